// The runtime's GPU path (runtime/gpu_executor.cpp) against a fake CUDA
// driver (fake_cuda.cpp): the real code path from dlopen to cuGraphLaunch,
// with "device memory" in host memory and each launch run by the plan's
// kernel on the CPU simulator. Checks: results equal the reference backend,
// the launch list is captured once and replayed per run, CUBIN vs PTX
// selection by the device's arch, a too-old GPU falls back to the CPU path
// (or fails with KILN_BACKEND_GPU), device-pointer bindings, and every device
// allocation is freed. What it cannot check: real kernels on a real GPU.
#include "tests/runtime/fake_gpu_util.h"

namespace kiln {
namespace {

using namespace fakegpu;

TEST_F(FakeGpu, RunsTheLaunchListAsOneCapturedGraphReplayedPerRun) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  std::vector<int> before = stats();
  {
    auto e = rt::Engine::load(bytes.data(), bytes.size(), "m.plan", rt::Backend::Auto);
    ASSERT_TRUE(e->on_gpu()) << e->info();
    EXPECT_EQ(e->info().rfind("GPU sm_90 (CUBIN, ", 0), 0u) << e->info();
    EXPECT_EQ(stats()[0] - before[0], int(e->plan().kernels.size()));  // CUBIN modules
    int kernel_steps = 0;
    for (const plan::Step& s : e->plan().steps) kernel_steps += s.kind == plan::StepKind::Kernel;
    rt::Context ctx(e);
    EXPECT_EQ(stats()[3] - before[3], kernel_steps);  // captured once
    for (uint64_t seed : {3, 4, 5}) {
      auto feed = testing::random_inputs(*graph, seed);
      expect_reference(run(ctx, feed), feed);
    }
    std::vector<int> after = stats();
    EXPECT_EQ(after[2] - before[2], 3);            // one graph launch per run
    EXPECT_EQ(after[3] - before[3], kernel_steps);  // never captured again
    EXPECT_EQ(after[4], before[4]);                // no launch outside the graph
  }
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

TEST_F(FakeGpu, PtxForANewerGpuAndTheCpuPathForAnOlderOne) {
  std::vector<uint8_t> sm80 = plan_for("sm_80");
  std::vector<int> before = stats();
  auto e = rt::Engine::load(sm80.data(), sm80.size(), "m.plan", rt::Backend::Auto);  // device sm_90
  ASSERT_TRUE(e->on_gpu()) << e->info();
  EXPECT_NE(e->info().find("PTX JIT"), std::string::npos) << e->info();
  EXPECT_EQ(stats()[1] - before[1], int(e->plan().kernels.size()));
  rt::Context ctx(e);
  auto feed = testing::random_inputs(*graph, 9);
  expect_reference(run(ctx, feed), feed);

  std::vector<uint8_t> sm90 = plan_for("sm_90");
  fake().set_arch(8, 6);
  auto cpu = rt::Engine::load(sm90.data(), sm90.size(), "m.plan", rt::Backend::Auto);
  EXPECT_FALSE(cpu->on_gpu());
  EXPECT_NE(cpu->info().find("CPU reference path (m.plan: wrong GPU arch: the plan's kernels are for sm_90, this "
                             "GPU is sm_86"),
            std::string::npos)
      << cpu->info();
  try {
    rt::Engine::load(sm90.data(), sm90.size(), "m.plan", rt::Backend::Gpu);
    ADD_FAILURE() << "an sm_90 plan loaded for an sm_86 GPU";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("wrong GPU arch"), std::string::npos) << err.what();
  }
}

TEST_F(FakeGpu, CApiWithDevicePointersAndAFailedRunLeavesTheContextUsable) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK)
      << kiln_last_error();
  kiln_backend b;
  ASSERT_EQ(kiln_engine_backend(e, &b), KILN_OK);
  EXPECT_EQ(b, KILN_BACKEND_GPU);
  kiln_context* c = nullptr;
  ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << kiln_last_error();
  auto feed = testing::random_inputs(*graph, 21);
  // "Device" buffers: the fake driver's device memory is host memory.
  int64_t xs[] = {4, 37}, bs[] = {37};
  EXPECT_EQ(kiln_context_run(c), KILN_ERROR_RUNTIME);
  EXPECT_STREQ(kiln_last_error(), "input \"x\" is not bound");
  ASSERT_EQ(kiln_context_bind_input(c, "x", feed.at("x").raw(), KILN_F32, xs, 2, KILN_MEMORY_DEVICE), KILN_OK);
  ASSERT_EQ(kiln_context_bind_input(c, "b", feed.at("b").raw(), KILN_F32, bs, 1, KILN_MEMORY_HOST), KILN_OK);
  std::vector<Tensor> outs;
  for (const Value* v : graph->outputs()) outs.emplace_back(v->type());
  int n = 0;
  ASSERT_EQ(kiln_engine_num_outputs(e, &n), KILN_OK);
  for (int i = 0; i < n; ++i) {
    kiln_tensor_info info;
    ASSERT_EQ(kiln_engine_output(e, i, &info), KILN_OK);
    ASSERT_EQ(kiln_context_bind_output(c, info.name, outs[i].raw(), info.dtype, info.shape, info.rank,
                                       i % 2 ? KILN_MEMORY_DEVICE : KILN_MEMORY_HOST),
              KILN_OK)
        << kiln_last_error();
  }
  int stream_dummy = 0;
  ASSERT_EQ(kiln_context_enqueue(c, &stream_dummy), KILN_OK) << kiln_last_error();
  expect_reference(outs, feed);
  kiln_engine_destroy(e);
  kiln_context_destroy(c);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

// Conv, GEMM and pooling kernels (2-D/3-D launch shapes where the emitters
// use them) through the GPU path.
TEST_F(FakeGpu, ConvGemmAndPoolPlansEqualTheReference) {
  for (const char* m : kOnnxModels) {
    SCOPED_TRACE(m);
    auto g = compiled_onnx(m);
    std::vector<uint8_t> bytes = plan_for(m);
    auto e = rt::Engine::load(bytes.data(), bytes.size(), m, rt::Backend::Gpu);
    rt::Context ctx(e);
    auto feed = testing::random_inputs(*g, 13);
    std::vector<Tensor> got = run(ctx, feed);
    std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << i;
  }
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

}  // namespace
}  // namespace kiln
