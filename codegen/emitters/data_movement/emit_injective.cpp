#include "codegen/emitters/data_movement/emit_injective.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "codegen/emitters/data_movement/emit_transpose_tiled.h"
#include "codegen/core/kernel_text.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

namespace {

const char* uint_type(size_t bytes) {
  switch (bytes) {
    case 1:
      return "unsigned char";
    case 2:
      return "unsigned short";
    case 4:
      return "unsigned int";
    case 8:
      return "unsigned long long";
  }
  fail("codegen: elements of {} bytes are not supported", bytes);
}

// What an op's index map sees, and what it tells the kernel shell.
struct MapCtx {
  const AttrMap& attrs;
  const std::vector<TensorType>& in;
  const TensorType& out;
  int result;
  const std::function<std::string(int, const std::string&)>& read;  // operand k at an offset (indices, pad value)
  std::vector<bool> data;  // per operand: whether `src` may name it (default: all)
  int fill_operand = -1;   // operand holding the value for src == -1 (pad's value operand)
  uint64_t fill_bits = 0;  // else the fill's bit pattern in the result's dtype
};

// The symbols of the kernel being emitted (a shape-generic kernel: its
// sizes are symbolic dims, read from `ks`); empty for a static kernel. Set
// for the duration of one emit_injective_op/injective_index_map call on
// this thread (kernels are emitted on several threads).
thread_local const KernelSymbols* t_syms = nullptr;

// A dim (constant or symbolic) as a CUDA integer literal: "123@L@", or its
// polynomial over ks.v[...] (always 64-bit: a symbolic kernel never narrows).
std::string lit(int64_t d) {
  if (!is_symbolic_dim(d)) return fmt::format("{}@L@", d);
  KILN_CHECK(t_syms, "codegen: a symbolic dim {} in a kernel emitted without symbols", dim_str(d));
  return t_syms->lit(d);
}

// Row-major strides of a shape whose dims may be symbolic (static: strides_of's values).
std::vector<int64_t> strides_sym(const Shape& s) { return has_symbolic_dims(s) ? symbolic_strides(s) : strides_of(s); }

// Sum of c{d} * stride terms plus a constant, as a CUDA expression (strides
// and base may be symbolic dims).
std::string linear(const std::vector<std::string>& coords, const std::vector<int64_t>& strides, int64_t base = 0) {
  std::string s;
  for (size_t d = 0; d < coords.size(); ++d) {
    if (strides[d] == 0) continue;
    if (!s.empty()) s += " + ";
    s += strides[d] == 1 ? coords[d] : fmt::format("{} * {}", coords[d], lit(strides[d]));
  }
  if (base != 0 || s.empty()) s += s.empty() ? lit(base) : fmt::format(" + {}", lit(base));
  return s;
}

std::vector<std::string> out_coords(int r) {
  std::vector<std::string> c;
  for (int d = 0; d < r; ++d) c.push_back(fmt::format("o{}", d));
  return c;
}

int64_t norm_axis(int64_t a, int r, const char* op) {
  int64_t n = a < 0 ? a + r : a;
  if (n < 0 || n >= r) fail("codegen: {}: axis {} is out of range for rank {}", op, a, r);
  return n;
}

// Each op's index map: appends statements (indented 4) that set `src` and `off`.
using IndexMap = std::function<void(MapCtx&, std::string&)>;

void map_reshape(MapCtx&, std::string& b) { b += "    src = 0; off = i;\n"; }

void map_transpose(MapCtx& c, std::string& b) {
  std::vector<int64_t> perm = c.attrs.get_ints("perm");
  std::vector<int64_t> ist = strides_sym(c.in[0].shape), st;
  for (int64_t p : perm) st.push_back(ist.at(p));
  b += fmt::format("    src = 0; off = {};\n", linear(out_coords(c.out.rank()), st));
}

void map_expand(MapCtx& c, std::string& b) {
  b += fmt::format("    src = 0; off = {};\n",
                   linear(out_coords(c.out.rank()), has_symbolic_dims(c.in[0].shape) || has_symbolic_dims(c.out.shape)
                                                        ? symbolic_broadcast_strides(c.in[0].shape, c.out.shape)
                                                        : broadcast_strides(c.in[0].shape, c.out.shape)));
}

void map_slice(MapCtx& c, std::string& b) {
  std::vector<int64_t> st = c.attrs.get_ints("starts"), sp = c.attrs.get_ints("steps");
  std::vector<int64_t> ist = strides_sym(c.in[0].shape), s(ist.size());
  int64_t base = 0;
  for (size_t d = 0; d < ist.size(); ++d) {
    // Values, not dims: a negative step (and its stride) is legal here.
    base = value_add(base, value_mul(st[d], ist[d]));
    s[d] = value_mul(sp[d], ist[d]);
  }
  b += fmt::format("    src = 0; off = {};\n", linear(out_coords(c.out.rank()), s, base));
}

void map_concat(MapCtx& c, std::string& b) {
  const int r = c.out.rank();
  const int64_t a = norm_axis(c.attrs.require_int("axis"), r, "concat");
  std::vector<std::string> co = out_coords(r);
  co[a] = fmt::format("(o{} - {}@L@)", a, 0);
  int64_t start = 0;
  bool first = true;
  for (size_t k = 0; k < c.in.size(); ++k) {
    const int64_t len = c.in[k].shape[a];
    if (len == 0) continue;
    co[a] = start ? fmt::format("(o{} - {})", a, lit(start)) : fmt::format("o{}", a);
    b += fmt::format("    {}if (o{} < {}) {{ src = {}; off = {}; }}\n", first ? "" : "else ", a,
                     lit(dim_add(start, len)), k, linear(co, strides_sym(c.in[k].shape)));
    first = false;
    start = dim_add(start, len);
  }
}

void map_split(MapCtx& c, std::string& b) {
  const int r = c.in[0].rank();
  const int64_t a = norm_axis(c.attrs.require_int("axis"), r, "split");
  std::vector<int64_t> split = c.attrs.get_ints("split");
  // Over a symbolic axis the parts' constant sizes must sum to the dim when it
  // runs (ops/movement_ops.cpp, split_op): only a graph specialised to the dim
  // checks that, so no shape-generic kernel reads past it or leaves rows out.
  if (is_symbolic_dim(c.in[0].shape[a]))
    unsupported(
        "codegen: split along symbolic dim {} ({}) into parts of constant sizes [{}] has no shape-generic "
        "kernel (it could not check that they sum to the dim)",
        a, dim_str(c.in[0].shape[a]), fmt::join(split, ","));
  int64_t start = 0;
  for (int k = 0; k < c.result; ++k) start = dim_add(start, split.at(k));
  std::vector<int64_t> ist = strides_sym(c.in[0].shape);
  b += fmt::format("    src = 0; off = {};\n", linear(out_coords(r), ist, dim_mul(start, ist[a])));
}

void map_pad(MapCtx& c, std::string& b) {
  std::vector<int64_t> pads = c.attrs.get_ints("pads");
  const std::string mode = c.attrs.get_string("mode", "constant");
  const Shape& is = c.in[0].shape;
  const int r = static_cast<int>(is.size());
  std::vector<int64_t> ist = strides_of(is);
  if (c.in.size() > 1) {
    c.fill_operand = 1;
    c.data[1] = false;
  } else {
    Tensor v = Tensor::scalar(c.in[0].dtype, c.attrs.get_float("value", 0.0f));
    std::memcpy(&c.fill_bits, v.raw(), dtype_size(c.in[0].dtype));
  }
  b += "    src = 0;\n";
  std::vector<std::string> co;
  for (int d = 0; d < r; ++d) {
    const int64_t dim = is[d], p = pads[d];
    const bool padded = pads[d] != 0 || pads[d + r] != 0;
    std::string v = fmt::format("p{}", d);
    b += fmt::format("    kidx {} = o{}{};\n", v, d, p == 0 ? "" : fmt::format(" - {}@L@", p));
    if (padded) {
      if (mode == "constant") {
        b += fmt::format("    if ({} < 0 || {} >= {}@L@) src = -1;\n", v, v, dim);
      } else if (mode == "edge") {
        b += fmt::format("    {} = {} < 0 ? 0 : {} >= {}@L@ ? {}@L@ : {};\n", v, v, v, dim, dim - 1, v);
      } else if (mode == "wrap") {
        b += fmt::format("    {} = (({} % {}@L@) + {}@L@) % {}@L@;\n", v, v, dim, dim, dim);
      } else if (mode == "reflect") {
        if (dim == 1) {
          b += fmt::format("    {} = 0;\n", v);
        } else {
          const int64_t period = 2 * (dim - 1);
          b += fmt::format("    {} = (({} % {}@L@) + {}@L@) % {}@L@;\n", v, v, period, period, period);
          b += fmt::format("    if ({} >= {}@L@) {} = {}@L@ - {};\n", v, dim, v, period, v);
        }
      } else {
        fail("codegen: pad mode '{}' is not known", mode);
      }
    }
    co.push_back(v);
  }
  b += fmt::format("    off = {};\n", linear(co, ist));
}

void map_tile(MapCtx& c, std::string& b) {
  const Shape& is = c.in[0].shape;
  std::vector<std::string> co;
  for (size_t d = 0; d < is.size(); ++d)
    co.push_back(c.out.shape[d] == is[d] ? fmt::format("o{}", d) : fmt::format("(o{} % {}@L@)", d, is[d]));
  b += fmt::format("    src = 0; off = {};\n", linear(co, strides_of(is)));
}

void map_gather(MapCtx& c, std::string& b) {
  const Shape& ds = c.in[0].shape;
  const Shape& is = c.in[1].shape;
  const int r = static_cast<int>(ds.size()), q = static_cast<int>(is.size());
  const int64_t a = norm_axis(c.attrs.get_int("axis", 0), r, "gather");
  if (c.in[1].dtype != DType::I32 && c.in[1].dtype != DType::I64)
    fail("codegen: gather: indices must be i32 or i64, got {}", dtype_name(c.in[1].dtype));
  c.data[1] = false;
  std::vector<std::string> ico;
  for (int j = 0; j < q; ++j) ico.push_back(fmt::format("o{}", a + j));
  b += fmt::format("    long long ix = (long long){};\n", c.read(1, linear(ico, strides_sym(is))));
  b += fmt::format("    if (ix < 0) ix += {};\n", lit(ds[a]));
  std::vector<std::string> dco;
  for (int d = 0; d < r; ++d)
    dco.push_back(d < a ? fmt::format("o{}", d) : d == a ? "ix" : fmt::format("o{}", d - 1 + q));
  // Out of range: the element gets zero bytes (the reference raises an error).
  b += fmt::format("    if (ix < 0 || ix >= {}) {{ src = -1; off = 0; }} else {{ src = 0; off = {}; }}\n", lit(ds[a]),
                   linear(dco, strides_sym(ds)));
}

void map_depth_to_space(MapCtx& c, std::string& b) {
  const int64_t bs = c.attrs.require_int("blocksize");
  const bool dcr = c.attrs.get_string("mode", "DCR") == "DCR";
  const Shape& s = c.in[0].shape;
  const int64_t C = s[1] / (bs * bs), H = s[2], W = s[3];
  b += fmt::format("    const kidx h = o2 / {0}@L@, b1 = o2 % {0}@L@, w = o3 / {0}@L@, b2 = o3 % {0}@L@;\n", bs);
  b += dcr ? fmt::format("    const kidx ch = (b1 * {}@L@ + b2) * {}@L@ + o1;\n", bs, C)
           : fmt::format("    const kidx ch = (o1 * {0}@L@ + b1) * {0}@L@ + b2;\n", bs);
  b += fmt::format("    src = 0; off = o0 * {}@L@ + ch * {}@L@ + h * {}@L@ + w;\n", s[1] * H * W, H * W, W);
}

void map_space_to_depth(MapCtx& c, std::string& b) {
  const int64_t bs = c.attrs.require_int("blocksize");
  const Shape& s = c.in[0].shape;
  const int64_t C = s[1], H = s[2], W = s[3];
  b += fmt::format("    const kidx ch = o1 % {}@L@, blk = o1 / {}@L@;\n", C, C);
  b += fmt::format("    const kidx h = o2 * {0}@L@ + blk / {0}@L@, w = o3 * {0}@L@ + blk % {0}@L@;\n", bs);
  b += fmt::format("    src = 0; off = o0 * {}@L@ + ch * {}@L@ + h * {}@L@ + w;\n", C * H * W, H * W, W);
}

// ---------------------------------------------------------------------------
// Index maps of the index family (ops/index_gather.cpp, index_layout.cpp).
// An index outside its range (the reference raises an error) gives the
// element zero bytes, as gather does. (one_hot, eye_like and compress, whose
// operands are not data or i32/i64 indices, are in emit_index_select.h.)

void require_indices(const TensorType& t, const char* op) {
  if (t.dtype != DType::I32 && t.dtype != DType::I64)
    fail("codegen: {}: indices must be i32 or i64, got {}", op, dtype_name(t.dtype));
}

// out[p] = data[p with p[axis] = indices[p]]; indices have the result's shape.
void map_gather_elements(MapCtx& c, std::string& b) {
  const Shape& ds = c.in[0].shape;
  const int r = static_cast<int>(ds.size());
  const int64_t a = norm_axis(c.attrs.get_int("axis", 0), r, "gather_elements");
  require_indices(c.in[1], "gather_elements");
  c.data[1] = false;
  std::vector<std::string> co = out_coords(r);
  // Symbolic dims (sizes, strides, the axis' bound) come from `ks` (lit); static ones keep their bytes.
  b += fmt::format("    long long ix = (long long){};\n", c.read(1, linear(co, strides_sym(c.in[1].shape))));
  b += fmt::format("    if (ix < 0) ix += {};\n", lit(ds[a]));
  co[a] = "(kidx)ix";
  b += fmt::format("    if (ix < 0 || ix >= {}) {{ src = -1; off = 0; }} else {{ src = 0; off = {}; }}\n", lit(ds[a]),
                   linear(co, strides_sym(ds)));
}

// out[t..., s...] = data[batch..., indices[t..., :], s...]: the first q-1
// result coordinates pick an index tuple (its first batch_dims are also the
// data's leading coordinates), the rest address the slice.
void map_gather_nd(MapCtx& c, std::string& b) {
  const Shape& ds = c.in[0].shape;
  const Shape& is = c.in[1].shape;
  const int64_t bd = c.attrs.get_int("batch_dims", 0);
  const int q = static_cast<int>(is.size()), r = static_cast<int>(ds.size());
  const int64_t m = is.back();
  // The index tuple's length is a static dim; the others may be symbolic
  // (the dynamo exporter's mask[arange(b)[:, None], arange(s)] of an HF
  // encoder): their strides and bounds come from the symbols (lit).
  if (is_symbolic_dim(m)) fail("codegen: gather_nd: the index tuple length {} is symbolic", dim_str(m));
  if (bd < 0 || bd + m > r || bd >= q) fail("codegen: gather_nd: operands do not fit batch_dims {}", bd);
  require_indices(c.in[1], "gather_nd");
  c.data[1] = false;
  std::vector<std::string> tco = out_coords(q - 1);
  Shape ts(is.begin(), is.end() - 1);
  const std::vector<int64_t> st = strides_sym(ds);
  b += fmt::format("    const kidx tup = ({}) * {}@L@;\n", linear(tco, strides_sym(ts)), m);
  b += "    bool bad = false;\n";
  std::string off;
  for (int64_t d = 0; d < bd; ++d) off += fmt::format("o{} * {} + ", d, lit(st[d]));
  for (int64_t j = 0; j < m; ++j) {
    const int64_t dim = ds[bd + j];
    // Static bounds keep their bytes (static plans stay byte-identical).
    const std::string bound =
        is_symbolic_dim(dim) ? fmt::format("(long long)({})", lit(dim)) : fmt::format("{}LL", dim);
    b += fmt::format("    long long ix{} = (long long){};\n", j, c.read(1, fmt::format("tup + {}", j)));
    b += fmt::format("    if (ix{0} < 0) ix{0} += {1};\n    bad = bad || ix{0} < 0 || ix{0} >= {1};\n", j, bound);
    off += fmt::format("(kidx)ix{} * {} + ", j, lit(st[bd + j]));
  }
  for (int64_t d = bd + m; d < r; ++d) off += fmt::format("o{} * {} + ", q - 1 + d - (bd + m), lit(st[d]));
  off += "0";
  b += fmt::format("    if (bad) {{ src = -1; off = 0; }} else {{ src = 0; off = {}; }}\n", off);
}

// Keeps x where col - row >= k (upper) or <= k (lower), zero elsewhere.
void map_trilu(MapCtx& c, std::string& b) {
  const int r = c.out.rank();
  if (r < 2) fail("codegen: trilu: rank {} < 2", r);
  const bool upper = c.attrs.get_int("upper", 1) == 1;
  const int64_t k = c.attrs.get_int("k", 0);
  b += fmt::format("    const long long diff = (long long)o{} - (long long)o{};\n", r - 1, r - 2);
  b += fmt::format("    src = diff {} {}LL ? 0 : -1; off = {};\n", upper ? ">=" : "<=", k,
                   linear(out_coords(r), strides_of(c.out.shape)));
}

// For batch entry b, the first sequence_lens[b] steps along time_axis are
// reversed; a length outside [0, steps] (an error in the reference) zeroes.
void map_reverse_sequence(MapCtx& c, std::string& b) {
  const int64_t ba = c.attrs.get_int("batch_axis", 1), ta = c.attrs.get_int("time_axis", 0);
  if (c.out.rank() < 2 || ba == ta || (ba != 0 && ba != 1) || (ta != 0 && ta != 1))
    fail("codegen: reverse_sequence: batch_axis {} / time_axis {}", ba, ta);
  require_indices(c.in[1], "reverse_sequence");
  c.data[1] = false;
  const int64_t steps = c.out.shape[ta];
  std::vector<std::string> co = out_coords(c.out.rank());
  co[ta] = "from";
  b += fmt::format("    const long long len = (long long){};\n", c.read(1, fmt::format("o{}", ba)));
  b += fmt::format("    const kidx from = (long long)o{0} < len ? (kidx)(len - 1 - o{0}) : o{0};\n", ta);
  b += fmt::format("    if (len < 0 || len > {}LL) {{ src = -1; off = 0; }} else {{ src = 0; off = {}; }}\n", steps,
                   linear(co, strides_of(c.in[0].shape)));
}

const std::map<std::string, IndexMap>& maps() {
  static const std::map<std::string, IndexMap> m = {
      {"reshape", map_reshape},
      {"transpose", map_transpose},
      {"expand", map_expand},
      {"slice", map_slice},
      {"concat", map_concat},
      {"split", map_split},
      {"pad", map_pad},
      {"tile", map_tile},
      {"gather", map_gather},
      {"depth_to_space", map_depth_to_space},
      {"space_to_depth", map_space_to_depth},
      {"gather_elements", map_gather_elements},
      {"gather_nd", map_gather_nd},
      {"trilu", map_trilu},
      {"reverse_sequence", map_reverse_sequence},
  };
  return m;
}

}  // namespace

