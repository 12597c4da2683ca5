#include "codegen/emitters/pool_select_loss/emit_loss.h"

#include <algorithm>

#include <fmt/format.h>

#include "codegen/launch_fit.h"
#include "codegen/core/emit_expr.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

std::vector<ShellBuffer> buffers_for(const std::vector<TensorType>& operands, const std::vector<TensorType>& results) {
  std::vector<ShellBuffer> b;
  for (size_t r = 0; r < results.size(); ++r) b.push_back({results[r].dtype, fmt::format("out{}", r), true});
  for (size_t i = 0; i < operands.size(); ++i) b.push_back({operands[i].dtype, fmt::format("in{}", i), false});
  return b;
}

}  // namespace

bool loss_supported(std::string_view op) { return op == "nll_loss" || op == "softmax_cross_entropy_loss"; }

std::vector<OpKernel> emit_loss_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                   const std::vector<TensorType>& results) {
  const std::string& op = def.name;
  if (!loss_supported(op)) unsupported("codegen: {} is not a loss op", op);
  const bool sce = op == "softmax_cross_entropy_loss";
  if (operands.size() < 2 || results.empty()) fail("codegen: {}: needs input and target operands and a result", op);
  const TensorType& x = operands[0];
  const TensorType& t = operands[1];
  const bool has_w = operands.size() > 2;
  if (x.shape.size() < 2 || !is_float(x.dtype) || (t.dtype != DType::I32 && t.dtype != DType::I64))
    fail("codegen: {}: operands {} / {} do not fit", op, x.str(), t.str());
  const int64_t N = x.shape[0], C = x.shape[1], inner = x.numel() / std::max<int64_t>(1, N * C);
  const int64_t elems = N * inner;
  if (t.numel() != elems) fail("codegen: {}: target {} does not fit {}", op, t.str(), x.str());
  const std::string red = attrs.get_string("reduction", "mean");
  const bool none = red == "none";
  if (results[0].numel() != (none ? elems : 1) || results[0].dtype != x.dtype)
    fail("codegen: {}: result {} does not fit reduction {}", op, results[0].str(), red);
  const bool want_logp = sce && results.size() > 1;
  if (want_logp && (results[1].shape != x.shape || results[1].dtype != x.dtype))
    fail("codegen: {}: log_prob result {} does not fit {}", op, results[1].str(), x.str());
  const bool has_ii = attrs.has("ignore_index");
  const int64_t ii = has_ii ? attrs.require_int("ignore_index") : 0;

  // Element (b, j) of class c is x[(b * C + c) * inner + j]; line base = b * C * inner + j.
  std::string helpers;
  if (sce) {
    // log-sum-exp of a line, as the reference: max (NaN never replaces it), sum of exp(x - max) in order.
    helpers += fmt::format(
        "__device__ __forceinline__ double @NAME@_lse(KILN_PTR(const {0}) in0, long long base) {{\n"
        "  double mx = -kiln_inf();\n"
        "  for (long long c = 0; c < {1}LL; ++c) {{ const double v = KILN_LOAD_X(base + c * {2}LL); if (mx < v) mx = v; }}\n"
        "  double s = 0.0;\n"
        "  for (long long c = 0; c < {1}LL; ++c) s += exp(KILN_LOAD_X(base + c * {2}LL) - mx);\n"
        "  return mx + log(s);\n}}\n",
        cuda_storage_type(x.dtype), C, inner);
  }
  // Statements computing `loss` and `w` of element e (b = e / inner, j = e % inner).
  std::string elem;
  elem += fmt::format("    const long long base = (e / {0}LL) * {1}LL + e % {0}LL;\n", inner, C * inner);
  elem += "    const long long cls = (long long)in1[e];\n";
  elem += "    double loss = 0.0, w = 0.0;\n";
  elem += has_ii ? fmt::format("    if (cls != {}LL) {{\n", ii) : "    {\n";
  elem += fmt::format(
      "      if (cls < 0 || cls >= {}LL) KILN_TRAP(\"{}: a target is outside [0, C) and not ignore_index\");\n", C, op);
  elem += has_w ? fmt::format("      w = (double){};\n", cuda_load(operands[2].dtype, "in2[cls]")) : "      w = 1.0;\n";
  elem += fmt::format("      const double logp = KILN_LOAD_X(base + cls * {}LL){};\n", inner,
                      sce ? " - @NAME@_lse(in0, base)" : "");
  elem += "      loss = -w * logp;\n    }\n";
  // The helpers take in0 by parameter; the seam macro reads `in0` wherever it is used.
  std::vector<OpKernel> ks;
  if (want_logp) {
    std::string b;
    b += fmt::format("  // {}: log_prob of {}: {} lines of {} classes\n", op, x.str(), elems, C);
    b += fmt::format(
        "  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < {}LL; e += (long long)gridDim.x * blockDim.x) {{\n",
        elems);
    b += fmt::format("    const long long base = (e / {0}LL) * {1}LL + e % {0}LL;\n", inner, C * inner);
    b += "    const double lse = @NAME@_lse(in0, base);\n";
    b += fmt::format(
        "    for (long long c = 0; c < {0}LL; ++c) KILN_STORE(0, base + c * {1}LL, KILN_LOAD_X(base + c * {1}LL) - lse);\n  }}\n",
        C, inner);
    OpKernel k;
    k.block = block_threads(256);  // the one decision (codegen/launch_fit.h)
    k.grid = static_cast<unsigned>(std::min<int64_t>((elems + k.block - 1) / k.block, 8192));
    k.results = {1};
    finish_op_kernel(k, "kiln_logprob", op, buffers_for(operands, {results[1]}), "double", helpers, b);
    ks.push_back(std::move(k));
  }
  OpKernel k;
  k.results = {0};
  std::string b;
  b += fmt::format("  // {}: {} at {}{}, reduction {}{}\n", op, x.str(), t.str(), has_w ? " weighted" : "", red,
                   has_ii ? fmt::format(", ignore_index {}", ii) : "");
  if (none) {
    b += fmt::format(
        "  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < {}LL; e += (long long)gridDim.x * blockDim.x) {{\n",
        elems);
    b += elem;
    b += "    KILN_STORE(0, e, loss);\n  }\n";
    k.block = block_threads(256);  // the one decision (codegen/launch_fit.h)
    k.grid = static_cast<unsigned>(std::min<int64_t>((elems + k.block - 1) / k.block, 8192));
  } else {
    b += "  __shared__ double ps[32], pw[32];\n";
    b += "  double sum = 0.0, wsum = 0.0;\n";
    b += fmt::format("  for (long long e = threadIdx.x; e < {}LL; e += blockDim.x) {{\n", elems);
    b += elem;
    b += "    sum += loss;\n    wsum += w;\n  }\n";
    b += "  for (int o = 16; o > 0; o >>= 1) {\n";
    b +=
        "    sum += __shfl_down_sync(0xffffffffu, sum, o);\n    wsum += __shfl_down_sync(0xffffffffu, wsum, o);\n  }\n";
    b += "  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n";
    b += "  if (lane == 0) { ps[warp] = sum; pw[warp] = wsum; }\n";
    b += "  __syncthreads();\n";
    b += "  if (warp == 0) {\n";
    b += "    sum = lane < (int)(blockDim.x >> 5) ? ps[lane] : 0.0;\n";
    b += "    wsum = lane < (int)(blockDim.x >> 5) ? pw[lane] : 0.0;\n";
    b += "    for (int o = 16; o > 0; o >>= 1) {\n";
    b +=
        "      sum += __shfl_down_sync(0xffffffffu, sum, o);\n      wsum += __shfl_down_sync(0xffffffffu, wsum, o);\n    }\n";
    b += fmt::format("    if (lane == 0) KILN_STORE(0, 0, {});\n  }}\n", red == "sum" ? "sum" : "sum / wsum");
    k.block = block_threads(256);  // its folds read blockDim
    k.grid = 1;
  }
  if (elems == 0 && none) k.grid = 0;
  finish_op_kernel(k, "kiln_loss", op, buffers_for(operands, {results[0]}), "double", helpers, b);
  ks.push_back(std::move(k));
  return ks;
}

}  // namespace kiln::codegen
