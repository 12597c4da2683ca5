#include "codegen/emitters/attention/emit_linear_attention.h"

#include <algorithm>
#include <bit>
#include <cstdint>

#include <fmt/format.h>

#include "codegen/launch_fit.h"
#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_params.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

constexpr int64_t kSharedBytes = 48 * 1024;  // static shared memory a block may use without opting in
constexpr int64_t kMaxBlock = 128;

}  // namespace

LinearAttentionKernel emit_linear_attention(const AttrMap& attrs, const std::vector<TensorType>& operands,
                                            const std::vector<bool>& present, const std::vector<TensorType>& results) {
  auto has = [&](size_t i) { return i < operands.size() && i < present.size() && present[i]; };
  if (!has(0) || !has(1) || !has(2) || results.empty() || results.size() > 2)
    fail("codegen: linear_attention: needs query, key, value and one or two results");
  const std::string rule = attrs.get_string("update_rule", "");
  const bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  if (!gated && !delta && rule != "linear") fail("codegen: linear_attention: update_rule '{}'", rule);
  if (gated != has(4) || delta != has(5))
    fail("codegen: linear_attention: update_rule '{}' with{} decay and with{} beta", rule, has(4) ? "" : "out",
         has(5) ? "" : "out");
  const TensorType &q = operands[0], &k = operands[1], &v = operands[2];
  const int64_t Hq = attrs.require_int("q_num_heads"), Hkv = attrs.require_int("kv_num_heads");
  if (q.shape.size() != 3 || k.shape.size() != 3 || v.shape.size() != 3 || Hq <= 0 || Hkv <= 0 || Hq % Hkv != 0 ||
      q.shape[2] % Hq != 0 || v.shape[2] % Hkv != 0)
    fail("codegen: linear_attention: operands {}, {}, {} with {} / {} heads", q.str(), k.str(), v.str(), Hq, Hkv);
  const int64_t B = q.shape[0], T = q.shape[1], dk = q.shape[2] / Hq, dv = v.shape[2] / Hkv, G = Hq / Hkv;
  if (k.shape != Shape{B, T, Hkv * dk} || v.shape != Shape{B, T, Hkv * dv})
    fail("codegen: linear_attention: key {} / value {} do not fit query {}", k.str(), v.str(), q.str());
  const TensorType& out = results[0];
  if (out.dtype != q.dtype || out.shape != Shape{B, T, Hq * dv})
    fail("codegen: linear_attention: output {} does not fit", out.str());
  const DType sdt = has(3) ? operands[3].dtype : q.dtype;
  if (results.size() > 1 && (results[1].dtype != sdt || results[1].shape != Shape{B, Hkv, dk, dv}))
    fail("codegen: linear_attention: present_state {} does not fit", results[1].str());
  if (has(3) && operands[3].shape != Shape{B, Hkv, dk, dv})
    fail("codegen: linear_attention: past_state {}", operands[3].str());
  const int64_t dw = has(4) ? operands[4].shape.back() / Hkv : 0;  // dk (per key dim) or 1 (per head)
  const int64_t bh = has(5) ? operands[5].shape.back() : 0;        // Hkv or 1
  if (has(4) && (operands[4].shape != Shape{B, T, Hkv * dw} || (dw != dk && dw != 1)))
    fail("codegen: linear_attention: decay {}", operands[4].str());
  if (has(5) && (operands[5].shape != Shape{B, T, bh} || (bh != Hkv && bh != 1)))
    fail("codegen: linear_attention: beta {}", operands[5].str());
  if (dk * 4 > kSharedBytes)
    unsupported("codegen: linear_attention: d_k {} needs more than {} bytes of shared memory per state column", dk,
                kSharedBytes);
  int64_t block = block_threads(static_cast<unsigned>(kMaxBlock));  // the one decision (codegen/launch_fit.h)
  while (block > 1 && block * dk * 4 > kSharedBytes) block /= 2;
  const int64_t columns = B * Hkv * dv;

  LinearAttentionKernel kern;
  std::vector<KernelParam> params;
  const char* res_names[] = {"out", "present"};
  for (size_t r = 0; r < results.size(); ++r) params.push_back({results[r].dtype, true, res_names[r]});
  const char* in_names[] = {"q", "k", "v", "past", "decay", "beta"};
  for (size_t i = 0; i < operands.size(); ++i) {
    if (has(i) && i != 3 && operands[i].dtype != q.dtype)
      fail("codegen: linear_attention: {} is {} but query is {}", in_names[i], operands[i].str(), q.str());
    params.push_back({has(i) ? operands[i].dtype : q.dtype, false, in_names[i]});
  }
  auto ld = [&](size_t i, const std::string& at) {
    return fmt::format("(float){}", cuda_load(operands[i].dtype, fmt::format("{}[{}]", in_names[i], at)));
  };
  auto st = [&](DType t, const std::string& val) { return cuda_store(t, fmt::format("(float)({})", val)); };

  std::string b = fmt::format(
      "// linear_attention ({}): query {}, key {}, value {}{}; {} query heads per kv head, d_k {}, d_v {}; "
      "one thread per state column\n",
      rule, q.str(), k.str(), v.str(), has(3) ? ", past_state " + operands[3].str() : std::string(), G, dk, dv);
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(params));
  b += fmt::format("  __shared__ float st[{}];\n", block * dk);
  b += fmt::format("  const float scale = __uint_as_float({:#x}u);  // {}\n",
                   std::bit_cast<uint32_t>(attrs.get_float("scale", 1.0f)), attrs.get_float("scale", 1.0f));
  b += grid_stride_loop("col", columns);
  b += fmt::format("    const long long m = col % {0}LL, bh = col / {0}LL, h = bh % {1}LL, b = bh / {1}LL;\n", dv, Hkv);
  b += fmt::format("    float* S = st + threadIdx.x;  // S[d] is S[d * {}]\n", block);
  b += fmt::format("    for (long long d = 0; d < {}LL; ++d) S[d * {}] = {};\n", dk, block,
                   has(3) ? ld(3, fmt::format("(bh * {}LL + d) * {}LL + m", dk, dv)) : "0.0f");
  // The time loop stays rolled: unrolled, its steps' loads and exps compete for registers (sm_80 spilled).
  b += fmt::format("#pragma unroll 1\n    for (long long t = 0; t < {}LL; ++t) {{\n", T);
  b += fmt::format("      const long long row = b * {}LL + t;\n", T);
  b += fmt::format("      const long long kb = (row * {}LL + h) * {}LL;  // k_t of this kv head\n", Hkv, dk);
  if (gated) {
    if (dw == 1) {
      b += fmt::format("      const float f = expf({});\n", ld(4, fmt::format("row * {}LL + h", Hkv)));
      b += fmt::format("      for (long long d = 0; d < {}LL; ++d) S[d * {}] *= f;\n", dk, block);
    } else {
      b += fmt::format("      for (long long d = 0; d < {}LL; ++d) S[d * {}] *= expf({});\n", dk, block,
                       ld(4, "kb + d"));
    }
  }
  b += fmt::format("      float x = {};\n", ld(2, fmt::format("(row * {}LL + h) * {}LL + m", Hkv, dv)));
  if (delta) {
    b += "      float r = 0.0f;\n";
    b += fmt::format("      for (long long d = 0; d < {}LL; ++d) r += S[d * {}] * {};\n", dk, block, ld(1, "kb + d"));
    b += fmt::format("      x = {} * (x - r);\n", ld(5, bh == 1 ? "row" : fmt::format("row * {}LL + h", Hkv)));
  }
  b += fmt::format("      for (long long d = 0; d < {}LL; ++d) S[d * {}] += {} * x;\n", dk, block, ld(1, "kb + d"));
  b += fmt::format("      for (long long g = 0; g < {}LL; ++g) {{\n", G);
  b += fmt::format("        const long long hq = h * {}LL + g;\n", G);
  b += "        float acc = 0.0f;\n";
  b += fmt::format("        for (long long d = 0; d < {}LL; ++d) acc += {} * S[d * {}];\n", dk,
                   ld(0, fmt::format("(row * {}LL + hq) * {}LL + d", Hq, dk)), block);
  b += fmt::format("        out[(row * {}LL + hq) * {}LL + m] = {};\n", Hq, dv, st(out.dtype, "scale * acc"));
  b += "      }\n    }\n";
  if (results.size() > 1)
    b += fmt::format("    for (long long d = 0; d < {}LL; ++d) present[(bh * {}LL + d) * {}LL + m] = {};\n", dk, dk, dv,
                     st(sdt, fmt::format("S[d * {}]", block)));
  b += "  }\n}\n";
  b += kernel_sim_entry(params);
  std::vector<DType> dts;
  for (const KernelParam& p : params) dts.push_back(p.dtype);
  kern.source = finish_kernel_source("kiln_linattn", rule, b, dts, kern.name);
  kern.block = static_cast<unsigned>(block);
  kern.grid = columns == 0 ? 0 : static_cast<unsigned>(std::min<int64_t>((columns + block - 1) / block, 65535));
  return kern;
}

}  // namespace kiln::codegen
