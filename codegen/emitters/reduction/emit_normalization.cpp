#include "codegen/launch_fit.h"
#include "codegen/emitters/reduction/emit_normalization.h"

#include <algorithm>
#include <bit>
#include <cstdint>

#include <fmt/format.h>

#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_expr.h"
#include "codegen/emitters/reduction/emit_rowwise.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

namespace {

// An exact double literal.
std::string dlit(double v) { return fmt::format("__longlong_as_double({:#x}LL)", std::bit_cast<uint64_t>(v)); }

int norm_axis(int64_t a, int r, const std::string& op) {
  const int64_t n = a < 0 ? a + r : a;
  if (n < 0 || n >= r) fail("codegen: {}: axis {} is out of range for rank {}", op, a, r);
  return static_cast<int>(n);
}

int64_t product(const Shape& s, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; ++i) p *= s[i];
  return p;
}

// A dim as a long long literal: "12LL", or a symbolic dim's polynomial over `ks`.
std::string ll_dim(const KernelSymbols& syms, int64_t d) {
  return is_symbolic_dim(d) ? syms.lit(d) : fmt::format("{}LL", d);
}

// Statements decomposing flat index `var` (row-major over `dims`) into the
// element offset with `strides`; returns the offset expression. Size-1 dims
// are skipped. Symbolic dims and strides read `syms`.
std::string decompose(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, const std::string& var,
                      const std::string& indent, std::string& body, const KernelSymbols& syms = {}) {
  std::vector<size_t> live;
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] != 1) live.push_back(d);
  if (live.empty()) return "0LL";
  if (live.size() == 1) {
    const int64_t s = strides[live[0]];
    return s == 1 ? var : fmt::format("{} * {}", var, ll_dim(syms, s));
  }
  body += fmt::format("{}long long {}_r = {};\n", indent, var, var);
  std::string off;
  for (int i = static_cast<int>(live.size()) - 1; i >= 0; --i) {
    const size_t d = live[i];
    std::string c;
    if (i == 0) {
      c = var + "_r";
    } else {
      c = fmt::format("{}_c{}", var, i);
      body += fmt::format("{}const long long {} = {}_r % {}; {}_r /= {};\n", indent, c, var, ll_dim(syms, dims[d]), var,
                          ll_dim(syms, dims[d]));
    }
    if (!off.empty()) off += " + ";
    off += strides[d] == 1 ? c : fmt::format("{} * {}", c, ll_dim(syms, strides[d]));
  }
  return off;
}

// A view of x for a statistics kernel: dims (a reshape of x, same element
// order) and which of them are reduced; the kept ones enumerate the groups
// (index `o`), the reduced ones a group's elements (index `r`).
struct View {
  std::vector<int64_t> dims;
  std::vector<bool> reduced;
};

// Everything a statistics kernel needs besides the view.
struct StatSpec {
  enum Kind { MeanVar, Abs, Square } kind = MeanVar;
  std::string stats;  // statements after the statistics (double mean, var; or double acc), indented 4
  std::string param;  // statements in the normalize loop (o, r, e, x known), indented 6
  std::string y;      // the normalized value, a double expression
  std::string extra;  // statements run by thread 0 of each group after the statistics (indented 6)
};

// `syms`: a shape-generic kernel's symbols (its last parameter, kiln_syms, in the simulator entry too).
ReductionKernel finish(ReductionKernel& k, DType dt, const std::string& label, const std::string& body,
                       const AnchorIO& io, const KernelSymbols& syms = {}) {
  if (deciding_only()) return k;  // decided; the rest is text (codegen/core/deciding_only.h)
  std::vector<DType> dts = io.dtypes;
  dts.push_back(dt);
  std::string prelude = kernel_headers(dts);
  if (!io.setup.empty()) prelude += std::string(expr_prelude());
  std::string named = name_kernel("kiln_norm", label, body + kernel_sim_entry(io.buffers, !syms.empty()), k.name);
  k.source = prelude + named;
  k.counts.clear();
  for (const KernelBuffer& b : io.buffers) k.counts.push_back(b.count);
  return k;
}

