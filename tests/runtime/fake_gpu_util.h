// Shared by the fake-GPU tests (fake_gpu_*_test.cpp): the FakeGpu fixture and
// a caller's own stream, over the fake driver (fake_gpu_driver.h) and the
// plans compiled before it is loaded (fake_gpu_plans.h). Inline functions in
// a named namespace: one copy of each static for the whole executable.
#pragma once
#include "tests/runtime/fake_gpu_driver.h"
#include "tests/runtime/fake_gpu_plans.h"
#include "tests/runtime/sim_kernel_args.h"

namespace kiln::fakegpu {

// A stream of the caller's own (for enqueue): device 0's primary context made
// current on this thread, as an application using the driver API has it.
class CallerStream {
 public:
  CallerStream() {
    const Fake& f = fake();
    void* ctx = nullptr;
    f.sym<int (*)(void**, int)>("cuDevicePrimaryCtxRetain")(&ctx, 0);
    f.sym<int (*)(void*)>("cuCtxPushCurrent_v2")(ctx);
    EXPECT_EQ(f.sym<int (*)(void**, unsigned)>("cuStreamCreate")(&stream, 1), 0);  // CU_STREAM_NON_BLOCKING
  }
  ~CallerStream() {
    const Fake& f = fake();
    f.sym<int (*)(void*)>("cuStreamDestroy_v2")(stream);
    void* popped = nullptr;
    f.sym<int (*)(void**)>("cuCtxPopCurrent_v2")(&popped);
  }
  int synchronize() const { return fake().sym<int (*)(void*)>("cuStreamSynchronize")(stream); }
  void* stream = nullptr;
};

class FakeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    graph = compiled_graph();
    fake().set_arch(9, 0);
    fake().take_races();
  }
  // The strict driver found no race (an unordered access of one buffer from
  // two streams: a wrong answer on a GPU, depending on timing).
  void TearDown() override {
    std::string races = fake().take_races();
    EXPECT_EQ(races, "") << "the fake driver found races";
    std::vector<int> s = stats();
    EXPECT_EQ(s[9], 0) << "a stream was left capturing";
  }
  // A plan (by arch or ONNX test name) whose kernels the fake driver can run.
  std::vector<uint8_t> plan_for(const std::string& arch) { return plan_bytes(plans().at(arch)); }
  // The same for a plan a test builds itself.
  std::vector<uint8_t> plan_bytes(const plan::Plan& p) {
    EXPECT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
    std::vector<codegen::KernelSource> sources;
    for (const plan::Kernel& k : p.kernels) sources.push_back({k.name, k.source});
    static codegen::SimCompiler compiler;
    std::map<std::string, codegen::SimEntry> entries;
    if (!sources.empty()) entries = compiler.compile(sources);  // a plan of copies only has none
    // Every step's kernel: regions', in-place appends' and launch variants' too.
    for (const auto& [name, counts] : sim_kernel_counts(p)) kernels()[name] = SimKernel{entries.at(name), counts};
    fake().set_kernels(arg_count, launch);
    note_kernel_buffers(p);  // what each kernel reads and writes, for the race detector
    fake().set_kernel_buffers(kernel_table_size, kernel_buffer_use);
    return plan::serialize(p);
  }
  std::vector<int> stats() {
    std::vector<int> s(12);
    fake().stats(s.data());
    return s;
  }
  std::vector<Tensor> run(rt::Context& ctx, const std::map<std::string, Tensor>& feed) {
    return testing::run_on_host(ctx, feed);
  }
  void expect_reference(const std::vector<Tensor>& got, const std::map<std::string, Tensor>& feed) {
    std::vector<Tensor> want = ReferenceExecutor(*graph).run(feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << "output " << i;
  }
  std::unique_ptr<Graph> graph;
};

}  // namespace kiln::fakegpu
