// GPU plans with data-dependent result sizes (NonZero, NonMaxSuppression;
// compiler/gpu_bounded_sizes.h, runtime/plan_bounded_sizes.h), on the strict
// fake driver with the plan's kernels on the simulator, and on plan-on-sim:
// one sm_90 plan computed at the bounds runs with counts from 0 to the
// bound through one context and one captured CUDA Graph; each run's outputs,
// trimmed to the counts its kernels wrote, equal the reference backend's run
// of the imported graph stage by stage; kiln_context_output_shape-style
// queries give the bound before a run and the real shape after it.
#include <gtest/gtest.h>

#include "backends/plan_sim.h"
#include "backends/reference/data_dependent_stages.h"
#include "compiler/gpu_bounded_sizes.h"
#include "runtime/gpu_executor.h"
#include "runtime/plan_graph.h"
#include "tests/runtime/fake_gpu_util.h"

namespace kiln::fakegpu {
namespace {

// NonZero's coordinates, then the elements there through GatherND of the
// transposed coordinates (sigmoid'ed): [2,n] and [n], n in [0, 24].
constexpr const char* kNonzeroGather =
    R"(graph @nz(%x: f32[4,6], %t: f32[]) -> (i64[2,n], f32[n]) symbols(n in [0, 24]) {
    %p = greater(%x, %t) : bool[4,6]
    %where = nonzero(%p) {size_symbol="n"} : i64[2,n]
    %c = transpose(%where) {perm=[1,0]} : i64[n,2]
    %v = gather_nd(%x, %c) : f32[n]
    %picked = sigmoid(%v) : f32[n]
    return %where, %picked
  })";

// An SSD-style head's end: NMS, the kept boxes' column, the boxes gathered.
constexpr const char* kNmsGather =
    R"(graph @nms(%boxes: f32[1,12,4], %scores: f32[1,2,12], %all: f32[12,4]) -> (i64[m,3], f32[m,4]) symbols(m in [0, 12]) {
    %sel = non_max_suppression(%boxes, %scores) {center_point_box=0, iou_threshold=0.4, max_output_boxes_per_class=6, score_threshold=0.3, size_symbol="m"} : i64[m,3]
    %col = slice(%sel) {starts=[0,2], ends=[m,3], steps=[1,1]} : i64[m,1]
    %idx = reshape(%col) {shape=[m]} : i64[m]
    %kept = gather(%all, %idx) {axis=0} : f32[m,4]
    return %sel, %kept
  })";

plan::Plan bounded_plan(const char* text) {
  auto g = parse_graph(text);
  plan::BoundedSizes sizes;
  std::unique_ptr<Graph> at = graph_at_bounds(*g, "test", sizes);
  CompileOptions o;
  o.pass.target = "sm_90";
  compile_graph(*at, o);
  plan::Plan p = build_plan(*at, {"sm_90", "fp32", {}});
  p.bounded_sizes = sizes;
  return p;
}

// What the imported graph gives on the reference backend, stage by stage.
std::vector<Tensor> reference(const char* text, const std::map<std::string, Tensor>& feed) {
  auto g = parse_graph(text);
  return run_data_dependent_stages(
             *g, feed, [](Graph& s, const std::map<std::string, Tensor>& in) { return ReferenceExecutor(s).run(in); })
      .outputs;
}

Tensor scalar(float v) {
  Tensor t(TensorType(DType::F32, {}));
  t.data<float>()[0] = v;
  return t;
}

// x's elements are -1..22 shuffled, so threshold t keeps 22 - floor(t) of them.
Tensor ramp() {
  Tensor x(TensorType(DType::F32, {4, 6}));
  for (int i = 0; i < 24; ++i) x.data<float>()[i] = static_cast<float>((i * 7) % 24) - 1.5f;
  return x;
}

std::map<std::string, Tensor> nms_feed(float score_shift) {
  std::map<std::string, Tensor> f;
  Tensor boxes(TensorType(DType::F32, {1, 12, 4})), scores(TensorType(DType::F32, {1, 2, 12})),
      all(TensorType(DType::F32, {12, 4}));
  for (int b = 0; b < 12; ++b) {
    // Four clusters of three overlapping boxes: some kept, some suppressed.
    const float cx = 3.0f * static_cast<float>(b / 3), cy = 0.2f * static_cast<float>(b % 3);
    const float c[4] = {cx, cy, cx + 1.5f, cy + 1.5f};
    for (int k = 0; k < 4; ++k) boxes.data<float>()[b * 4 + k] = all.data<float>()[b * 4 + k] = c[k];
  }
  for (int i = 0; i < 24; ++i) scores.data<float>()[i] = static_cast<float>((i * 5) % 24) / 24.0f + score_shift;
  f.emplace("boxes", std::move(boxes));
  f.emplace("scores", std::move(scores));
  f.emplace("all", std::move(all));
  return f;
}

