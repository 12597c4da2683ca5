// merge-sibling-matmuls: the merged matmul + split gives the same results as
// the separate matmuls (column order of the concatenated weight, batched left
// operands, f16 weights), alone and followed by the fuser.
#include <gtest/gtest.h>

#include <string>

#include "ir/verifier.h"
#include "ops/registry.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

// A rank-2 constant with distinct, exactly representable values.
std::string weight(const std::string& name, const char* dtype, int rows, int cols, int seed) {
  std::string vals;
  for (int i = 0; i < rows * cols; ++i)
    vals += fmt::format("{}{}.0", i ? ", " : "", ((i * 7 + seed * 13) % 17) - 8);
  return fmt::format("  %{} = const {}[{},{}] dense<[{}]>\n", name, dtype, rows, cols, vals);
}

int count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op() == op;
  return n;
}

TEST(MergeSiblingMatmuls, KeepsMeaningBatchedAndUneven) {
  std::string text = "graph @m(%x: f32[2,3,4], %b: f32[5]) -> (f32[2,3,5], f32[2,3,2], f32[2,3,3]) {\n" +
                     weight("w1", "f32", 4, 5, 1) + weight("w2", "f32", 4, 2, 2) + weight("w3", "f32", 4, 3, 3) +
                     "  %a = matmul(%x, %w1) : f32[2,3,5]\n"
                     "  %ab = add(%a, %b) : f32[2,3,5]\n"
                     "  %c = matmul(%x, %w2) : f32[2,3,2]\n"
                     "  %d = matmul(%x, %w3) : f32[2,3,3]\n"
                     "  %dr = relu(%d) : f32[2,3,3]\n"
                     "  return %ab, %c, %dr\n}\n";
  auto g = testing::parse(text);
  auto merged = testing::expect_pass_keeps_meaning(*g, {"merge-sibling-matmuls"});
  verify_graph(*merged, op_registry());
  EXPECT_EQ(count(*merged, "matmul"), 1);
  EXPECT_EQ(count(*merged, "split"), 1);
  EXPECT_EQ(merged->constants().size(), 1u);  // only the concatenation
  auto fused = testing::expect_pass_keeps_meaning(*g, {"merge-sibling-matmuls", "fuse"});
  verify_graph(*fused, op_registry());
  EXPECT_EQ(fused->num_nodes(), 1u);  // one gemm kernel writing all three
}

TEST(MergeSiblingMatmuls, HalfWeights) {
  std::string text = "graph @m(%x: f16[3,4]) -> (f16[3,2], f16[3,2]) {\n" + weight("w1", "f16", 4, 2, 4) +
                     weight("w2", "f16", 4, 2, 5) +
                     "  %a = matmul(%x, %w1) : f16[3,2]\n"
                     "  %c = matmul(%x, %w2) : f16[3,2]\n"
                     "  return %a, %c\n}\n";
  auto g = testing::parse(text);
  auto merged = testing::expect_pass_keeps_meaning(*g, {"merge-sibling-matmuls"});
  EXPECT_EQ(count(*merged, "matmul"), 1);
  EXPECT_EQ(merged->constants()[0]->dtype(), DType::F16);
}

}  // namespace
}  // namespace kiln
