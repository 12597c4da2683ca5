// Resize with coordinate_transformation_mode "align_corners" and a scale whose
// resized length is fractional (5 * 1.5 = 7.5, a 7-element result). ONNX's
// formula is x_original = x_resized * (length_original - 1) / (length_resized
// - 1); the onnx package's reference implementation (onnx/reference/ops/
// op_resize.py) and the conformance data generated from it
// (test_resize_downsample_scales_{linear,cubic}_align_corners) take the
// fractional length, scale * input length (7.5), and the ONNX maintainers
// call that intended (onnx/onnx#2462). ONNX Runtime takes the integer result
// length (7) and fails those two conformance tests. kiln follows ONNX: its
// reference backend, the static resize kernel and the shape-generic one
// divide by 6.5, not 6 (docs/ops.md, "Expected differences"). The values
// below are onnx 1.23's ReferenceEvaluator on the input [0, 1, 4, 9, 16]; ONNX
// Runtime 1.32's are in the comments.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "backends/compare.h"
#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/plan_format.h"

namespace kiln {
namespace {

struct Case {
  std::string mode;
  std::vector<float> want;  // onnx.reference (fractional length 7.5)
};

const std::vector<Case> kCases = {
    // ONNX Runtime: 0, 1, 1, 4, 9, 9, 16
    {"nearest", {0, 1, 1, 4, 4, 9, 16}},
    // ONNX Runtime: 0, 0.6666667, 2, 4, 7.333334, 11.33333, 16
    {"linear", {0, 0.6153846f, 1.692308f, 3.538461f, 6.307693f, 9.538462f, 13.84615f}},
    // ONNX Runtime: 0, 0.3518516, 1.777776, 4, 6.814815, 11.75926, 16
    {"cubic", {0, 0.3013183f, 1.569419f, 3.20801f, 5.982699f, 9.679099f, 14.23532f}},
};

std::string static_graph(const std::string& mode) {
  return "graph @m(%x: f32[1,1,1,5]) -> (f32[1,1,1,7]) {\n  %y = resize(%x) {coordinate_transformation_mode="
         "\"align_corners\", mode=\"" +
         mode + "\", scales=[1.0,1.0,1.0,1.5], sizes=[1,1,1,7]} : f32[1,1,1,7]\n  return %y\n}\n";
}

// The same resize over a symbolic width, as a plan with shape profiles emits
// it: one shape-generic kernel, run here at w = 5 (5 -> 7).
std::string symbolic_graph(const std::string& mode) {
  return "graph @m(%x: f32[1,1,1,w]) -> (f32[1,1,1,w+w.div2]) symbols(w in [2, 40]) {\n  %y = resize(%x) "
         "{coordinate_transformation_mode=\"align_corners\", mode=\"" +
         mode + "\", scales=[1.0,1.0,1.0,1.5], sizes=[1,1,1,w+w.div2]} : f32[1,1,1,w+w.div2]\n  return %y\n}\n";
}

std::map<std::string, Tensor> input_0_1_4_9_16() {
  Tensor x(TensorType(DType::F32, {1, 1, 1, 5}));
  for (int i = 0; i < 5; ++i) x.data<float>()[i] = static_cast<float>(i * i);
  return {{"x", x}};
}

Tensor expected(const Case& c) {
  Tensor t(TensorType(DType::F32, {1, 1, 1, 7}));
  for (int i = 0; i < 7; ++i) t.data<float>()[i] = c.want[i];
  return t;
}

const Tolerance kTol{1e-5, 1e-5};

TEST(ResizeAlignCorners, ReferenceTakesTheFractionalLength) {
  for (const Case& c : kCases) {
    auto g = parse_graph(static_graph(c.mode), "resize.kir");
    std::vector<Tensor> got = ReferenceExecutor(*g).run(input_0_1_4_9_16());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(compare_tensors(got[0], expected(c), kTol), "") << c.mode;
  }
}

TEST(ResizeAlignCorners, StaticKernelOnSimTakesTheFractionalLength) {
  for (const Case& c : kCases) {
    auto g = parse_graph(static_graph(c.mode), "resize.kir");
    CompileOptions o;
    o.pass.target = "sm_90";
    compile_graph(*g, o);
    const plan::Plan p = build_plan(*g, PlanBuildOptions{"sm_90", "fp32", {}});
    ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
    std::vector<Tensor> got = run_plan_on_sim(p, *g, input_0_1_4_9_16());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(compare_tensors(got[0], expected(c), kTol), "") << c.mode;
  }
}

TEST(ResizeAlignCorners, ShapeGenericKernelOnSimTakesTheFractionalLength) {
  for (const Case& c : kCases) {
    auto g = parse_graph(symbolic_graph(c.mode), "resize.kir");
    CompileOptions o;
    o.pass.target = "sm_90";
    o.symbolic = true;
    compile_graph(*g, o);
    PlanBuildOptions po{"sm_90", "fp32", {}};
    po.profiles = {plan::Profile{{{"x", {1, 1, 1, 2}, {1, 1, 1, 40}, {1, 1, 1, 40}}}}};
    const plan::Plan p = build_plan(*g, po);
    ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
    EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << c.mode << ": the launch is shape-generic";
    std::vector<Tensor> got = run_plan_on_sim(p, *g, input_0_1_4_9_16());
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(compare_tensors(got[0], expected(c), kTol), "") << c.mode;
  }
}

}  // namespace
}  // namespace kiln
