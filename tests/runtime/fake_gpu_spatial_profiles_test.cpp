// A CNN with a symbolic batch, height and width on the runtime's GPU path
// (strict fake driver, the plan's shape-generic kernels run on the
// simulator; docs/dynamic_shapes.md, "Symbolic image sizes"): conv + relu,
// max pool, a strided conv (their sizes derived symbols of height and
// width), instance norm, resize x2, group norm and a global pool from one
// sm_90 plan at three image sizes (odd ones included), each matching the
// reference backend on the graph specialised to it, one CUDA Graph per shape;
// and the families of a fused pool over the image, a cubic resize by a
// non-integer scale, cumsum and gather_elements likewise.
#include <gtest/gtest.h>

#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/gpu_executor.h"
#include "tests/runtime/fake_gpu_util.h"

namespace kiln::fakegpu {
namespace {

using FakeGpuProfiles = FakeGpu;

constexpr const char* kSpatialCnn =
    R"(graph @m(%x: f32[n,3,h,w], %w1: f32[8,3,3,3], %b1: f32[8], %w2: f32[8,8,3,3], %s8: f32[8], %t8: f32[8])
    -> (f32[n,8,2*h.plus2.div4,2*w.plus2.div4], f32[n,8,1,1]) symbols(n in [1, 3], h in [8, 32], w in [8, 32]) {
    %c1 = conv(%x, %w1, %b1) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]} : f32[n,8,h,w]
    %r1 = relu(%c1) : f32[n,8,h,w]
    %p1 = max_pool(%r1) {dilations=[1,1], kernel_shape=[2,2], pads=[0,0,0,0], strides=[2,2]} : f32[n,8,h.div2,w.div2]
    %c2 = conv(%p1, %w2) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[2,2]} : f32[n,8,h.plus2.div4,w.plus2.div4]
    %i = instance_normalization(%c2, %s8, %t8) {epsilon=1e-05} : f32[n,8,h.plus2.div4,w.plus2.div4]
    %u = resize(%i) {mode="nearest", scales=[1.0,1.0,2.0,2.0], sizes=[n,8,2*h.plus2.div4,2*w.plus2.div4]} : f32[n,8,2*h.plus2.div4,2*w.plus2.div4]
    %g = group_normalization(%u, %s8, %t8) {epsilon=1e-05, num_groups=4} : f32[n,8,2*h.plus2.div4,2*w.plus2.div4]
    %gp = global_average_pool(%g) : f32[n,8,1,1]
    return %g, %gp
  })";

std::unique_ptr<Graph> spatial_cnn_graph() {
  auto g = parse_graph(kSpatialCnn);
  CompileOptions o;
  o.pass.target = "sm_90";
  o.symbolic = true;
  compile_graph(*g, o);
  return g;
}

TEST_F(FakeGpuProfiles, SpatialCnnPlanRunsAtThreeImageSizes) {
  std::unique_ptr<Graph> g = spatial_cnn_graph();
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {plan::Profile{{{"x", {1, 3, 8, 8}, {3, 3, 32, 32}, {3, 3, 32, 32}}}}};
  const plan::Plan p = build_plan(*g, po);
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  // Every launch is shape-generic but the layout pass's relayouts of the
  // weights, graph inputs of one static shape (transposes).
  for (const plan::Kernel& k : p.kernels)
    if (k.source.find("kiln_syms ks") == std::string::npos)
      EXPECT_EQ(k.name.find("kiln_inj_transpose"), 0u) << k.name << " is not shape-generic";
  EXPECT_FALSE(p.generic_launches.empty());
  std::vector<uint8_t> bytes = plan_bytes(p);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "seg.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  for (auto [n, h, w] : {std::tuple<int64_t, int64_t, int64_t>{1, 8, 8}, {2, 19, 13}, {3, 32, 27}}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"n", n}, {"h", h}, {"w", w}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(h));
    for (const Value* v : at->inputs()) ctx.bind_input(v->name(), feed.at(v->name()).raw(), v->type(), false);
    const std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
    std::vector<Tensor> outs;
    for (size_t k = 0; k < at->outputs().size(); ++k) {
      const Value* o = at->outputs()[k];
      outs.emplace_back(o->type());
      EXPECT_EQ(ctx.output_shape(o->name()), o->shape()) << o->name();
      ctx.bind_output(o->name(), outs.back().raw(), o->type(), false);
    }
    EXPECT_EQ(outs[0].shape(), (Shape{n, 8, 2 * ((h + 2) / 4), 2 * ((w + 2) / 4)}));
    ctx.run();
    for (size_t k = 0; k < outs.size(); ++k)
      EXPECT_EQ(compare_tensors(outs[k], want[k], {1e-4, 1e-4}), "") << "shape " << n << "x" << h << "x" << w;
  }
  EXPECT_EQ(ctx.gpu_context()->graph_cache_stats().captures, 3u);
  // A height outside the profile: the runtime's error, never a run.
  EXPECT_THROW(ctx.set_input_shape("x", {1, 3, 33, 8}), Error);
}

