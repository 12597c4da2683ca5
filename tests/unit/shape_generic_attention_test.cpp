// Shape-generic attention kernels (codegen/emitters/attention/attention_dims.h):
// a plan with shape profiles compiles the attention op once, with symbolic
// batch, query and key lengths, for sm_80 and sm_90 (NVRTC), and runs from
// that plan on the simulator (plan-on-sim) at several shapes equal to the
// reference backend on the graph specialised to each: the SIMT kernel (f32,
// a padding mask [b,1,1,s]), the tensor-core kernel (f16, causal with the
// offset keys - queries, as a KV-cache decode step: past 0, 5, 17), its
// split-KV form (a long past split per launch, the parts combined in the
// kernel) and grouped-query heads, one per block or packed several per block.
#include <gtest/gtest.h>

#include "runtime/plan_format.h"
#include "tests/unit/shape_generic_util.h"

namespace kiln {
namespace {

std::unique_ptr<Graph> compiled(const char* text, const std::string& target) {
  return testing::compile_symbolic(text, "attn.kir", target);
}

plan::Plan gpu_plan(const Graph& g, const std::string& arch, const plan::Profile& profile) {
  return testing::profile_plan(g, arch, profile, "attn.onnx");
}

// The plan's attention launch: one generic launch, its kernel's source.
const plan::Kernel& attention_kernel(const plan::Plan& p) {
  EXPECT_EQ(p.generic_launches.size(), 1u);
  return p.kernels.at(p.steps.at(p.generic_launches.at(0).step).kernel);
}

void expect_on_sim_equal(const plan::Plan& p, const Graph& g, const SymbolBindings& at_shape, Tolerance tol) {
  testing::expect_plan_on_sim_equals_reference(p, g, at_shape, testing::seed_of(at_shape, 1), tol);
}

// f32 (SIMT kernel): an encoder's self-attention, batch and sequence
// symbolic, BERT's additive padding mask broadcast over heads and queries.
const char* kEncoder =
    "graph @m(%q: f32[b,2,s,16], %k: f32[b,2,s,16], %v: f32[b,2,s,8], %mask: f32[b,1,1,s]) -> (f32[b,2,s,8]) "
    "symbols(b in [1, 3], s in [1, 40]) {\n"
    "  %o = attention(%q, %k, %v, %mask) {scale=0.25} : f32[b,2,s,8]\n"
    "  return %o\n"
    "}\n";
const plan::Profile kEncoderProfile = {{{"q", {1, 2, 1, 16}, {3, 2, 40, 16}, {3, 2, 40, 16}},
                                        {"k", {1, 2, 1, 16}, {3, 2, 40, 16}, {3, 2, 40, 16}},
                                        {"v", {1, 2, 1, 8}, {3, 2, 40, 8}, {3, 2, 40, 8}},
                                        {"mask", {1, 1, 1, 1}, {3, 1, 1, 40}, {3, 1, 1, 40}}}};

TEST(ShapeGenericKernels, AttentionSimtWithAPaddingMaskOnSimAtThreeShapesEqualsTheReference) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(kEncoder, arch);
    plan::Plan p = gpu_plan(*g, arch, kEncoderProfile);
    ASSERT_TRUE(p.meta.gpu_kernels) << arch << ": " << p.meta.no_gpu_reason;
    const plan::Kernel& k = attention_kernel(p);
    EXPECT_NE(k.source.find("kiln_syms ks"), std::string::npos);
    EXPECT_FALSE(k.cubin.empty()) << arch;
    const plan::GenericLaunch& gl = p.generic_launches[0];
    EXPECT_EQ(gl.symbols, (std::vector<std::string>{"b", "s"}));
    // x: batch * heads, y: query tiles (at most 40 queries: tiles of 16).
    EXPECT_EQ(plan::eval_grid_axis(gl.grid[0], {{"b", 2}, {"s", 7}}), 4u);
    EXPECT_EQ(plan::eval_grid_axis(gl.grid[1], {{"b", 2}, {"s", 33}}), 3u);
  }
  auto g = compiled(kEncoder, "sm_90");
  plan::Plan p = gpu_plan(*g, "sm_90", kEncoderProfile);
  for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 1}, {2, 7}, {3, 40}})
    expect_on_sim_equal(p, *g, {{"b", b}, {"s", s}}, {1e-5, 1e-4});
}

