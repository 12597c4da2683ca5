// A plan with a shape profile on the runtime's GPU path (strict fake driver,
// the plan's shape-generic kernels -- pointwise and a softmax row kernel --
// run on the simulator): one plan compiled
// for sm_90 runs at several shapes, each matching the reference backend on
// the graph specialised to that shape; each slot captures one CUDA Graph per
// distinct shape on first use, replays it on a repeat, and keeps at most
// GpuContext::kMaxCachedGraphs (the least recently used destroyed first).
#include <gtest/gtest.h>

#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/gpu_executor.h"
#include "tests/runtime/fake_gpu_util.h"

namespace kiln::fakegpu {
namespace {

using FakeGpuProfiles = FakeGpu;

// One synchronous run at batch `n`; the output and what the reference gives.
std::pair<Tensor, Tensor> run_at(rt::Context& ctx, const Graph& g, int64_t n) {
  std::unique_ptr<Graph> at = specialize_graph(g, {{"batch", n}}, op_registry());
  const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(100 + n));
  for (const Value* v : at->inputs()) ctx.bind_input(v->name(), feed.at(v->name()).raw(), v->type(), false);
  Tensor out(at->outputs()[0]->type());
  EXPECT_EQ(ctx.output_shape("r"), (Shape{n, 3, 24}));
  ctx.bind_output("r", out.raw(), out.type(), false);
  ctx.run();
  return {out, ReferenceExecutor(*at).run(feed)[0]};
}

TEST_F(FakeGpuProfiles, OnePlanRunsAtThreeShapesWithShapeGenericKernels) {
  const plan::Plan& p = plans().at("profile_pointwise");
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  ASSERT_FALSE(p.generic_launches.empty()) << "no shape-generic launch in the plan";
  for (const plan::Kernel& k : p.kernels) EXPECT_NE(k.source.find("kiln_syms ks"), std::string::npos) << k.name;
  std::vector<uint8_t> bytes = plan_for("profile_pointwise");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "profile.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  std::unique_ptr<Graph> g = profile_pointwise_graph();
  for (int64_t n : {1, 5, 16}) {
    auto [got, want] = run_at(ctx, *g, n);
    EXPECT_EQ(compare_tensors(got, want, {1e-5, 1e-4}), "") << "batch " << n;
  }
  // Outside the profile: the runtime's error, never a run.
  EXPECT_THROW(ctx.set_input_shape("x", {17, 3, 24}), Error);
}

TEST_F(FakeGpuProfiles, GraphsAreCapturedPerShapeReusedAndEvictedAtTheBound) {
  std::vector<uint8_t> bytes = plan_for("profile_pointwise");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "profile.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  std::unique_ptr<Graph> g = profile_pointwise_graph();
  const rt::GpuContext* gpu = ctx.gpu_context();
  ASSERT_NE(gpu, nullptr);
  const size_t steps = plans().at("profile_pointwise").steps.size();
  auto captured_launches = [&] { return static_cast<size_t>(stats()[3]); };
  const size_t before = captured_launches();
  run_at(ctx, *g, 2);
  EXPECT_EQ(gpu->graph_cache_stats().captures, 1u);
  EXPECT_EQ(captured_launches() - before, steps) << "the first run at a shape captures its launch list";
  run_at(ctx, *g, 2);
  EXPECT_EQ(gpu->graph_cache_stats().captures, 1u) << "a repeat replays the cached graph";
  EXPECT_EQ(captured_launches() - before, steps);
  run_at(ctx, *g, 3);
  EXPECT_EQ(gpu->graph_cache_stats().captures, 2u) << "a new shape captures a new graph";
  EXPECT_EQ(gpu->graph_cache_stats().cached, 2u);
  // Fill the cache to its bound with shapes 2..9, then one more evicts the
  // least recently used (2) and destroys its graph.
  const size_t bound = rt::GpuContext::kMaxCachedGraphs;
  for (int64_t n = 4; n < 2 + static_cast<int64_t>(bound); ++n) run_at(ctx, *g, n);
  EXPECT_EQ(gpu->graph_cache_stats().cached, bound);
  EXPECT_EQ(gpu->graph_cache_stats().evictions, 0u);
  run_at(ctx, *g, 3);  // now the most recently used: 2 is the least
  auto [got, want] = run_at(ctx, *g, 2 + static_cast<int64_t>(bound));
  EXPECT_EQ(compare_tensors(got, want, {1e-5, 1e-4}), "");
  EXPECT_EQ(gpu->graph_cache_stats().evictions, 1u);
  EXPECT_EQ(gpu->graph_cache_stats().cached, bound);
  const size_t captures = gpu->graph_cache_stats().captures;
  run_at(ctx, *g, 3);  // kept
  EXPECT_EQ(gpu->graph_cache_stats().captures, captures);
  run_at(ctx, *g, 2);  // evicted: captured again
  EXPECT_EQ(gpu->graph_cache_stats().captures, captures + 1);
  EXPECT_EQ(gpu->graph_cache_stats().evictions, 2u);
}

// Two submissions in flight at different shapes: each slot moves its own
// shape's bytes and replays its own shape's graph.
TEST_F(FakeGpuProfiles, PipelinedRunsAtTwoShapesEachGetTheirOwnSizes) {
  std::vector<uint8_t> bytes = plan_for("profile_pointwise");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "profile.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  std::unique_ptr<Graph> g = profile_pointwise_graph();
  std::vector<std::map<std::string, Tensor>> feeds;
  std::vector<Tensor> outs, wants;
  const int64_t batches[] = {3, 11};
  for (int64_t n : batches) {
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"batch", n}}, op_registry());
    feeds.push_back(testing::random_inputs(*at, static_cast<uint64_t>(n)));
    wants.push_back(ReferenceExecutor(*at).run(feeds.back())[0]);
    outs.emplace_back(at->outputs()[0]->type());
  }
  for (size_t k = 0; k < 2; ++k) {
    for (const auto& [name, t] : feeds[k]) ctx.bind_input(name, t.raw(), t.type(), false);
    ctx.bind_output("r", outs[k].raw(), outs[k].type(), false);
    ctx.submit();
  }
  EXPECT_EQ(ctx.in_flight(), 2u);
  ctx.wait();
  ctx.wait();
  for (size_t k = 0; k < 2; ++k)
    EXPECT_EQ(compare_tensors(outs[k], wants[k], {1e-5, 1e-4}), "") << "batch " << batches[k];
}

