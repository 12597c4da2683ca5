// The runtime API's newer pieces on the GPU path, against the strict fake
// driver (tests/runtime/fake_cuda/): lookups and plan getters, the log
// callback's AUTO-fallback warning, per-kernel profiling (un-captured
// launches timed by events) and zero-copy device bindings (the graph
// captured again with the caller's addresses, no copies). The CPU side of the
// same calls is in runtime_api_test.cpp.
#include <set>

#include "kiln/kiln.hpp"
#include "tests/runtime/fake_gpu_util.h"

namespace kiln {
namespace {

using namespace fakegpu;

std::vector<std::string> log_lines() {
  std::vector<std::string> lines;
  std::string s = fake().take_log(), line;
  for (char c : s) {
    if (c == '\n') {
      lines.push_back(line);
      line.clear();
    } else {
      line += c;
    }
  }
  return lines;
}

TEST_F(FakeGpu, ApiLooksUpByNameAndTellsTargetAndPrecision) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  kiln::Engine e = kiln::Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU);
  EXPECT_EQ(e.input_index("b"), 1);
  EXPECT_EQ(e.output_index("p"), 3);
  EXPECT_EQ(e.outputs()[size_t(e.output_index("p"))].shape, (std::vector<int64_t>{4, 37}));
  int i = 0;
  EXPECT_EQ(kiln_engine_output_index(e.get(), "q", &i), KILN_ERROR_NOT_FOUND);
  EXPECT_STREQ(kiln_last_error(), "the model has no output named \"q\" (outputs: \"s\", \"h\", \"f\", \"p\", \"i\")");
  EXPECT_EQ(e.target(), "sm_90");
  EXPECT_EQ(e.precision(), "fp32");
}

struct Logged {
  std::vector<std::pair<kiln_log_level, std::string>> lines;
};
void collect(kiln_log_level level, const char* message, void* user) {
  static_cast<Logged*>(user)->lines.emplace_back(level, message);
}

TEST_F(FakeGpu, LogCallbackWarnsWhenAutoFallsBackToTheCpuAndSaysWhy) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  Logged logged;
  kiln_set_log_callback(collect, &logged);
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_AUTO, &e), KILN_OK);
  kiln_engine_destroy(e);
  fake().set_arch(8, 6);  // an older GPU than the plan's
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_AUTO, &e), KILN_OK);
  kiln_engine_destroy(e);
  kiln_set_log_callback(nullptr, nullptr);
  ASSERT_EQ(logged.lines.size(), 2u);
  EXPECT_EQ(logged.lines[0].first, KILN_LOG_INFO);
  EXPECT_EQ(logged.lines[0].second.rfind("plan in memory: runs on the GPU sm_90 (CUBIN, ", 0), 0u)
      << logged.lines[0].second;
  EXPECT_EQ(logged.lines[1].first, KILN_LOG_WARNING);
  EXPECT_EQ(logged.lines[1].second.rfind("plan in memory: the AUTO backend runs on the CPU reference path (plan in "
                                         "memory: wrong GPU arch: the plan's kernels are for sm_90, this GPU is sm_86",
                                         0),
            0u)
      << logged.lines[1].second;
}

// Under KILN_BACKEND_GPU a valid plan this GPU or driver cannot run is
// KILN_ERROR_UNAVAILABLE with the reason (as for a machine without a driver),
// never KILN_ERROR_INVALID_PLAN: the same plan runs on another machine.
TEST_F(FakeGpu, WrongArchAndTooOldADriverAreUnavailableNotAnInvalidPlan) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  kiln_engine* e = nullptr;
  fake().set_arch(8, 0);
  EXPECT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_ERROR_UNAVAILABLE);
  EXPECT_EQ(e, nullptr);
  EXPECT_NE(std::string(kiln_last_error())
                .find("plan in memory: wrong GPU arch: the plan's kernels are for sm_90, this GPU is sm_80"),
            std::string::npos)
      << kiln_last_error();
  fake().set_arch(9, 0);
  fake().set_driver_version(12080);  // CUDA 12.8 (R570): older than NVRTC 13's CUBIN
  EXPECT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_ERROR_UNAVAILABLE);
  EXPECT_NE(
      std::string(kiln_last_error()).find("need a CUDA driver of version 13.0 or newer, this driver is version 12.8"),
      std::string::npos)
      << kiln_last_error();
  fake().set_driver_version(13000);
  // A damaged plan is still an invalid plan, whatever the backend.
  std::vector<uint8_t> damaged(bytes.begin(), bytes.begin() + bytes.size() / 2);
  EXPECT_EQ(kiln_engine_create_from_memory(damaged.data(), damaged.size(), KILN_BACKEND_GPU, &e),
            KILN_ERROR_INVALID_PLAN);
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK)
      << kiln_last_error();
  kiln_engine_destroy(e);
}

