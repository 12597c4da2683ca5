// Control flow on the simulator and in GPU plans: each region runs through
// its own generated kernels, and a GPU plan with control flow left is an
// error naming the node (kiln builds no sub-plans yet), never a plan that
// quietly runs it on the CPU.
#include <gtest/gtest.h>

#include "backends/reference/executor.h"
#include "backends/sim/sim_executor.h"
#include "ir/error.h"
#include "tests/unit/plan_test_util.h"

namespace kiln {
namespace {

const char* kIfLoop = R"(graph @m(%c: bool[], %n: i64[], %x: f32[4]) -> (f32[4]) {
  %v = loop(%n, _, %x, %c) {carried=1} : f32[4] {
    graph @body(%i: i64[], %go: bool[], %a: f32[4], %cc: bool[]) -> (bool[], f32[4]) {
      %b = if(%cc, %a) : f32[4] loc("pick") {
        graph @then(%p: f32[4]) -> (f32[4]) {
          %h = const f32[] splat<0.5>
          %t = mul(%p, %h) : f32[4]
          %u = tanh(%t) : f32[4]
          return %u
        }
        graph @else(%q: f32[4]) -> (f32[4]) {
          %e = sigmoid(%q) : f32[4]
          return %e
        }
      }
      return %go, %b
    }
  }
  return %v
})";

TEST(ControlFlowSim, RegionsRunThroughGeneratedKernels) {
  auto g = testing::compile_text(kIfLoop, "sm_90");
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

TEST(ControlFlowPlan, GpuPlanWithControlFlowIsAnErrorNamingTheNode) {
  auto g = testing::compile_text(kIfLoop, "sm_90");
  try {
    build_plan(*g, {"sm_90", "fp32", {}, true, {}, "cf.onnx"});
    FAIL() << "a GPU plan was built";
  } catch (const Unsupported& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cf.onnx: node (loop)"), std::string::npos) << m;
    EXPECT_NE(m.find("control flow with a data-dependent condition is not supported in GPU plans yet"),
              std::string::npos)
        << m;
  }
  // The cpu target keeps it (the runtime runs it on the reference path).
  EXPECT_NO_THROW(build_plan(*g, {"cpu", "fp32", {}}));
}

}  // namespace
}  // namespace kiln
