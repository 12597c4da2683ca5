// The runtime's GPU path (runtime/gpu_executor.cpp) against a fake CUDA
// driver (tests/runtime/fake_cuda/): the real code path from dlopen to cuGraphLaunch,
// with "device memory" in host memory and each launch run by the plan's
// kernel on the CPU simulator. Checks: results equal the reference backend,
// the launch list is captured once and replayed per run, CUBIN vs PTX
// selection by the device's arch, a too-old GPU falls back to the CPU path
// (or fails with KILN_BACKEND_GPU), device-pointer bindings, and every device
// allocation is freed. What it cannot check: real kernels on a real GPU.
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

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
    EXPECT_EQ(after[2] - before[2], 3);             // one graph launch per run
    EXPECT_EQ(after[3] - before[3], kernel_steps);  // never captured again
    EXPECT_EQ(after[4], before[4]);                 // no launch outside the graph
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
  CallerStream caller;
  ASSERT_EQ(kiln_context_enqueue(c, caller.stream), KILN_OK) << kiln_last_error();
  ASSERT_EQ(caller.synchronize(), 0);  // asynchronous: the outputs are there once the stream is done
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

// Plans are launchable by construction (codegen/launch_fit.h): node tests of
// every emitter family and the 32768-wide f64 softmax run on the strict fake
// H100 (which refuses launches over the per-block limits using each CUBIN's
// registers, as the hardware does) and equal the reference backend.
TEST_F(FakeGpu, LaunchFitPlansRunOnAStrictH100AndEqualTheReference) {
  std::vector<std::string> names(std::begin(kLaunchFitModels), std::end(kLaunchFitModels));
  names.push_back("wide_softmax");
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    std::map<std::string, Tensor> feed;
    std::unique_ptr<Graph> g = name == "wide_softmax" ? compiled_text(kWideSoftmax) : compiled_case(name, &feed);
    if (name == "wide_softmax") feed = testing::random_inputs(*g, 17);
    std::vector<uint8_t> bytes = plan_for(name);
    auto e = rt::Engine::load(bytes.data(), bytes.size(), name, rt::Backend::Gpu);
    rt::Context ctx(e);
    std::vector<Tensor> got = run(ctx, feed);
    std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << i;
  }
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

// The one thread cap: on a device with a quarter of the H100's register
// file, the wide softmax's 1024-thread blocks are refused by the driver
// (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES); the plan built for that register file
// launches smaller blocks, each within it, and equals the reference.
TEST_F(FakeGpu, AMisfitLaunchIsBuiltAgainWithFewerThreads) {
  std::unique_ptr<Graph> g = compiled_text(kWideSoftmax);
  auto feed = testing::random_inputs(*g, 17);
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  ASSERT_EQ(fake().set_property("regs_per_block", kSmallRegisterFile), 0);
  {
    std::vector<uint8_t> bytes = plan_for("wide_softmax");
    auto e = rt::Engine::load(bytes.data(), bytes.size(), "wide_softmax", rt::Backend::Gpu);
    try {
      rt::Context ctx(e);  // captures the launch list: the driver refuses the launch there
      run(ctx, feed);
      ADD_FAILURE() << "the H100 plan's 1024-thread blocks fit the small register file";
    } catch (const std::exception& err) {
      EXPECT_NE(std::string(err.what()).find("(error 701)"), std::string::npos) << err.what();
    }
  }
  const plan::Plan& p = plans().at("wide_softmax_small_registers");
  for (const plan::Step& s : p.steps)
    if (s.kind == plan::StepKind::Kernel) EXPECT_LT(1ll * s.block.x * s.block.y * s.block.z, 1024) << "not capped";
  std::vector<uint8_t> bytes = plan_for("wide_softmax_small_registers");
  {
    auto e = rt::Engine::load(bytes.data(), bytes.size(), "wide_softmax_small_registers", rt::Backend::Gpu);
    rt::Context ctx(e);
    std::vector<Tensor> got = run(ctx, feed);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(compare_tensors(got[0], want[0], {1e-12, 1e-10}), "");
  }
  fake().set_property("regs_per_block", 65536);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

// An absent optional operand (LinearAttention's past_state, with decay
// after it) is the plan's explicit "none" argument: the kernel gets a
// null pointer, and the plan runs on the strict fake H100 and equals the
// reference backend.
TEST_F(FakeGpu, AnAbsentOptionalOperandIsANullPointerArgument) {
  const plan::Plan& p = plans().at(kAbsentOperandCase);
  int nones = 0;
  for (const plan::Step& s : p.steps)
    for (const plan::BufferRef& b : s.args)
      if (b.kind == plan::BufferKind::None) ++nones;
  EXPECT_GT(nones, 0) << "no explicit none argument in the plan";
  std::unique_ptr<Graph> g = compiled_text(kAbsentOperand);
  auto feed = testing::random_inputs(*g, 7);
  // ONNX's decay is a log gate <= 0 (random inputs lie in [-2, 2]).
  Tensor& decay = feed.at("g");
  for (int64_t i = 0; i < decay.numel(); ++i) decay.set_double(i, decay.get_double(i) / 4 - 0.5);
  std::vector<uint8_t> bytes = plan_for(kAbsentOperandCase);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), kAbsentOperandCase, rt::Backend::Gpu);
  rt::Context ctx(e);
  null_pointer_args = 0;
  std::vector<Tensor> got = run(ctx, feed);
  EXPECT_EQ(null_pointer_args.load(), nones) << "each none argument reaches its kernel as a null pointer";
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << i;
}

