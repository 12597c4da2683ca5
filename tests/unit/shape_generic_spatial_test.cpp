// Shape-generic kernels over a symbolic image size (docs/dynamic_shapes.md,
// "Symbolic image sizes"): graphs whose batch, height and width are symbols
// compiled once into a GPU plan with a profile hold conv (SIMT implicit GEMM
// with a fused epilogue, strided, depthwise, conv_transpose; the f16
// tensor-core implicit GEMM; nhwc on the SIMT core), the window and global
// pools, instance and group normalization and resize (nearest and linear)
// kernels taking `kiln_syms`, with strided windows' sizes as derived
// symbols (ir/floor_div_dims.h), compiled by NVRTC for sm_80 and sm_90, and
// run on the simulator from the plan at three image sizes (odd ones
// included) equal to the reference backend on the graph specialised to each.
#include <gtest/gtest.h>

#include <set>

#include "runtime/plan_format.h"
#include "tests/unit/shape_generic_util.h"

namespace kiln {
namespace {

// The default pipeline (the layout pass turns conv regions NHWC), or without
// the layout pass (the channels-first kernels).
std::unique_ptr<Graph> compiled(const char* text, const std::string& target, bool layout = true) {
  return testing::compile_symbolic(text, "seg.kir", target,
                                   layout ? std::vector<std::string>{} : std::vector<std::string>{"layout"});
}

plan::Plan plan_for(const Graph& g, const std::string& arch, const plan::Profile& profile) {
  return testing::profile_plan(g, arch, profile, "seg.onnx");
}

// Every launch is shape-generic but the layout pass's relayouts of the
// weights (graph inputs of a static shape: transposes at one shape).
// The kernels the top-level launch list runs (not the opt-shape or bucket
// launch variants, runtime/plan_launch_variants.h, which may be specialised).
std::vector<plan::Kernel> base_kernels(const plan::Plan& p) {
  std::set<uint32_t> used;
  for (const plan::Step& st : p.steps)
    if (st.kind == plan::StepKind::Kernel) used.insert(st.kernel);
  std::vector<plan::Kernel> r;
  for (uint32_t i : used) r.push_back(p.kernels.at(i));
  return r;
}

void expect_all_generic(const plan::Plan& p, const std::string& arch) {
  ASSERT_TRUE(p.meta.gpu_kernels) << arch << ": " << p.meta.no_gpu_reason;
  size_t static_transposes = 0;
  for (const plan::Kernel& k : base_kernels(p)) {
    EXPECT_FALSE(k.cubin.empty()) << k.name << " has no " << arch << " CUBIN";
    if (k.source.find("kiln_syms ks") != std::string::npos) continue;
    EXPECT_EQ(k.name.find("kiln_inj_transpose"), 0u) << k.name << " is not shape-generic";
    ++static_transposes;
  }
  EXPECT_LE(p.steps.size() - p.generic_launches.size(), static_transposes * 4) << arch;
  EXPECT_GE(p.generic_launches.size(), 1u) << arch;
}

int count_kernels(const plan::Plan& p, const std::string& part) {
  int n = 0;
  for (const plan::Kernel& k : base_kernels(p)) n += k.name.find(part) != std::string::npos;
  return n;
}

// Random inputs seeded by the image height.
void expect_sim_equals_reference(const plan::Plan& p, const Graph& g, const SymbolBindings& at_shape, Tolerance tol) {
  testing::expect_plan_on_sim_equals_reference(p, g, at_shape, static_cast<uint64_t>(at_shape.at("h")), tol);
}

const std::vector<SymbolBindings> kShapes = {
    {{"n", 1}, {"h", 8}, {"w", 8}}, {{"n", 2}, {"h", 13}, {"w", 10}}, {{"n", 3}, {"h", 24}, {"w", 19}}};

// conv + bias + relu (one fused kernel), a max pool and a strided conv (their
// sizes h.div2, h.plus2.div4), a depthwise conv, instance norm, resize x2
// (nearest and linear), conv_transpose, average and lp pools with pads,
// group norm, the global pools.
const char* kSeg =
    "graph @m(%x: f32[n,3,h,w], %w1: f32[8,3,3,3], %c1: f32[8], %w2: f32[8,8,3,3], %dw: f32[8,1,3,3], "
    "%s8: f32[8], %b8: f32[8], %wt: f32[8,4,2,2], %s4: f32[4], %b4: f32[4]) -> (f32[n,4,2*h.plus2.div4,"
    "2*w.plus2.div4], f32[n,8,2*h.plus2.div4,2*w.plus2.div4], f32[n,4,1,1], f32[n,8,1,1], "
    "f32[n,4,4*h.plus2.div4,4*w.plus2.div4]) symbols(n in [1, 3], h in [8, 24], w in [8, 24]) {\n"
    "  %a1 = conv(%x, %w1, %c1) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]} : f32[n,8,h,w]\n"
    "  %r1 = relu(%a1) : f32[n,8,h,w]\n"
    "  %p1 = max_pool(%r1) {dilations=[1,1], kernel_shape=[2,2], pads=[0,0,0,0], strides=[2,2]} : "
    "f32[n,8,h.div2,w.div2]\n"
    "  %a2 = conv(%p1, %w2) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[2,2]} : "
    "f32[n,8,h.plus2.div4,w.plus2.div4]\n"
    "  %d = conv(%a2, %dw) {dilations=[1,1], group=8, pads=[1,1,1,1], strides=[1,1]} : "
    "f32[n,8,h.plus2.div4,w.plus2.div4]\n"
    "  %i = instance_normalization(%d, %s8, %b8) {epsilon=1e-05} : f32[n,8,h.plus2.div4,w.plus2.div4]\n"
    "  %u = resize(%i) {mode=\"nearest\", scales=[1.0,1.0,2.0,2.0], sizes=[n,8,2*h.plus2.div4,2*w.plus2.div4]} : "
    "f32[n,8,2*h.plus2.div4,2*w.plus2.div4]\n"
    "  %ul = resize(%i) {coordinate_transformation_mode=\"half_pixel\", mode=\"linear\", scales=[1.0,1.0,2.0,2.0], "
    "sizes=[n,8,2*h.plus2.div4,2*w.plus2.div4]} : f32[n,8,2*h.plus2.div4,2*w.plus2.div4]\n"
    "  %t = conv_transpose(%u, %wt) {dilations=[1,1], group=1, pads=[0,0,0,0], strides=[2,2]} : "
    "f32[n,4,4*h.plus2.div4,4*w.plus2.div4]\n"
    "  %av = average_pool(%t) {dilations=[1,1], kernel_shape=[3,3], pads=[1,1,1,1], strides=[2,2]} : "
    "f32[n,4,2*h.plus2.div4,2*w.plus2.div4]\n"
    "  %lp = lp_pool(%av) {dilations=[1,1], kernel_shape=[2,2], p=2, pads=[0,0,1,1], strides=[1,1]} : "
    "f32[n,4,2*h.plus2.div4,2*w.plus2.div4]\n"
    "  %g = group_normalization(%t, %s4, %b4) {epsilon=1e-05, num_groups=2} : f32[n,4,4*h.plus2.div4,4*w.plus2.div4]\n"
    "  %ga = global_average_pool(%g) : f32[n,4,1,1]\n"
    "  %gm = global_max_pool(%ul) : f32[n,8,1,1]\n"
    "  return %lp, %ul, %ga, %gm, %g\n"
    "}\n";

plan::Profile seg_profile() { return {{{"x", {1, 3, 8, 8}, {3, 3, 24, 24}, {3, 3, 24, 24}}}}; }

TEST(ShapeGenericKernels, SpatialPlansCompileForSm80AndSm90) {
  for (const std::string arch : {"sm_80", "sm_90"})
    for (bool layout : {false, true}) {
      auto g = compiled(kSeg, arch, layout);
      const plan::Plan p = plan_for(*g, arch, seg_profile());
      expect_all_generic(p, arch);
      // The layout pass runs on the symbolic graph: the convs channels-last.
      EXPECT_EQ(count_kernels(p, "kiln_conv_nhwc") > 0, layout) << arch;
      if (!layout) EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << arch << ": every launch is shape-generic";
      // Each step holds its grid at the largest shape.
      const SymbolBindings max = {{"n", 3}, {"h", 24}, {"w", 24}};
      for (const plan::GenericLaunch& gl : p.generic_launches) {
        EXPECT_EQ(p.steps[gl.step].grid.x, plan::eval_grid_axis(gl.grid[0], max)) << arch << " step " << gl.step;
        EXPECT_EQ(p.steps[gl.step].grid.y, plan::eval_grid_axis(gl.grid[1], max)) << arch << " step " << gl.step;
      }
    }
}

TEST(ShapeGenericKernels, SpatialOnSimAtThreeShapesEqualsTheReference) {
  for (bool layout : {false, true}) {
    auto g = compiled(kSeg, "sm_90", layout);
    const plan::Plan p = plan_for(*g, "sm_90", seg_profile());
    for (const SymbolBindings& s : kShapes) expect_sim_equals_reference(p, *g, s, {1e-4, 1e-4});
  }
}

// f16 convs on tensor cores (mma.sync implicit GEMMs whose N is the
// symbolic positions, h*w and floor((h-1)/2)+1 squared), a conv_transpose,
// and nhwc on the SIMT core (M = the images x positions).
TEST(ShapeGenericKernels, SpatialTensorCoreAndNhwcConvsOnSimEqualTheReference) {
  // Each conv reads x (one f16 rounding each, as the existing f16 checks).
  const char* f16 =
      "graph @m(%x: f16[n,16,h,w], %w: f16[32,16,3,3], %c: f16[32], %w2: f16[16,16,3,3], %wt: f16[16,16,2,2]) -> "
      "(f16[n,32,h,w], f16[n,16,h.plus1.div2,w.plus1.div2], f16[n,16,2*h,2*w]) symbols(n in [1, 3], h in [8, 24], "
      "w in [8, 24]) {\n"
      "  %a = conv(%x, %w, %c) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]} : f16[n,32,h,w]\n"
      "  %r = relu(%a) : f16[n,32,h,w]\n"
      "  %b = conv(%x, %w2) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[2,2]} : "
      "f16[n,16,h.plus1.div2,w.plus1.div2]\n"
      "  %t = conv_transpose(%x, %wt) {dilations=[1,1], group=1, pads=[0,0,0,0], strides=[2,2]} : "
      "f16[n,16,2*h,2*w]\n"
      "  return %r, %b, %t\n"
      "}\n";
  const plan::Profile profile = {{{"x", {1, 16, 8, 8}, {3, 16, 24, 24}, {3, 16, 24, 24}}}};
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(f16, arch);
    const plan::Plan p = plan_for(*g, arch, profile);
    expect_all_generic(p, arch);
    // The convs channels-last (the layout pass), the conv_transpose channels-first: all on tensor cores.
    EXPECT_EQ(count_kernels(p, "kiln_conv_nhwc_mma_"), 2) << arch;
    EXPECT_EQ(count_kernels(p, "kiln_conv_transpose_mma_"), 1) << arch;
    if (arch == "sm_90")
      for (const SymbolBindings& s : kShapes) expect_sim_equals_reference(p, *g, s, {2.5e-3, 1e-3});
  }
  const char* nhwc =
      "graph @m(%x: f32[n,h,w,4]{nhwc}, %w: f32[6,3,3,4]{nhwc}, %c: f32[6]) -> (f32[n,h.plus1.div2,w.plus1.div2,6]{nhwc}) "
      "symbols(n in [1, 3], h in [8, 24], w in [8, 24]) {\n"
      "  %y = conv(%x, %w, %c) {dilations=[1,1], group=1, layout=\"nhwc\", pads=[1,1,1,1], strides=[2,2]} : "
      "f32[n,h.plus1.div2,w.plus1.div2,6]{nhwc}\n"
      "  return %y\n"
      "}\n";
  auto g = compiled(nhwc, "sm_90");
  const plan::Plan p = plan_for(*g, "sm_90", {{{"x", {1, 8, 8, 4}, {3, 24, 24, 4}, {3, 24, 24, 4}}}});
  expect_all_generic(p, "sm_90");
  for (const SymbolBindings& s : kShapes) expect_sim_equals_reference(p, *g, s, {1e-5, 1e-4});
}

}  // namespace
}  // namespace kiln