const std::map<std::string, plan::Plan>& bounded_plans() {
  static const std::map<std::string, plan::Plan> ps = [] {
    std::map<std::string, plan::Plan> r;
    r["nonzero"] = bounded_plan(kNonzeroGather);
    r["nms"] = bounded_plan(kNmsGather);
    return r;
  }();
  return ps;
}

class FakeGpuBoundedSizes : public FakeGpu {
 protected:
  void SetUp() override {
    bounded_plans();  // compiled before the fake driver is loaded (NVRTC)
    FakeGpu::SetUp();
  }
  std::vector<uint8_t> bounded_plan_bytes(const std::string& name) {
    // plan_for registers a plan's kernels with the fake driver by name.
    const plan::Plan& p = bounded_plans().at(name);
    std::vector<codegen::KernelSource> sources;
    for (const plan::Kernel& k : p.kernels) sources.push_back({k.name, k.source});
    static codegen::SimCompiler compiler;
    std::map<std::string, codegen::SimEntry> entries = compiler.compile(sources);
    for (const plan::StepAt& at : plan::all_steps(p)) {
      const plan::Step& s = *at.step;
      if (s.kind != plan::StepKind::Kernel) continue;
      SimKernel k{entries.at(p.kernels[s.kernel].name), {}};
      for (const plan::BufferRef& b : s.args) k.counts.push_back(b.elements);
      if (s.param_table) k.counts = {static_cast<long long>(2 * s.args.size())};
      kernels()[p.kernels[s.kernel].name] = k;
    }
    fake().set_kernels(arg_count, launch);
    note_kernel_buffers(p);
    fake().set_kernel_buffers(kernel_table_size, kernel_buffer_use);
    return plan::serialize(p);
  }
};

// Runs the context with `feed`; the outputs, trimmed by the runtime.
std::vector<Tensor> run_trimmed(rt::Context& ctx, const std::map<std::string, Tensor>& feed) {
  const rt::Engine& e = ctx.engine();
  for (const rt::TensorDesc& d : e.inputs()) ctx.bind_input(d.name, feed.at(d.name).raw(), d.type, false);
  std::vector<Tensor> bound;
  for (const rt::TensorDesc& d : e.outputs()) {
    bound.emplace_back(TensorType(d.type.dtype, ctx.output_shape(d.name)));
    ctx.bind_output(d.name, bound.back().raw(), bound.back().type(), false);
  }
  ctx.run();
  std::vector<Tensor> r;
  for (size_t i = 0; i < bound.size(); ++i) {
    Tensor t(TensorType(bound[i].dtype(), ctx.output_shape(e.outputs()[i].name)));
    if (t.nbytes()) std::memcpy(t.raw(), bound[i].raw(), t.nbytes());
    r.push_back(std::move(t));
  }
  return r;
}

void expect_equal(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].shape(), want[i].shape()) << what << ": output " << i;
    EXPECT_EQ(compare_tensors(got[i], want[i], {1e-6, 1e-6}), "") << what << ": output " << i;
  }
}

