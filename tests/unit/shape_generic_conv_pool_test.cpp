// Shape-generic conv and pool kernels (docs/dynamic_shapes.md "Shape-generic
// GPU kernels"): graphs with a symbolic batch of images compiled once into a
// GPU plan with a profile hold conv (SIMT implicit GEMM with a fused
// epilogue, depthwise, and the f16 tensor-core implicit GEMM) and pool
// (max/average/lp windows, global average/max pools, both the thread-per-plane
// and the block-per-plane form) kernels taking `kiln_syms`, compiled by NVRTC
// for sm_80 and sm_90, and run on the simulator from the plan at three
// batches equal to the reference backend on the graph specialised to each.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/plan_format.h"
#include "tests/unit/shape_generic_util.h"

namespace kiln {
namespace {

// The default pipeline less the layout pass: these check the channels-first
// kernels as the model has them (the NHWC forms the layout pass picks:
// shape_generic_spatial_test.cpp).
std::unique_ptr<Graph> compiled(const char* text, const std::string& target) {
  return testing::compile_symbolic(text, "cnn.kir", target, {"layout"});
}

plan::Plan plan_for(const Graph& g, const std::string& arch, const plan::Profile& profile) {
  return testing::profile_plan(g, arch, profile, "cnn.onnx");
}

// The error building an sm_90 plan of `text` with `profile` gives ("(no error)" if none).
std::string refusal(const char* text, const plan::Profile& profile) {
  auto g = parse_graph(text, "refused.kir");
  try {
    plan_for(*g, "sm_90", profile);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Every kernel of the plan takes kiln_syms and has a CUBIN; every launch is generic.
void expect_all_generic(const plan::Plan& p, const std::string& arch) {
  ASSERT_TRUE(p.meta.gpu_kernels) << arch << ": " << p.meta.no_gpu_reason;
  EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << arch << ": every launch is shape-generic";
  for (const plan::Kernel& k : p.kernels) {
    EXPECT_NE(k.source.find("kiln_syms ks"), std::string::npos) << k.name;
    EXPECT_FALSE(k.cubin.empty()) << k.name << " has no " << arch << " CUBIN";
  }
}

// The plan on the simulator at batch `b` against the reference on the graph specialised to b.
void expect_sim_equals_reference(const plan::Plan& p, const Graph& g, int64_t b, Tolerance tol) {
  testing::expect_plan_on_sim_equals_reference(p, g, {{"b", b}}, static_cast<uint64_t>(b), tol);
}

// A conv with a bias and a relu epilogue (one fused kernel), max pool, a
// strided conv, a depthwise conv, average and lp pools with pads, and the
// global pools: the thread-per-plane form (9 elements) and the
// block-per-plane form (a 40x40 plane).
const char* kConvPool =
    "graph @m(%x: f32[b,3,12,12], %w: f32[8,3,3,3], %c: f32[8], %w2: f32[16,8,3,3], %dw: f32[16,1,3,3], "
    "%z: f32[b,2,40,40]) -> (f32[b,16,1,1], f32[b,16,3,3], f32[b,16,1,1], f32[b,2,1,1]) symbols(b in [1, 9]) {\n"
    "  %c1 = conv(%x, %w, %c) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]} : f32[b,8,12,12]\n"
    "  %r1 = relu(%c1) : f32[b,8,12,12]\n"
    "  %p1 = max_pool(%r1) {dilations=[1,1], kernel_shape=[2,2], pads=[0,0,0,0], strides=[2,2]} : f32[b,8,6,6]\n"
    "  %c2 = conv(%p1, %w2) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[2,2]} : f32[b,16,3,3]\n"
    "  %d = conv(%c2, %dw) {dilations=[1,1], group=16, pads=[1,1,1,1], strides=[1,1]} : f32[b,16,3,3]\n"
    "  %a = average_pool(%d) {dilations=[1,1], kernel_shape=[3,3], pads=[1,1,1,1], strides=[1,1]} : f32[b,16,3,3]\n"
    "  %l = lp_pool(%a) {dilations=[1,1], kernel_shape=[2,2], p=2, pads=[0,0,1,1], strides=[1,1]} : f32[b,16,3,3]\n"
    "  %g = global_average_pool(%a) : f32[b,16,1,1]\n"
    "  %gm = global_max_pool(%d) : f32[b,16,1,1]\n"
    "  %gz = global_average_pool(%z) : f32[b,2,1,1]\n"
    "  return %g, %l, %gm, %gz\n"
    "}\n";

plan::Profile conv_pool_profile() {
  return {
      {{"x", {1, 3, 12, 12}, {9, 3, 12, 12}, {9, 3, 12, 12}}, {"z", {1, 2, 40, 40}, {9, 2, 40, 40}, {9, 2, 40, 40}}}};
}

TEST(ShapeGenericKernels, ConvAndPoolPlansCompileForSm80AndSm90) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(kConvPool, arch);
    const plan::Plan p = plan_for(*g, arch, conv_pool_profile());
    expect_all_generic(p, arch);
    // The conv's grid is its row tiles x column tiles x the images (z = b);
    // the step holds it at b = 9.
    bool conv_grid = false;
    for (const plan::GenericLaunch& gl : p.generic_launches) {
      EXPECT_EQ(p.steps[gl.step].grid.x, plan::eval_grid_axis(gl.grid[0], {{"b", 9}}));
      EXPECT_EQ(p.steps[gl.step].grid.z, plan::eval_grid_axis(gl.grid[2], {{"b", 9}}));
      conv_grid = conv_grid || (gl.grid[2].per_block == 1 && plan::eval_grid_axis(gl.grid[2], {{"b", 9}}) == 9);
    }
    EXPECT_TRUE(conv_grid) << arch << ": no grid of tiles x batch";
  }
}

TEST(ShapeGenericKernels, ConvAndPoolOnSimAtThreeShapesEqualTheReference) {
  auto g = compiled(kConvPool, "sm_90");
  const plan::Plan p = plan_for(*g, "sm_90", conv_pool_profile());
  // Four convs and pools chained over inputs in [-2, 2]: sums that cancel, so 1e-4 absolute.
  for (int64_t b : {1, 4, 9}) expect_sim_equals_reference(p, *g, b, {1e-4, 1e-4});
}

// A conv in layout nhwc (as the layout pass tags them): one GEMM whose M is
// the images x output positions, symbolic through the batch (SIMT core).
TEST(ShapeGenericKernels, NhwcConvWithASymbolicMOnSimAtThreeShapesEqualsTheReference) {
  const char* text =
      "graph @m(%x: f32[b,8,8,4]{nhwc}, %w: f32[6,3,3,4]{nhwc}, %c: f32[6]) -> (f32[b,8,8,6]{nhwc}) "
      "symbols(b in [1, 9]) {\n"
      "  %y = conv(%x, %w, %c) {dilations=[1,1], group=1, layout=\"nhwc\", pads=[1,1,1,1], strides=[1,1]} : "
      "f32[b,8,8,6]{nhwc}\n"
      "  return %y\n"
      "}\n";
  const plan::Profile profile = {{{"x", {1, 8, 8, 4}, {9, 8, 8, 4}, {9, 8, 8, 4}}}};
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(text, arch);
    const plan::Plan p = plan_for(*g, arch, profile);
    expect_all_generic(p, arch);
    ASSERT_EQ(p.generic_launches.size(), 1u) << arch;
    EXPECT_NE(p.kernels.at(0).name.find("conv_nhwc"), std::string::npos) << p.kernels[0].name;
    // Row tiles counted from M = 64 * b.
    EXPECT_EQ(p.generic_launches[0].grid[0].items, (DimPoly{{{"b"}, 64}}));
    if (arch != "sm_90") continue;
    for (int64_t b : {1, 4, 9}) expect_sim_equals_reference(p, *g, b, {1e-5, 1e-4});
  }
  // On tensor cores (f16): the mma.sync GEMM with a symbolic M (the images x positions).
  const char* f16 =
      "graph @m(%x: f16[b,8,8,16]{nhwc}, %w: f16[16,3,3,16]{nhwc}) -> (f16[b,8,8,16]{nhwc}) symbols(b in [1, 9]) {\n"
      "  %y = conv(%x, %w) {dilations=[1,1], group=1, layout=\"nhwc\", pads=[1,1,1,1], strides=[1,1]} : "
      "f16[b,8,8,16]{nhwc}\n"
      "  return %y\n"
      "}\n";
  auto g = compiled(f16, "sm_90");
  const plan::Plan p = plan_for(*g, "sm_90", {{{"x", {1, 8, 8, 16}, {9, 8, 8, 16}, {9, 8, 8, 16}}}});
  expect_all_generic(p, "sm_90");
  EXPECT_NE(p.kernels.at(0).name.find("conv_nhwc_mma"), std::string::npos) << p.kernels[0].name;
  for (int64_t b : {1, 4, 9}) expect_sim_equals_reference(p, *g, b, {2.5e-3, 1e-3});
}

// Pools with a fused pointwise prologue (a per-channel shift broadcast into
// the batch, relu) and epilogue (a scale), over a symbolic batch.
TEST(ShapeGenericKernels, FusedPoolsOnSimAtThreeShapesEqualTheReference) {
  const char* text =
      "graph @m(%x: f32[b,4,8,8], %c: f32[4,1,1]) -> (f32[b,4,4,4], f32[b,4,1,1]) symbols(b in [1, 9]) {\n"
      "  %a = add(%x, %c) : f32[b,4,8,8]\n"
      "  %r = relu(%a) : f32[b,4,8,8]\n"
      "  %p = max_pool(%r) {dilations=[1,1], kernel_shape=[2,2], pads=[0,0,0,0], strides=[2,2]} : f32[b,4,4,4]\n"
      "  %q = mul(%x, %x) : f32[b,4,8,8]\n"
      "  %g = global_average_pool(%q) : f32[b,4,1,1]\n"
      "  %k = const f32[] dense<[0.5]>\n"
      "  %s = mul(%g, %k) : f32[b,4,1,1]\n"
      "  return %p, %s\n"
      "}\n";
  const plan::Profile profile = {{{"x", {1, 4, 8, 8}, {9, 4, 8, 8}, {9, 4, 8, 8}}}};
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(text, arch);
    int fused = 0;
    for (const auto& n : g->nodes()) fused += n->op() == "fused" && n->attrs().get_string("kind", "") == "reduction";
    EXPECT_EQ(fused, 2) << arch << ": the prologues and the epilogue are not fused into the pools";
    const plan::Plan p = plan_for(*g, arch, profile);
    expect_all_generic(p, arch);
    EXPECT_EQ(p.steps.size(), 2u) << arch;
    if (arch != "sm_90") continue;
    for (int64_t b : {1, 4, 9}) expect_sim_equals_reference(p, *g, b, {1e-5, 1e-4});
  }
}

