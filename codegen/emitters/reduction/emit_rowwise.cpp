#include "codegen/emitters/reduction/emit_rowwise.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_expr.h"
#include "codegen/launch_fit.h"
#include "codegen/core/kernel_vector.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

namespace {

// How a row is spread over threads and registers.
struct RowPlan {
  int64_t rows = 0, count = 0;  // rows may be a symbolic dim (a shape-generic kernel)
  int W = 1;                    // elements per vector (1: element by element)
  bool vec = false;             // vector loads/stores of operand 0 / result 0 where aligned
  bool warp = true;             // a warp per row (rows_per_block rows per block), else a block per row
  int rows_per_block = 4;       // warp rows: 4, or 2 or 1 where 4 would leave some of an H100's SMs without a block
  int T = 32;                   // threads per row
  int NV = 1;                   // vectors (of W) per thread
  int slots() const { return NV * W; }
};

std::optional<RowPlan> plan_rows(int64_t rows, int64_t count, DType dt, bool plain) {
  const bool symbolic = is_symbolic_dim(rows);
  if (count < 1 || count > kMaxRegisterRow || (!symbolic && rows < 1)) return std::nullopt;
  RowPlan p;
  p.rows = rows;
  p.count = count;
  p.W = vector_width({dt});
  p.vec = plain && p.W > 1 && count % p.W == 0;
  if (!p.vec) p.W = 1;
  p.warp = count <= 1024;
  if (p.warp) {
    // Blocks of 4 warps, unless that gives fewer blocks than an H100 has SMs
    // (132): a row kernel is bound by DRAM traffic, and an SM without a block
    // issues no loads (kiln's performance model, docs/performance.md: BERT's
    // 128-row layernorms ran on 32 SMs).
    constexpr int64_t kSms = 132;
    // (A symbolic row count keeps 4: the launch's row count is not known here.)
    while (!symbolic && p.rows_per_block > 1 && (rows + p.rows_per_block - 1) / p.rows_per_block < kSms)
      p.rows_per_block /= 2;
    p.rows_per_block = static_cast<int>(block_threads(32u * p.rows_per_block) / 32);  // the one decision
  } else {
    // About 16 elements per thread: 64..1024 threads.
    const int64_t want = (count + 15) / 16;
    int64_t t = 64;
    while (t < want && t < 1024) t *= 2;
    p.T = static_cast<int>(block_threads(static_cast<unsigned>(t)));  // the one decision
  }
  const int64_t vectors = count / p.W;
  p.NV = static_cast<int>((vectors + p.T - 1) / p.T);
  if (p.slots() > 32) {
    // Only with fewer threads than the row asks for: the callers' multi-pass kernels take the row.
    KILN_CHECK(thread_cap() != 0, "codegen: row of {} in {} slots", count, p.slots());
    return std::nullopt;
  }
  return p;
}

// Whether `io` reads operand 0 as in0[idx] and stores result 0 as out[idx]
// (plain_io), so the row may be moved as vectors.
bool plain_row_io(const AnchorIO& io) {
  return io.setup.empty() && io.load(0, "IDX", false) == "in0[IDX]" &&
         io.store(0, "IDX", "VAL", "") == "out[IDX] = VAL;\n";
}

// Rows of `count` elements in `shape` (a symbolic dim where the shape is
// symbolic; 0 for an empty row).
int64_t row_count(const Shape& shape, int64_t count) {
  if (!count) return 0;
  if (!has_symbolic_dims(shape)) return shape_numel(shape) / count;
  std::optional<int64_t> rows = dim_div_exact(dim_product(shape), count);
  KILN_CHECK(rows, "codegen: [{}] is not rows of {}", dims_str(shape), count);
  return *rows;
}

std::string neg_inf(DType dt) {
  return dt == DType::F64 ? "__longlong_as_double(0xfff0000000000000LL)" : "__int_as_float(0xff800000)";
}

// Assembles the kernel: folds, row loop, the load of x[] (one read of the
// row), `compute` (statements over x[] using each()), and the store of
// `value` (an expression of the compute type over XS = the slot's value and
// r = its position in the row, after `value_code` statements).
class RowKernel {
 public:
  RowKernel(const RowPlan& p, DType dt, const AnchorIO& io)
      : p_(p), dt_(dt), io_(io), C_(cuda_compute_type(dt)), syms_(std::vector<Shape>{{p.rows}}) {}