bool injective_supported(const std::string& name) { return maps().count(name) != 0; }

InjectiveMap injective_index_map(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                 const std::vector<TensorType>& outs, int result,
                                 const std::function<std::string(int, const std::string&)>& read) {
  auto it = maps().find(def.name);
  if (it == maps().end()) fail("codegen: op '{}' has no injective index map", def.name);
  if (result < 0 || result >= static_cast<int>(outs.size()))
    fail("codegen: {}: result {} of {}", def.name, result, outs.size());
  if (operands.empty()) fail("codegen: {}: no operands", def.name);
  const TensorType& out = outs[result];
  if (dtype_size(operands[0].dtype) != dtype_size(out.dtype))
    fail("codegen: {}: operand {} and result {} differ in element size", def.name, operands[0].str(), out.str());
  MapCtx c{attrs, operands, out, result, read, std::vector<bool>(operands.size(), true)};
  InjectiveMap m;
  it->second(c, m.code);
  m.data = c.data;
  m.fill_operand = c.fill_operand;
  m.fill_bits = c.fill_bits;
  return m;
}

std::string finish_index_types(const std::string& code, bool narrow) {
  return replace_all(replace_all(code, "@L@", narrow ? "" : "LL"), "kidx", narrow ? "int" : "long long");
}

std::string coordinates_code(const Shape& s, const std::string& flat, const std::string& indent) {
  const int rank = static_cast<int>(s.size());
  std::string b = fmt::format("{}kidx r = (kidx)({});\n", indent, flat);
  for (int d = rank - 1; d >= 0; --d) {
    if (d == 0) b += fmt::format("{}const kidx o0 = r;\n", indent);
    else b += fmt::format("{0}const kidx o{1} = r % {2}; r /= {2};\n", indent, d, lit(s[d]));
  }
  b += indent + "(void)r;\n";
  return b;
}

