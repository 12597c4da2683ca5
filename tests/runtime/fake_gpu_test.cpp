// The runtime's GPU path (runtime/gpu_executor.cpp) against a fake CUDA
// driver (fake_cuda.cpp): the real code path from dlopen to cuGraphLaunch,
// with "device memory" in host memory and each launch run by the plan's
// kernel on the CPU simulator. Checks: results equal the reference backend,
// the launch list is captured once and replayed per run, CUBIN vs PTX
// selection by the device's arch, a too-old GPU falls back to the CPU path
// (or fails with KILN_BACKEND_GPU), device-pointer bindings, and every device
// allocation is freed. What it cannot check: real kernels on a real GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "backends/reference/executor.h"
#include "codegen/sim_module.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "kiln/kiln.h"
#include "runtime/engine.h"
#include "tests/unit/pass_test_util.h"
#include "tools/kiln/compare.h"
#include "tools/kiln/compile.h"
#include "tools/kiln/plan_writer.h"
#include "tools/kiln/bench.h"
#include "tools/kiln/bench_plan.h"

namespace kiln {
namespace {

using CUdeviceptr = unsigned long long;

struct Fake {
  void (*set_arch)(int, int);
  void (*set_kernels)(int (*)(const char*),
                      int (*)(const char*, const unsigned*, const unsigned*, unsigned, const CUdeviceptr*));
  void (*stats)(int*);
  void (*fail_next)(const char*);
  const char* (*take_log)();
};

const std::map<std::string, plan::Plan>& plans();

const Fake& fake() {
  static Fake f = [] {
    // NVRTC crashes in a process where the fake driver is loaded (it looks
    // for the real driver's entry points), so every plan is compiled first.
    plans();
    // Loaded by path before the runtime looks for libcuda.so.1 (same SONAME).
    void* h = dlopen(KILN_FAKE_CUDA, RTLD_NOW | RTLD_GLOBAL);
    if (!h) throw std::runtime_error(std::string("cannot load the fake driver: ") + dlerror());
    Fake r;
    r.set_arch = reinterpret_cast<void (*)(int, int)>(dlsym(h, "fake_cuda_set_arch"));
    r.set_kernels = reinterpret_cast<decltype(r.set_kernels)>(dlsym(h, "fake_cuda_set_kernels"));
    r.stats = reinterpret_cast<void (*)(int*)>(dlsym(h, "fake_cuda_stats"));
    r.fail_next = reinterpret_cast<void (*)(const char*)>(dlsym(h, "fake_cuda_fail_next"));
    r.take_log = reinterpret_cast<const char* (*)()>(dlsym(h, "fake_cuda_take_log"));
    return r;
  }();
  return f;
}

// The kernels the fake driver runs: name -> simulator entry and the element
// counts of its arguments (from the plan's steps).
struct SimKernel {
  codegen::SimEntry entry;
  std::vector<long long> counts;
};
std::map<std::string, SimKernel>& kernels() {
  static std::map<std::string, SimKernel> k;
  return k;
}

int arg_count(const char* name) {
  auto it = kernels().find(name);
  return it == kernels().end() ? -1 : int(it->second.counts.size());
}

int launch(const char* name, const unsigned* grid, const unsigned* block, unsigned shared, const CUdeviceptr* args) {
  const SimKernel& k = kernels().at(name);
  std::vector<void*> bufs;
  for (size_t i = 0; i < k.counts.size(); ++i) bufs.push_back(reinterpret_cast<void*>(args[i]));
  kiln::sim::LaunchConfig cfg;
  cfg.kernel = name;
  cfg.grid = dim3(grid[0], grid[1], grid[2]);
  cfg.block = dim3(block[0], block[1], block[2]);
  cfg.shared_bytes = shared;
  try {
    codegen::sim_launch(k.entry, cfg, bufs, k.counts);
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << ": " << e.what();
    return 719;  // CUDA_ERROR_LAUNCH_FAILED
  }
  return 0;
}

constexpr const char* kGraph = R"(graph @m(%x: f32[4,37], %b: f32[37]) -> (f32[4], f32[4,37], f32[148], f32[4,37], f32[4,37]) {
    %w = const f32[37] dense<[0.5, -1.0, 2.0, 0.25, 1.5, -0.5, 3.0, 0.75, -2.0, 1.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8, 2.9]>
    %h = add(%x, %b) : f32[4,37]
    %t = mul(%h, %w) : f32[4,37]
    %e = tanh(%t) : f32[4,37]
    %s = reduce_max(%x) {axes=[1], keepdims=0} : f32[4]
    %f = reshape(%e) {shape=[148]} : f32[148]
    %p = softmax(%x) {axis=1} : f32[4,37]
    %i = identity(%x) : f32[4,37]
    return %s, %h, %f, %p, %i
  })";

