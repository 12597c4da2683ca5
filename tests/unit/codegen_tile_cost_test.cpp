// The tile chooser weighs a configuration by kiln's performance model
// (codegen/emitters/gemm_conv/gemm_tile_cost.h): the launch it describes
// before emitting must be the launch `kiln inspect --perf` reads from the
// emitted kernel (perf/plan_work.cpp), or the choice optimizes something the
// plan's estimate does not say. Each case compiles one f16 matmul for sm_90,
// reads its plan's steps through plan_work, and compares them with
// gemm_launch_work / split_k_reduction_work of the configuration the chooser
// took: an unsplit grid, a split summed by a reduction kernel (BERT-base's
// FFN-down GEMM) and a folded split (ResNet-50's M = 1 classifier).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "backends/plan_sim.h"
#include "codegen/emitters/gemm_conv/gemm_tile_cost.h"
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "perf/plan_work.h"
#include "runtime/plan_graph.h"
#include "tests/unit/plan_test_util.h"

namespace kiln {
namespace {

struct Case {
  int64_t M, N, K;
  const char* tile;  // the configuration the calibrated model chooses
};

// The plan of `%y = matmul(%a, %w)` for f16 [M, K] x [K, N] on sm_90.
plan::Plan matmul_plan(const Case& c) {
  auto g = testing::compile_text(fmt::format(R"(graph @m(%a: f16[{0},{2}], %w: f16[{2},{1}]) -> (f16[{0},{1}]) {{
    %y = matmul(%a, %w) : f16[{0},{1}]
    return %y
  }})",
                                             c.M, c.N, c.K),
                                 "sm_90");
  return build_plan(*g, {"sm_90", "fp16", {}});
}

class TileCostMatchesThePlan : public ::testing::TestWithParam<Case> {};

TEST_P(TileCostMatchesThePlan, ChooserAndInspectSeeTheSameLaunch) {
  if (!plan_sim_available()) GTEST_SKIP() << "kiln built without codegen";
  const Case c = GetParam();
  // A matmul's B is stored [K, N]: its stages are BK rows (the emitter's hint).
  const codegen::GemmProblem problem{codegen::GemmMath::F16, 1, c.M, c.N, c.K, 0, false, true};
  const codegen::GemmTileConfig tile = codegen::default_gemm_tile(problem);
  ASSERT_EQ(codegen::gemm_tile_name(tile), c.tile);
  const plan::Plan p = matmul_plan(c);
  const std::unique_ptr<Graph> g = plan::load_graph(p);
  std::vector<perf::StepWork> steps;
  for (perf::StepWork& s : perf::plan_work(p, *g))
    if (s.work.kind != perf::WorkKind::Copy) steps.push_back(std::move(s));
  const perf::LaunchWork reduction = codegen::split_k_reduction_work(problem, tile);
  ASSERT_EQ(steps.size(), reduction.blocks > 0 ? 2u : 1u);

  const perf::LaunchWork want = codegen::gemm_launch_work(problem, tile);
  const perf::LaunchWork& got = steps[0].work;
  EXPECT_EQ(got.blocks, want.blocks);
  EXPECT_EQ(got.threads, want.threads);
  EXPECT_EQ(got.smem_bytes, want.smem_bytes);
  EXPECT_EQ(got.tile.bm, want.tile.bm);
  EXPECT_EQ(got.tile.bn, want.tile.bn);
  EXPECT_EQ(got.tile.bk, want.tile.bk);
  EXPECT_EQ(got.tile.stages, want.tile.stages);
  EXPECT_EQ(got.tile.k_tiles, want.tile.k_tiles);
  EXPECT_EQ(got.tile.split, want.tile.split);
  EXPECT_DOUBLE_EQ(got.flops, want.flops);
  EXPECT_DOUBLE_EQ(got.block_flops, want.block_flops);
  EXPECT_DOUBLE_EQ(got.bytes, want.bytes);
  EXPECT_DOUBLE_EQ(got.l2_bytes, want.l2_bytes);
  EXPECT_EQ(got.tail_blocks, want.tail_blocks);
  EXPECT_DOUBLE_EQ(got.tail_bytes, want.tail_bytes);
  EXPECT_EQ(got.epilogue_width, want.epilogue_width);
  EXPECT_EQ(got.epilogue_accesses, want.epilogue_accesses);
  EXPECT_EQ(got.epilogue_bytes, want.epilogue_bytes);
  // Registers are ptxas's: the chooser's expectation (accumulators + 64) is
  // near them, and so is its estimate of the launch.
  EXPECT_NEAR(got.registers, want.registers, 40) << "ptxas gave " << got.registers;
  const perf::GpuSpec& gpu = codegen::tile_choice_gpu();
  const double got_us = perf::estimate_launch(got, gpu).est_us, want_us = perf::estimate_launch(want, gpu).est_us;
  EXPECT_NEAR(got_us, want_us, 0.05 * want_us);
  if (reduction.blocks > 0) {
    const perf::LaunchWork& r = steps[1].work;
    EXPECT_EQ(steps[1].anchor, "split-K reduction");
    EXPECT_EQ(r.blocks, reduction.blocks);
    EXPECT_EQ(r.threads, reduction.threads);
    EXPECT_DOUBLE_EQ(r.bytes, reduction.bytes);
    EXPECT_DOUBLE_EQ(r.flops, reduction.flops);
  }
}

INSTANTIATE_TEST_SUITE_P(Gemms, TileCostMatchesThePlan,
                         ::testing::Values(Case{512, 256, 256, "16x32x64 w1x1 s5"},
                                           Case{128, 768, 3072, "64x64x64 w2x2 s5 split8"},
                                           Case{1, 1000, 2048, "16x32x64 w1x1 s6 split7 fold"}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return fmt::format("M{}_N{}_K{}", i.param.M, i.param.N, i.param.K);
                         });

}  // namespace
}  // namespace kiln