  const std::string& C() const { return C_; }
  bool generic() const { return !syms_.empty(); }
  // The kernel's parameters; a shape-generic one ends with its kiln_syms.
  std::string params() const { return kernel_params(io_.buffers) + (generic() ? ", kiln_syms ks" : ""); }
  // Before the kernel: the kiln_syms definition (nothing for a static kernel).
  std::string preamble() const { return generic() ? KernelSymbols::struct_text() : std::string(); }

  // Statements running `stmt` for every slot of this thread holding an
  // element of the row: XS stands for the slot, r for the element's position.
  std::string each(const std::string& stmt, const std::string& ind = "    ") const {
    std::string s = replace_xs(stmt);
    return fmt::format(
        "{0}#pragma unroll\n{0}for (int k = 0; k < {1}; ++k) {{\n{0}#pragma unroll\n{0}  for (int j = 0; j < {2}; ++j) {{\n"
        "{0}    const long long r = (lane + (long long)k * {3}) * {2} + j;\n{0}    if (r < {4}LL) {{ {5} }}\n{0}  }}\n{0}}}\n",
        ind, p_.NV, p_.W, p_.T, p_.count, s);
  }

  // The fold of `v` (type C) over the row's threads: "max" or "sum".
  std::string fold(const std::string& kind, const std::string& v) const {
    return fmt::format("    {0} = @NAME@_{1}{2}({0});\n", v, kind, p_.warp ? "_warp" : "_block");
  }

  std::string helpers() const {
    const std::string mx = "(v != v) ? v : (v > a ? v : a)";
    std::string h;
    if (p_.warp) {
      for (auto [kind, comb] : {std::pair<std::string, std::string>{"max", mx}, {"sum", "a + v"}})
        h += fmt::format(
            "__device__ __forceinline__ {0} @NAME@_{1}_warp({0} a) {{\n"
            "  for (int o = 16; o > 0; o >>= 1) {{\n    const {0} v = __shfl_xor_sync(0xffffffffu, a, o);\n"
            "    a = {2};\n  }}\n  return a;\n}}\n",
            C_, kind, comb);
    } else {
      h += block_fold(C_, "@NAME@_max", mx, fmt::format("({})({})", C_, neg_inf(dt_)));
      h += block_fold(C_, "@NAME@_sum", "a + v", fmt::format("({})0", C_));
    }
    return h;
  }

  std::string begin() const {
    std::string b = io_.setup;
    const std::string S(cuda_storage_type(dt_));
    if (p_.vec) {
      b += fmt::format("  using V = kiln_vec<{}, {}>;\n", S, p_.W);
      b += fmt::format("  const bool aligned = {};\n",
                       vector_aligned({"out", "in0"}, {dtype_size(dt_), dtype_size(dt_)}, p_.W));
    }
    if (p_.warp) {
      b += "  const int lane = threadIdx.x & 31;\n";
      b += fmt::format("  for (long long row = (long long)blockIdx.x * {} + (threadIdx.x >> 5); row < {};\n",
                       p_.rows_per_block, syms_.lit(p_.rows));
      b += fmt::format("       row += (long long)gridDim.x * {}) {{\n", p_.rows_per_block);
    } else {
      b += "  const int lane = threadIdx.x;\n";
      b += fmt::format("  for (long long row = blockIdx.x; row < {}; row += gridDim.x) {{\n", syms_.lit(p_.rows));
    }
    b += fmt::format("    const long long base = row * {}LL;\n", p_.count);
    b += fmt::format("    {} x[{}];\n", C_, p_.slots());
    // The one read of the row (the record pass of a fused prologue).
    const std::string scalar = each(fmt::format("XS = ({})({});", C_, cuda_load(dt_, io_.load(0, "base + r", true))),
                                    p_.vec ? "      " : "    ");
    if (p_.vec) {
      b += "    if (aligned) {\n";
      b += fmt::format("#pragma unroll\n      for (int k = 0; k < {}; ++k) {{\n", p_.NV);
      b += fmt::format("        const long long q = lane + (long long)k * {};\n", p_.T);
      b += fmt::format("        if (q < {}LL) {{\n", p_.count / p_.W);
      b += fmt::format("          const V w = *KILN_PTR_CAST(const V, in0 + (base + q * {}));\n", p_.W);
      b += fmt::format("#pragma unroll\n          for (int j = 0; j < {}; ++j) x[k * {} + j] = ({})({});\n", p_.W, p_.W,
                       C_, cuda_load(dt_, "w.v[j]"));
      b += "        }\n      }\n    } else {\n" + scalar + "    }\n";
    } else {
      b += scalar;
    }
    return b;
  }