// The f16 conv runs on tensor cores (mma.sync implicit GEMM, NCHW: a GEMM per
// image and group, the images the symbolic batch), with a residual add and a
// relu in its epilogue, stored 8 columns at a time (the residual read as
// vectors); then a max pool in f16.
const char* kConvF16 =
    "graph @m(%x: f16[b,16,8,16], %w: f16[32,16,3,3], %c: f16[32], %r: f16[b,32,8,16]) -> (f16[b,32,4,8]) "
    "symbols(b in [1, 6]) {\n"
    "  %c1 = conv(%x, %w, %c) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]} : f16[b,32,8,16]\n"
    "  %s = add(%c1, %r) : f16[b,32,8,16]\n"
    "  %a = relu(%s) : f16[b,32,8,16]\n"
    "  %p = max_pool(%a) {dilations=[1,1], kernel_shape=[2,2], pads=[0,0,0,0], strides=[2,2]} : f16[b,32,4,8]\n"
    "  return %p\n"
    "}\n";

plan::Profile conv_f16_profile() {
  return {
      {{"x", {1, 16, 8, 16}, {6, 16, 8, 16}, {6, 16, 8, 16}}, {"r", {1, 32, 8, 16}, {6, 32, 8, 16}, {6, 32, 8, 16}}}};
}