// A kernel with more buffers than the parameter space holds (5,001: 40,008
// bytes, over 32,764) takes one pointer to a table of them, which the runtime
// uploads into device memory before capturing the launch list; the driver
// reads the one parameter its image declares, and the plan equals the
// reference on the strict fake H100, run after run.
TEST_F(FakeGpu, AKernelWithMoreBuffersThanTheParameterSpaceTakesAPointerTable) {
  const plan::Plan& p = plans().at("concat_5000");
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_TRUE(p.steps[0].param_table);
  std::unique_ptr<Graph> g = concat_5000();
  std::vector<uint8_t> bytes = plan_for("concat_5000");
  {
    auto e = rt::Engine::load(bytes.data(), bytes.size(), "concat_5000", rt::Backend::Gpu);
    rt::Context ctx(e);
    for (uint64_t seed : {1, 2}) {
      auto feed = testing::random_inputs(*g, seed);
      std::vector<Tensor> got = run(ctx, feed);
      std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(compare_tensors(got[0], want[0], {0, 0}), "") << "seed " << seed;
    }
  }
  EXPECT_EQ(stats()[5], 0) << "device allocations (the tables among them) leaked";
}

// The fake driver's call log as lines.
std::vector<std::string> take_log() {
  std::vector<std::string> lines;
  std::string s = fake().take_log(), line;
  for (char c : s) {
    if (c != '\n') {
      line += c;
      continue;
    }
    lines.push_back(line);
    line.clear();
  }
  return lines;
}

// Index of the first line at or after `from` that starts with `prefix` (-1: none).
int find_line(const std::vector<std::string>& log, const std::string& prefix, int from = 0) {
  for (int i = from; i < int(log.size()); ++i)
    if (log[size_t(i)].rfind(prefix, 0) == 0) return i;
  return -1;
}