// f16 (tensor-core kernel): a decode step's attention, the keys past + seq
// (here one symbol kv), causal aligned to the bottom right (the offset kv -
// seq is computed per launch). Prefill (seq 8, past 0) and decode steps at
// past 5 and 17, and a prefill of 3 after 40.
const char* kDecode =
    "graph @m(%q: f16[1,4,seq,64], %k: f16[1,4,kv,64], %v: f16[1,4,kv,64]) -> (f16[1,4,seq,64]) "
    "symbols(seq in [1, 8], kv in [1, 48]) {\n"
    "  %o = attention(%q, %k, %v) {scale=0.125, causal=1} : f16[1,4,seq,64]\n"
    "  return %o\n"
    "}\n";

plan::Profile decode_profile(int64_t max_kv) {
  return {{{"q", {1, 4, 1, 64}, {1, 4, 1, 64}, {1, 4, 8, 64}},
           {"k", {1, 4, 1, 64}, {1, 4, max_kv, 64}, {1, 4, max_kv, 64}},
           {"v", {1, 4, 1, 64}, {1, 4, max_kv, 64}, {1, 4, max_kv, 64}}}};
}

TEST(ShapeGenericKernels, AttentionTensorCoresCausalDecodeStepsOnSimEqualTheReference) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(kDecode, arch);
    plan::Plan p = gpu_plan(*g, arch, decode_profile(48));
    const plan::Kernel& k = attention_kernel(p);
    EXPECT_NE(k.source.find("on tensor cores"), std::string::npos);
    EXPECT_NE(k.source.find("kiln_syms ks"), std::string::npos);
    EXPECT_FALSE(k.cubin.empty()) << arch;
  }
  auto g = compiled(kDecode, "sm_90");
  plan::Plan p = gpu_plan(*g, "sm_90", decode_profile(48));
  for (auto [seq, past] : {std::pair<int64_t, int64_t>{8, 0}, {1, 5}, {1, 17}, {3, 40}})
    expect_on_sim_equal(p, *g, {{"seq", seq}, {"kv", past + seq}}, {2e-3, 2e-2});
}

// A long past: the cost model splits the keys (flash-decoding) in parts of a
// fixed number of key tiles, so the split count follows the keys of each
// launch (grid z); the workspace and tickets are planned at the largest.
TEST(ShapeGenericKernels, AttentionSplitKvFollowsThePastPerLaunch) {
  const std::string text =
      std::string(kDecode).replace(std::string(kDecode).find("kv in [1, 48]"), 13, "kv in [1, 1100]");
  auto g = compiled(text.c_str(), "sm_90");
  plan::Plan p = gpu_plan(*g, "sm_90", decode_profile(1100));
  const plan::Kernel& k = attention_kernel(p);
  ASSERT_NE(k.source.find("split-KV"), std::string::npos) << k.source.substr(0, 400);
  const plan::GenericLaunch& gl = p.generic_launches[0];
  const uint64_t few = plan::eval_grid_axis(gl.grid[2], {{"seq", 1}, {"kv", 9}});
  const uint64_t many = plan::eval_grid_axis(gl.grid[2], {{"seq", 1}, {"kv", 1100}});
  EXPECT_EQ(few, 1u);
  EXPECT_GT(many, 2u);
  EXPECT_EQ(p.steps[gl.step].grid.z, many);  // the step holds the largest grid
  for (auto [seq, past] : {std::pair<int64_t, int64_t>{1, 0}, {1, 700}, {2, 1098}})
    expect_on_sim_equal(p, *g, {{"seq", seq}, {"kv", past + seq}}, {2e-3, 2e-2});
}

// Grouped-query attention as a Llama-style decoder has it: 32 query heads of
// 128 on 8 key/value heads, a causal decode step over past + seq keys (up to
// 2048: where kiln's calibrated model packs heads at the decode corner).
TEST(ShapeGenericKernels, AttentionGroupedQueryDecodeStepsOnSimEqualTheReference) {
  const char* text =
      "graph @m(%q: f16[1,32,seq,128], %k: f16[1,8,kv,128], %v: f16[1,8,kv,128]) -> (f16[1,32,seq,128]) "
      "symbols(seq in [1, 8], kv in [1, 2048]) {\n"
      "  %o = attention(%q, %k, %v) {scale=0.088388, causal=1} : f16[1,32,seq,128]\n"
      "  return %o\n"
      "}\n";
  auto g = compiled(text, "sm_90");
  plan::Plan p = gpu_plan(*g, "sm_90",
                          {{{"q", {1, 32, 1, 128}, {1, 32, 1, 128}, {1, 32, 8, 128}},
                            {"k", {1, 8, 1, 128}, {1, 8, 2048, 128}, {1, 8, 2048, 128}},
                            {"v", {1, 8, 1, 128}, {1, 8, 2048, 128}, {1, 8, 2048, 128}}}});
  // At the decode corner the model packs 2 heads of each group of 4 into a block's rows.
  {
    const std::string& src = attention_kernel(p).source;
    const size_t at = src.find("grouped-query:");
    EXPECT_NE(src.find("grouped-query: 2 of the 4 heads of a key/value head packed"), std::string::npos)
        << (at == std::string::npos ? "" : src.substr(at, 80));
  }
  for (auto [seq, past] : {std::pair<int64_t, int64_t>{8, 0}, {1, 5}, {1, 17}, {1, 290}})
    expect_on_sim_equal(p, *g, {{"seq", seq}, {"kv", past + seq}}, {2e-3, 2e-2});
}

