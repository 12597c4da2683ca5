// The shape-generic resize beyond integer scales
// (codegen/emitters/data_movement/emit_resize_generic.h): over a symbolic
// height and width, resizes by non-integer scales (1.5, 0.75, 0.5, 2.5,
// 1.25) whose output sizes are floor(in * scale) written over derived
// symbols (`h+h.div2`, `h.times3.div4`), and cubic ones (Keys' A of -0.75
// and -0.5, exclude_outside) and a linear one with exclude_outside, compiled
// once into a GPU plan with a profile (NVRTC sm_80 and sm_90, every launch
// shape-generic) and run from the plan on the simulator at three image
// sizes, odd ones included, equal to the reference backend on the graph
// specialised to each.
#include <gtest/gtest.h>

#include "backends/compare.h"
#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

const char* kResizes =
    "graph @m(%x: f32[n,3,h,w]) -> (f32[n,3,h+h.div2,w+w.div2], f32[n,3,h.times3.div4,w.times3.div4], "
    "f32[n,3,h+h.div2,2*w], f32[n,3,h.div2,2*w+w.div2], f32[n,3,h+h.div4,w.times3.div4]) "
    "symbols(n in [1, 3], h in [5, 40], w in [5, 40]) {\n"
    "  %a = resize(%x) {mode=\"nearest\", scales=[1.0,1.0,1.5,1.5], sizes=[n,3,h+h.div2,w+w.div2]} : "
    "f32[n,3,h+h.div2,w+w.div2]\n"
    "  %b = resize(%x) {coordinate_transformation_mode=\"half_pixel\", mode=\"linear\", scales=[1.0,1.0,0.75,0.75], "
    "sizes=[n,3,h.times3.div4,w.times3.div4]} : f32[n,3,h.times3.div4,w.times3.div4]\n"
    "  %c = resize(%x) {coordinate_transformation_mode=\"half_pixel\", mode=\"cubic\", scales=[1.0,1.0,1.5,2.0], "
    "sizes=[n,3,h+h.div2,2*w]} : f32[n,3,h+h.div2,2*w]\n"
    "  %d = resize(%x) {coordinate_transformation_mode=\"align_corners\", cubic_coeff_a=-0.5, exclude_outside=1, "
    "mode=\"cubic\", scales=[1.0,1.0,0.5,2.5], sizes=[n,3,h.div2,2*w+w.div2]} : f32[n,3,h.div2,2*w+w.div2]\n"
    "  %e = resize(%x) {coordinate_transformation_mode=\"asymmetric\", exclude_outside=1, mode=\"linear\", "
    "scales=[1.0,1.0,1.25,0.75], sizes=[n,3,h+h.div4,w.times3.div4]} : f32[n,3,h+h.div4,w.times3.div4]\n"
    "  return %a, %b, %c, %d, %e\n"
    "}\n";

std::unique_ptr<Graph> compiled(const std::string& target) {
  auto g = parse_graph(kResizes, "resize.kir");
  CompileOptions o;
  o.pass.target = target;
  o.symbolic = true;
  compile_graph(*g, o);
  return g;
}

plan::Plan plan_for(const Graph& g, const std::string& arch) {
  PlanBuildOptions po{arch, "fp32", {}};
  po.profiles = {{{{"x", {1, 3, 5, 5}, {3, 3, 40, 40}, {3, 3, 40, 40}}}}};
  po.source_name = "resize.onnx";
  return build_plan(g, po);
}

TEST(ShapeGenericResize, NonIntegerScalesAndCubicCompileForSm80AndSm90) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(arch);
    const plan::Plan p = plan_for(*g, arch);
    ASSERT_TRUE(p.meta.gpu_kernels) << arch << ": " << p.meta.no_gpu_reason;
    EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << arch << ": every launch is shape-generic";
    int resizes = 0;
    for (const plan::Kernel& k : p.kernels) {
      EXPECT_FALSE(k.cubin.empty()) << k.name << " has no " << arch << " CUBIN";
      resizes += k.name.find("kiln_resize") == 0;
    }
    EXPECT_EQ(resizes, 5) << arch;
  }
}

TEST(ShapeGenericResize, OnSimAtThreeShapesEqualsTheReference) {
  auto g = compiled("sm_90");
  const plan::Plan p = plan_for(*g, "sm_90");
  for (const SymbolBindings& at_shape : std::vector<SymbolBindings>{
           {{"n", 1}, {"h", 5}, {"w", 8}}, {{"n", 2}, {"h", 13}, {"w", 10}}, {{"n", 3}, {"h", 37}, {"w", 29}}}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, at_shape, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(at_shape.at("h")));
    std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
    std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].shape(), want[i].shape()) << "h=" << at_shape.at("h") << " output " << i;
      EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-5}), "") << "h=" << at_shape.at("h") << " output " << i;
    }
  }
}

}  // namespace
}  // namespace kiln