// The stream ("s3") and event ("e7") words of a log line.
std::string word(const std::string& line, size_t n) {
  std::vector<std::string> w;
  std::string cur;
  for (char c : line + " ") {
    if (c == ' ') {
      w.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return n < w.size() ? w[n] : "";
}

// run() with host buffers: inputs staged in pinned memory and uploaded on an
// upload stream, the graph on the compute stream after an event, the outputs
// downloaded on a download stream after the graph's end event into pinned
// staging; the event times are the fake clock's (its launch/copy costs).
TEST_F(FakeGpu, HostBuffersAreStagedThroughPinnedMemoryOnCopyStreamsAndTimedWithEvents) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  std::vector<int> before = stats();
  {
    auto e = rt::Engine::load(bytes.data(), bytes.size(), "m.plan", rt::Backend::Gpu);
    rt::Context ctx(e);
    size_t staged = e->inputs().size() + e->outputs().size();
    EXPECT_EQ(stats()[7] - before[7], int(staged));  // one pinned buffer per input and output
    EXPECT_EQ(stats()[6] - before[6], int(staged));
    EXPECT_THROW(ctx.last_timing(), Error);  // not run yet
    take_log();
    auto feed = testing::random_inputs(*graph, 31);
    expect_reference(run(ctx, feed), feed);
    std::vector<std::string> log = take_log();
    std::string all;
    for (const auto& l : log) all += l + "\n";
    SCOPED_TRACE(all);
    // Order: uploads (upload stream) -> compute waits -> graph -> download stream waits -> downloads.
    int up0 = find_line(log, "record ");
    ASSERT_GE(up0, 0);
    std::string copy = word(log[size_t(up0)], 2);
    int h = up0;
    for (size_t i = 0; i < e->inputs().size(); ++i) {
      h = find_line(log, "htod ", h + 1);
      ASSERT_GE(h, 0);
      EXPECT_EQ(log[size_t(h)], "htod pinned " + copy);
    }
    int up1 = find_line(log, "record ", h + 1);
    ASSERT_GE(up1, 0);
    EXPECT_EQ(word(log[size_t(up1)], 2), copy);
    int wait_in = find_line(log, "wait ", up1 + 1);
    ASSERT_GE(wait_in, 0);
    std::string compute = word(log[size_t(wait_in)], 1);
    EXPECT_NE(compute, copy);
    EXPECT_EQ(word(log[size_t(wait_in)], 2), word(log[size_t(up1)], 1));  // waits for the uploads' event
    int g0 = find_line(log, "record ", wait_in + 1), g = find_line(log, "graph ", wait_in + 1);
    int g1 = find_line(log, "record ", g + 1);
    ASSERT_TRUE(g0 >= 0 && g > g0 && g1 > g);
    EXPECT_EQ(log[size_t(g)], "graph " + compute);
    EXPECT_EQ(word(log[size_t(g1)], 2), compute);
    int wait_out = find_line(log, "wait ", g1 + 1);
    ASSERT_GE(wait_out, 0);
    std::string down = word(log[size_t(wait_out)], 1);  // the download stream waits for the graph's end
    EXPECT_NE(down, copy);
    EXPECT_NE(down, compute);
    EXPECT_EQ(log[size_t(wait_out)], "wait " + down + " " + word(log[size_t(g1)], 1));
    int d = wait_out;
    for (size_t i = 0; i < e->outputs().size(); ++i) {
      d = find_line(log, "dtoh ", d + 1);
      ASSERT_GE(d, 0);
      EXPECT_EQ(log[size_t(d)], "dtoh pinned " + down);
      EXPECT_EQ(word(log[size_t(d + 1)], 2), down) << "an event after each download";
    }
    EXPECT_EQ(find_line(log, "htod pageable"), -1);
    EXPECT_EQ(find_line(log, "dtoh pageable"), -1);
    // The fake clock: launches cost 0.005 + 0.001 x blocks ms, copies bytes / 1e7 ms.
    double want_compute = 0, want_up = 0, want_down = 0;
    for (const plan::Step& st : e->plan().steps)
      want_compute += st.kind == plan::StepKind::Copy ? double(st.args[0].nbytes) / 1e7
                                                      : 0.005 + 0.001 * double(st.grid.x) * st.grid.y * st.grid.z;
    for (const auto& t : e->inputs()) want_up += double(t.type.nbytes()) / 1e7;
    for (const auto& t : e->outputs()) want_down += double(t.type.nbytes()) / 1e7;
    rt::RunTiming t = ctx.last_timing();
    EXPECT_NEAR(t.compute_ms, want_compute, 1e-4);
    EXPECT_NEAR(t.upload_ms, want_up, 1e-5);
    EXPECT_NEAR(t.download_ms, want_down, 1e-5);
  }
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
  EXPECT_EQ(stats()[6], 0) << "pinned allocations leaked";
}

// Driver failures during context creation and runs become statuses with the
// driver's words; the context stays usable and frees everything.
TEST_F(FakeGpu, DriverFailuresInStagingBecomeStatusesAndLeaveTheContextUsable) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK);
  kiln_context* c = nullptr;
  fake().fail_next("cuMemHostAlloc");
  EXPECT_EQ(kiln_context_create(e, &c), KILN_ERROR_RUNTIME);
  EXPECT_EQ(c, nullptr);
  EXPECT_NE(std::string(kiln_last_error()).find("CUDA: allocating pinned staging for an input: out of memory"),
            std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(stats()[6], 0) << "pinned memory of the failed context leaked";
  ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << kiln_last_error();
  kiln_run_timing t;
  EXPECT_EQ(kiln_context_last_timing(c, &t), KILN_ERROR_UNAVAILABLE);
  auto feed = testing::random_inputs(*graph, 41);
  std::vector<Tensor> outs;
  for (const Value* v : graph->outputs()) outs.emplace_back(v->type());
  for (const Value* v : graph->inputs()) {
    const Tensor& x = feed.at(v->name());
    ASSERT_EQ(kiln_context_bind_input(c, v->name().c_str(), x.raw(), KILN_F32, x.shape().data(), int(x.shape().size()),
                                      KILN_MEMORY_HOST),
              KILN_OK);
  }
  for (size_t i = 0; i < outs.size(); ++i)
    ASSERT_EQ(kiln_context_bind_output(c, graph->outputs()[i]->name().c_str(), outs[i].raw(), KILN_F32,
                                       outs[i].shape().data(), int(outs[i].shape().size()), KILN_MEMORY_HOST),
              KILN_OK);
  // Errors that leave the CUDA context usable (out of memory; a sticky one,
  // such as a launch failure, is FakeDriverRules' and FakeGpuSticky's).
  for (const char* fn : {"cuMemcpyHtoDAsync", "cuGraphLaunch", "cuEventSynchronize"}) {
    SCOPED_TRACE(fn);
    fake().fail(fn, 0, 2);
    EXPECT_EQ(kiln_context_run(c), KILN_ERROR_RUNTIME);
    EXPECT_NE(std::string(kiln_last_error()).find("out of memory (error 2)"), std::string::npos) << kiln_last_error();
    EXPECT_EQ(kiln_context_last_timing(c, &t), KILN_ERROR_UNAVAILABLE);
    ASSERT_EQ(kiln_context_run(c), KILN_OK) << kiln_last_error();
    expect_reference(outs, feed);
    ASSERT_EQ(kiln_context_last_timing(c, &t), KILN_OK) << kiln_last_error();
    EXPECT_GT(t.compute_ms, 0.f);
  }
  kiln_context_destroy(c);
  kiln_engine_destroy(e);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
  EXPECT_EQ(stats()[6], 0) << "pinned allocations leaked";
}

