// The runtime's GPU path under failure, threads and repetition, against the
// fake CUDA driver (tests/runtime/fake_cuda/; kernels run on the CPU simulator):
// - out of device memory (weights, then the activation arena), a failing
//   graph launch, a failing wait for the run's events and a launch that fails
//   while the context captures its graph (injected, or over the device's
//   limits): each is a kiln status with the CUDA error's text through the C
//   API, the capture is ended, nothing leaks, and the next context or run on
//   the same engine succeeds (sticky errors, after which nothing succeeds,
//   are FakeGpuSticky's in fake_gpu_sticky_test.cpp);
// - enqueue on the caller's stream ordered against the context's streams,
//   the device chosen by the caller, a destructor whose driver calls fail;
// - one engine shared by 8 threads, each with its own context (stream, arena,
//   captured graph), for KILN_THREAD_TEST_SECONDS (default 30): every output
//   equal to the single-threaded result bit for bit;
// - KILN_LEAK_TEST_CYCLES (default 1000) load/run/destroy cycles: device
//   memory back to all free (cuMemGetInfo), no live allocation, host RSS flat.
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "tests/runtime/fake_gpu_util.h"

namespace kiln {
namespace {

using namespace fakegpu;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * size_t(sysconf(_SC_PAGESIZE));
}

// The fake driver back to normal after each test.
class FakeGpuFailures : public FakeGpu {
 protected:
  void TearDown() override {
    FakeGpu::TearDown();
    fake().set_memory_limit(SIZE_MAX);
    for (const char* f : {"cuMemAlloc_v2", "cuLaunchKernel", "cuGraphLaunch", "cuStreamSynchronize",
                          "cuEventSynchronize", "cuCtxPushCurrent_v2", "cuMemcpyHtoDAsync", "cuMemHostAlloc"})
      fake().fail(f, 0, 0);
    launches_to_fail = 0;
    fake().set_device_count(1);
  }
  // Binds `feed` and fresh outputs through the C API and runs.
  kiln_status run_c(kiln_context* c, const std::map<std::string, Tensor>& feed, std::vector<Tensor>& outs) {
    outs.clear();
    for (const Value* v : graph->inputs()) {
      const TensorType& t = v->type();
      kiln_status s = kiln_context_bind_input(c, v->name().c_str(), feed.at(v->name()).raw(), kiln_dtype(t.dtype),
                                              t.shape.data(), t.rank(), KILN_MEMORY_HOST);
      if (s != KILN_OK) return s;
    }
    for (const Value* v : graph->outputs()) outs.emplace_back(v->type());
    for (size_t i = 0; i < outs.size(); ++i) {
      const TensorType& t = outs[i].type();
      std::string name = graph->outputs()[i]->name();
      kiln_status s = kiln_context_bind_output(c, name.c_str(), outs[i].raw(), kiln_dtype(t.dtype), t.shape.data(),
                                               t.rank(), KILN_MEMORY_HOST);
      if (s != KILN_OK) return s;
    }
    return kiln_context_run(c);
  }
  std::string last_error() const { return kiln_last_error(); }
};

using FakeGpuSafety = FakeGpuFailures;
using FakeGpuThreads = FakeGpuFailures;
using FakeGpuLeaks = FakeGpuFailures;

TEST_F(FakeGpuSafety, OutOfDeviceMemoryIsAStatusWithTextAndTheEngineRecovers) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  const size_t weight_bytes = plans().at("sm_90").weight_data.size();
  ASSERT_GT(weight_bytes, 0u);
  // Not even the weights fit: the GPU engine cannot be made.
  fake().set_memory_limit(weight_bytes - 1);
  kiln_engine* e = nullptr;
  EXPECT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_ERROR_RUNTIME);
  EXPECT_EQ(last_error(), "plan in memory: CUDA: allocating the weights: out of memory (error 2)");
  EXPECT_EQ(e, nullptr);
  EXPECT_EQ(stats()[5], 0) << "a failed engine left device allocations";
  // Auto falls back to the CPU path and says why.
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_AUTO, &e), KILN_OK);
  const char* info = nullptr;
  ASSERT_EQ(kiln_engine_info(e, &info), KILN_OK);
  EXPECT_NE(std::string(info).find("CPU reference path (CUDA: allocating the weights: out of memory"),
            std::string::npos)
      << info;
  kiln_engine_destroy(e);

  // The weights fit, the context's arena does not.
  fake().set_memory_limit(weight_bytes);
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK) << last_error();
  kiln_context* c = nullptr;
  EXPECT_EQ(kiln_context_create(e, &c), KILN_ERROR_RUNTIME);
  EXPECT_EQ(c, nullptr);
  EXPECT_NE(last_error().find("CUDA: allocating the activation arena: out of memory (error 2)"), std::string::npos)
      << last_error();
  EXPECT_EQ(stats()[5], 1) << "the failed context kept device memory (only the weights should be live)";
  // Memory freed elsewhere: the same engine makes a context that runs.
  fake().set_memory_limit(SIZE_MAX);
  ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << last_error();
  auto feed = testing::random_inputs(*graph, 31);
  std::vector<Tensor> outs;
  ASSERT_EQ(run_c(c, feed, outs), KILN_OK) << last_error();
  expect_reference(outs, feed);
  kiln_context_destroy(c);
  kiln_engine_destroy(e);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

