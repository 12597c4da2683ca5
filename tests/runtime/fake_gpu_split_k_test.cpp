// A folded split-K GEMM on the runtime's GPU path (strict fake driver, the
// plan's kernels run on the simulator): its per-tile counters live in the
// arena's zeroed region, which the runtime zeroes once per context
// (GpuContext::zero_once) and the kernel leaves zero. New device memory is
// filled with 0xFF here (cuMemAlloc does not zero), so a context that skipped
// the zeroing would see every counter at 0xFFFFFFFF and no block of a tile
// would draw the last ticket: the result would be the uninitialized arena.
#include <gtest/gtest.h>

#include "tests/runtime/fake_gpu_util.h"

namespace kiln::fakegpu {
namespace {

using FakeGpuSplitK = FakeGpu;

TEST_F(FakeGpuSplitK, FoldedSplitKCountersAreZeroedOncePerContextAndStayZero) {
  const plan::Plan& p = plans().at("folded_split_k");
  ASSERT_GT(p.memory.zeroed_bytes, 0u) << "the plan has no zeroed region";
  int folded = 0, reductions = 0;
  for (const plan::Kernel& k : p.kernels) {
    folded += k.source.find("summed by the last block of each tile") != std::string::npos;
    reductions += k.source.find("split-K reduction of") != std::string::npos;
  }
  EXPECT_EQ(folded, 1);
  EXPECT_EQ(reductions, 0) << "a folded split has no reduction kernel";
  std::unique_ptr<Graph> g = compiled_text(kFoldedSplitK);
  const std::map<std::string, Tensor> feed = testing::random_inputs(*g, 23);
  const std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  std::vector<uint8_t> bytes = plan_for("folded_split_k");
  fake().set_alloc_fill(0xFF);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "folded_split_k", rt::Backend::Gpu);
  std::vector<Tensor> first;
  for (int context = 0; context < 2; ++context) {
    SCOPED_TRACE(context);
    rt::Context ctx(e);
    for (int run_no = 0; run_no < 2; ++run_no) {
      SCOPED_TRACE(run_no);
      std::vector<Tensor> got = run(ctx, feed);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(compare_tensors(got[0], want[0], default_tolerance(DType::F16)), "");
      // Deterministic: the same bits whichever block of a tile arrives last, run after run.
      if (first.empty()) first = got;
      else EXPECT_TRUE(got[0].same_bytes(first[0])) << "a later run differs";
    }
  }
  fake().set_alloc_fill(-1);
}

// A split-KV attention (codegen/emitters/attention/emit_attention_tc.cpp) on the same
// path: its workspace of partial states is uninitialized arena (0xFF here),
// its per-tile counters in the zeroed region; results match the reference and
// repeat bit for bit across runs and contexts.
TEST_F(FakeGpuSplitK, SplitKvAttentionCountersAreZeroedOncePerContextAndStayZero) {
  const plan::Plan& p = plans().at("split_kv_attention");
  ASSERT_GT(p.memory.zeroed_bytes, 0u) << "the plan has no zeroed region";
  int split = 0;
  for (const plan::Kernel& k : p.kernels) split += k.source.find("split-KV: the keys in") != std::string::npos;
  EXPECT_EQ(split, 1) << "the attention kernel did not split its keys";
  std::unique_ptr<Graph> g = compiled_text(kSplitKvAttention);
  const std::map<std::string, Tensor> feed = testing::random_inputs(*g, 29);
  const std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  std::vector<uint8_t> bytes = plan_for("split_kv_attention");
  fake().set_alloc_fill(0xFF);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "split_kv_attention", rt::Backend::Gpu);
  std::vector<Tensor> first;
  for (int context = 0; context < 2; ++context) {
    SCOPED_TRACE(context);
    rt::Context ctx(e);
    for (int run_no = 0; run_no < 2; ++run_no) {
      SCOPED_TRACE(run_no);
      std::vector<Tensor> got = run(ctx, feed);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(compare_tensors(got[0], want[0], default_tolerance(DType::F16)), "");
      if (first.empty()) first = got;
      else EXPECT_TRUE(got[0].same_bytes(first[0])) << "a later run differs";
    }
  }
  fake().set_alloc_fill(-1);
}

}  // namespace
}  // namespace kiln::fakegpu