  // Stores `value` (compute type, over XS and r, after `code`) as result 0.
  std::string store(const std::string& code, const std::string& value) const {
    const std::string st = cuda_store(dt_, fmt::format("({})({})", C_, replace_xs(value)));
    std::string scalar_stmt = replace_xs(code) + io_.store(0, "base + r", st, "");
    std::string b;
    if (p_.vec) {
      b += "    if (aligned) {\n";
      b += fmt::format("#pragma unroll\n      for (int k = 0; k < {}; ++k) {{\n", p_.NV);
      b += fmt::format("        const long long q = lane + (long long)k * {};\n", p_.T);
      b += fmt::format("        if (q < {}LL) {{\n          V w;\n", p_.count / p_.W);
      b += fmt::format("#pragma unroll\n          for (int j = 0; j < {}; ++j) {{\n", p_.W);
      b += fmt::format("            const long long r = q * {} + j;\n", p_.W);
      b += "            " + replace_xs(code) + "\n";
      b += fmt::format("            w.v[j] = {};\n          }}\n", st);
      b += fmt::format("          *KILN_PTR_CAST(V, out + (base + q * {})) = w;\n", p_.W);
      b += "        }\n      }\n    } else {\n" + each(scalar_stmt, "      ") + "    }\n";
    } else {
      b += each(scalar_stmt);
    }
    return b;
  }

  void launch(ReductionKernel& k) const {
    k.outputs = p_.rows;
    k.count = p_.count;
    if (generic()) {  // the grid per shape: rows / rows per block, at most 65535 blocks
      k.block = static_cast<unsigned>(p_.warp ? 32 * p_.rows_per_block : p_.T);
      k.symbols = syms_.names();
      k.grid_expr = GridAxisExpr{p_.rows, p_.warp ? p_.rows_per_block : 1, 65535};
      k.grid = 1;
      return;
    }
    if (p_.warp) {
      k.block = static_cast<unsigned>(32 * p_.rows_per_block);
      k.grid = static_cast<unsigned>(std::min<int64_t>((p_.rows + p_.rows_per_block - 1) / p_.rows_per_block, 65535));
    } else {
      k.block = static_cast<unsigned>(p_.T);
      k.grid = static_cast<unsigned>(std::min<int64_t>(p_.rows, 65535));
    }
  }

  void finish(ReductionKernel& k, const std::string& prefix, const std::string& label, const std::string& body) const {
    if (deciding_only()) return launch(k);  // decided; the rest is text (codegen/core/deciding_only.h)
    std::vector<DType> dts = io_.dtypes;
    dts.push_back(dt_);
    std::string prelude = kernel_headers(dts) + std::string(kVectorPrelude);
    if (!io_.setup.empty()) prelude += std::string(expr_prelude());
    std::string named = name_kernel(prefix, label, body + kernel_sim_entry(io_.buffers, generic()), k.name);
    k.source = prelude + named;
    k.counts.clear();
    for (const KernelBuffer& b : io_.buffers) k.counts.push_back(b.count);
    launch(k);
  }

 private:
  std::string replace_xs(const std::string& s) const {
    std::string out;
    const std::string slot = fmt::format("x[k * {} + j]", p_.W);
    for (size_t pos = 0;;) {
      size_t at = s.find("XS", pos);
      out.append(s, pos, at == std::string::npos ? std::string::npos : at - pos);
      if (at == std::string::npos) break;
      out += slot;
      pos = at + 2;
    }
    return out;
  }

  RowPlan p_;
  DType dt_;
  const AnchorIO& io_;
  std::string C_;
  KernelSymbols syms_;
};

}  // namespace