TEST(ShapeGenericKernels, TensorCoreConvOnSimAtThreeShapesEqualsTheReference) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(kConvF16, arch);
    // The generic kernels alone (launch variants are checked below).
    PlanBuildOptions po{arch, "fp32", {}};
    po.profiles = {conv_f16_profile()};
    po.source_name = "cnn.onnx";
    po.opt_variants = "none";
    const plan::Plan p = build_plan(*g, po);
    expect_all_generic(p, arch);
    bool mma = false;
    for (const plan::Kernel& k : p.kernels) mma = mma || k.name.find("_mma_") != std::string::npos;
    EXPECT_TRUE(mma) << arch << ": the f16 conv is not on tensor cores";
    bool vector_store = false;
    for (const plan::Kernel& k : p.kernels)
      vector_store = vector_store || k.source.find("kiln_vec<") != std::string::npos;
    EXPECT_TRUE(vector_store) << arch << ": the conv's epilogue is not vectorized";
    if (arch != "sm_90") continue;
    // f16 results: the reference rounds the f32 sum once, the kernel too, in another order.
    for (int64_t b : {1, 3, 6}) expect_sim_equals_reference(p, *g, b, {2.5e-3, 1e-3});
    // The specialised conv at b=6, the generic one elsewhere. Forced ("all"):
    // whether it pays is the model's call, and at this size the generic
    // kernel already gets the specialised one's tile (within 2% by the model).
    // The pool's variant comes too; the conv's must be on tensor cores.
    PlanBuildOptions vo = po;
    vo.opt_variants = "all";
    const plan::Plan with_variant = build_plan(*g, vo);
    bool mma_variant = false;
    for (const plan::LaunchVariant& v : with_variant.launch_variants)
      for (const plan::Step& s : v.steps)
        mma_variant = mma_variant || with_variant.kernels.at(s.kernel).name.find("_mma_") != std::string::npos;
    EXPECT_TRUE(mma_variant) << "no tensor-core conv among the " << with_variant.launch_variants.size()
                             << " launch variants";
    for (int64_t b : {3, 6}) expect_sim_equals_reference(with_variant, *g, b, {2.5e-3, 1e-3});
  }
}