InjectiveSymbolsScope::InjectiveSymbolsScope(const KernelSymbols* syms) : previous_(t_syms) { t_syms = syms; }

InjectiveSymbolsScope::~InjectiveSymbolsScope() { t_syms = previous_; }

bool injective_shape_generic(const std::string& name) {
  static const char* const kGeneric[] = {"reshape", "transpose", "expand",          "slice",    "concat",
                                         "split",   "gather",    "gather_elements", "gather_nd"};
  return std::find(std::begin(kGeneric), std::end(kGeneric), name) != std::end(kGeneric);
}

InjectiveKernel emit_injective_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                  const std::vector<TensorType>& outs, int result) {
  // Shape-generic (a plan with shape profiles, docs/dynamic_shapes.md): the
  // sizes come from the symbols' values (`ks`), indices are 64-bit.
  std::vector<Shape> shapes;
  for (const TensorType& t : operands) shapes.push_back(t.shape);
  for (const TensorType& t : outs) shapes.push_back(t.shape);
  const KernelSymbols syms(shapes);
  const bool generic = !syms.empty();
  if (generic && !injective_shape_generic(def.name))
    unsupported("codegen: {} has no shape-generic kernel (symbolic sizes) yet", def.name);
  const InjectiveSymbolsScope scope(generic ? &syms : nullptr);
  // Transposes that move the innermost dim: through shared-memory tiles
  // (static shapes only: the tiled kernel counts its tiles at compile time).
  if (!generic && def.name == "transpose" && operands.size() == 1 && outs.size() == 1 &&
      dtype_size(operands[0].dtype) == dtype_size(outs[0].dtype))
    if (std::optional<InjectiveKernel> t = emit_tiled_transpose(operands[0], attrs.get_ints("perm"))) return *t;
  const InjectiveMap m = injective_index_map(def, attrs, operands, outs, result, [](int k, const std::string& off) {
    return fmt::format("in{}[{}]", k, off);
  });
  const TensorType& out = outs[result];
  const char* E = uint_type(dtype_size(out.dtype));
  std::vector<std::string> param_types(operands.size(), E);
  for (size_t i = 0; i < operands.size(); ++i)
    if (!m.data[i] && static_cast<int>(i) != m.fill_operand)
      param_types[i] = operands[i].dtype == DType::I32 ? "int" : "long long";
  std::string fill =
      m.fill_operand >= 0 ? fmt::format("in{}[0]", m.fill_operand) : fmt::format("({})0x{:x}ULL", E, m.fill_bits);
  InjectiveKernel k;
  k.numel = generic ? dim_product(out.shape) : out.numel();
  if (!generic) {  // a symbolic kernel's counts are known per shape only
    k.counts.push_back(k.numel);
    for (const TensorType& t : operands) k.counts.push_back(t.numel());
  }
  std::string params = fmt::format("KILN_PTR({}) out", E);
  for (size_t i = 0; i < operands.size(); ++i) params += fmt::format(", KILN_PTR(const {}) in{}", param_types[i], i);
  if (generic) params += ", kiln_syms ks";
  std::string body;
  if (generic) body += KernelSymbols::struct_text();
  body += fmt::format("// {}({}): {} <-", def.name, result, out.str());
  for (size_t i = 0; i < operands.size(); ++i) body += (i ? ", " : " ") + operands[i].str();
  body += "\n";
  body += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", params);
  body += fmt::format("  const long long n = {};\n", generic ? syms.lit(k.numel) : fmt::format("{}LL", k.numel));
  body += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n";
  body += "       i += (long long)gridDim.x * blockDim.x) {\n";
  body += coordinates_code(out.shape, "i", "    ");
  body += "    int src = 0;\n    kidx off = 0;\n";
  body += m.code;
  // The select over the data operands (not gather's indices, not pad's value).
  body += fmt::format("    {} v;\n", E);
  bool first = true;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (!m.data[i]) continue;
    body += fmt::format("    {}if (src == {}) v = in{}[off];\n", first ? "" : "else ", i, i);
    first = false;
  }
  body += fmt::format("    else v = {};\n", fill);
  body += "    out[i] = v;\n  }\n}\n";
  // Index arithmetic in 32 bits when every offset fits (64-bit division by
  // the dims' constants costs several times more on the GPU).
  bool narrow = !generic && k.numel <= INT32_MAX;
  for (const TensorType& t : operands) narrow = narrow && !has_symbolic_dims(t.shape) && t.numel() <= INT32_MAX;
  body = finish_index_types(body, narrow);
  // Simulator entry.
  body += "#ifdef KILN_SIM\n";
  body +=
      "extern \"C\" int @NAME@_sim(const ::kiln::sim::LaunchConfig* cfg, void* const* buffers, "
      "const long long* counts, std::string* error) {\n  try {\n";
  body += fmt::format(
      "    ::kiln::sim::launch(*cfg, @NAME@,\n        ::kiln::sim::arg(static_cast<{}*>(buffers[0]), "
      "counts[0], \"out\")",
      E);
  for (size_t i = 0; i < operands.size(); ++i)
    body += fmt::format(",\n        ::kiln::sim::arg(static_cast<const {}*>(buffers[{}]), counts[{}], \"in{}\")",
                        param_types[i], i + 1, i + 1, i);
  // The symbols' values: one more buffer, passed by value.
  if (generic) body += fmt::format(",\n        *static_cast<const kiln_syms*>(buffers[{}])", operands.size() + 1);
  body += ");\n    return 0;\n";
  body += "  } catch (const ::kiln::sim::SimError& ex) {\n    *error = ex.what();\n    return 1;\n";
  body += "  } catch (const std::exception& ex) {\n    *error = ex.what();\n    return 2;\n  }\n}\n#endif\n";

  k.name = fmt::format("kiln_inj_{}_{:016x}", sanitize_identifier(def.name), XXH64(body.data(), body.size(), 0));
  k.source = std::string(kKernelPrelude) + replace_all(body, "@NAME@", k.name);
  if (generic) {
    k.symbols = syms.names();
    k.grid_expr = GridAxisExpr{k.numel, k.block, 8192};
    k.grid = 1;  // evaluated per shape (nonzero: a launch)
    return k;
  }
  const int64_t blocks = (k.numel + k.block - 1) / k.block;
  k.grid = static_cast<unsigned>(std::min<int64_t>(blocks, 8192));
  return k;
}

}  // namespace kiln::codegen