TEST_F(FakeGpuSafety, FailedLaunchSyncOrCaptureIsAStatusAndTheNextRunSucceeds) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK) << last_error();
  kiln_context* c = nullptr;
  ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << last_error();
  const int live = stats()[5];
  auto feed = testing::random_inputs(*graph, 41);
  std::vector<Tensor> outs;

  // The graph launch fails (an error that leaves the CUDA context usable).
  fake().fail("cuGraphLaunch", 0, 2);
  EXPECT_EQ(run_c(c, feed, outs), KILN_ERROR_RUNTIME);
  EXPECT_EQ(last_error(), "CUDA: cuGraphLaunch: out of memory (error 2)");
  ASSERT_EQ(run_c(c, feed, outs), KILN_OK) << last_error();
  expect_reference(outs, feed);

  // The driver reports an error when the run is waited for.
  fake().fail("cuEventSynchronize", 0, 2);
  EXPECT_EQ(run_c(c, feed, outs), KILN_ERROR_RUNTIME);
  EXPECT_EQ(last_error(), "CUDA: waiting for an output: out of memory (error 2)");
  auto feed2 = testing::random_inputs(*graph, 42);
  ASSERT_EQ(run_c(c, feed2, outs), KILN_OK) << last_error();
  expect_reference(outs, feed2);

  // The second launch fails while a new context captures its graph: the
  // capture ended, no context, its memory freed, and the next context works.
  fake().fail("cuLaunchKernel", 1, 1);
  kiln_context* c2 = nullptr;
  EXPECT_EQ(kiln_context_create(e, &c2), KILN_ERROR_RUNTIME);
  EXPECT_EQ(c2, nullptr);
  EXPECT_EQ(last_error().rfind("CUDA: capturing kernel kiln_", 0), 0u) << last_error();
  EXPECT_NE(last_error().find(": invalid argument (error 1)"), std::string::npos) << last_error();
  EXPECT_EQ(stats()[9], 0) << "the failed capture was not ended";
  EXPECT_EQ(stats()[5], live) << "the failed context kept device memory";
  ASSERT_EQ(kiln_context_create(e, &c2), KILN_OK) << last_error();
  ASSERT_EQ(run_c(c2, feed, outs), KILN_OK) << last_error();
  expect_reference(outs, feed);

  // An out-of-memory while the engine loads, after other allocations: all freed.
  kiln_engine* e2 = nullptr;
  fake().fail("cuMemAlloc_v2", 0, 2);
  EXPECT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e2), KILN_ERROR_RUNTIME);
  EXPECT_NE(last_error().find("out of memory (error 2)"), std::string::npos) << last_error();
  kiln_context_destroy(c2);
  kiln_context_destroy(c);
  kiln_engine_destroy(e);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