// Zero-copy device bindings hold the shape set when they were bound: the
// captured graph of that shape uses them in place; a new shape needs them
// bound again.
TEST_F(FakeGpuProfiles, ZeroCopyBindingsRunAtTheShapeTheyWereBoundWith) {
  std::vector<uint8_t> bytes = plan_for("profile_pointwise");
  CallerStream caller;  // the application's current context, as for its own cuMemAlloc
  auto mem_alloc = fake().sym<int (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
  auto mem_free = fake().sym<int (*)(CUdeviceptr)>("cuMemFree_v2");
  auto htod = fake().sym<int (*)(CUdeviceptr, const void*, size_t)>("cuMemcpyHtoD_v2");
  auto dtoh = fake().sym<int (*)(void*, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2");
  std::unique_ptr<Graph> g = profile_pointwise_graph();
  {
    auto e = rt::Engine::load(bytes.data(), bytes.size(), "profile.plan", rt::Backend::Gpu);
    rt::Context ctx(e);
    for (int64_t n : {4, 13}) {
      std::unique_ptr<Graph> at = specialize_graph(*g, {{"batch", n}}, op_registry());
      const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(7 * n));
      const Tensor want = ReferenceExecutor(*at).run(feed)[0];
      ctx.set_input_shape("x", {n, 3, 24});
      std::vector<CUdeviceptr> bufs;
      for (const Value* v : at->inputs()) {
        bufs.push_back(0);
        ASSERT_EQ(mem_alloc(&bufs.back(), v->type().nbytes()), 0);
        ASSERT_EQ(htod(bufs.back(), feed.at(v->name()).raw(), v->type().nbytes()), 0);
        ctx.bind_input_device(v->name(), bufs.back());
      }
      CUdeviceptr out = 0;
      ASSERT_EQ(mem_alloc(&out, want.nbytes()), 0);
      ctx.bind_output_device("r", out);
      ctx.run();
      Tensor got(want.type());
      ASSERT_EQ(dtoh(got.raw(), out, got.nbytes()), 0);
      EXPECT_EQ(compare_tensors(got, want, {1e-5, 1e-4}), "") << "batch " << n;
      // Another shape without binding again: refused, never run on the old buffers.
      ctx.set_input_shape("x", {n + 1, 3, 24});
      EXPECT_THROW(ctx.run(), Error);
      for (CUdeviceptr b : bufs) mem_free(b);
      mem_free(out);
    }
  }
}

// The dynamic-batch MLP (gemm, relu, gemm, matmul, softmax: every kernel
// shape-generic) from one sm_90 plan at three batches.
TEST_F(FakeGpuProfiles, MlpPlanRunsAtThreeBatches) {
  const plan::Plan& p = plans().at("profile_mlp");
  EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << "every launch is shape-generic";
  std::vector<uint8_t> bytes = plan_for("profile_mlp");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "mlp.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  std::unique_ptr<Graph> g = profile_mlp_graph();
  for (int64_t n : {1, 33, 64}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"batch", n}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(n));
    for (const Value* v : at->inputs()) ctx.bind_input(v->name(), feed.at(v->name()).raw(), v->type(), false);
    Tensor out(at->outputs()[0]->type());
    ctx.bind_output("y", out.raw(), out.type(), false);
    ctx.run();
    EXPECT_EQ(compare_tensors(out, ReferenceExecutor(*at).run(feed)[0], {1e-5, 1e-4}), "") << "batch " << n;
  }
}