// Pipelined runs: two submissions in flight, each with its own buffers and
// captured graph (the second made on first need); the upload stream never
// waits for a graph, so one run's uploads overlap another's compute on a GPU;
// wait() returns each run's own outputs; a third submission and a wait with
// nothing in flight are errors; run() is refused while runs are in flight.
TEST_F(FakeGpu, TwoPipelinedRunsHaveTheirOwnBuffersAndUploadsNeverWaitForCompute) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  std::vector<int> before = stats();
  {
    auto e = rt::Engine::load(bytes.data(), bytes.size(), "m.plan", rt::Backend::Gpu);
    int kernel_steps = 0;
    for (const plan::Step& st : e->plan().steps) kernel_steps += st.kind == plan::StepKind::Kernel;
    rt::Context ctx(e);
    EXPECT_EQ(stats()[3] - before[3], kernel_steps);  // one slot captured
    auto feed_a = testing::random_inputs(*graph, 51), feed_b = testing::random_inputs(*graph, 52);
    std::vector<Tensor> out_a, out_b;
    for (const auto& d : e->outputs()) {
      out_a.emplace_back(d.type);
      out_b.emplace_back(d.type);
    }
    auto bind = [&](std::map<std::string, Tensor>& feed, std::vector<Tensor>& outs) {
      for (const auto& d : e->inputs()) ctx.bind_input(d.name, feed.at(d.name).raw(), d.type, false);
      for (size_t i = 0; i < outs.size(); ++i)
        ctx.bind_output(e->outputs()[i].name, outs[i].raw(), outs[i].type(), false);
    };
    take_log();
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE(round);
      // The caller refills its input buffers right after submit: the run took a copy.
      std::map<std::string, Tensor> in_a = feed_a, in_b = feed_b;
      for (auto& [name, t] : in_a) t = t.clone();
      for (auto& [name, t] : in_b) t = t.clone();
      bind(in_a, out_a);
      ctx.submit();
      for (auto& [name, t] : in_a)
        for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, 99.0);
      bind(in_b, out_b);
      ctx.submit();
      EXPECT_EQ(ctx.in_flight(), 2u);
      EXPECT_THROW(ctx.submit(), Error);
      EXPECT_THROW(ctx.run(), Error);
      ctx.wait();
      expect_reference(out_a, feed_a);
      ctx.wait();
      expect_reference(out_b, feed_b);
      EXPECT_EQ(ctx.in_flight(), 0u);
      EXPECT_THROW(ctx.wait(), Error);
      EXPECT_GT(ctx.last_timing().compute_ms, 0.f);
    }
    EXPECT_EQ(stats()[3] - before[3], 2 * kernel_steps);  // the second slot captured once, on first need
    EXPECT_EQ(stats()[7] - before[7], int(2 * (e->inputs().size() + e->outputs().size())));
    std::vector<std::string> log = take_log();
    // Uploads: one stream, which never waits for anything (so never for a graph).
    int h = find_line(log, "htod ");
    ASSERT_GE(h, 0);
    std::string up = word(log[size_t(h)], 2);
    for (const std::string& l : log) {
      if (l.rfind("htod ", 0) == 0) {
        EXPECT_EQ(l, "htod pinned " + up);
      }
      EXPECT_NE(l.rfind("wait " + up + " ", 0), 0u) << l;
    }
    // Both runs' uploads were issued before the first run's outputs were waited for.
    int second_upload = find_line(log, "htod ", find_line(log, "graph ") + 1);
    EXPECT_GE(second_upload, 0);
  }
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
  EXPECT_EQ(stats()[6], 0) << "pinned allocations leaked";
}