TEST_F(FakeGpu, ProfileTimesEachKernelWithEventsAroundUncapturedLaunches) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "m.plan", rt::Backend::Gpu);
  const plan::Plan& p = e->plan();
  int kernel_steps = 0;
  for (const plan::Step& s : p.steps) kernel_steps += s.kind == plan::StepKind::Kernel;
  kiln_engine* ce = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &ce), KILN_OK);
  kiln_context* c = nullptr;
  ASSERT_EQ(kiln_context_create(ce, &c), KILN_OK) << kiln_last_error();
  auto feed = testing::random_inputs(*graph, 41);
  for (const auto& d : e->inputs())
    ASSERT_EQ(kiln_context_bind_input(c, d.name.c_str(), feed.at(d.name).raw(), KILN_F32, d.type.shape.data(),
                                      d.type.rank(), KILN_MEMORY_HOST),
              KILN_OK);
  std::vector<Tensor> outs;
  for (const auto& d : e->outputs()) {
    outs.emplace_back(d.type);
    ASSERT_EQ(kiln_context_bind_output(c, d.name.c_str(), outs.back().raw(), KILN_F32, d.type.shape.data(),
                                       d.type.rank(), KILN_MEMORY_HOST),
              KILN_OK);
  }
  std::vector<int> before = stats();
  const kiln_profile_entry* entries = nullptr;
  int n = 0;
  ASSERT_EQ(kiln_context_profile(c, &entries, &n), KILN_OK) << kiln_last_error();
  std::vector<int> after = stats();
  expect_reference(outs, feed);  // a profiled run is a run
  EXPECT_EQ(after[2], before[2]) << "profiling replayed the captured graph";
  EXPECT_EQ(after[4] - before[4], kernel_steps) << "each kernel launched un-captured once";
  ASSERT_EQ(n, int(p.steps.size()));
  std::vector<const Node*> nodes;
  for (const auto& node : e->graph().nodes()) nodes.push_back(node.get());
  for (int k = 0; k < n; ++k) {
    const plan::Step& s = p.steps[size_t(k)];
    SCOPED_TRACE(entries[k].name);
    if (s.kind == plan::StepKind::Copy) {
      EXPECT_EQ(std::string(entries[k].op), "copy");
      continue;
    }
    EXPECT_EQ(std::string(entries[k].name), p.kernels[s.kernel].name);
    EXPECT_EQ(std::string(entries[k].op), nodes.at(s.node)->op());
    EXPECT_EQ(std::string(entries[k].node), nodes.at(s.node)->name());
    // The fake's clock charges a kernel 0.005 ms + 0.001 ms per block: the
    // time between the events around it is exactly that.
    double blocks = double(s.grid.x) * s.grid.y * s.grid.z;
    EXPECT_NEAR(entries[k].ms, 0.005 + 0.001 * blocks, 1e-5);
  }
  // Profiling leaves the context's graph as it was: a run replays it.
  ASSERT_EQ(kiln_context_run(c), KILN_OK) << kiln_last_error();
  EXPECT_EQ(stats()[2] - after[2], 1);
  EXPECT_EQ(stats()[4], after[4]);
  expect_reference(outs, feed);
  kiln_context_destroy(c);
  kiln_engine_destroy(ce);
  e.reset();
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

// The pointers each launch received (the launch callback's arguments).
std::set<CUdeviceptr>& launch_args() {
  static std::set<CUdeviceptr> s;
  return s;
}
int recording_launch(const char* name, const unsigned* grid, const unsigned* block, unsigned shared,
                     const CUdeviceptr* args) {
  for (int i = 0; i < arg_count(name); ++i) launch_args().insert(args[i]);
  return launch(name, grid, block, shared, args);
}