// A plan whose launch breaks the device's limits (2048 threads per block)
// fails while the context captures its graph: the capture is ended before
// the cleanup frees memory (the driver refuses cuMemFree/cuMemFreeHost while
// a thread captures, so without that every buffer leaked and the stream
// stayed capturing), and nothing of the context is left.
TEST_F(FakeGpuSafety, ALaunchOverTheDeviceLimitsFailsTheCaptureAndLeavesNothing) {
  plan_for("sm_90");
  plan::Plan p = plans().at("sm_90");
  size_t k = 0;
  while (p.steps[k].kind != plan::StepKind::Kernel) ++k;
  p.steps[k].block = {2048, 1, 1};
  std::vector<uint8_t> bytes = plan::serialize(p);
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK) << last_error();
  const int live = stats()[5];
  kiln_context* c = nullptr;
  EXPECT_EQ(kiln_context_create(e, &c), KILN_ERROR_RUNTIME);
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(last_error(),
            "CUDA: capturing kernel " + p.kernels[p.steps[k].kernel].name + ": invalid argument (error 1)");
  EXPECT_EQ(stats()[9], 0) << "the compute stream was left capturing";
  EXPECT_EQ(stats()[5], live) << "the failed context kept device memory";
  EXPECT_EQ(stats()[6], 0) << "the failed context kept pinned memory";
  kiln_engine_destroy(e);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