ReductionKernel stat_kernel(const std::string& label, const TensorType& x, const View& v, const StatSpec& sp,
                            const AnchorIO& io) {
  ReductionKernel k;
  // Shape-generic (a symbolic batch or image size: instance/group norm):
  // the view's dims, the group count and size from `ks`, a block per group.
  const KernelSymbols syms({x.shape});
  const bool generic = !syms.empty();
  std::vector<int64_t> strides(v.dims.size());
  int64_t run = 1;
  for (int d = static_cast<int>(v.dims.size()) - 1; d >= 0; --d) {
    strides[d] = run;
    run = dim_mul(run, v.dims[d]);
  }
  KILN_CHECK(run == dim_product(x.shape), "codegen: {}: view of {} elements", label, dim_str(dim_product(x.shape)));
  std::vector<int64_t> kd, ks, rd, rs;
  k.outputs = 1;
  k.count = 1;
  for (size_t d = 0; d < v.dims.size(); ++d) {
    (v.reduced[d] ? rd : kd).push_back(v.dims[d]);
    (v.reduced[d] ? rs : ks).push_back(strides[d]);
    int64_t& n = v.reduced[d] ? k.count : k.outputs;
    n = dim_mul(n, v.dims[d]);
  }
  const DType dt = x.dtype;
  const std::string C(cuda_compute_type(dt));
  std::string b = fmt::format("// {}: {}: {} groups of {}\n", label, x.str(), dim_str(k.outputs), dim_str(k.count));
  if (generic) b += KernelSymbols::struct_text();
  b += block_fold("double", "@NAME@_sum", "a + v", "0.0");
  b += fmt::format("extern \"C\" __global__ void @NAME@({}{}) {{\n", kernel_params(io.buffers),
                   generic ? ", kiln_syms ks" : "");
  b += io.setup;
  b += fmt::format("  for (long long o = blockIdx.x; o < {}; o += gridDim.x) {{\n", ll_dim(syms, k.outputs));
  const std::string base = decompose(kd, ks, "o", "    ", b, syms);
  b += fmt::format("    const long long base = {};\n", base);
  std::string elem;
  const std::string roff = decompose(rd, rs, "r", "      ", elem, syms);
  elem += fmt::format("      const long long e = base + {};\n", roff);
  auto loop = [&](bool record) {
    return fmt::format("    for (long long r = threadIdx.x; r < {}; r += blockDim.x) {{\n", ll_dim(syms, k.count)) +
           elem + fmt::format("      const double x = (double)({})({});\n", C, cuda_load(dt, io.load(0, "e", record)));
  };
  b += "    double s = 0.0;\n";
  b += loop(true);
  b += sp.kind == StatSpec::MeanVar ? "      s += x;\n    }\n"
       : sp.kind == StatSpec::Abs   ? "      s += fabs(x);\n    }\n"
                                    : "      s += x * x;\n    }\n";
  b += "    s = @NAME@_sum_block(s);\n";
  if (sp.kind == StatSpec::MeanVar) {
    b += fmt::format("    const double mean = s / (double){};\n", ll_dim(syms, k.count));
    b += "    double q = 0.0;\n";
    b += loop(false) + "      const double dv = x - mean;\n      q += dv * dv;\n    }\n";
    b += "    q = @NAME@_sum_block(q);\n";
    b += fmt::format("    const double var = q / (double){};\n", ll_dim(syms, k.count));
  }
  b += sp.stats;
  if (!sp.extra.empty()) b += "    if (threadIdx.x == 0) {\n" + sp.extra + "    }\n";
  b += loop(false) + sp.param;
  b += io.store(0, "e", cuda_store(dt, fmt::format("({})({})", C, sp.y)), "      ");
  b += "    }\n  }\n}\n";
  finish(k, dt, label, b, io, syms);
  int64_t bl = 32;
  while ((is_symbolic_dim(k.count) || bl < k.count) && bl < 256) bl *= 2;  // symbolic: 256, valid at every size
  k.block = block_threads(static_cast<unsigned>(bl));                      // its loops and folds read blockDim
  if (generic) {
    k.symbols = syms.names();
    k.grid_expr = GridAxisExpr{k.outputs, 1, 65535};
    k.grid = 1;  // evaluated per shape
    return k;
  }
  k.grid = static_cast<unsigned>(std::min<int64_t>(k.outputs, 65535));
  return k;
}