// GQA head packing (issue 18) in a generic kernel: 32 query heads on 8
// key/value heads, a long past. At the decode corner (one query) the cost
// terms pack 2 heads per block; the packed rows are P * seq per launch (grid
// y), each row's query seq-relative for the causal limit, and the keys split
// per launch. Decode steps and a prefill of 4 queries (a block's rows then
// span heads) on the simulator equal the reference.
TEST(ShapeGenericKernels, AttentionPackedGroupedQueryHeadsOnSimEqualTheReference) {
  const char* text =
      "graph @m(%q: f16[1,32,seq,128], %k: f16[1,8,kv,128], %v: f16[1,8,kv,128]) -> (f16[1,32,seq,128]) "
      "symbols(seq in [1, 4], kv in [1, 2100]) {\n"
      "  %o = attention(%q, %k, %v) {scale=0.088, causal=1} : f16[1,32,seq,128]\n"
      "  return %o\n"
      "}\n";
  auto g = compiled(text, "sm_90");
  plan::Plan p = gpu_plan(*g, "sm_90",
                          {{{"q", {1, 32, 1, 128}, {1, 32, 1, 128}, {1, 32, 4, 128}},
                            {"k", {1, 8, 1, 128}, {1, 8, 2100, 128}, {1, 8, 2100, 128}},
                            {"v", {1, 8, 1, 128}, {1, 8, 2100, 128}, {1, 8, 2100, 128}}}});
  const plan::Kernel& k = attention_kernel(p);
  ASSERT_NE(k.source.find("grouped-query: 2 of the 4 heads of a key/value head packed"), std::string::npos)
      << k.source.substr(k.source.find("// attention"), 700);
  EXPECT_NE(k.source.find("split-KV"), std::string::npos);
  const plan::GenericLaunch& gl = p.generic_launches[0];
  EXPECT_EQ(plan::eval_grid_axis(gl.grid[0], {{"seq", 1}, {"kv", 9}}), 16u);  // 32 heads / 2
  EXPECT_EQ(plan::eval_grid_axis(gl.grid[1], {{"seq", 1}, {"kv", 9}}), 1u);   // 2 rows
  for (auto [seq, past] : {std::pair<int64_t, int64_t>{1, 0}, {1, 700}, {1, 2099}, {4, 1500}})
    expect_on_sim_equal(p, *g, {{"seq", seq}, {"kv", past + seq}}, {2e-3, 2e-2});
}

// Heads and head dims stay static in a generic kernel (they size its
// tiles): a symbolic head count is refused naming the node.
TEST(ShapeGenericKernels, AttentionWithSymbolicHeadsIsRefusedByName) {
  const char* text =
      "graph @m(%q: f32[1,h,4,16], %k: f32[1,h,4,16], %v: f32[1,h,4,16]) -> (f32[1,h,4,16]) symbols(h in [1, 4]) {\n"
      "  %o = attention(%q, %k, %v) {scale=0.25} : f32[1,h,4,16]\n"
      "  return %o\n"
      "}\n";
  auto g = parse_graph(text, "heads.kir");
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {{{{"q", {1, 1, 4, 16}, {1, 4, 4, 16}, {1, 4, 4, 16}},
                   {"k", {1, 1, 4, 16}, {1, 4, 4, 16}, {1, 4, 4, 16}},
                   {"v", {1, 1, 4, 16}, {1, 4, 4, 16}, {1, 4, 4, 16}}}}};
  po.source_name = "heads.onnx";
  std::string why;
  try {
    build_plan(*g, po);
  } catch (const Error& e) {
    why = e.what();
  }
  EXPECT_NE(why.find("heads.onnx: node (attention) producing %o"), std::string::npos) << why;
  EXPECT_NE(why.find("its kernel family (attention) has no shape-generic kernel for it yet"), std::string::npos) << why;
}

}  // namespace
}  // namespace kiln
