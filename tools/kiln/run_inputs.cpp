#include "tools/kiln/run_inputs.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/symbolic_dim.h"
#include "tools/kiln/model_stdin.h"

namespace kiln {

namespace {

// Ops whose result holds the same integers as their first operand, so an
// index flowing through them is still an index.
bool preserves_values(const std::string& op) {
  static const char* const kOps[] = {"cast", "reshape", "squeeze", "unsqueeze", "flatten", "identity", "expand"};
  return std::find_if(std::begin(kOps), std::end(kOps), [&](const char* o) { return op == o; }) != std::end(kOps);
}

// The smallest table `v` indexes, following its uses; 0 when none.
int64_t smallest_table(const Value* v, int depth) {
  if (depth > 64) return 0;  // a pathological chain; no bound rather than a deep walk
  int64_t best = 0;
  auto take = [&](int64_t b) {
    if (b > 0 && (best == 0 || b < best)) best = b;
  };
  for (const Use& u : v->uses()) {
    const Node& n = *u.user;
    if (n.body() && u.operand < static_cast<int>(n.body()->inputs().size())) {
      take(smallest_table(n.body()->inputs()[u.operand], depth + 1));
    } else if ((n.op() == "gather" || n.op() == "gather_elements") && u.operand == 1) {
      const Shape& data = n.input(0)->shape();
      int64_t axis = n.attrs().get_int("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(data.size());
      if (axis >= 0 && axis < static_cast<int64_t>(data.size())) take(data[axis]);
    } else if (preserves_values(n.op()) && u.operand == 0 && n.num_outputs() == 1) {
      take(smallest_table(n.output(0), depth + 1));
    }
  }
  return best;
}

// The sizes `v` sets, following its uses through value-preserving ops: the
// intersection of their ranges (hi < 0 once one is not known before the run).
void collect_sizes(const Value* v, int depth, std::optional<SizeInput>& r) {
  if (depth > 64) return;
  for (const Use& u : v->uses()) {
    const Node& n = *u.user;
    if (n.op() == "topk" && u.operand == 1) {
      // k in [0, the axis's size]; 0 selects nothing, so random ks start at 1.
      const Shape& x = n.input(0)->shape();
      int64_t axis = n.attrs().get_int("axis", -1);
      if (axis < 0) axis += static_cast<int64_t>(x.size());
      if (axis < 0 || axis >= static_cast<int64_t>(x.size())) continue;
      const int64_t extent = x[axis];
      SizeInput s;
      if (is_symbolic_dim(extent)) {
        s.what = fmt::format("k of {}, whose axis {} has a size ({}) known only when it runs", n.describe(), axis,
                             dim_str(extent));
      } else {
        s = {std::min<int64_t>(1, extent), extent,
             fmt::format("k of {}, axis {} of size {}", n.describe(), axis, extent)};
      }
      if (!r || s.hi < 0 || (r->hi >= 0 && s.hi < r->hi)) r = s;
    } else if (preserves_values(n.op()) && u.operand == 0 && n.num_outputs() == 1) {
      collect_sizes(n.output(0), depth + 1, r);
    }
  }
}

std::string quoted_names(const std::vector<std::pair<std::string, TensorType>>& decl) {
  std::string s;
  for (const auto& [name, type] : decl) s += fmt::format("{}\"{}\"", s.empty() ? "" : ", ", name);
  return s.empty() ? "none" : s;
}

bool has_input(const std::vector<std::pair<std::string, TensorType>>& decl, const std::string& name) {
  return std::any_of(decl.begin(), decl.end(), [&](const auto& d) { return d.first == name; });
}

// "name:file,name2:file2" -> name -> path; each name once.
std::map<std::string, std::string> parse_files(const std::string& flag) {
  std::map<std::string, std::string> r;
  std::stringstream ss(flag);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t c = item.rfind(':');
    if (c == std::string::npos || c == 0 || c + 1 == item.size())
      fail("--inputs: '{}' is not NAME:FILE (a .npy or an ONNX TensorProto .pb file)", item);
    std::string name = item.substr(0, c);
    if (!r.emplace(name, item.substr(c + 1)).second)
      fail("--inputs: input \"{}\" is given twice ({} and {})", name, r[name], item.substr(c + 1));
  }
  return r;
}

double parse_bound(const std::string& text, const std::string& item) {
  const char* b = text.c_str();
  char* e = nullptr;
  double v = std::strtod(b, &e);
  if (text.empty() || e != b + text.size() || !std::isfinite(v))
    fail("--input-range: '{}' in '{}' is not a finite number", text, item);
  return v;
}

struct RangeSpec {
  std::string name;  // empty: every input
  ValueRange range;
};

// "[LO,HI]", "LO,HI", "NAME:[LO,HI]" or "NAME:LO,HI" (polygraphy's --val-range form).
RangeSpec parse_range(const std::string& item) {
  RangeSpec r;
  std::string body = item;
  size_t c = item.rfind(':');
  if (c != std::string::npos) {
    r.name = item.substr(0, c);
    body = item.substr(c + 1);
    if (r.name.empty()) fail("--input-range: '{}' has an empty input name", item);
  }
  if (body.size() >= 2 && body.front() == '[' && body.back() == ']') body = body.substr(1, body.size() - 2);
  size_t comma = body.find(',');
  if (comma == std::string::npos || body.find(',', comma + 1) != std::string::npos)
    fail("--input-range: '{}' is not [NAME:][LO,HI] (e.g. input_ids:[0,30521] or [0,1] for every input)", item);
  r.range = {parse_bound(body.substr(0, comma), item), parse_bound(body.substr(comma + 1), item)};
  if (r.range.lo > r.range.hi) fail("--input-range: '{}': LO {} is above HI {}", item, r.range.lo, r.range.hi);
  return r;
}

// The range must hold only values of the input's type: integers for
// integer types, within their limits.
void check_range_fits(const ValueRange& r, const std::string& name, const TensorType& type) {
  if (type.dtype == DType::Bool)
    fail("--input-range: input \"{}\" is bool: its random values are 0 and 1; give it values with --inputs", name);
  if (is_float(type.dtype)) return;
  if (r.lo != std::floor(r.lo) || r.hi != std::floor(r.hi))
    fail("--input-range: input \"{}\" is {}: the range [{}, {}] must have integer bounds", name, dtype_name(type.dtype),
         r.lo, r.hi);
  double lo = 0, hi = 0;
  switch (type.dtype) {
    case DType::I8:
      lo = -128, hi = 127;
      break;
    case DType::U8:
      lo = 0, hi = 255;
      break;
    case DType::I16:
      lo = -32768, hi = 32767;
      break;
    case DType::U16:
      lo = 0, hi = 65535;
      break;
    case DType::I32:
      lo = -2147483648.0, hi = 2147483647.0;
      break;
    case DType::U32:
      lo = 0, hi = 4294967295.0;
      break;
    case DType::U64:
      lo = 0, hi = 1.8e19;
      break;
    default:
      lo = -9.2e18, hi = 9.2e18;
      break;
  }
  if (r.lo < lo || r.hi > hi)
    fail("--input-range: [{}, {}] does not fit input \"{}\" ({})", r.lo, r.hi, name, dtype_name(type.dtype));
}

}  // namespace

void add_input_flags(CLI::App* cmd, std::string& files, std::vector<std::string>& ranges) {
  cmd->add_option("--inputs", files,
                  "Input values: name:file.npy,name2:file.pb,... (NumPy or ONNX TensorProto files; the others "
                  "seeded random); repeatable")
      // Repeated (--inputs a:a.npy --inputs b:b.npy, as polygraphy's
      // --load-inputs is) the lists join; a name given twice is an error.
      ->join(',')
      ->group("Runtime");
  cmd->add_option(
         "--input-range,--val-range", ranges,
         "Range of an input's random values: NAME:[LO,HI], or [LO,HI] for every input; repeatable "
         "(default: [-1,1] for floats; integers indexing a Gather table: [0, rows-1]; TopK's k: [1, axis size]; others [0,9])")
      ->allow_extra_args(false)
      ->group("Runtime");
}

std::map<std::string, int64_t> index_bounds(const Graph& g) {
  std::map<std::string, int64_t> r;
  for (const Value* in : g.inputs()) {
    if (is_float(in->dtype()) || in->dtype() == DType::Bool) continue;
    if (int64_t b = smallest_table(in, 0); b > 0) r[in->name()] = b;
  }
  return r;
}

std::map<std::string, SizeInput> size_inputs(const Graph& g) {
  std::map<std::string, SizeInput> r;
  for (const Value* in : g.inputs()) {
    if (is_float(in->dtype()) || in->dtype() == DType::Bool) continue;
    std::optional<SizeInput> s;
    collect_sizes(in, 0, s);
    if (s) r[in->name()] = *s;
  }
  return r;
}

Tensor read_input_file(const std::string& path) {
  reject_directory(path, "a .npy or TensorProto file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open: {}", path, std::strerror(errno));
  char head[6] = {};
  in.read(head, sizeof head);
  if (in.gcount() == 6 && std::memcmp(head, "\x93NUMPY", 6) == 0) return read_npy(path);
  try {
    return read_tensor_pb(path);
  } catch (const Error& e) {
    fail("{}: neither a NumPy .npy file (no \\x93NUMPY magic) nor a readable ONNX TensorProto ({})", path, e.what());
  }
}

std::map<std::string, Tensor> make_run_inputs(const std::vector<std::pair<std::string, TensorType>>& decl,
                                              const RunInputOptions& o, std::vector<std::string>* described) {
  std::map<std::string, std::string> files = parse_files(o.files);
  for (const auto& [name, path] : files)
    if (!has_input(decl, name))
      fail("--inputs: the model has no input named \"{}\" (its inputs: {})", name, quoted_names(decl));

  std::optional<ValueRange> all;
  std::map<std::string, ValueRange> named;
  for (const std::string& item : o.ranges) {
    RangeSpec r = parse_range(item);
    if (r.name.empty()) {
      if (all) fail("--input-range: a range for every input is given twice ('{}')", item);
      all = r.range;
    } else if (!has_input(decl, r.name)) {
      fail("--input-range: the model has no input named \"{}\" (its inputs: {})", r.name, quoted_names(decl));
    } else if (files.count(r.name)) {
      fail("--input-range: input \"{}\" is read from {} (--inputs), not generated", r.name, files[r.name]);
    } else if (!named.emplace(r.name, r.range).second) {
      fail("--input-range: input \"{}\" is given twice", r.name);
    }
  }

  std::map<std::string, Tensor> feed;
  uint64_t seed = 1;
  for (const auto& [name, declared] : decl) {
    uint64_t s = seed++;
    TensorType type = declared;
    if (auto it = files.find(name); it != files.end()) {
      Tensor t = is_stdin_arg(it->second) ? read_input_from_stdin(name) : read_input_file(it->second);
      const std::string from = is_stdin_arg(it->second) ? std::string(kStdinName) : it->second;
      // A symbolic dim takes any size here; the symbols' ranges and
      // agreement are checked when they are bound (ir/specialize.h).
      bool fits = t.dtype() == type.dtype && t.rank() == type.rank();
      for (int i = 0; fits && i < t.rank(); ++i) fits = t.shape()[i] == type.shape[i] || is_symbolic_dim(type.shape[i]);
      if (!fits) fail("--inputs: {} holds {} but input \"{}\" is {}", from, t.type().str(), name, type.str());
      feed[name] = std::move(t);
      if (described) described->push_back(fmt::format("input \"{}\": {} from {}", name, type.str(), from));
      continue;
    }
    if (auto g = o.generate_shapes.find(name); g != o.generate_shapes.end() && has_symbolic_dims(type.shape))
      type.shape = g->second;
    if (has_symbolic_dims(type.shape))
      fail("input \"{}\" is {}: give its values with --inputs {}:FILE, or its shape with --opt-shapes", name,
           type.str(), name);
    std::optional<ValueRange> range;
    std::string why;
    if (auto it = named.find(name); it != named.end()) {
      range = it->second;
      why = "--input-range";
    } else if (auto z = o.size_inputs.find(name); z != o.size_inputs.end()) {
      // A size: a value outside its range fails the run, whatever
      // --input-range gives every input.
      if (z->second.hi < 0)
        fail(
            "input \"{}\" sets {}: a random value may not fit it; give its value with --inputs {}:FILE or its "
            "range with --input-range {}:[LO,HI]",
            name, z->second.what, name, name);
      range = ValueRange{double(z->second.lo), double(z->second.hi)};
      why = z->second.what;
    } else if (all && type.dtype != DType::Bool) {
      range = all;
      why = "--input-range";
    } else if (auto b = o.index_bounds.find(name); b != o.index_bounds.end() && !is_float(type.dtype)) {
      range = ValueRange{0, double(b->second - 1)};
      why = fmt::format("indexes a table of {} rows", b->second);
    }
    if (range) check_range_fits(*range, name, type);
    if (type.dtype == DType::String)
      fail(
          "input \"{}\" is a string tensor ({}): kiln draws no random strings; give its values with --inputs {}:FILE "
          "(an ONNX TensorProto .pb)",
          name, type.str(), name);
    feed[name] = random_tensor(type, s, range);
    if (described) {
      std::string what = type.dtype == DType::Bool ? "random 0/1"
                         : range                   ? fmt::format("random in [{}, {}] ({})", range->lo, range->hi, why)
                         : is_float(type.dtype)    ? "random in [-1, 1] (default)"
                                                   : "random in [0, 9] (default for integers)";
      described->push_back(fmt::format("input \"{}\": {} {}", name, type.str(), what));
    }
  }
  return feed;
}

}  // namespace kiln