// The families of dyn9 on the GPU path: a pool with a per-channel prologue
// over the symbolic image (one fused kernel), a cubic resize by 1.5 x 0.75
// (sizes over derived symbols), a cumsum along a symbolic axis and a
// gather_elements at symbolic positions (RoBERTa's position and token type
// ids), from one sm_90 plan at three shapes, one CUDA Graph per shape.
constexpr const char* kProfileFamilies =
    R"(graph @m(%x: f32[n,4,h,w], %c: f32[4,1,1], %ids: i64[n,h], %buf: f32[n,64])
    -> (f32[n,4,h.div2,w.div2], f32[n,4,h+h.div2,w.times3.div4], i64[n,h], f32[n,h])
    symbols(n in [1, 3], h in [4, 32], w in [4, 32]) {
    %a = add(%x, %c) : f32[n,4,h,w]
    %r = relu(%a) : f32[n,4,h,w]
    %p = max_pool(%r) {dilations=[1,1], kernel_shape=[2,2], pads=[0,0,0,0], strides=[2,2]} : f32[n,4,h.div2,w.div2]
    %u = resize(%x) {mode="cubic", scales=[1.0,1.0,1.5,0.75], sizes=[n,4,h+h.div2,w.times3.div4]} : f32[n,4,h+h.div2,w.times3.div4]
    %cs = cumsum(%ids) {axis=1} : i64[n,h]
    %ge = gather_elements(%buf, %ids) {axis=1} : f32[n,h]
    return %p, %u, %cs, %ge
  })";

TEST_F(FakeGpuProfiles, FusedPoolCubicResizeCumsumAndGatherElementsRunAtThreeShapes) {
  auto g = parse_graph(kProfileFamilies);
  CompileOptions o;
  o.pass.target = "sm_90";
  o.symbolic = true;
  compile_graph(*g, o);
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {plan::Profile{{{"x", {1, 4, 4, 4}, {3, 4, 32, 32}, {3, 4, 32, 32}},
                                {"ids", {1, 4}, {3, 32}, {3, 32}},
                                {"buf", {1, 64}, {3, 64}, {3, 64}}}}};
  const plan::Plan p = build_plan(*g, po);
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  EXPECT_EQ(p.steps.size(), 4u) << "the pool's prologue is not fused";
  EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << "every launch is shape-generic";
  std::vector<uint8_t> bytes = plan_bytes(p);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "families.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  for (auto [n, h, w] : {std::tuple<int64_t, int64_t, int64_t>{1, 4, 5}, {2, 19, 13}, {3, 32, 27}}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"n", n}, {"h", h}, {"w", w}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(h));
    for (const Value* v : at->inputs()) ctx.bind_input(v->name(), feed.at(v->name()).raw(), v->type(), false);
    const std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
    std::vector<Tensor> outs;
    for (size_t k = 0; k < at->outputs().size(); ++k) {
      const Value* out = at->outputs()[k];
      outs.emplace_back(out->type());
      EXPECT_EQ(ctx.output_shape(out->name()), out->shape()) << out->name();
      ctx.bind_output(out->name(), outs.back().raw(), out->type(), false);
    }
    EXPECT_EQ(outs[1].shape(), (Shape{n, 4, h + h / 2, 3 * w / 4}));
    ctx.run();
    for (size_t k = 0; k < outs.size(); ++k)
      EXPECT_EQ(compare_tensors(outs[k], want[k], {1e-5, 1e-5}), "")
          << "output " << k << " at " << n << "x" << h << "x" << w;
  }
  EXPECT_EQ(ctx.gpu_context()->graph_cache_stats().captures, 3u);
}

}  // namespace
}  // namespace kiln::fakegpu