// A per-channel (or per-element) parameter: operand k at index `idx`, as double.
std::string param(const AnchorIO& io, const std::vector<TensorType>& ops, int k, const std::string& idx) {
  return fmt::format("(double){}", cuda_load(ops[k].dtype, io.load(k, idx, false)));
}

ReductionKernel layer_norm(const AttrMap& a, const std::vector<TensorType>& ops, const std::vector<TensorType>& res,
                           const AnchorIO& io) {
  const TensorType& x = ops[0];
  const int r = x.rank();
  const int axis = norm_axis(a.get_int("axis", -1), r, "layer_normalization");
  // Rows that fit in registers: one pass over memory (emit_rowwise.h).
  if (std::optional<ReductionKernel> rk = emit_row_layer_norm(axis, a.get_float("epsilon", 1e-5f), ops, res, io))
    return *rk;
  // Symbolic sizes: the row kernel only (shape-generic), never the static one below.
  if (has_symbolic_dims(x.shape))
    unsupported(
        "codegen: layer_normalization of {}: a shape-generic one needs static normalized dims of at most {} "
        "elements",
        x.str(), kMaxRegisterRow);
  View v{x.shape, std::vector<bool>(r, false)};
  for (int d = axis; d < r; ++d) v.reduced[d] = true;
  const Shape ns(x.shape.begin() + axis, x.shape.end());
  StatSpec sp;
  sp.stats = fmt::format("    const double inv = 1.0 / sqrt(var + {});\n", dlit(a.get_float("epsilon", 1e-5f)));
  std::string si = broadcast_param_index(ops[1].shape, ns, "ps", sp.param, "      ", "\n");
  sp.param += fmt::format("      const double sc = {};\n", param(io, ops, 1, si));
  sp.y = "(x - mean) * inv * sc";
  if (ops.size() > 2) {
    std::string bi = broadcast_param_index(ops[2].shape, ns, "pb", sp.param, "      ", "\n");
    sp.param += fmt::format("      const double bi = {};\n", param(io, ops, 2, bi));
    sp.y += " + bi";
  }
  if (res.size() > 1) sp.extra += io.store(1, "o", "(float)mean", "      ");
  if (res.size() > 2) sp.extra += io.store(2, "o", "(float)inv", "      ");
  return stat_kernel("layer_normalization", x, v, sp, io);
}

// group / instance normalization: x [N, C, S...] (nhwc: [N, S..., C]).
ReductionKernel group_norm(const std::string& op, int64_t groups, const AttrMap& a, const std::vector<TensorType>& ops,
                           const AnchorIO& io) {
  const TensorType& x = ops[0];
  const int r = x.rank();
  if (r < 2) fail("codegen: {}: x {} needs rank >= 2", op, x.str());
  const bool nhwc = a.get_string("layout", "nchw") == "nhwc";
  const int64_t n = x.shape[0], ch = nhwc ? x.shape[r - 1] : x.shape[1];
  // The spatial dims may be symbolic (a shape-generic kernel, stat_kernel).
  int64_t inner = 1;
  for (int d = nhwc ? 1 : 2; d < (nhwc ? r - 1 : r); ++d) inner = dim_mul(inner, x.shape[d]);
  if (groups <= 0 || is_symbolic_dim(ch) || ch % groups != 0)
    fail("codegen: {}: {} channels in {} groups", op, dim_str(ch), groups);
  const int64_t cpg = ch / groups;
  // NCHW groups are contiguous rows: one pass when they fit in registers (static sizes).
  if (!nhwc && !has_symbolic_dims(x.shape))
    if (std::optional<ReductionKernel> rk =
            emit_row_group_norm(op, groups, a.get_float("epsilon", 1e-5f), ops, {ops[0]}, io))
      return *rk;
  View v;
  std::string c;
  if (nhwc) {
    v = {{n, inner, groups, cpg}, {false, true, false, true}};
    c = fmt::format("(o % {}LL) * {}LL + r % {}LL", groups, cpg, cpg);
  } else {
    v = {{n, groups, dim_mul(cpg, inner)}, {false, false, true}};
    const KernelSymbols syms({x.shape});
    c = fmt::format("(o % {}LL) * {}LL + r / {}", groups, cpg, ll_dim(syms, inner));
  }
  StatSpec sp;
  sp.stats = fmt::format("    const double inv = 1.0 / sqrt(var + {});\n", dlit(a.get_float("epsilon", 1e-5f)));
  sp.param = fmt::format("      const long long ch = {};\n", c);
  sp.param += fmt::format("      const double ga = inv * {};\n", param(io, ops, 1, "ch"));
  sp.param += fmt::format("      const double sh = {} - mean * ga;\n", param(io, ops, 2, "ch"));
  sp.y = "x * ga + sh";
  return stat_kernel(op, x, v, sp, io);
}