std::optional<ReductionKernel> emit_row_softmax(bool log_softmax, const TensorType& in, int64_t count,
                                                const AnchorIO& io) {
  const std::string label = log_softmax ? "log_softmax" : "softmax";
  if (!is_float(in.dtype)) return std::nullopt;
  std::optional<RowPlan> p = plan_rows(row_count(in.shape, count), count, in.dtype, plain_row_io(io));
  if (!p) return std::nullopt;
  RowKernel rk(*p, in.dtype, io);
  const std::string& C = rk.C();
  const bool f64 = in.dtype == DType::F64;
  const std::string ex = f64 ? "exp" : "expf", lg = f64 ? "log" : "logf";
  std::string b = fmt::format(
      "// {}: {} along the last axis of extent > 1: {} rows of {} ({} per row, {} threads, {} x {} slots{})\n", label,
      in.str(), dim_str(p->rows), p->count, p->warp ? "a warp" : "a block", p->T, p->NV, p->W,
      p->vec ? ", vector access" : "");
  b += rk.preamble();
  b += rk.helpers();
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", rk.params());
  b += rk.begin();
  b += fmt::format("    {} m = ({})({});\n", C, C, neg_inf(in.dtype));
  b += rk.each("m = (XS != XS) ? XS : (XS > m ? XS : m);");
  b += rk.fold("max", "m");
  b += fmt::format("    {} s = 0;\n", C);
  if (log_softmax) {
    b += rk.each(fmt::format("s += {}(XS - m);", ex));
    b += rk.fold("sum", "s");
    b += fmt::format("    const {} ls = {}(s);\n", C, lg);
    b += rk.store("", "(XS - m) - ls");
  } else if (in.dtype == DType::F16) {
    // f16 rounds exp(x - m) and the sum to f16 before dividing, as the reference (ops/softmax_ops.cpp).
    auto r16 = [](const std::string& v) { return cuda_load(DType::F16, cuda_store(DType::F16, v)); };
    b += rk.each(fmt::format("XS = {}; s += XS;", r16(fmt::format("{}({})", ex, r16("XS - m")))));
    b += rk.fold("sum", "s");
    b += fmt::format("    s = {};\n", r16("s"));
    b += rk.store("", "XS / s");
  } else {
    b += rk.each(fmt::format("XS = {}(XS - m); s += XS;", ex));
    b += rk.fold("sum", "s");
    b += fmt::format("    const {0} inv = ({0})1 / s;\n", C);
    b += rk.store("", "XS * inv");
  }
  b += "  }\n}\n";
  ReductionKernel k;
  rk.finish(k, "kiln_sm", label, b);
  return k;
}

namespace {

// The normalization of rows of `count` contiguous elements of ops[0]:
// (x - mean) * inv_std * scale + bias, scale/bias operand k (1, 2) read at
// the index `pidx(k, code)` gives (statements for it appended to code; the
// row is `row`, the position in it `r`).
std::optional<ReductionKernel> row_norm(const std::string& label, int64_t count, float epsilon,
                                        const std::vector<TensorType>& ops, const std::vector<TensorType>& results,
                                        const AnchorIO& io, const std::function<std::string(int, std::string&)>& pidx) {
  const TensorType& x = ops[0];
  if (!is_float(x.dtype)) return std::nullopt;
  std::optional<RowPlan> p = plan_rows(row_count(x.shape, count), count, x.dtype, plain_row_io(io));
  if (!p) return std::nullopt;
  RowKernel rk(*p, x.dtype, io);
  const std::string& C = rk.C();
  const std::string sq = x.dtype == DType::F64 ? "sqrt" : "sqrtf";
  std::string b = fmt::format("// {}: {}: {} rows of {} ({} per row, {} threads, {} x {} slots{})\n", label, x.str(),
                              dim_str(p->rows), p->count, p->warp ? "a warp" : "a block", p->T, p->NV, p->W,
                              p->vec ? ", vector access" : "");
  b += rk.preamble();
  b += rk.helpers();
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", rk.params());
  b += rk.begin();
  b += fmt::format("    {} s = 0;\n", C);
  b += rk.each("s += XS;");
  b += rk.fold("sum", "s");
  b += fmt::format("    const {0} mean = s / ({0}){1};\n    {0} q = 0;\n", C, p->count);
  b += rk.each(fmt::format("const {} d = XS - mean; q += d * d;", C));
  b += rk.fold("sum", "q");
  b += fmt::format("    const {0} inv = ({0})1 / {1}(q / ({0}){2} + ({0}){3});\n", C, sq, p->count,
                   fmt::format("{:a}", static_cast<double>(epsilon)));
  const char* names[] = {"mean", "inv"};
  for (size_t r = 1; r < results.size() && r < 3; ++r)
    b += fmt::format("    if (lane == 0) {{\n{}    }}\n",
                     io.store(static_cast<int>(r), "row",
                              cuda_store(results[r].dtype,
                                         fmt::format("({})({})", cuda_compute_type(results[r].dtype), names[r - 1])),
                              "      "));
  std::string code;
  std::string value =
      fmt::format("(XS - mean) * inv * ({})({})", C, cuda_load(ops[1].dtype, io.load(1, pidx(1, code), false)));
  if (ops.size() > 2) value += fmt::format(" + ({})({})", C, cuda_load(ops[2].dtype, io.load(2, pidx(2, code), false)));
  b += rk.store(code, value);
  b += "  }\n}\n";
  ReductionKernel k;
  rk.finish(k, "kiln_norm", label, b);
  return k;
}

}  // namespace