std::unique_ptr<Graph> compiled_graph() {
  auto g = parse_graph(kGraph);
  CompileOptions o;
  o.pass.target = "sm_90";
  compile_graph(*g, o);
  return g;
}

// ONNX node tests whose every node has an emitter: conv, GEMM, pooling.
const char* const kOnnxModels[] = {"test_basic_conv_with_padding", "test_matmul_2d", "test_gemm_default_no_bias",
                                   "test_maxpool_2d_default"};

std::unique_ptr<Graph> compiled_onnx(const std::string& name) {
  auto r = import_onnx_file("/usr/share/libonnx-testdata/data/node/" + name + "/model.onnx");
  CompileOptions o;
  o.pass.target = "sm_90";
  compile_graph(*r.graph, o);
  return std::move(r.graph);
}

// Plans by arch (kGraph) and by ONNX test name (for sm_90).
const std::map<std::string, plan::Plan>& plans() {
  static const std::map<std::string, plan::Plan> ps = [] {
    auto g = compiled_graph();
    std::map<std::string, plan::Plan> r;
    for (std::string arch : {"sm_80", "sm_90"}) r[arch] = build_plan(*g, {arch, "fp32", {}});
    for (const char* m : kOnnxModels) r[m] = build_plan(*compiled_onnx(m), {"sm_90", "fp32", {}});
    return r;
  }();
  return ps;
}

class FakeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    graph = compiled_graph();
    fake().set_arch(9, 0);
  }
  // A plan (by arch or ONNX test name) whose kernels the fake driver can run.
  std::vector<uint8_t> plan_for(const std::string& arch) {
    const plan::Plan& p = plans().at(arch);
    EXPECT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
    std::vector<codegen::KernelSource> sources;
    for (const plan::Kernel& k : p.kernels) sources.push_back({k.name, k.source});
    static codegen::SimCompiler compiler;
    auto entries = compiler.compile(sources);
    for (const plan::Step& s : p.steps) {
      if (s.kind != plan::StepKind::Kernel) continue;
      SimKernel k{entries.at(p.kernels[s.kernel].name), {}};
      for (const plan::BufferRef& b : s.args) k.counts.push_back(b.elements);
      kernels()[p.kernels[s.kernel].name] = k;
    }
    fake().set_kernels(arg_count, launch);
    return plan::serialize(p);
  }
  std::vector<int> stats() {
    std::vector<int> s(9);
    fake().stats(s.data());
    return s;
  }
  std::vector<Tensor> run(rt::Context& ctx, const std::map<std::string, Tensor>& feed) {
    const rt::Engine& e = ctx.engine();
    for (const auto& d : e.inputs()) ctx.bind_input(d.name, feed.at(d.name).raw(), d.type, false);
    std::vector<Tensor> outs;
    for (const auto& d : e.outputs()) outs.emplace_back(d.type);
    for (size_t i = 0; i < outs.size(); ++i) ctx.bind_output(e.outputs()[i].name, outs[i].raw(), outs[i].type(), false);
    ctx.run();
    return outs;
  }
  void expect_reference(const std::vector<Tensor>& got, const std::map<std::string, Tensor>& feed) {
    std::vector<Tensor> want = ReferenceExecutor(*graph).run(feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << "output " << i;
  }
  std::unique_ptr<Graph> graph;
};

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