ReductionKernel mvn(const AttrMap& a, const std::vector<TensorType>& ops, const AnchorIO& io) {
  const TensorType& x = ops[0];
  const int r = x.rank();
  View v{x.shape, std::vector<bool>(r, false)};
  for (int64_t ax : a.get_ints("axes")) v.reduced[norm_axis(ax, r, "mean_variance_normalization")] = true;
  StatSpec sp;
  sp.stats = fmt::format("    const double denom = sqrt(var) + {};\n", dlit(1e-9));
  sp.y = "(x - mean) / denom";
  return stat_kernel("mean_variance_normalization", x, v, sp, io);
}

ReductionKernel lp_norm(const AttrMap& a, const std::vector<TensorType>& ops, const AnchorIO& io) {
  const TensorType& x = ops[0];
  const int r = x.rank();
  const int axis = norm_axis(a.require_int("axis"), r, "lp_normalization");
  const int64_t p = a.require_int("p");
  if (p != 1 && p != 2) fail("codegen: lp_normalization: p = {}", p);
  View v{{product(x.shape, 0, axis), x.shape[axis], product(x.shape, axis + 1, r)}, {false, true, false}};
  StatSpec sp;
  sp.kind = p == 1 ? StatSpec::Abs : StatSpec::Square;
  sp.stats = p == 1 ? "    const double acc = s;\n" : "    const double acc = sqrt(s);\n";
  sp.y = "(acc == 0.0 ? 0.0 : x / acc)";  // a zero norm gives 0, as ONNX defines it
  return stat_kernel("lp_normalization", x, v, sp, io);
}

// One thread per element: batch_normalization and lrn. Shape-generic (a
// symbolic batch; `code` must not depend on it): the element count from `ks`.
ReductionKernel elementwise_kernel(const std::string& label, const TensorType& x, const std::string& code,
                                   const std::string& y, const AnchorIO& io) {
  ReductionKernel k;
  const KernelSymbols syms({x.shape});
  const bool generic = !syms.empty();
  k.outputs = dim_product(x.shape);
  k.count = 1;
  const DType dt = x.dtype;
  const std::string C(cuda_compute_type(dt));
  std::string b = fmt::format("// {}: {}\n", label, x.str());
  if (generic) b += KernelSymbols::struct_text();
  b += fmt::format("extern \"C\" __global__ void @NAME@({}{}) {{\n", kernel_params(io.buffers),
                   generic ? ", kiln_syms ks" : "");
  b += io.setup;
  b += fmt::format("  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < {};\n",
                   generic ? syms.lit(k.outputs) : fmt::format("{}LL", k.outputs));
  b += "       i += (long long)gridDim.x * blockDim.x) {\n";
  b += fmt::format("    const double x = (double)({})({});\n", C, cuda_load(dt, io.load(0, "i", true)));
  b += code;
  b += io.store(0, "i", cuda_store(dt, fmt::format("({})({})", C, y)), "    ");
  b += "  }\n}\n";
  finish(k, dt, label, b, io, syms);
  k.block = block_threads(256);
  if (generic) {
    k.symbols = syms.names();
    k.grid_expr = GridAxisExpr{k.outputs, k.block, 8192};
    k.grid = 1;  // evaluated per shape
    return k;
  }
  k.grid = static_cast<unsigned>(std::min<int64_t>((k.outputs + k.block - 1) / k.block, 8192));
  return k;
}