// The same calls on a CPU engine: submit runs at once, wait counts, the limits hold.
TEST_F(FakeGpu, PipelinedCallsOnACpuEngineRunAtOnceAndCount) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU, &e), KILN_OK);
  kiln_context* c = nullptr;
  ASSERT_EQ(kiln_context_create(e, &c), KILN_OK);
  EXPECT_EQ(kiln_context_wait(c), KILN_ERROR_RUNTIME);
  EXPECT_STREQ(kiln_last_error(), "no run is in flight: nothing to wait for");
  EXPECT_EQ(kiln_context_submit(c), KILN_ERROR_RUNTIME);  // nothing bound
  auto feed = testing::random_inputs(*graph, 61);
  std::vector<Tensor> outs;
  for (const Value* v : graph->outputs()) outs.emplace_back(v->type());
  for (const Value* v : graph->inputs()) {
    const Tensor& x = feed.at(v->name());
    ASSERT_EQ(kiln_context_bind_input(c, v->name().c_str(), x.raw(), KILN_F32, x.shape().data(), int(x.shape().size()),
                                      KILN_MEMORY_HOST),
              KILN_OK);
  }
  for (size_t i = 0; i < outs.size(); ++i)
    ASSERT_EQ(kiln_context_bind_output(c, graph->outputs()[i]->name().c_str(), outs[i].raw(), KILN_F32,
                                       outs[i].shape().data(), int(outs[i].shape().size()), KILN_MEMORY_HOST),
              KILN_OK);
  ASSERT_EQ(kiln_context_submit(c), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_context_submit(c), KILN_OK) << kiln_last_error();
  EXPECT_EQ(kiln_context_submit(c), KILN_ERROR_RUNTIME);
  EXPECT_EQ(kiln_context_wait(c), KILN_OK);
  EXPECT_EQ(kiln_context_wait(c), KILN_OK);
  EXPECT_EQ(kiln_context_wait(c), KILN_ERROR_RUNTIME);
  expect_reference(outs, feed);
  kiln_run_timing t;
  EXPECT_EQ(kiln_context_last_timing(c, &t), KILN_ERROR_UNAVAILABLE);
  kiln_context_destroy(c);
  kiln_engine_destroy(e);
}

}  // namespace
}  // namespace kiln
