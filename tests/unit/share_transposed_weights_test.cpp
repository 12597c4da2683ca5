// share-transposed-weights: a tied embedding read by a gather and, transposed,
// by the LM head's matmul keeps its meaning as a gemm with trans_b (alone,
// then folded and fused; f32 and f16), the default pipeline stores the
// embedding once, and the gemm's kernel compiles with NVRTC and gives on the
// simulator what the reference gives.
#include <gtest/gtest.h>

#include <string>

#include "ir/verifier.h"
#include "ops/registry.h"
#include "tests/unit/codegen_graph_check.h"
#include "tests/unit/pass_test_util.h"
#include "tests/unit/plan_test_util.h"

namespace kiln {
namespace {

// GPT-2's head as exporters write it: wte [V, K] gathered by the ids and, as
// Transpose(wte), the right operand of the logits' matmul.
std::string tied(const char* dt) {
  std::string vals;
  for (int i = 0; i < 6 * 8; ++i) vals += fmt::format("{}{}.0", i ? ", " : "", ((i * 7) % 17) - 8);
  return fmt::format(
      "graph @m(%ids: i64[1,5], %h: {0}[1,5,8]) -> ({0}[1,5,8], {0}[1,5,6]) {{\n"
      "  %wte = const {0}[6,8] dense<[{1}]>\n"
      "  %e = gather(%wte, %ids) {{axis=0}} : {0}[1,5,8]\n"
      "  %wt = transpose(%wte) {{perm=[1,0]}} : {0}[8,6]\n"
      "  %logits = matmul(%h, %wt) : {0}[1,5,6]\n"
      "  return %e, %logits\n}}\n",
      dt, vals);
}

int count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op() == op;
  return n;
}

TEST(ShareTransposedWeights, TiedEmbeddingKeepsMeaning) {
  for (const char* dt : {"f32", "f16"}) {
    SCOPED_TRACE(dt);
    auto g = testing::parse(tied(dt));
    auto after = testing::expect_pass_keeps_meaning(*g, {"share-transposed-weights"});
    verify_graph(*after, op_registry());
    EXPECT_EQ(count(*after, "gemm"), 1);
    EXPECT_EQ(count(*after, "matmul"), 0);
    EXPECT_EQ(count(*after, "transpose"), 0);
    auto folded = testing::expect_pass_keeps_meaning(*g, {"share-transposed-weights", "fold-constants", "dce", "fuse"});
    verify_graph(*folded, op_registry());
    EXPECT_EQ(folded->constants().size(), 1u) << "only wte";
  }
}

// The whole default pipeline: the plan's weights are the embedding alone
// (before: the embedding and its transposed copy, twice the bytes).
TEST(ShareTransposedWeights, DefaultPipelineStoresTheEmbeddingOnce) {
  auto g = testing::compile_text(tied("f32"));
  size_t bytes = 0;
  for (const Value* c : g->constants()) bytes += c->type().nbytes();
  EXPECT_EQ(bytes, 6u * 8u * 4u);
  auto original = testing::parse(tied("f32"));
  auto feed = testing::random_inputs(*original);
  std::vector<Tensor> want = ReferenceExecutor(*original).run(feed);
  std::vector<Tensor> got = ReferenceExecutor(*g).run(feed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << i;
}

// The gemm reading B as [N, K] (trans_b) after the sm_90 pipeline: NVRTC
// compiles its kernels and the simulator matches the reference.
TEST(ShareTransposedWeights, GemmKernelRunsOnTheSimulator) {
  auto g = testing::compile_text(tied("f32"), "sm_90");
  EXPECT_EQ(g->constants().size(), 1u);
  testing::expect_kernels_compile({g.get()}, "tied embedding");
  testing::expect_sim_matches_reference(*g);
}

}  // namespace
}  // namespace kiln
