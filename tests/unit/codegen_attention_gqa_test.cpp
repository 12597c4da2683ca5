// Grouped-query head packing in the tensor-core attention kernel
// (codegen/emitters/attention/emit_attention_tc.cpp, issue 18): where a
// head's queries leave a warp's 16 rows idle (a decode step), P of the G
// query heads that share a key/value head run as one head of P * Sq rows, so
// each K/V tile is read once for the P heads. The cases: group sizes 3, 4, 6
// and 8 (MQA among them), past lengths off the key tiles, a mask per batch,
// per head and per query, causal with several queries per head (a block's
// rows then span heads, each with its own causal limit), rows with every key
// masked (NaN, or 0 with nan_to_zero), a NaN score, fp16 and bf16, head dims
// 64 and 128. Each kernel must pack (the source says so: a silent fallback
// to one head per block fails here), compile for sm_80 and sm_90 without
// spills, and match the reference (ops/attention_ops.cpp via evaluate_op) on
// the simulator with its split workspace poisoned and its tickets zero again.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "backends/sim/sim_module.h"
#include "codegen/emitters/attention/emit_attention.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "ops/registry.h"
#include "tests/unit/attention_sim_check.h"

namespace kiln {
namespace {

struct GqaCase {
  std::string text;
  DType dt;
  Shape q, k, mask;  // v is k's shape; mask empty: none
  int causal = 0, nan_to_zero = 0;
  int64_t masked_head = -1;  // a head whose query 0 sees no key (mask -inf)
  bool nan_key = false;      // a NaN in key 77 of key/value head 0
  int64_t packed = 0;        // the heads the cost terms pack per block (1: one head per block, G > 1 still)
};

std::vector<GqaCase> gqa_cases() {
  using S = Shape;
  // text, dtype, q, k (= v), mask; causal, nan_to_zero, masked head, NaN key, heads packed.
  std::vector<GqaCase> c = {
      {"decode f16 D=128 H=32 Hk=8 past 2048",
       DType::F16,
       S{1, 32, 1, 128},
       S{1, 8, 2048, 128},
       {},
       0,
       0,
       -1,
       false,
       2},
      {"decode bf16 D=64 H=16 Hk=2 (G=8) batch 2 mask[B,1,1,Sk] past 999", DType::BF16, S{2, 16, 1, 64},
       S{2, 2, 999, 64}, S{2, 1, 1, 999}, 0, 0, -1, false, 2},
      // G = 3 where the cost terms keep one head per block: each reads its group's K/V.
      {"decode f16 D=128 H=12 Hk=4 (G=3) mask[B,H,1,Sk] past 517", DType::F16, S{1, 12, 1, 128}, S{1, 4, 517, 128},
       S{1, 12, 1, 517}, 0, 0, -1, false, 1},
      {"decode f16 D=64 H=24 Hk=8 (G=3) past 3000",
       DType::F16,
       S{1, 24, 1, 64},
       S{1, 8, 3000, 64},
       {},
       0,
       0,
       -1,
       false,
       3},
      // Several queries per head: a block's rows span heads, each row its own causal limit.
      // (Packed by the pre-calibration constants; the calibrated model keeps one head per block, spreading
      // the split's combine over more tiles. The G = 3 case below packs rows of several queries.)
      {"f16 D=64 H=8 Hk=2 Sq=3 causal past 700", DType::F16, S{1, 8, 3, 64}, S{1, 2, 700, 64}, {}, 1, 0, -1, false, 1},
      {"bf16 D=64 H=12 Hk=4 (G=3) Sq=2 causal mask[B,H,Sq,Sk] past 1100", DType::BF16, S{2, 12, 2, 64},
       S{2, 4, 1100, 64}, S{2, 12, 2, 1100}, 1, 0, -1, false, 3},
      {"bf16 D=64 H=6 Hk=1 (MQA) Sq=5 causal mask[Sq,Sk] past 333", DType::BF16, S{1, 6, 5, 64}, S{1, 1, 333, 64},
       S{5, 333}, 1, 0, -1, false, 1},
      {"decode f16 D=64 H=8 Hk=2 masked row -> NaN", DType::F16, S{1, 8, 1, 64}, S{1, 2, 901, 64}, S{1, 8, 1, 901}, 0,
       0, 5, false, 1},
      {"decode f16 D=64 H=8 Hk=2 masked row nan_to_zero", DType::F16, S{1, 8, 1, 64}, S{1, 2, 901, 64}, S{1, 8, 1, 901},
       0, 1, 5, false, 1},
      // A masked row in a packed kernel (the two above now run one head per block).
      {"decode f16 D=128 H=32 Hk=8 masked row -> NaN past 2048", DType::F16, S{1, 32, 1, 128}, S{1, 8, 2048, 128},
       S{1, 32, 1, 2048}, 0, 0, 5, false, 2},
      {"decode bf16 D=128 H=32 Hk=8 NaN score past 1500",
       DType::BF16,
       S{1, 32, 1, 128},
       S{1, 8, 1500, 128},
       {},
       0,
       0,
       -1,
       true,
       2},
  };
  return c;
}

using testing::attention_input;
using testing::AttentionOnSim;

AttrMap attrs_of(const GqaCase& c) {
  AttrMap a;
  a.set("scale", static_cast<float>(1.0 / std::sqrt(double(c.q[3]))));
  a.set("causal", int64_t{c.causal});
  a.set("nan_to_zero", int64_t{c.nan_to_zero});
  return a;
}

TEST(CodegenAttentionGqa, PackedHeadsMatchReferenceOnSim) {
  const std::vector<GqaCase> cases = gqa_cases();
  std::vector<codegen::KernelSource> sources;
  std::vector<codegen::AttentionKernel> kernels;
  for (const GqaCase& c : cases) {
    std::vector<TensorType> ops = {TensorType(c.dt, c.q), TensorType(c.dt, c.k), TensorType(c.dt, c.k)};
    if (!c.mask.empty()) ops.push_back(TensorType(c.dt, c.mask));
    kernels.push_back(codegen::emit_attention_op(attrs_of(c), ops, TensorType(c.dt, c.q)));
    const codegen::AttentionKernel& k = kernels.back();
    sources.push_back({k.name, k.source});
    EXPECT_TRUE(k.tensor_cores) << c.text;
    // The header states the packing: "P of the G heads of a key/value head
    // packed into a head's rows", or "G heads per key/value head" (P = 1).
    int64_t P = 0, G = 0;
    if (const size_t at = k.source.find("; grouped-query: "); at != std::string::npos) {
      const std::string rest = k.source.substr(at + 17, 80);
      if (std::sscanf(rest.c_str(), "%lld of the %lld heads", reinterpret_cast<long long*>(&P),
                      reinterpret_cast<long long*>(&G)) != 2 &&
          std::sscanf(rest.c_str(), "%lld heads per", reinterpret_cast<long long*>(&G)) == 1)
        P = 1;
    }
    fmt::print("  {}: {} of {} heads packed, grid {}, {} splits, {} warps\n", c.text, P, G, k.grid, k.kv_splits,
               k.warps);
    EXPECT_EQ(G, c.q[1] / c.k[1]) << c.text;
    EXPECT_EQ(P, c.packed) << c.text << ": the heads packed per block";
    // Fewer blocks per split than one per query head: B * H / P tiles.
    const int64_t tiles = k.kv_splits > 1 ? k.tile_counters : int64_t{k.grid};
    if (c.packed > 1) EXPECT_LT(tiles, c.q[0] * c.q[1] * ((c.q[2] + 15) / 16)) << c.text;
  }
  std::vector<std::string> names;
  for (const GqaCase& c : cases) names.push_back(c.text);
  testing::expect_compiles_for_sm80_and_sm90(sources, names);
  codegen::SimCompiler sim;
  std::map<std::string, codegen::SimEntry> entries = sim.compile(sources);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const GqaCase& c = cases[ci];
    const codegen::AttentionKernel& k = kernels[ci];
    std::vector<Tensor> ins = {attention_input(c.dt, c.q, 11 * ci + 1, false),
                               attention_input(c.dt, c.k, 11 * ci + 2, false),
                               attention_input(c.dt, c.k, 11 * ci + 3, false)};
    if (!c.mask.empty()) ins.push_back(attention_input(c.dt, c.mask, 300 + ci, true));
    if (c.masked_head >= 0)  // mask [B, H, 1, Sk]: query 0 of this head sees no key
      for (int64_t j = 0; j < c.mask[3]; ++j) ins[3].set_double(c.masked_head * c.mask[3] + j, -INFINITY);
    if (c.nan_key) ins[1].set_double(77 * c.k[3] + 5, NAN);
    const AttentionOnSim r =
        testing::run_attention_on_sim(entries.at(k.name), k, attrs_of(c), ins, TensorType(c.dt, c.q), c.text);
    if (c.masked_head >= 0 || c.nan_key) EXPECT_EQ(r.got_nans > 0, c.nan_to_zero == 0) << c.text;
    EXPECT_EQ(r.bad, 0) << c.text << ": " << r.bad << " of " << r.numel << " differ; " << r.first;
  }
}

}  // namespace
}  // namespace kiln
