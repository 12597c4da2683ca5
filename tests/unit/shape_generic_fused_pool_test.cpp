// Fused pools over a symbolic image size (docs/dynamic_shapes.md, "Symbolic
// image sizes"): pools whose pointwise prologue reads a per-channel operand
// broadcast along the symbolic height and width (a shift, a folded batch
// norm's scale) and whose epilogue scales per channel, over a symbolic batch,
// height and width, fused into one kernel each as in a static plan, compiled
// by NVRTC for sm_80 and sm_90 with every launch shape-generic, and run from
// the plan on the simulator at three image sizes (odd ones included) equal
// to the reference backend on the graph specialised to each.
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

// A max pool after shift + relu and before a scale (both per channel), a global average
// pool of a square with a per-channel scale after it, and an average pool
// with pads after a per-channel scale and shift (a batch norm left by
// folding, written out), and a stride-1 average pool times a per-pixel mask
// broadcast over the channels (its strides symbolic: w, h*w).
const char* kFusedPools =
    "graph @m(%x: f32[n,4,h,w], %c: f32[4,1,1], %s: f32[1,4,1,1], %mk: f32[n,1,h,w]) -> (f32[n,4,h.div2,w.div2], "
    "f32[n,4,1,1], f32[n,4,h.plus1.div2,w.plus1.div2], f32[n,4,h,w]) symbols(n in [1, 3], h in [4, 40], w in [4, 40]) {\n"
    "  %a = add(%x, %c) : f32[n,4,h,w]\n"
    "  %r = relu(%a) : f32[n,4,h,w]\n"
    "  %p = max_pool(%r) {dilations=[1,1], kernel_shape=[2,2], pads=[0,0,0,0], strides=[2,2]} : "
    "f32[n,4,h.div2,w.div2]\n"
    "  %q = mul(%x, %x) : f32[n,4,h,w]\n"
    "  %g = global_average_pool(%q) : f32[n,4,1,1]\n"
    "  %gs = mul(%g, %s) : f32[n,4,1,1]\n"
    "  %m = mul(%x, %s) : f32[n,4,h,w]\n"
    "  %b = add(%m, %c) : f32[n,4,h,w]\n"
    "  %v = average_pool(%b) {dilations=[1,1], kernel_shape=[3,3], pads=[1,1,1,1], strides=[2,2]} : "
    "f32[n,4,h.plus1.div2,w.plus1.div2]\n"
    "  %pc = mul(%p, %c) : f32[n,4,h.div2,w.div2]\n"
    "  %sp = average_pool(%x) {dilations=[1,1], kernel_shape=[3,3], pads=[1,1,1,1], strides=[1,1]} : "
    "f32[n,4,h,w]\n"
    "  %spm = mul(%sp, %mk) : f32[n,4,h,w]\n"
    "  return %pc, %gs, %v, %spm\n"
    "}\n";

std::unique_ptr<Graph> compiled(const std::string& target) {
  auto g = parse_graph(kFusedPools, "pools.kir");
  CompileOptions o;
  o.pass.target = target;
  o.symbolic = true;
  compile_graph(*g, o);
  return g;
}

plan::Plan plan_for(const Graph& g, const std::string& arch) {
  PlanBuildOptions po{arch, "fp32", {}};
  po.profiles = {
      {{{"x", {1, 4, 4, 4}, {3, 4, 40, 40}, {3, 4, 40, 40}}, {"mk", {1, 1, 4, 4}, {3, 1, 40, 40}, {3, 1, 40, 40}}}}};
  po.source_name = "pools.onnx";
  return build_plan(g, po);
}

TEST(ShapeGenericFusedPools, FusedAsInAStaticPlanForSm80AndSm90) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(arch);
    int fused = 0;
    for (const auto& n : g->nodes()) fused += n->op() == "fused" && n->attrs().get_string("kind", "") == "reduction";
    EXPECT_EQ(fused, 4) << arch << ": the prologues and epilogues are not fused into the pools";
    const plan::Plan p = plan_for(*g, arch);
    ASSERT_TRUE(p.meta.gpu_kernels) << arch << ": " << p.meta.no_gpu_reason;
    EXPECT_EQ(p.steps.size(), 4u) << arch;
    EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << arch << ": every launch is shape-generic";
    for (const plan::Kernel& k : p.kernels) EXPECT_FALSE(k.cubin.empty()) << k.name << " has no " << arch << " CUBIN";
  }
}

TEST(ShapeGenericFusedPools, OnSimAtThreeShapesEqualTheReference) {
  auto g = compiled("sm_90");
  const plan::Plan p = plan_for(*g, "sm_90");
  for (const SymbolBindings& at_shape : std::vector<SymbolBindings>{
           {{"n", 1}, {"h", 4}, {"w", 6}}, {{"n", 2}, {"h", 13}, {"w", 10}}, {{"n", 3}, {"h", 37}, {"w", 29}}}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, at_shape, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(at_shape.at("h")));
    std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
    std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].shape(), want[i].shape()) << "h=" << at_shape.at("h") << " output " << i;
      EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << "h=" << at_shape.at("h") << " output " << i;
    }
  }
}

}  // namespace
}  // namespace kiln