TEST_F(FakeGpu, ZeroCopyDeviceBindingsAreUsedInPlaceByTheCapturedGraph) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  fake().set_kernels(arg_count, recording_launch);
  CallerStream caller;  // the application's current context, as for its own cuMemAlloc
  auto mem_alloc = fake().sym<int (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
  auto mem_free = fake().sym<int (*)(CUdeviceptr)>("cuMemFree_v2");
  auto htod = fake().sym<int (*)(CUdeviceptr, const void*, size_t)>("cuMemcpyHtoD_v2");
  auto dtoh = fake().sym<int (*)(void*, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2");
  {
    kiln::Engine e = kiln::Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU);
    kiln::Context ctx(e);
    std::vector<CUdeviceptr> in, out;
    for (const kiln::TensorInfo& t : e.inputs()) {
      in.push_back(0);
      ASSERT_EQ(mem_alloc(&in.back(), t.nbytes()), 0);
      ctx.bind_input_device(t.name, in.back());
    }
    for (const kiln::TensorInfo& t : e.outputs()) {
      out.push_back(0);
      ASSERT_EQ(mem_alloc(&out.back(), t.nbytes()), 0);
      ctx.bind_output_device(t.name, out.back());
    }
    int kernel_steps = 0;
    for (const plan::Step& s : plans().at("sm_90").steps) kernel_steps += s.kind == plan::StepKind::Kernel;
    for (uint64_t seed : {51, 52}) {
      auto feed = testing::random_inputs(*graph, seed);
      for (size_t i = 0; i < in.size(); ++i)
        ASSERT_EQ(htod(in[i], feed.at(e.inputs()[i].name).raw(), feed.at(e.inputs()[i].name).nbytes()), 0);
      std::vector<int> before = stats();
      launch_args().clear();
      log_lines();
      ctx.run();
      std::vector<std::string> log = log_lines();
      // No copy of any input or output: the kernels used the buffers in place.
      for (const std::string& l : log) EXPECT_TRUE(l.rfind("htod", 0) && l.rfind("dtoh", 0) && l.rfind("dtod", 0)) << l;
      for (CUdeviceptr p : in) EXPECT_TRUE(launch_args().count(p)) << "no kernel read the caller's input";
      // The first run with these buffers captured the graph again; the second replays it.
      EXPECT_EQ(stats()[3] - before[3], seed == 51 ? kernel_steps : 0);
      EXPECT_EQ(stats()[2] - before[2], 1);
      std::vector<Tensor> got;
      for (size_t i = 0; i < out.size(); ++i) {
        got.emplace_back(DType(e.outputs()[i].dtype), e.outputs()[i].shape);
        ASSERT_EQ(dtoh(got.back().raw(), out[i], got.back().nbytes()), 0);
      }
      expect_reference(got, feed);
    }
    // Two runs in flight would share the caller's buffers: refused.
    ctx.submit();
    try {
      ctx.submit();
      ADD_FAILURE() << "a second zero-copy run was submitted";
    } catch (const kiln::runtime_error& err) {
      EXPECT_NE(std::string(err.what()).find("zero-copy device bindings allow one run in flight"), std::string::npos)
          << err.what();
    }
    ctx.wait();
    // Back to copied host bindings: the context's own buffers again (captured anew).
    auto feed = testing::random_inputs(*graph, 53);
    std::vector<Tensor> outs;
    for (const kiln::TensorInfo& t : e.inputs()) ctx.bind_input(t.name, feed.at(t.name).raw(), t.dtype, t.shape);
    for (const kiln::TensorInfo& t : e.outputs()) {
      outs.emplace_back(DType(t.dtype), t.shape);
      ctx.bind_output(t.name, outs.back().raw(), t.dtype, t.shape);
    }
    launch_args().clear();
    ctx.run();
    for (CUdeviceptr p : in) EXPECT_FALSE(launch_args().count(p)) << "a kernel still used the caller's input";
    expect_reference(outs, feed);
    for (CUdeviceptr p : in) mem_free(p);
    for (CUdeviceptr p : out) mem_free(p);
  }
  fake().set_kernels(arg_count, launch);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

// A zero-copy pointer the kernels could not use (128-bit accesses, cp.async)
// is refused when bound, naming the tensor, rather than faulting on the GPU.
TEST_F(FakeGpu, AnUnalignedZeroCopyPointerIsRefusedNamingTheTensor) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  CallerStream caller;
  auto mem_alloc = fake().sym<int (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
  auto mem_free = fake().sym<int (*)(CUdeviceptr)>("cuMemFree_v2");
  {
    kiln::Engine e = kiln::Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU);
    kiln::Context ctx(e);
    CUdeviceptr p = 0;
    ASSERT_EQ(mem_alloc(&p, e.inputs()[0].nbytes() + 256), 0);
    ctx.bind_input_device(e.inputs()[0].name, p);  // as cuMemAlloc returns it: accepted
    for (CUdeviceptr off : {CUdeviceptr(2), CUdeviceptr(16), CUdeviceptr(128)}) {
      try {
        ctx.bind_input_device(e.inputs()[0].name, p + off);
        ADD_FAILURE() << "an input pointer at +" << off << " was accepted";
      } catch (const kiln::runtime_error& err) {
        EXPECT_NE(std::string(err.what()).find("input \"" + e.inputs()[0].name + "\": device pointer"),
                  std::string::npos)
            << err.what();
        EXPECT_NE(std::string(err.what()).find("is not 256-byte aligned"), std::string::npos) << err.what();
      }
      try {
        ctx.bind_output_device(e.outputs()[0].name, p + off);
        ADD_FAILURE() << "an output pointer at +" << off << " was accepted";
      } catch (const kiln::runtime_error& err) {
        EXPECT_NE(std::string(err.what()).find("output \"" + e.outputs()[0].name + "\""), std::string::npos)
            << err.what();
      }
    }
    mem_free(p);
  }
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

}  // namespace
}  // namespace kiln
