// ONNX adapters for the shape family (see import_context.h): every opset form
// is turned into one canonical static kiln op, with compile-time operands
// (shapes, axes, starts/ends, pads, repeats) hoisted into attributes.
//
//   Reshape, Flatten, Squeeze, Unsqueeze -> reshape {shape}
//   Transpose -> transpose {perm}        Concat -> concat {axis}
//   Split -> split {axis, split}         Slice -> slice {starts, ends, steps}
//   Pad -> pad {pads, mode, value}       Expand -> expand {shape}
//   Tile -> tile {repeats}               Range -> range
//   DepthToSpace -> depth_to_space       SpaceToDepth -> space_to_depth
//   Shape, Size, ConstantOfShape, Constant -> constants (shapes are static)
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "frontend/import_context.h"
#include "frontend/reshape_target.h"
#include "ir/data_dependent.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"
#include "ops/shape_ops.h"

namespace kiln::adapters {

namespace {

// A compile-time integer list operand (shape, axes, starts, pads...), 1-D
// (or a scalar where `allow_scalar`).
std::vector<int64_t> int_list(ImportContext& c, int i, const std::string& what, bool allow_scalar = false,
                              bool allow_symbolic = false) {
  const Tensor& t = allow_symbolic ? c.require_shape_value(i, what) : c.require_value(i, what);
  if (!is_int(t.dtype())) c.fail("{} must be an integer tensor, got {}", what, t.type().str());
  if (t.rank() != 1 && !(allow_scalar && t.rank() == 0))
    c.fail("{} must be a 1-D tensor, got {}", what, t.type().str());
  return t.to_int_vector();
}

// Normalises axes against `rank`, rejecting out-of-range and repeated ones.
std::vector<int64_t> norm_axes(ImportContext& c, const std::vector<int64_t>& axes, int rank, const char* what) {
  std::vector<int64_t> r;
  std::set<int64_t> seen;
  for (int64_t a : axes) {
    int64_t n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank) c.fail("{} {} is out of range for rank {}", what, a, rank);
    if (!seen.insert(n).second) c.fail("{} {} is repeated", what, a);
    r.push_back(n);
  }
  return r;
}

Value* emit_reshape(ImportContext& c, Value* x, const Shape& s) {
  AttrMap a;
  a.set("shape", std::vector<int64_t>(s));
  return c.emit1("reshape", {x}, a);
}

// ---------------------------------------------------------------------------
// Reshape family

void reshape_adapter(ImportContext& c) {
  std::vector<int64_t> spec;
  if (c.opset() < 5) {
    c.only_attrs({"shape", "consumed_inputs"});
    if (!c.attrs().has("shape")) c.fail("attribute 'shape' is missing");
    spec = c.attrs().get_ints("shape");
  } else {
    c.only_attrs({"allowzero"});
    spec = int_list(c, 1, "Reshape shape", false, /*allow_symbolic=*/true);
  }
  int64_t allowzero = c.attrs().get_int("allowzero", 0);
  if (allowzero != 0 && allowzero != 1) c.fail("allowzero must be 0 or 1, got {}", allowzero);
  Value* x = c.input(0);
  c.set_outputs({emit_reshape(c, x, resolve_reshape(c, x->shape(), spec, allowzero == 1))});
}

void flatten_adapter(ImportContext& c) {
  c.only_attrs({"axis"});
  Value* x = c.input(0);
  int r = x->type().rank();
  int64_t axis = c.attrs().get_int("axis", 1);
  if (axis < 0 && c.opset() >= 11) axis += r;
  if (axis < 0 || axis > r) c.fail("axis {} is out of range for rank {}", c.attrs().get_int("axis", 1), r);
  const Shape& s = x->shape();
  Shape out;
  try {
    // (products of symbolic dims are polynomials: [batch,8,1,1] -> [batch,8])
    auto count = [&](Shape part) { return has_symbolic_dims(part) ? dim_product(part) : shape_numel(part); };
    out = {count(Shape(s.begin(), s.begin() + axis)), count(Shape(s.begin() + axis, s.end()))};
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  c.set_outputs({emit_reshape(c, x, out)});
}

std::vector<int64_t> axes_operand(ImportContext& c, int first_input_opset, const char* op, bool* given) {
  *given = false;
  if (c.opset() < first_input_opset) {
    c.only_attrs({"axes"});
    *given = c.attrs().has("axes");
    return c.attrs().get_ints("axes");
  }
  c.only_attrs({});
  if (!c.has_input(1)) return {};
  *given = true;
  return int_list(c, 1, std::string(op) + " axes", true);
}

void squeeze_adapter(ImportContext& c) {
  bool given = false;
  std::vector<int64_t> axes = axes_operand(c, 13, "Squeeze", &given);
  Value* x = c.input(0);
  const Shape& s = x->shape();
  std::vector<bool> drop(s.size(), false);
  if (!given) {
    // Which dims are 1 decides the result's rank: a symbolic dim may be 1 at
    // run time or not, so kiln does not guess.
    if (int k = first_symbolic_dim(s); k >= 0)
      c.unsupported("Squeeze without axes on {}: whether dim {} ({}) is 1 is known only at run time", x->type().str(),
                    k, dim_str(s[k]));
    for (size_t i = 0; i < s.size(); ++i) drop[i] = s[i] == 1;
  } else {
    for (int64_t a : norm_axes(c, axes, x->type().rank(), "axis")) {
      if (s[a] != 1) c.fail("cannot squeeze dim {} of {}: it is {}, not 1", a, x->type().str(), s[a]);
      drop[a] = true;
    }
  }
  Shape out;
  for (size_t i = 0; i < s.size(); ++i)
    if (!drop[i]) out.push_back(s[i]);
  c.set_outputs({emit_reshape(c, x, out)});
}

void unsqueeze_adapter(ImportContext& c) {
  bool given = false;
  std::vector<int64_t> axes = axes_operand(c, 13, "Unsqueeze", &given);
  if (!given) c.fail("axes are missing");
  Value* x = c.input(0);
  const Shape& s = x->shape();
  int out_rank = x->type().rank() + static_cast<int>(axes.size());
  std::vector<bool> is_new(out_rank, false);
  for (int64_t a : norm_axes(c, axes, out_rank, "axis")) is_new[a] = true;
  Shape out;
  size_t k = 0;
  for (int i = 0; i < out_rank; ++i) out.push_back(is_new[i] ? 1 : s[k++]);
  c.set_outputs({emit_reshape(c, x, out)});
}

// ---------------------------------------------------------------------------
// Transpose, Concat, Split

void transpose_adapter(ImportContext& c) {
  c.only_attrs({"perm"});
  int r = c.input(0)->type().rank();
  std::vector<int64_t> perm;
  if (c.attrs().has("perm")) {
    perm = c.attrs().get_ints("perm");
  } else {
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  }
  AttrMap a;
  a.set("perm", perm);
  c.set_outputs({c.emit1("transpose", {c.input(0)}, a)});
}

void concat_adapter(ImportContext& c) {
  c.only_attrs({"axis"});
  if (c.opset() >= 4 && !c.attrs().has("axis")) c.fail("attribute 'axis' is missing");
  int64_t axis = c.attrs().get_int("axis", 1);  // Concat-1 defaults to 1
  std::vector<Value*> ins;
  for (int i = 0; i < c.num_inputs(); ++i) ins.push_back(c.input(i));
  if (ins.empty()) c.fail("needs at least one operand");
  int r = ins[0]->type().rank();
  if (r == 0) c.fail("cannot concatenate scalars");
  int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r) c.fail("axis {} is out of range for rank {}", axis, r);
  AttrMap m;
  m.set("axis", a);
  c.set_outputs({c.emit1("concat", ins, m)});
}

void split_adapter(ImportContext& c) {
  Value* x = c.input(0);
  int r = x->type().rank();
  if (r == 0) c.fail("cannot split a scalar");
  std::vector<int64_t> split;
  bool have_split = false;
  int64_t num_outputs = 0;
  if (c.opset() >= 13) {
    c.only_attrs(c.opset() >= 18 ? std::initializer_list<const char*>{"axis", "num_outputs"}
                                 : std::initializer_list<const char*>{"axis"});
    if (c.has_input(1)) {
      split = int_list(c, 1, "Split sizes");
      have_split = true;
    }
    num_outputs = c.attrs().get_int("num_outputs", 0);
    if (have_split && c.attrs().has("num_outputs")) c.fail("both a split operand and num_outputs are given");
  } else {
    c.only_attrs({"axis", "split"});
    if (c.attrs().has("split")) {
      split = c.attrs().get_ints("split");
      have_split = true;
    } else if (c.opset() < 2 && c.has_input(1)) {  // Split-1 took the sizes as an optional operand too
      split = int_list(c, 1, "Split sizes");
      have_split = true;
    }
  }
  int64_t axis = c.attrs().get_int("axis", 0);
  int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r) c.fail("axis {} is out of range for rank {}", axis, r);
  int64_t dim = x->shape()[a];
  int n = c.num_outputs();
  if (!have_split) {
    // Equal parts of a dim known only at run time would have run-time sizes
    // (explicit sizes over it are checked when it runs: split_op).
    if (is_symbolic_dim(dim))
      c.unsupported("splitting {} into equal parts along its symbolic dim {} ({}) is not supported yet",
                    x->type().str(), a, dim_str(dim));
    if (c.attrs().has("num_outputs")) {
      if (num_outputs <= 0) c.fail("num_outputs {} must be positive", num_outputs);
      if (num_outputs != n) c.fail("num_outputs is {} but the node has {} outputs", num_outputs, n);
      // Opset 18: chunks of ceil(dim / n), the last one smaller.
      int64_t chunk = (dim + n - 1) / n;
      for (int i = 0; i < n; ++i) split.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
      int64_t sum = 0;
      for (int64_t s : split) sum += s;
      if (sum != dim) c.fail("dim {} of size {} cannot be split into {} chunks", a, dim, n);
    } else {
      if (n <= 0) c.fail("has no outputs");
      if (dim % n != 0) c.fail("dim {} of size {} does not split into {} equal parts", a, dim, n);
      split.assign(n, dim / n);
    }
  }
  if (static_cast<int>(split.size()) != n)
    c.fail("split [{}] has {} parts but the node has {} outputs", fmt::join(split, ","), split.size(), n);
  AttrMap m;
  m.set("axis", a);
  m.set("split", split);
  c.set_outputs(c.emit("split", {x}, m, n));
}

