// GPU plans with control flow (issue 14: if, loop and scan in sm_90 plans) on
// the strict fake driver: the runtime reads each condition and trip count
// from device memory and runs the chosen region's launch list host-driven,
// the launches between control-flow steps replayed as captured CUDA Graphs
// (runtime/gpu_segments.cpp), and the outputs equal the reference backend on every
// path (branches taken both ways, loops ending early, zero iterations,
// reversed scans over an inner axis, nested regions). Runs, pipelined
// submissions and enqueue on the caller's stream all take that path.
#include "backends/plan_sim.h"
#include "tests/runtime/fake_gpu_util.h"

namespace kiln {
namespace {

using namespace fakegpu;

Tensor f32(const Shape& shape, std::vector<float> v) { return Tensor::from(DType::F32, shape, v); }
Tensor i64(int64_t v) {
  Tensor t = Tensor::scalar(DType::I64, 0);
  t.set_int(0, v);
  return t;
}
Tensor flag(bool v) { return Tensor::scalar(DType::Bool, v ? 1 : 0); }

using Feed = std::map<std::string, Tensor>;

// Per plan, data sets that take different paths through its regions.
std::vector<Feed> feeds_for(const std::string& name) {
  const Tensor x4 = f32({4}, {1, -2, 3, 0.5f}), x3 = f32({3}, {0.1f, 0.2f, 0.3f});
  if (name == "cf_if_in_loop")
    return {{{"c", flag(true)}, {"n", i64(3)}, {"x", x4}},
            {{"c", flag(false)}, {"n", i64(3)}, {"x", x4}},
            {{"c", flag(true)}, {"n", i64(0)}, {"x", x4}}};
  if (name == "cf_if_pass_through")
    return {{{"c", flag(true)}, {"x", f32({2}, {-1, 7})}}, {{"c", flag(false)}, {"x", f32({2}, {-1, 7})}}};
  if (name == "cf_while")  // ends by its condition after 4 iterations, by the trip count, or never runs
    return {{{"n", i64(10)}, {"x", x3}, {"lim", Tensor::scalar(DType::F32, 5.0)}},
            {{"n", i64(6)}, {"x", x3}, {"lim", Tensor::scalar(DType::F32, 1e9)}},
            {{"n", i64(0)}, {"x", x3}, {"lim", Tensor::scalar(DType::F32, 5.0)}}};
  if (name == "cf_loop_scan") return {{{"n", i64(4)}, {"x", x3}, {"w", f32({3}, {0.5f, -1, 2})}}};
  if (name == "cf_scan")
    return {{{"init", f32({2}, {0.25f, -0.5f})},
             {"xs", f32({2, 5}, {1, 2, 3, 4, 5, -1, -2, -3, -4, -5})},
             {"w", f32({2}, {0.3f, 0.7f})}}};
  return {};
}

class FakeGpuControlFlow : public FakeGpu {
 protected:
  std::unique_ptr<Graph> cf_graph(const std::string& name) { return compiled_text(control_flow_graphs().at(name)); }
  void expect_equal(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(compare_tensors(got[i], want[i], {1e-5, 1e-4}), "") << what << " output " << i;
  }
};

TEST_F(FakeGpuControlFlow, EveryPathEqualsTheReferenceWithItsSegmentsAsGraphs) {
  int runs = 0;
  for (const auto& [name, text] : control_flow_graphs()) {
    const plan::Plan& p = plans().at(name);
    ASSERT_TRUE(p.meta.gpu_kernels) << name << ": " << p.meta.no_gpu_reason;
    ASSERT_FALSE(p.control.empty()) << name << ": the control flow was folded away";
    std::vector<uint8_t> bytes = plan_for(name);
    auto g = cf_graph(name);
    std::vector<int> before = stats();
    {
      auto e = rt::Engine::load(bytes.data(), bytes.size(), name, rt::Backend::Gpu);
      EXPECT_NE(e->info().find("run host-driven, the launches between them replayed as CUDA Graphs"), std::string::npos)
          << e->info();
      rt::Context ctx(e);
      std::vector<int> captured = stats();
      for (const Feed& feed : feeds_for(name)) {
        std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
        expect_equal(run(ctx, feed), want, name + " (GPU path)");
        // The plan-on-sim path runs the same control-flow records.
        expect_equal(run_plan_on_sim(p, *g, feed), want, name + " (plan on sim)");
        ++runs;
      }
      // Every launch is in a segment captured with the context: the runs
      // launch graphs only, none of the kernels directly.
      std::vector<int> after = stats();
      if (!p.kernels.empty()) {
        EXPECT_GT(captured[3], before[3]) << name << ": no launch was captured";
        EXPECT_GT(after[2], captured[2]) << name << ": no segment was replayed";
      }
      EXPECT_EQ(after[3], captured[3]) << name << ": a run captured launches";
      EXPECT_EQ(after[4], before[4]) << name << ": a kernel was launched outside a graph";
    }
    EXPECT_EQ(stats()[5], 0) << name << ": device allocations leaked";
  }
  EXPECT_EQ(runs, 10);
}

// A kernel that takes its 5,001 buffers through a pointer table, inside a
// loop body: the runtime fills the region launch's own table (keyed by its
// step) with the loop's frame, carried value and captures, on the GPU path
// and on the plan-on-sim path, and the loop equals the reference for 0, 1
// and 3 iterations; the race detector sees the buffers through the table.
TEST_F(FakeGpuControlFlow, APointerTableKernelInsideALoopBodyEqualsTheReference) {
  const plan::Plan& p = plans().at("cf_table_in_loop");
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  ASSERT_EQ(p.control.size(), 1u) << "the loop was folded away";
  int tables = 0, top_level = 0;
  for (const plan::StepAt& at : plan::all_steps(p)) tables += at.step->param_table;
  for (const plan::Step& s : p.steps) top_level += s.param_table;
  ASSERT_EQ(tables, 1) << "the body's concat takes no pointer table";
  ASSERT_EQ(top_level, 0) << "the table is not inside the loop";
  std::vector<uint8_t> bytes = plan_for("cf_table_in_loop");
  auto g = table_in_loop();
  Feed feed{{"x", f32({1}, {0.75f})}};
  for (int i = 0; i < 4999; ++i) feed["w" + std::to_string(i)] = f32({1}, {float((i % 7) - 3) * 0.5f + 0.01f * i});
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "cf_table.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  for (int64_t n : {3, 1, 0}) {
    feed["n"] = i64(n);
    std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
    expect_equal(run(ctx, feed), want, "GPU path, n=" + std::to_string(n));
    expect_equal(run_plan_on_sim(p, *g, feed), want, "plan on sim, n=" + std::to_string(n));
  }
}

// Zero-copy device bindings change the addresses the segments were
// captured with: the first run with new buffers captures them again, later
// runs replay them, and the loop's output lands in the caller's buffer.
TEST_F(FakeGpuControlFlow, ZeroCopyBindingsCaptureTheSegmentsAgain) {
  std::vector<uint8_t> bytes = plan_for("cf_if_in_loop");
  auto g = cf_graph("cf_if_in_loop");
  CallerStream caller;  // the application's current context, for its own cuMemAlloc
  auto mem_alloc = fake().sym<int (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
  auto mem_free = fake().sym<int (*)(CUdeviceptr)>("cuMemFree_v2");
  auto htod = fake().sym<int (*)(CUdeviceptr, const void*, size_t)>("cuMemcpyHtoD_v2");
  auto dtoh = fake().sym<int (*)(void*, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2");
  std::vector<CUdeviceptr> buffers;
  {
    auto e = rt::Engine::load(bytes.data(), bytes.size(), "cf.plan", rt::Backend::Gpu);
    rt::Context ctx(e);
    for (const Feed& feed : feeds_for("cf_if_in_loop")) {
      for (const auto& d : e->inputs()) {
        buffers.push_back(0);
        const Tensor& t = feed.at(d.name);
        ASSERT_EQ(mem_alloc(&buffers.back(), std::max<size_t>(t.nbytes(), 1)), 0);
        ASSERT_EQ(htod(buffers.back(), t.raw(), t.nbytes()), 0);
        ctx.bind_input_device(d.name, buffers.back());
      }
      Tensor got(e->outputs()[0].type);
      buffers.push_back(0);
      ASSERT_EQ(mem_alloc(&buffers.back(), got.nbytes()), 0);
      const CUdeviceptr out = buffers.back();
      ctx.bind_output_device(e->outputs()[0].name, out);
      std::vector<int> before = stats();
      ctx.run();
      std::vector<int> once = stats();
      EXPECT_GT(once[3], before[3]) << "the segments were not captured again with the new buffers";
      ctx.run();
      EXPECT_EQ(stats()[3], once[3]) << "a run with the same buffers captured again";
      EXPECT_EQ(stats()[4], before[4]) << "a kernel was launched outside a graph";
      ASSERT_EQ(dtoh(got.raw(), out, got.nbytes()), 0);
      expect_equal({got}, ReferenceExecutor(*g).run(feed), "zero-copy");
    }
  }
  for (CUdeviceptr b : buffers) mem_free(b);
}

TEST_F(FakeGpuControlFlow, SubmitAndEnqueueTakeTheHostDrivenPath) {
  std::vector<uint8_t> bytes = plan_for("cf_if_in_loop");
  auto g = cf_graph("cf_if_in_loop");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "cf.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  std::vector<Feed> feeds = feeds_for("cf_if_in_loop");
  // Two submissions in flight, each with its own condition.
  std::vector<std::vector<Tensor>> outs(2);
  for (size_t k = 0; k < 2; ++k) {
    for (const auto& d : e->inputs()) ctx.bind_input(d.name, feeds[k].at(d.name).raw(), d.type, false);
    outs[k].emplace_back(e->outputs()[0].type);
    ctx.bind_output(e->outputs()[0].name, outs[k][0].raw(), outs[k][0].type(), false);
    ctx.submit();
  }
  ctx.wait();
  ctx.wait();
  for (size_t k = 0; k < 2; ++k) expect_equal(outs[k], ReferenceExecutor(*g).run(feeds[k]), "submission");
  {
    CallerStream caller;
    std::vector<Tensor> got{Tensor(e->outputs()[0].type)};
    for (const auto& d : e->inputs()) ctx.bind_input(d.name, feeds[1].at(d.name).raw(), d.type, false);
    ctx.bind_output(e->outputs()[0].name, got[0].raw(), got[0].type(), false);
    ctx.enqueue(caller.stream);
    ASSERT_EQ(caller.synchronize(), 0);
    expect_equal(got, ReferenceExecutor(*g).run(feeds[1]), "enqueue");
    // profile() (into the same bound buffers): the control step is one
    // entry timing its whole run.
    for (int64_t i = 0; i < got[0].numel(); ++i) got[0].set_double(i, 0);
    const std::vector<rt::ProfileEntry>& prof = ctx.profile();
    bool control = false;
    for (const rt::ProfileEntry& pe : prof) control |= pe.name.rfind("control flow (step ", 0) == 0 && pe.op == "loop";
    EXPECT_TRUE(control);
    expect_equal(got, ReferenceExecutor(*g).run(feeds[1]), "profile");
  }
}

TEST_F(FakeGpuControlFlow, ALoopRunningOtherThanItsScanOutputsIsAnErrorAndTheContextStaysUsable) {
  std::vector<uint8_t> bytes = plan_for("cf_loop_scan");
  auto g = cf_graph("cf_loop_scan");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "cf.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  Feed feed = feeds_for("cf_loop_scan")[0];
  feed["n"] = i64(3);
  try {
    run(ctx, feed);
    ADD_FAILURE() << "a loop of 3 iterations filled scan outputs compiled for 4";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("the loop ran 3 iterations but its scan outputs were compiled for 4"),
              std::string::npos)
        << err.what();
  }
  feed["n"] = i64(9);  // stops before writing past the scan outputs
  EXPECT_THROW(run(ctx, feed), Error);
  feed["n"] = i64(4);
  expect_equal(run(ctx, feed), ReferenceExecutor(*g).run(feed), "after the errors");
}

}  // namespace
}  // namespace kiln