ReductionKernel batch_norm(const AttrMap& a, const std::vector<TensorType>& ops, const AnchorIO& io) {
  const TensorType& x = ops[0];
  const int r = x.rank();
  if (r < 2) fail("codegen: batch_normalization: x {} needs rank >= 2", x.str());
  const bool nhwc = a.get_string("layout", "nchw") == "nhwc";
  const int64_t ch = nhwc ? x.shape[r - 1] : x.shape[1];
  const int64_t inner = nhwc ? 1 : product(x.shape, 2, r);
  std::string code = inner == 1 ? fmt::format("    const long long c = i % {}LL;\n", ch)
                                : fmt::format("    const long long c = (i / {}LL) % {}LL;\n", inner, ch);
  code += fmt::format("    const double ga = {} / sqrt({} + {});\n", param(io, ops, 1, "c"), param(io, ops, 4, "c"),
                      dlit(a.get_float("epsilon", 1e-5f)));
  code += fmt::format("    const double mu = {};\n    const double be = {};\n", param(io, ops, 3, "c"),
                      param(io, ops, 2, "c"));
  return elementwise_kernel("batch_normalization", x, code, "(x - mu) * ga + be", io);
}

ReductionKernel lrn(const AttrMap& a, const std::vector<TensorType>& ops, const AnchorIO& io) {
  const TensorType& x = ops[0];
  if (x.rank() < 2) fail("codegen: lrn: x {} needs rank >= 2", x.str());
  const int64_t ch = x.shape[1], inner = product(x.shape, 2, x.rank());
  const int64_t size = a.require_int("size");
  const int64_t before = (size - 1) / 2, after = size / 2;
  const double coef = static_cast<double>(a.get_float("alpha", 0)) / static_cast<double>(size);
  const std::string C(cuda_compute_type(x.dtype));
  std::string code;
  code += fmt::format("    const long long j = i % {0}LL, c = (i / {0}LL) % {1}LL, bb = i / {2}LL;\n", inner, ch,
                      ch * inner);
  code += fmt::format(
      "    const long long lo = c - {0}LL < 0 ? 0 : c - {0}LL, hi = c + {1}LL > {2}LL ? {2}LL : c + {1}LL;\n", before,
      after, ch - 1);
  code += "    double sq = 0.0;\n";
  code += "    for (long long cc = lo; cc <= hi; ++cc) {\n";
  code += fmt::format("      const {0} xc = ({0})({1});\n", C,
                      cuda_load(x.dtype, io.load(0, fmt::format("(bb * {}LL + cc) * {}LL + j", ch, inner), false)));
  code += "      sq += (double)xc * xc;\n    }\n";
  const std::string y =
      fmt::format("x / pow({} + {} * sq, {})", dlit(a.get_float("bias", 0)), dlit(coef), dlit(a.get_float("beta", 0)));
  return elementwise_kernel("lrn", x, code, y, io);
}

}  // namespace

bool normalization_supported(const std::string& name) {
  return name == "layer_normalization" || name == "group_normalization" || name == "instance_normalization" ||
         name == "batch_normalization" || name == "lrn" || name == "mean_variance_normalization" ||
         name == "lp_normalization";
}

ReductionKernel emit_normalization(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                   const std::vector<TensorType>& results, const AnchorIO& io) {
  const std::string& op = def.name;
  if (!normalization_supported(op)) fail("codegen: op '{}' is not a normalization this emitter handles", op);
  if (operands.empty() || !is_float(operands[0].dtype) || results.empty())
    fail("codegen: {}: needs a floating x and a result", op);
  for (const TensorType& t : operands)
    if (!is_float(t.dtype)) fail("codegen: {}: operand {} is not floating", op, t.str());
  if (op == "layer_normalization") return layer_norm(attrs, operands, results, io);
  if (op == "group_normalization") return group_norm(op, attrs.require_int("num_groups"), attrs, operands, io);
  if (op == "instance_normalization") {
    const bool nhwc = attrs.get_string("layout", "nchw") == "nhwc";
    const int r = operands[0].rank();
    if (r < 2) fail("codegen: {}: x {} needs rank >= 2", op, operands[0].str());
    return group_norm(op, nhwc ? operands[0].shape[r - 1] : operands[0].shape[1], attrs, operands, io);
  }
  if (op == "mean_variance_normalization") return mvn(attrs, operands, io);
  if (op == "lp_normalization") return lp_norm(attrs, operands, io);
  if (op == "batch_normalization") return batch_norm(attrs, operands, io);
  return lrn(attrs, operands, io);
}

ReductionKernel emit_normalization(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                   const std::vector<TensorType>& results) {
  return emit_normalization(def, attrs, operands, results, plain_io(operands, results));
}

}  // namespace kiln::codegen