// ---------------------------------------------------------------------------
// Slice

void slice_adapter(ImportContext& c) {
  Value* x = c.input(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    c.only_attrs({"starts", "ends", "axes"});
    if (!c.attrs().has("starts") || !c.attrs().has("ends")) c.fail("attributes 'starts' and 'ends' are required");
    starts = c.attrs().get_ints("starts");
    ends = c.attrs().get_ints("ends");
    axes = c.attrs().get_ints("axes");
  } else {
    c.only_attrs({});
    // Symbolic values (a size Shape gave) are canonicalised below: they take
    // a symbolic dim whole, or are refused by name.
    starts = int_list(c, 1, "Slice starts", false, /*allow_symbolic=*/true);
    ends = int_list(c, 2, "Slice ends", false, /*allow_symbolic=*/true);
    if (c.has_input(3)) axes = int_list(c, 3, "Slice axes");
    if (c.has_input(4)) steps = int_list(c, 4, "Slice steps");
    if (c.has_input(3) && axes.size() != starts.size())
      c.fail("Slice axes has {} values but starts has {}", axes.size(), starts.size());
  }
  ops::SliceSpec spec;
  try {
    spec =
        ops::canonical_slice(x->shape(), starts, ends, axes, steps, /*allow_data_dependent=*/true, &c.symbol_ranges());
  } catch (const Unsupported&) {
    throw;
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  AttrMap m;
  m.set("starts", spec.starts);
  m.set("ends", spec.ends);
  m.set("steps", spec.steps);
  if (const int a = spec.data_dependent_axis; a >= 0) {
    // A symbolic dim clamped by the slice (torchvision's keep[:100] of the
    // boxes NMS kept): its size is decided when the dim is known, so the
    // slice gets a size symbol, at most what start:end:step could select.
    const int64_t s = spec.starts[a], e = spec.ends[a], p = spec.steps[a];
    const int64_t cap = p > 0 && s >= 0 && e >= 0 && e < ops::kSliceOpenEnd ? ops::slice_extent(s, e, p) : -1;
    std::string sym = c.declare_size_symbol("slice_n", x->shape()[a], cap);
    if (sym.empty())
      c.unsupported("slicing [{}] along dim {} ({}) needs its size: not supported with symbolic dims inside a region",
                    dims_str(x->shape()), a, dim_str(x->shape()[a]));
    m.set(kSizeSymbolAttr, sym);
  }
  c.set_outputs({c.emit1("slice", {x}, m)});
}

// ---------------------------------------------------------------------------
// Pad

// True when `v` is a constant or computed from constants only (no graph inputs).
bool fixed_by_model(const Value* v, int depth = 0) {
  if (v->is_constant()) return true;
  if (v->is_input() || depth > 64) return false;
  for (const Value* in : v->producer()->inputs())
    if (in && !fixed_by_model(in, depth + 1)) return false;
  return true;
}

// The one element of `t` as an f32 when that is exact (integers past 2^24 and
// most f64 values are not: those stay a constant operand of pad).
std::optional<float> exact_f32(const Tensor& t) {
  if (is_float(t.dtype())) {
    double d = t.get_double(0);
    float f = static_cast<float>(d);
    if (std::isnan(d) || static_cast<double>(f) == d) return f;
    return std::nullopt;
  }
  if (t.dtype() == DType::U64) {
    uint64_t u = static_cast<uint64_t>(t.get_int(0));
    if (u < (uint64_t(1) << 63) && static_cast<uint64_t>(static_cast<float>(u)) == u) return static_cast<float>(u);
    return std::nullopt;
  }
  int64_t i = t.get_int(0);
  float f = static_cast<float>(i);
  if (f > -9.2e18f && f < 9.2e18f && static_cast<int64_t>(f) == i) return f;
  return std::nullopt;
}

void pad_adapter(ImportContext& c) {
  Value* x = c.input(0);
  int r = x->type().rank();
  std::string mode = c.attrs().get_string("mode", "constant");
  std::vector<int64_t> pads;
  Value* value_operand = nullptr;
  std::optional<float> value;  // kept as an attribute when known and exact in f32
  if (c.opset() < 11) {
    const char* pads_name = c.opset() < 2 ? "paddings" : "pads";
    c.only_attrs({"mode", pads_name, "value"});
    if (!c.attrs().has(pads_name)) c.fail("attribute '{}' is missing", pads_name);
    pads = c.attrs().get_ints(pads_name);
    value = c.attrs().get_float("value", 0.0f);
  } else {
    c.only_attrs({"mode"});
    pads = int_list(c, 1, "Pad pads");
    if (c.has_input(2)) {
      Value* v = c.input(2);
      if (v->dtype() != x->dtype())
        c.fail("constant_value is {} but the data is {}", dtype_name(v->dtype()), dtype_name(x->dtype()));
      if (v->type().numel() != 1) c.fail("constant_value must be one element, got {}", v->type().str());
      // Only read the value when it is fixed by the model; asking for a graph
      // input's value would freeze that input into a constant.
      const Tensor* t = fixed_by_model(v) ? c.value(2) : nullptr;
      if (std::optional<float> f = t ? exact_f32(*t) : std::nullopt) value = f;
      else value_operand = v;
    }
    if (c.has_input(3)) {
      if (c.opset() < 18) c.fail("the axes operand needs opset 18");
      std::vector<int64_t> axes = norm_axes(c, int_list(c, 3, "Pad axes"), r, "axis");
      if (pads.size() != 2 * axes.size())
        c.fail("pads has {} values but {} axes need {}", pads.size(), axes.size(), 2 * axes.size());
      std::vector<int64_t> full(2 * r, 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        full[axes[i]] = pads[i];
        full[axes[i] + r] = pads[i + axes.size()];
      }
      pads = full;
    }
  }
  if (mode != "constant" && mode != "reflect" && mode != "edge" && !(mode == "wrap" && c.opset() >= 19))
    c.unsupported("mode '{}' is not supported at opset {}", mode, c.opset());
  if (static_cast<int>(pads.size()) != 2 * r)
    c.fail("pads [{}] needs {} values for rank {}", fmt::join(pads, ","), 2 * r, r);
  AttrMap m;
  m.set("pads", pads);
  if (mode != "constant") {
    m.set("mode", mode);
    value_operand = nullptr;
    value.reset();
  }
  std::vector<Value*> ins{x};
  if (value && (*value != 0 || std::signbit(*value) || std::isnan(*value))) m.set("value", *value);
  if (value_operand) ins.push_back(value_operand);
  c.set_outputs({c.emit1("pad", ins, m)});
}

// ---------------------------------------------------------------------------
// Expand, Tile

void expand_adapter(ImportContext& c) {
  c.only_attrs({});
  Value* x = c.input(0);
  // The target may hold symbolic dims ([1, kv, 2, past+seq, 16], a decoder's
  // grouped-query heads repeated over its whole cache).
  std::vector<int64_t> spec = int_list(c, 1, "Expand shape", false, true);
  for (int64_t v : spec)
    if (v < 0 && !is_symbolic_dim(v)) c.fail("Expand shape [{}] has a negative dim", dims_str(spec));
  Shape out;
  try {
    out = broadcast_shapes(x->shape(), spec);
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  AttrMap m;
  m.set("shape", out);
  c.set_outputs({c.emit1("expand", {x}, m)});
}

void tile_adapter(ImportContext& c) {
  c.only_attrs({});
  Value* x = c.input(0);
  int r = x->type().rank();
  std::vector<int64_t> repeats;
  if (c.opset() < 6) {
    // Tile-1: operands (input, tiles, axis), both scalars.
    std::vector<int64_t> tiles = int_list(c, 1, "Tile tiles", true), axis = int_list(c, 2, "Tile axis", true);
    if (tiles.size() != 1 || axis.size() != 1) c.fail("tiles and axis must be scalars");
    repeats.assign(r, 1);
    repeats[norm_axes(c, axis, r, "axis")[0]] = tiles[0];
  } else {
    repeats = int_list(c, 1, "Tile repeats");
    if (static_cast<int>(repeats.size()) != r)
      c.fail("repeats has {} values for the rank {} input {}", repeats.size(), r, x->type().str());
  }
  AttrMap m;
  m.set("repeats", repeats);
  c.set_outputs({c.emit1("tile", {x}, m)});
}

// ---------------------------------------------------------------------------
// Shape, Size, ConstantOfShape, Constant: constants at import.

void shape_adapter(ImportContext& c) {
  c.only_attrs({"start", "end"});
  const Shape& s = c.input(0)->shape();
  int64_t r = static_cast<int64_t>(s.size());
  int64_t start = c.attrs().get_int("start", 0), end = c.attrs().get_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  if (end < start) end = start;
  Tensor t(DType::I64, {end - start});
  for (int64_t i = start; i < end; ++i) t.set_int(i - start, s[i]);
  c.set_outputs({c.constant(t)});
}

void size_adapter(ImportContext& c) {
  c.only_attrs({});
  Tensor t(DType::I64, {});
  t.set_int(0, c.input(0)->type().numel());
  c.set_outputs({c.constant(t)});
}

void constant_of_shape_adapter(ImportContext& c) {
  c.only_attrs({"value"});
  std::vector<int64_t> dims = int_list(c, 0, "ConstantOfShape shape", false, /*allow_symbolic=*/true);
  for (int64_t d : dims)
    if (d < 0 && !is_symbolic_dim(d)) c.fail("shape [{}] has a negative dim", dims_str(dims));
  Tensor value = Tensor::scalar(DType::F32, 0);
  if (c.attrs().has("value")) {
    value = *c.attrs().get_tensor("value");
    if (value.numel() != 1) c.fail("attribute 'value' must hold one element, got {}", value.type().str());
  }
  Shape s(dims.begin(), dims.end());
  if (has_symbolic_dims(s)) {
    // A size known only at run time (torchvision's full_like over the boxes
    // a score threshold kept): the one value broadcast to it, as a node.
    Tensor one(value.dtype(), Shape(s.size(), 1));
    ops::fill_bytes(one.raw(), value.raw(), dtype_size(value.dtype()), 1);
    AttrMap m;
    m.set("shape", std::vector<int64_t>(s));
    return c.set_outputs({c.emit1("expand", {c.constant(one)}, m)});
  }
  try {
    shape_numel(s);
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  if (static_cast<double>(shape_numel(s)) * static_cast<double>(dtype_size(value.dtype())) > double(int64_t(1) << 34))
    c.unsupported("a {} constant of shape [{}] is too large to build at compile time", dtype_name(value.dtype()),
                  fmt::join(dims, ","));
  Tensor t(value.dtype(), s);
  ops::fill_bytes(t.raw(), value.raw(), dtype_size(value.dtype()), t.numel());
  c.set_outputs({c.constant(t)});
}

void constant_adapter(ImportContext& c) {
  c.only_attrs({"value", "value_float", "value_floats", "value_int", "value_ints", "value_string", "value_strings",
                "sparse_value"});
  int count = 0;
  for (auto& kv : c.attrs()) (void)kv, ++count;
  if (count != 1) c.fail("needs exactly one value attribute, got {}", count);
  Tensor t;
  const AttrMap& a = c.attrs();
  if (a.has("value")) {
    t = *a.get_tensor("value");
  } else if (a.has("value_float")) {
    t = Tensor::scalar(DType::F32, a.get_float("value_float", 0));
  } else if (a.has("value_floats")) {
    std::vector<float> v = a.get_floats("value_floats");
    t = Tensor(DType::F32, {static_cast<int64_t>(v.size())});
    if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(float));
  } else if (a.has("value_int")) {
    t = Tensor(DType::I64, {});
    t.set_int(0, a.get_int("value_int", 0));
  } else if (a.has("value_ints")) {
    std::vector<int64_t> v = a.get_ints("value_ints");
    t = Tensor(DType::I64, {static_cast<int64_t>(v.size())});
    if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(int64_t));
  } else if (a.has("value_string")) {
    t = Tensor::from_strings({}, {a.get_string("value_string", "")});
  } else if (a.has("value_strings")) {
    std::vector<std::string> v = a.get_strings("value_strings");
    t = Tensor::from_strings({static_cast<int64_t>(v.size())}, v);
  } else {
    c.unsupported("sparse constants are not supported");
  }
  c.set_outputs({c.constant(t)});
}

// ---------------------------------------------------------------------------
// Range, DepthToSpace, SpaceToDepth

void range_adapter(ImportContext& c) {
  // `stash_type` (opset 27+): the type f16/bf16 ranges are computed in
  // before rounding, float by default. kiln computes start + i * delta in
  // double and rounds once; float or double stashes agree with that.
  c.only_attrs(c.opset() >= 27 ? std::initializer_list<const char*>{"stash_type"}
                               : std::initializer_list<const char*>{});
  int64_t stash = c.attrs().get_int("stash_type", onnx::TensorProto::FLOAT);
  if (stash != onnx::TensorProto::FLOAT && stash != onnx::TensorProto::DOUBLE)
    c.unsupported("stash_type {} (not float or double) is not supported", stash);
  c.set_outputs({c.emit1("range", {c.input(0), c.input(1), c.input(2)})});
}

void depth_to_space_adapter(ImportContext& c) {
  c.only_attrs(c.opset() >= 11 ? std::initializer_list<const char*>{"blocksize", "mode"}
                               : std::initializer_list<const char*>{"blocksize"});
  if (!c.attrs().has("blocksize")) c.fail("attribute 'blocksize' is missing");
  AttrMap m;
  m.set("blocksize", c.attrs().get_int("blocksize", 0));
  m.set("mode", c.attrs().get_string("mode", "DCR"));
  c.set_outputs({c.emit1("depth_to_space", {c.input(0)}, m)});
}

// SpaceToDepth orders the moved blocks depth-column-row (DCR, kiln's
// space_to_depth). Opset 28 adds `mode` CRD (column-row-depth, the inverse
// of DepthToSpace CRD): a reshape to [N, C, H/b, b, W/b, b], a transpose
// to [N, C, b, b, H/b, W/b] and a reshape to [N, C*b*b, H/b, W/b].
void space_to_depth_adapter(ImportContext& c) {
  c.only_attrs(c.opset() >= 28 ? std::initializer_list<const char*>{"blocksize", "mode"}
                               : std::initializer_list<const char*>{"blocksize"});
  if (!c.attrs().has("blocksize")) c.fail("attribute 'blocksize' is missing");
  int64_t b = c.attrs().get_int("blocksize", 0);
  std::string mode = c.attrs().get_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") c.fail("mode must be \"DCR\" or \"CRD\", not \"{}\"", mode);
  Value* x = c.input(0);
  if (mode == "DCR") {
    AttrMap m;
    m.set("blocksize", b);
    return c.set_outputs({c.emit1("space_to_depth", {x}, m)});
  }
  const Shape& s = x->shape();
  if (s.size() != 4) c.fail("expects a rank-4 input, got {}", x->type().str());
  if (b <= 0) c.fail("blocksize must be positive, not {}", b);
  if (s[2] % b || s[3] % b) c.fail("blocksize {} does not divide the spatial dims of {}", b, x->type().str());
  AttrMap r1, tr, r2;
  r1.set("shape", std::vector<int64_t>{s[0], s[1], s[2] / b, b, s[3] / b, b});
  tr.set("perm", std::vector<int64_t>{0, 1, 3, 5, 2, 4});
  r2.set("shape", std::vector<int64_t>{s[0], s[1] * b * b, s[2] / b, s[3] / b});
  Value* y = c.emit1("transpose", {c.emit1("reshape", {x}, r1)}, tr);
  c.set_outputs({c.emit1("reshape", {y}, r2)});
}

}  // namespace

void register_shape(AdapterTable& t) {
  t.add("Reshape", reshape_adapter);
  t.add("Flatten", flatten_adapter);
  t.add("Squeeze", squeeze_adapter);
  t.add("Unsqueeze", unsqueeze_adapter);
  t.add("Transpose", transpose_adapter);
  t.add("Concat", concat_adapter);
  t.add("Split", split_adapter);
  t.add("Slice", slice_adapter);
  t.add("Pad", pad_adapter);
  t.add("Expand", expand_adapter);
  t.add("Tile", tile_adapter);
  t.add("Shape", shape_adapter);
  t.add("Size", size_adapter);
  t.add("ConstantOfShape", constant_of_shape_adapter);
  t.add("Constant", constant_adapter);
  t.add("Range", range_adapter);
  t.add("DepthToSpace", depth_to_space_adapter);
  t.add("SpaceToDepth", space_to_depth_adapter);
}

}  // namespace kiln::adapters