// run() with host buffers: inputs staged in pinned memory and uploaded on a
// copy stream, the graph on the compute stream after an event, the outputs
// downloaded on the copy stream after the graph's end event into pinned
// staging; the event times are the fake clock's (its launch/copy costs).
TEST_F(FakeGpu, HostBuffersAreStagedThroughPinnedMemoryOnACopyStreamAndTimedWithEvents) {
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
    // Order: uploads (copy stream) -> compute waits -> graph -> copy stream waits -> downloads.
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
    EXPECT_EQ(log[size_t(wait_out)], "wait " + copy + " " + word(log[size_t(g1)], 1));
    int d = wait_out;
    for (size_t i = 0; i < e->outputs().size(); ++i) {
      d = find_line(log, "dtoh ", d + 1);
      ASSERT_GE(d, 0);
      EXPECT_EQ(log[size_t(d)], "dtoh pinned " + copy);
      EXPECT_EQ(word(log[size_t(d + 1)], 2), copy) << "an event after each download";
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
  EXPECT_NE(std::string(kiln_last_error()).find("CUDA: allocating pinned staging for an input: fake CUDA error"),
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
  for (const char* fn : {"cuMemcpyHtoDAsync", "cuGraphLaunch", "cuEventSynchronize"}) {
    SCOPED_TRACE(fn);
    fake().fail_next(fn);
    EXPECT_EQ(kiln_context_run(c), KILN_ERROR_RUNTIME);
    EXPECT_NE(std::string(kiln_last_error()).find("fake CUDA error"), std::string::npos) << kiln_last_error();
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

// `kiln bench MODEL.plan --backend gpu` (tools/kiln/bench_plan.cpp) through the
// C API on the fake driver: the GPU backend is named, GPU Compute Time is each
// run's event time (the fake clock's sum over the launch list), and --profile
// says plainly that no per-kernel times exist instead of printing a table.
TEST_F(FakeGpu, BenchOfAPlanReportsTheGpuComputeTimeOfEveryRun) {
  plan_for("sm_90");  // the fake driver's kernels
  std::string dir = ::testing::TempDir();
  std::string path = dir + "/bench_fake.plan", json = dir + "/bench_fake.json";
  plan::write_plan_file(path, plans().at("sm_90"));
  BenchOptions o;
  o.model = path;
  o.backend = "gpu";
  o.iterations = 4;
  o.warmup_ms = 0;
  o.profile = true;
  o.json_path = json;
  ::testing::internal::CaptureStdout();
  int rc = run_bench_plan(o);
  std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("Backend: gpu (GPU sm_90 (CUBIN, "), std::string::npos) << out;
  EXPECT_NE(out.find("GPU Compute Time: min = "), std::string::npos) << out;
  EXPECT_NE(out.find("=== Profile ===\nnot available: no per-kernel profile on the GPU"), std::string::npos) << out;
  double want_compute = 0;
  for (const plan::Step& st : plans().at("sm_90").steps)
    want_compute += st.kind == plan::StepKind::Copy ? double(st.args[0].nbytes) / 1e7
                                                    : 0.005 + 0.001 * double(st.grid.x) * st.grid.y * st.grid.z;
  std::ifstream f(json);
  nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["backend"], "gpu");
  EXPECT_EQ(j["backend_kind"], "gpu");
  ASSERT_EQ(j["gpu_compute_samples_ms"].size(), 4u);
  for (const auto& v : j["gpu_compute_samples_ms"]) EXPECT_NEAR(v.get<double>(), want_compute, 1e-4);
  EXPECT_NEAR(j["gpu_compute_ms"]["median"].get<double>(), want_compute, 1e-4);
  EXPECT_EQ(j["latency_samples_ms"].size(), 4u);
  EXPECT_EQ(j["profile"].size(), 0u);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

}  // namespace
}  // namespace kiln