// reduce_* over static axes with a symbolic outer extent: the batch, or the
// batch*seq rows of a [b, s, 40] tensor; kept inner dims (reduce over
// channels) and non-contiguous axes too.
TEST(ShapeGenericKernels, ReductionsOverStaticAxesOnSimAtThreeShapesEqualTheReference) {
  const char* text =
      "graph @m(%x: f32[b,6,5,7], %y: f32[b,s,40]) -> (f32[b,6,1,1], f32[b,5,7], f32[b,s], f32[b,1,5,1]) "
      "symbols(b in [1, 9], s in [1, 20]) {\n"
      "  %r1 = reduce_sum(%x) {axes=[2,3], keepdims=1} : f32[b,6,1,1]\n"
      "  %r2 = reduce_max(%x) {axes=[1], keepdims=0} : f32[b,5,7]\n"
      "  %r3 = reduce_log_sum_exp(%y) {axes=[2], keepdims=0} : f32[b,s]\n"
      "  %r4 = reduce_mean(%x) {axes=[1,3], keepdims=1} : f32[b,1,5,1]\n"
      "  return %r1, %r2, %r3, %r4\n"
      "}\n";
  const plan::Profile profile = {
      {{"x", {1, 6, 5, 7}, {9, 6, 5, 7}, {9, 6, 5, 7}}, {"y", {1, 1, 40}, {9, 20, 40}, {9, 20, 40}}}};
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(text, arch);
    const plan::Plan p = plan_for(*g, arch, profile);
    expect_all_generic(p, arch);
    EXPECT_EQ(p.generic_launches.size(), 4u) << arch;
    if (arch != "sm_90") continue;
    for (auto [b, sq] : {std::pair<int64_t, int64_t>{1, 1}, {4, 13}, {9, 20}}) {
      std::unique_ptr<Graph> at = specialize_graph(*g, {{"b", b}, {"s", sq}}, op_registry());
      const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(b * 100 + sq));
      std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
      std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << "b=" << b << " s=" << sq << " output " << i;
    }
  }
  // Over the symbolic axis the strides and the reduced count would be symbolic: refused by name.
  const std::string why = refusal(
      "graph @m(%z: f32[b,6]) -> (f32[6]) symbols(b in [1, 9]) {\n"
      "  %r = reduce_max(%z) {axes=[0], keepdims=0} : f32[6]\n"
      "  return %r\n"
      "}\n",
      {{{"z", {1, 6}, {9, 6}, {9, 6}}}});
  EXPECT_NE(why.find("node (reduce_max) producing %r: target sm_90 needs a shape-generic GPU kernel for every node "
                     "of a plan with shape profiles (b in [1, 9]), and kiln has none yet for reduce_max (its kernel "
                     "family (reduction) has no shape-generic kernel for it yet)"),
            std::string::npos)
      << why;
}

