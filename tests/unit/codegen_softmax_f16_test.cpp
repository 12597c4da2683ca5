// f16 softmax kernels round as the reference does (ops/softmax_ops.cpp:
// exp(x - max) and the sum to f16 before dividing, ONNX's reference): the
// row kernel (last axis), the block-per-line kernel (a middle axis) and a
// fused add -> softmax give the reference's bits on the simulator.
#include <gtest/gtest.h>

#include "backends/reference/executor.h"
#include "backends/sim/sim_executor.h"
#include "ir/error.h"
#include "tests/unit/codegen_graph_check.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

// The graph of `text`, through the fuse pass when `fuse`.
void expect_same_bits(const std::string& text, bool fuse = false) {
  auto g = testing::parse(text);
  auto want_graph = g->clone();
  if (fuse) {
    PassStats st;
    create_pass("fuse")->run(*g, PassOptions{}, st);
    int fused = 0;
    for (const auto& n : g->nodes()) fused += n->op() == "fused";
    EXPECT_EQ(fused, 1) << "the add is a prologue of the softmax";
  }
  auto feed = testing::random_inputs(*g, 5);
  std::vector<Tensor> want = ReferenceExecutor(*want_graph).run(feed);
  std::vector<Tensor> got = codegen::SimExecutor(*g).run(feed);
  ASSERT_EQ(got.size(), 1u);
  int differ = 0;
  for (int64_t i = 0; i < want[0].numel(); ++i) differ += got[0].data<uint16_t>()[i] != want[0].data<uint16_t>()[i];
  EXPECT_EQ(differ, 0) << text;
}

TEST(CodegenSoftmaxF16, KernelsGiveTheReferenceBits) {
  expect_same_bits(
      "graph @rows(%x: f16[64,37]) -> (f16[64,37]) {\n  %y = softmax(%x) {axis=1} : f16[64,37]\n  return %y\n}\n");
  expect_same_bits(
      "graph @middle(%x: f16[3,300,5]) -> (f16[3,300,5]) {\n  %y = softmax(%x) {axis=1} : f16[3,300,5]\n"
      "  return %y\n}\n");
  expect_same_bits(
      "graph @fused(%x: f16[8,50], %b: f16[8,50]) -> (f16[8,50]) {\n  %s = add(%x, %b) : f16[8,50]\n"
      "  %y = softmax(%s) {axis=1} : f16[8,50]\n  return %y\n}\n",
      true);
}

}  // namespace
}  // namespace kiln