// The dynamic-batch CNN: shape-generic convs (fused bias, folded batch norm
// and relu), pools, gemm and softmax from one plan at three batches, one
// CUDA Graph per batch.
TEST_F(FakeGpuProfiles, CnnPlanRunsAtThreeBatches) {
  const plan::Plan& p = plans().at("profile_cnn");
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  // Every launch is shape-generic but the layout pass's relayouts of the
  // weights, graph inputs of one static shape (transposes).
  for (const plan::Kernel& k : p.kernels)
    if (k.source.find("kiln_syms ks") == std::string::npos)
      EXPECT_EQ(k.name.find("kiln_inj_transpose"), 0u) << k.name << " is not shape-generic";
  EXPECT_FALSE(p.generic_launches.empty());
  std::vector<uint8_t> bytes = plan_for("profile_cnn");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "cnn.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  std::unique_ptr<Graph> g = profile_cnn_graph();
  for (int64_t n : {1, 3, 8}) {
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"batch", n}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(n));
    for (const Value* v : at->inputs()) ctx.bind_input(v->name(), feed.at(v->name()).raw(), v->type(), false);
    Tensor out(at->outputs()[0]->type());
    EXPECT_EQ(ctx.output_shape("y"), (Shape{n, 10}));
    ctx.bind_output("y", out.raw(), out.type(), false);
    ctx.run();
    EXPECT_EQ(compare_tensors(out, ReferenceExecutor(*at).run(feed)[0], {1e-5, 1e-4}), "") << "batch " << n;
  }
  EXPECT_EQ(ctx.gpu_context()->graph_cache_stats().captures, 3u);
}

}  // namespace
}  // namespace kiln::fakegpu