std::optional<ReductionKernel> emit_row_layer_norm(int axis, float epsilon, const std::vector<TensorType>& ops,
                                                   const std::vector<TensorType>& results, const AnchorIO& io) {
  const TensorType& x = ops[0];
  if (axis < 0 || axis >= x.rank() || ops.size() < 2) return std::nullopt;
  const Shape ns(x.shape.begin() + axis, x.shape.end());
  return row_norm("layer_normalization", shape_numel(ns), epsilon, ops, results, io, [&](int k, std::string& code) {
    return broadcast_param_index(ops[k].shape, ns, k == 1 ? "ps" : "pb", code, "", " ");
  });
}

std::optional<ReductionKernel> emit_row_group_norm(const std::string& op, int64_t groups, float epsilon,
                                                   const std::vector<TensorType>& ops,
                                                   const std::vector<TensorType>& results, const AnchorIO& io) {
  const TensorType& x = ops[0];
  if (x.rank() < 2 || ops.size() < 3 || groups <= 0 || x.shape[1] % groups != 0) return std::nullopt;
  int64_t inner = 1;
  for (int d = 2; d < x.rank(); ++d) inner *= x.shape[d];
  const int64_t cpg = x.shape[1] / groups;
  // The channel of position r in row (n, g): g * cpg + r / inner.
  std::string ch = groups == 1 ? std::string("0LL") : fmt::format("(row % {}LL) * {}LL", groups, cpg);
  if (cpg > 1) ch += inner == 1 ? " + r" : fmt::format(" + r / {}LL", inner);
  return row_norm(op, cpg * inner, epsilon, ops, results, io, [&](int, std::string&) { return "(" + ch + ")"; });
}

std::string broadcast_param_index(const Shape& ps_in, const Shape& ns, const std::string& name, std::string& code,
                                  std::string_view line_prefix, std::string_view line_end) {
  Shape ps = ps_in;
  while (ps.size() > ns.size()) ps.erase(ps.begin());
  if (shape_numel(ps) == 1) return "0LL";
  std::vector<int64_t> st = broadcast_strides(ps, ns);
  std::vector<int64_t> contiguous(ns.size());
  for (int d = static_cast<int>(ns.size()) - 1, run = 1; d >= 0; --d) {
    contiguous[d] = run;
    run *= ns[d];
  }
  if (st == contiguous) return "r";
  code += fmt::format("{}long long {}_q = r;{}", line_prefix, name, line_end);
  std::string off;
  for (int d = static_cast<int>(ns.size()) - 1; d >= 0; --d) {
    std::string c = fmt::format("{}_d{}", name, d);
    code += fmt::format("{}const long long {} = {}_q % {}LL; {}_q /= {}LL;{}", line_prefix, c, name, ns[d], name, ns[d],
                        line_end);
    if (st[d] == 0) continue;
    if (!off.empty()) off += " + ";
    off += st[d] == 1 ? c : fmt::format("{} * {}LL", c, st[d]);
  }
  return off.empty() ? "0LL" : off;
}

}  // namespace kiln::codegen
