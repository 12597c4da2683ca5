// Control flow on the simulator and in GPU plans: each region runs through
// its own generated kernels; a GPU plan keeps if/loop/scan as control-flow
// records whose regions have their own launch lists (runtime/plan_format.h),
// run host-driven (runtime/plan_control_run.h) on the GPU and, here, by the
// plan-on-sim path.
#include <gtest/gtest.h>

#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "backends/sim/sim_executor.h"
#include "ir/error.h"
#include "tests/runtime/control_flow_graphs.h"
#include "tests/unit/plan_test_util.h"

namespace kiln {
namespace {

using cfgraphs::kIfInLoop;

TEST(ControlFlowSim, RegionsRunThroughGeneratedKernels) {
  auto g = testing::compile_text(kIfInLoop, "sm_90");
  codegen::SimExecutor sim(*g);
  ReferenceExecutor ref(*g);
  for (bool c : {true, false}) {
    std::map<std::string, Tensor> in{{"c", Tensor::scalar(DType::Bool, c)},
                                     {"n", Tensor::scalar(DType::I64, 3)},
                                     {"x", Tensor::from(DType::F32, {4}, std::vector<float>{1, -2, 3, 0.5f})}};
    Tensor a = sim.run(in)[0], b = ref.run(in)[0];
    for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(a.get_double(i), b.get_double(i), 1e-6) << "c=" << c << " i=" << i;
  }
}

// The sm_90 plan keeps the loop and its nested if as control-flow records
// whose regions have their own launch lists; the plan's launch list run on
// the simulator (backends/plan_sim.h), host-driven as the GPU runtime runs
// it, equals the reference on both branches and with no iteration.
TEST(ControlFlowPlan, GpuPlanRunsItsRegionsHostDrivenAndEqualsTheReference) {
  auto g = testing::compile_text(kIfInLoop, "sm_90");
  plan::Plan p = build_plan(*g, {"sm_90", "fp32", {}, true, {}, "cf.onnx"});
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  ASSERT_EQ(p.control.size(), 2u);  // the loop, then the if of its body
  EXPECT_EQ(p.control[0].kind, plan::ControlKind::Loop);
  EXPECT_EQ(p.control[1].kind, plan::ControlKind::If);
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].kind, plan::StepKind::Control);
  // The branches' kernels (mul, tanh, sigmoid) are in the plan's kernel list.
  EXPECT_EQ(p.kernels.size(), 3u);
  // Regions' frames lie past the model's own arena, inside the plan's arena.
  for (const plan::StepAt& at : plan::all_steps(p))
    for (const plan::BufferRef& b : at.step->args)
      if (b.kind == plan::BufferKind::Arena) EXPECT_LE(b.offset + b.nbytes, p.memory.arena_bytes);
  // The plan round-trips byte for byte through the `control` section.
  std::vector<uint8_t> bytes = plan::serialize(p);
  plan::Plan back = plan::deserialize(bytes.data(), bytes.size(), "cf.plan");
  EXPECT_EQ(plan::serialize(back), bytes);
  for (bool c : {true, false})
    for (int64_t n : {3, 0}) {
      std::map<std::string, Tensor> in{{"c", Tensor::scalar(DType::Bool, c)},
                                       {"n", Tensor::scalar(DType::I64, double(n))},
                                       {"x", Tensor::from(DType::F32, {4}, std::vector<float>{1, -2, 3, 0.5f})}};
      Tensor a = run_plan_on_sim(back, *g, in)[0], b = ReferenceExecutor(*g).run(in)[0];
      for (int64_t i = 0; i < 4; ++i)
        EXPECT_NEAR(a.get_double(i), b.get_double(i), 1e-6) << "c=" << c << " n=" << n << " i=" << i;
    }
  // The cpu target keeps the graph for the reference path and writes no record.
  plan::Plan cpu = build_plan(*g, {"cpu", "fp32", {}});
  EXPECT_TRUE(cpu.control.empty());
  EXPECT_TRUE(cpu.steps.empty());
}

// A damaged `control` section is a load error naming what is wrong, never
// a run that reads or writes past a buffer.
TEST(ControlFlowPlan, ALoaderRejectsInconsistentControlFlowRecords) {
  auto g = testing::compile_text(kIfInLoop, "sm_90");
  const plan::Plan good = build_plan(*g, {"sm_90", "fp32", {}});
  auto load_error = [](const plan::Plan& p) {
    std::vector<uint8_t> bytes = plan::serialize(p);
    try {
      plan::deserialize(bytes.data(), bytes.size(), "cf.plan");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  auto expect_error = [&](const plan::Plan& p, const std::string& want) {
    std::string got = load_error(p);
    EXPECT_NE(got.find(want), std::string::npos) << got;
  };
  plan::Plan p = good;
  p.steps[0].kernel = 7;
  expect_error(p, "cf.plan: launch step 0 names control-flow record 7, the plan has 2");
  p = good;
  p.control[1].regions[0].steps.push_back(p.steps[0]);  // the if's branch runs the loop again: a cycle
  expect_error(p, "cf.plan: control-flow record 1 region 0 step 2 names control-flow record 0");
  p = good;
  p.control[0].regions[0].params[2].nbytes = 8;  // the carried value's slot, smaller than the value
  expect_error(p, "cf.plan: control-flow record 0: a loop-carried parameter has 8 bytes, expected 16");
  p = good;
  p.control[0].results[0].kind = plan::BufferKind::Arena;  // the graph output's binding, moved past the arena
  p.control[0].results[0].offset = p.memory.arena_bytes;
  expect_error(p, "binds 16 bytes at arena offset");
  p = good;
  p.control.clear();
  expect_error(p, "launch step 0 names control-flow record 0, the plan has 0");
  EXPECT_EQ(load_error(good), "loaded");
}
}  // namespace
}  // namespace kiln