// enqueue(stream) replays slot 0's graph on the caller's stream; a run right
// after it uploads into the same input buffers and runs on the same arena on
// the context's streams. Without an event ordering them, the fake driver
// sees the run's uploads overwrite inputs the caller's stream may still read
// (a race, FakeGpu::TearDown) and the outputs may be the second run's.
TEST_F(FakeGpuSafety, EnqueueIsOrderedAgainstTheContextsOwnStreams) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK) << last_error();
  kiln_context* c = nullptr;
  ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << last_error();
  CallerStream caller;
  auto alloc = fake().sym<int (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
  auto to_host = fake().sym<int (*)(void*, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2");
  auto free_dev = fake().sym<int (*)(CUdeviceptr)>("cuMemFree_v2");
  auto feed = testing::random_inputs(*graph, 71), feed2 = testing::random_inputs(*graph, 72);
  // Inputs from host memory (taken at the call), outputs into device
  // buffers: nothing in enqueue waits for the caller's stream.
  std::vector<CUdeviceptr> dev_out;
  for (const Value* v : graph->inputs()) {
    const TensorType& t = v->type();
    ASSERT_EQ(kiln_context_bind_input(c, v->name().c_str(), feed.at(v->name()).raw(), kiln_dtype(t.dtype),
                                      t.shape.data(), t.rank(), KILN_MEMORY_HOST),
              KILN_OK);
  }
  for (const Value* v : graph->outputs()) {
    const TensorType& t = v->type();
    dev_out.push_back(0);
    ASSERT_EQ(alloc(&dev_out.back(), t.nbytes()), 0);
    ASSERT_EQ(kiln_context_bind_output(c, v->name().c_str(), reinterpret_cast<void*>(dev_out.back()),
                                       kiln_dtype(t.dtype), t.shape.data(), t.rank(), KILN_MEMORY_DEVICE),
              KILN_OK);
  }
  ASSERT_EQ(kiln_context_enqueue(c, caller.stream), KILN_OK) << last_error();
  std::vector<Tensor> outs2;
  ASSERT_EQ(run_c(c, feed2, outs2), KILN_OK) << last_error();  // binds host buffers, runs on the context's streams
  expect_reference(outs2, feed2);
  ASSERT_EQ(caller.synchronize(), 0);
  std::vector<Tensor> outs;
  for (size_t i = 0; i < graph->outputs().size(); ++i) {
    outs.emplace_back(graph->outputs()[i]->type());
    ASSERT_EQ(to_host(outs.back().raw(), dev_out[i], outs.back().nbytes()), 0);
    free_dev(dev_out[i]);
  }
  expect_reference(outs, feed);
  kiln_context_destroy(c);
  kiln_engine_destroy(e);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

// The device is the caller's: named at engine creation, else the current
// context's (an application that made device 1 current), else device 0.
TEST_F(FakeGpuSafety, TheEngineRunsOnTheDeviceTheCallerChose) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  fake().set_device_count(2);
  kiln_engine* e = nullptr;
  const char* info = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory_on_device(bytes.data(), bytes.size(), KILN_BACKEND_GPU, 1, &e), KILN_OK)
      << last_error();
  ASSERT_EQ(kiln_engine_info(e, &info), KILN_OK);
  EXPECT_NE(std::string(info).find(", device 1)"), std::string::npos) << info;
  int ordinal = -1;
  ASSERT_EQ(kiln_engine_device(e, &ordinal), KILN_OK);
  EXPECT_EQ(ordinal, 1);
  kiln_context* c = nullptr;
  ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << last_error();
  auto feed = testing::random_inputs(*graph, 81);
  std::vector<Tensor> outs;
  ASSERT_EQ(run_c(c, feed, outs), KILN_OK) << last_error();
  expect_reference(outs, feed);
  kiln_context_destroy(c);
  kiln_engine_destroy(e);

  EXPECT_EQ(kiln_engine_create_from_memory_on_device(bytes.data(), bytes.size(), KILN_BACKEND_GPU, 2, &e),
            KILN_ERROR_RUNTIME);
  EXPECT_EQ(last_error(), "plan in memory: CUDA device 2 does not exist (2 device(s))");
  EXPECT_EQ(kiln_engine_create_from_memory_on_device(bytes.data(), bytes.size(), KILN_BACKEND_GPU, -2, &e),
            KILN_ERROR_INVALID_ARGUMENT);

  // Device 1's primary context current on this thread: the engine takes device 1.
  void* ctx = nullptr;
  ASSERT_EQ(fake().sym<int (*)(void**, int)>("cuDevicePrimaryCtxRetain")(&ctx, 1), 0);
  ASSERT_EQ(fake().sym<int (*)(void*)>("cuCtxPushCurrent_v2")(ctx), 0);
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK) << last_error();
  ASSERT_EQ(kiln_engine_info(e, &info), KILN_OK);
  EXPECT_NE(std::string(info).find(", device 1)"), std::string::npos) << info;
  ASSERT_EQ(kiln_engine_device(e, &ordinal), KILN_OK);
  EXPECT_EQ(ordinal, 1);
  kiln_engine_destroy(e);
  void* popped = nullptr;
  fake().sym<int (*)(void**)>("cuCtxPopCurrent_v2")(&popped);
  // No current context: device 0 (its description names no device).
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK) << last_error();
  ASSERT_EQ(kiln_engine_info(e, &info), KILN_OK);
  EXPECT_EQ(std::string(info).find("device 1"), std::string::npos) << info;
  ASSERT_EQ(kiln_engine_device(e, &ordinal), KILN_OK);
  EXPECT_EQ(ordinal, 0);
  kiln_engine_destroy(e);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

// A context destroyed while the driver refuses to make its CUDA context
// current: the destructor must not throw (that would be std::terminate).
// Its memory cannot be freed without the context (the driver's rule), so
// the test only asks that the process survives and the engine still works.
TEST_F(FakeGpuSafety, DestructorsNeverThrowWhenTheDriverFails) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK) << last_error();
  kiln_context* c = nullptr;
  ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << last_error();
  fake().fail("cuCtxPushCurrent_v2", 0, 201);  // CUDA_ERROR_INVALID_CONTEXT
  kiln_context_destroy(c);
  ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << last_error();
  auto feed = testing::random_inputs(*graph, 91);
  std::vector<Tensor> outs;
  ASSERT_EQ(run_c(c, feed, outs), KILN_OK) << last_error();
  expect_reference(outs, feed);
  kiln_context_destroy(c);
  kiln_engine_destroy(e);
  EXPECT_GT(stats()[5], 0) << "the first context's memory was freed without a current context";
  fake().sym<void (*)()>("fake_cuda_reset_memory")();
}