// Fused reductions over a symbolic batch: a pointwise prologue (with a
// static per-column operand broadcast into it) and epilogue around a
// reduce_sum, and a prologue before a softmax; each group one kernel.
TEST(ShapeGenericKernels, FusedReductionsOnSimAtThreeShapesEqualTheReference) {
  const char* text =
      "graph @m(%x: f32[b,6,40], %c: f32[40]) -> (f32[b,6], f32[b,6,40]) symbols(b in [1, 9]) {\n"
      "  %a = add(%x, %c) : f32[b,6,40]\n"
      "  %e = tanh(%a) : f32[b,6,40]\n"
      "  %r = reduce_sum(%e) {axes=[2], keepdims=0} : f32[b,6]\n"
      "  %k = const f32[] dense<[0.25]>\n"
      "  %m = mul(%r, %k) : f32[b,6]\n"
      "  %q = mul(%x, %x) : f32[b,6,40]\n"
      "  %s = softmax(%q) {axis=-1} : f32[b,6,40]\n"
      "  return %m, %s\n"
      "}\n";
  const plan::Profile profile = {{{"x", {1, 6, 40}, {9, 6, 40}, {9, 6, 40}}}};
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(text, arch);
    int fused = 0;
    for (const auto& n : g->nodes()) fused += n->op() == "fused" && n->attrs().get_string("kind", "") == "reduction";
    EXPECT_EQ(fused, 2) << arch << ": the prologues and the epilogue are not fused into the reductions";
    const plan::Plan p = plan_for(*g, arch, profile);
    expect_all_generic(p, arch);
    EXPECT_EQ(p.steps.size(), 2u) << arch;
    if (arch != "sm_90") continue;
    for (int64_t b : {1, 4, 9}) expect_sim_equals_reference(p, *g, b, {1e-5, 1e-4});
  }
}

// A batch_normalization that folding leaves (on a graph input, its
// statistics inputs too): one thread per element over a symbolic batch.
TEST(ShapeGenericKernels, BatchNormOnSimAtThreeShapesEqualsTheReference) {
  const char* text =
      "graph @m(%x: f32[b,4,5,6], %s: f32[4], %t: f32[4], %mu: f32[4], %v: f32[4]) -> (f32[b,4,5,6]) "
      "symbols(b in [1, 9]) {\n"
      "  %y = batch_normalization(%x, %s, %t, %mu, %v) {epsilon=1e-05} : f32[b,4,5,6]\n"
      "  return %y\n"
      "}\n";
  const plan::Profile profile = {{{"x", {1, 4, 5, 6}, {9, 4, 5, 6}, {9, 4, 5, 6}}}};
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(text, arch);
    const plan::Plan p = plan_for(*g, arch, profile);
    expect_all_generic(p, arch);
    ASSERT_EQ(p.generic_launches.size(), 1u) << arch;
    EXPECT_NE(p.kernels.at(0).name.find("batch_normalization"), std::string::npos) << p.kernels[0].name;
    if (arch != "sm_90") continue;
    for (int64_t b : {1, 4, 9}) {
      std::unique_ptr<Graph> at = specialize_graph(*g, {{"b", b}}, op_registry());
      std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(b));
      Tensor& var = feed.at("v");  // variances must be positive
      for (int64_t i = 0; i < var.numel(); ++i) var.set_double(i, 0.5 + std::abs(var.get_double(i)));
      std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
      std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
      EXPECT_EQ(compare_tensors(got[0], want[0], {1e-5, 1e-4}), "") << "b=" << b;
    }
  }
}

}  // namespace
}  // namespace kiln