TEST_F(FakeGpuBoundedSizes, NonzeroGatherNdRunsAtEveryCountFromOneCapturedGraph) {
  const plan::Plan& p = bounded_plans().at("nonzero");
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  ASSERT_EQ(p.bounded_sizes.counts.size(), 1u);
  EXPECT_EQ(p.bounded_sizes.counts[0].bound, 24);
  std::vector<uint8_t> bytes = bounded_plan_bytes("nonzero");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "nonzero.plan", rt::Backend::Gpu);
  ASSERT_EQ(e->outputs().size(), 2u) << "the count is no user output";
  EXPECT_EQ(e->outputs()[0].api_shape, (std::vector<int64_t>{2, -1}));
  EXPECT_EQ(e->outputs()[1].api_shape, (std::vector<int64_t>{-1}));
  rt::Context ctx(e);
  EXPECT_EQ(ctx.output_shape("where"), (Shape{2, 24})) << "the bound before a run";
  const std::vector<int> before = stats();
  // Thresholds keeping some, none and every element.
  for (float t : {4.0f, 100.0f, -5.0f, 10.5f}) {
    std::map<std::string, Tensor> feed;
    feed.emplace("x", ramp());
    feed.emplace("t", scalar(t));
    std::vector<Tensor> want = reference(kNonzeroGather, feed);
    std::vector<Tensor> got = run_trimmed(ctx, feed);
    expect_equal(got, want, fmt::format("threshold {}", t));
    EXPECT_EQ(ctx.output_shape("picked"), want[1].shape());
  }
  // Every run replayed the plan's one CUDA Graph; nothing launched outside it.
  const std::vector<int> after = stats();
  EXPECT_EQ(after[2] - before[2], 4) << "graph launches";
  EXPECT_EQ(after[4] - before[4], 0) << "direct launches";
  // The plan-on-sim path: the same kernels, trimmed the same way.
  std::map<std::string, Tensor> feed;
  feed.emplace("x", ramp());
  feed.emplace("t", scalar(7.0f));
  auto g = plan::load_graph(p, "nonzero.plan");
  SymbolBindings counts;
  std::vector<Tensor> on_sim = plan::trim_outputs(p.bounded_sizes, run_plan_on_sim(p, *g, feed), &counts);
  expect_equal(on_sim, reference(kNonzeroGather, feed), "plan-on-sim");
  EXPECT_EQ(counts.at("n"), 15);
}

TEST_F(FakeGpuBoundedSizes, NmsThenGatherKeepsWhatOnnxKeeps) {
  std::vector<uint8_t> bytes = bounded_plan_bytes("nms");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "nms.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  EXPECT_EQ(ctx.output_shape("kept"), (Shape{12, 4}));
  std::set<int64_t> counts;
  for (float shift : {2.0f, -0.5f, -0.62f, -1.0f}) {
    std::map<std::string, Tensor> feed = nms_feed(shift);
    std::vector<Tensor> want = reference(kNmsGather, feed);
    expect_equal(run_trimmed(ctx, feed), want, fmt::format("score shift {}", shift));
    counts.insert(want[0].shape()[0]);
  }
  EXPECT_GE(counts.size(), 3u) << "different counts";
  EXPECT_EQ(*counts.begin(), 0) << "none kept";
  const plan::Plan& p = bounded_plans().at("nms");
  auto g = plan::load_graph(p, "nms.plan");
  std::map<std::string, Tensor> feed = nms_feed(0.0f);
  expect_equal(plan::trim_outputs(p.bounded_sizes, run_plan_on_sim(p, *g, feed)), reference(kNmsGather, feed),
               "plan-on-sim");
}

TEST_F(FakeGpuBoundedSizes, WhatTrimmingOnTheHostCannotServeIsRefused) {
  std::vector<uint8_t> bytes = bounded_plan_bytes("nonzero");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "nonzero.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  try {
    ctx.bind_output_device("picked", 0x10000);
    FAIL() << "a zero-copy data-dependent output must be refused";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("output \"picked\": its size is decided at run time"), std::string::npos)
        << err.what();
  }
  Tensor small(TensorType(DType::F32, {3}));
  EXPECT_THROW(ctx.bind_output("picked", small.raw(), small.type(), false), Error) << "bound below the bound";
}

// The compiler's side: what is not exact at the bound is refused by name.
TEST(GpuBoundedSizes, ConsumersMixingAcrossTheCountAreRefused) {
  auto g = parse_graph(R"(graph @sum(%x: f32[6]) -> (f32[1]) symbols(n in [0, 6]) {
    %i = nonzero(%x) {size_symbol="n"} : i64[1,n]
    %j = reshape(%i) {shape=[n]} : i64[n]
    %v = gather(%x, %j) {axis=0} : f32[n]
    %s = reduce_sum(%v) {axes=[0], keepdims=1} : f32[1]
    return %s
  })");
  plan::BoundedSizes sizes;
  try {
    graph_at_bounds(*g, "sum.onnx", sizes);
    FAIL() << "a sum over the count must be refused";
  } catch (const Unsupported& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("sum.onnx: node (reduce_sum) producing %s reads a value whose size is decided at run time (n)"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("it reduces along a data-dependent dim"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kiln::fakegpu