TEST_F(FakeGpuThreads, OneEngineEightThreadsOwnContextsBitExact) {
  const double seconds = env_int("KILN_THREAD_TEST_SECONDS", 30);
  std::vector<uint8_t> bytes = plan_for("sm_90");
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK) << last_error();
  constexpr int kInputs = 8, kThreads = 8;
  std::vector<std::map<std::string, Tensor>> feeds;
  std::vector<std::vector<Tensor>> want(kInputs);
  {
    kiln_context* c = nullptr;
    ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << last_error();
    for (int i = 0; i < kInputs; ++i) {
      feeds.push_back(testing::random_inputs(*graph, 200 + i));
      ASSERT_EQ(run_c(c, feeds[i], want[i]), KILN_OK) << last_error();
    }
    expect_reference(want[0], feeds[0]);
    kiln_context_destroy(c);
  }
  std::atomic<long> runs{0}, mismatches{0};
  std::vector<std::string> errors(kThreads);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      kiln_context* c = nullptr;
      if (kiln_context_create(e, &c) != KILN_OK) {
        errors[t] = kiln_last_error();
        return;
      }
      std::vector<Tensor> outs;
      for (long i = 0; i == 0 || std::chrono::steady_clock::now() < deadline; ++i) {
        int k = int((t + i) % kInputs);
        if (run_c(c, feeds[k], outs) != KILN_OK) {
          errors[t] = kiln_last_error();
          break;
        }
        bool same = outs.size() == want[k].size();
        for (size_t o = 0; same && o < outs.size(); ++o)
          same = std::memcmp(outs[o].raw(), want[k][o].raw(), outs[o].nbytes()) == 0;
        mismatches += !same;
        ++runs;
      }
      kiln_context_destroy(c);
    });
  for (auto& th : threads) th.join();
  kiln_engine_destroy(e);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(mismatches.load(), 0) << "of " << runs.load() << " runs";
  EXPECT_GE(runs.load(), kThreads);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
  std::printf("%ld runs on %d threads in %.0f s (simulator), %ld differed from the single-threaded result\n",
              runs.load(), kThreads, seconds, mismatches.load());
}

TEST_F(FakeGpuLeaks, LoadRunDestroyCyclesKeepDeviceAndHostMemoryFlat) {
  const int cycles = env_int("KILN_LEAK_TEST_CYCLES", 1000);
  ASSERT_GE(cycles, 200);
  std::vector<uint8_t> bytes = plan_for("sm_90");
  size_t free0 = 0, total = 0;
  ASSERT_EQ(fake().mem_get_info(&free0, &total), 0);
  auto feed = testing::random_inputs(*graph, 51);
  std::vector<Tensor> outs, first;
  size_t rss_100 = 0;
  for (int i = 1; i <= cycles; ++i) {
    kiln_engine* e = nullptr;
    ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK)
        << last_error();
    kiln_context* c = nullptr;
    ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << last_error();
    ASSERT_EQ(run_c(c, feed, outs), KILN_OK) << last_error();
    kiln_context_destroy(c);
    kiln_engine_destroy(e);
    if (i == 1) {
      expect_reference(outs, feed);
      first = outs;
    }
    for (size_t o = 0; o < outs.size(); ++o)
      ASSERT_EQ(std::memcmp(outs[o].raw(), first[o].raw(), outs[o].nbytes()), 0) << "cycle " << i;
    size_t free_now = 0;
    ASSERT_EQ(fake().mem_get_info(&free_now, &total), 0);
    ASSERT_EQ(free_now, free0) << "device memory not all freed after cycle " << i;
    if (i == 100) rss_100 = rss_bytes();
  }
  size_t rss_end = rss_bytes();
  std::printf("RSS after cycle 100: %zu KiB, after cycle %d: %zu KiB; device memory free %zu of %zu bytes\n",
              rss_100 >> 10, cycles, rss_end >> 10, free0, total);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
  EXPECT_LT(rss_end, rss_100 + (size_t(1) << 20)) << "host memory grew by " << ((rss_end - rss_100) >> 10) << " KiB";
}

}  // namespace
}  // namespace kiln
