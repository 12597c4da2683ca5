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
#include "tests/runtime/bounded_size_plans.h"
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

// torchvision's detection post-processing in little (ssdlite's): per class,
// the scores above a threshold (NonZero), the best min(4, n) of them (TopK
// with k from the constant holding n), the classes' boxes, scores and labels
// concatenated along the counts; if none is left an empty keep (the If's
// condition from the constant holding the concat's shape), else batched NMS
// (boxes offset by label * (max coordinate + 1)); the first 6 kept (a clamped
// slice) and their boxes, scores and labels.
constexpr const char* kPostIf =
    R"(graph @post(%s: f32[2,10], %b: f32[10,4], %t: f32[]) -> (f32[c,4], f32[c], i64[c]) symbols(n in [0, 10], k in [0, 10], n2 in [0, 10], k2 in [0, 10], m in [0, 20], i in [0, 20], c in [0, 6]) {
    %zero = const i64[] splat<0>
    %one = const i64[] splat<1>
    %four = const i64[1] dense<[4]>
    %s0 = gather(%s, %zero) {axis=0} : f32[10]
    %p0 = greater(%s0, %t) : bool[10]
    %nz0 = nonzero(%p0) {size_symbol="n"} : i64[1,n]
    %i0 = reshape(%nz0) {shape=[n]} : i64[n]
    %v0 = gather(%s0, %i0) {axis=0} : f32[n]
    %b0 = gather(%b, %i0) {axis=0} : f32[n,4]
    %sh0 = const i64[1] dense<[n]>
    %kk0 = concat(%four, %sh0) {axis=0} : i64[2]
    %k0 = reduce_min(%kk0) {axes=[0], keepdims=1} : i64[1]
    %top0, %ti0 = topk(%v0, %k0) {axis=0, largest=1, sorted=1, size_symbol="k"} : f32[k], i64[k]
    %tb0 = gather(%b0, %ti0) {axis=0} : f32[k,4]
    %l0 = expand(%zero) {shape=[k]} : i64[k]
    %s1 = gather(%s, %one) {axis=0} : f32[10]
    %p1 = greater(%s1, %t) : bool[10]
    %nz1 = nonzero(%p1) {size_symbol="n2"} : i64[1,n2]
    %i1 = reshape(%nz1) {shape=[n2]} : i64[n2]
    %v1 = gather(%s1, %i1) {axis=0} : f32[n2]
    %b1 = gather(%b, %i1) {axis=0} : f32[n2,4]
    %sh1 = const i64[1] dense<[n2]>
    %kk1 = concat(%four, %sh1) {axis=0} : i64[2]
    %k1 = reduce_min(%kk1) {axes=[0], keepdims=1} : i64[1]
    %top1, %ti1 = topk(%v1, %k1) {axis=0, largest=1, sorted=1, size_symbol="k2"} : f32[k2], i64[k2]
    %tb1 = gather(%b1, %ti1) {axis=0} : f32[k2,4]
    %l1 = expand(%one) {shape=[k2]} : i64[k2]
    %allb = concat(%tb0, %tb1) {axis=0} : f32[k+k2,4]
    %alls = concat(%top0, %top1) {axis=0} : f32[k+k2]
    %alll = concat(%l0, %l1) {axis=0} : i64[k+k2]
    %dims = const i64[2] dense<[k+k2, 4]>
    %numel = reduce_prod(%dims) {axes=[0], keepdims=0} : i64[]
    %empty = equal(%numel, %zero) : bool[]
    %keep = if(%empty, %allb, %alls, %alll) {size_symbol="i"} : i64[i] {
      graph @then(%tb: f32[k+k2,4], %ts: f32[k+k2], %tl: i64[k+k2]) -> (i64[0]) {
        %none = const i64[0] dense<[]>
        return %none
      }
      graph @else(%eb: f32[k+k2,4], %es: f32[k+k2], %el: i64[k+k2]) -> (i64[m]) {
        %two = const i64[] splat<2>
        %onef = const f32[] splat<1.0>
        %mx = reduce_max(%eb) {axes=[0,1], keepdims=0} : f32[]
        %mx1 = add(%mx, %onef) : f32[]
        %lf = cast(%el) {to="f32"} : f32[k+k2]
        %off = mul(%lf, %mx1) : f32[k+k2]
        %offc = reshape(%off) {shape=[k+k2,1]} : f32[k+k2,1]
        %bo = add(%eb, %offc) : f32[k+k2,4]
        %bx = reshape(%bo) {shape=[1,k+k2,4]} : f32[1,k+k2,4]
        %sx = reshape(%es) {shape=[1,1,k+k2]} : f32[1,1,k+k2]
        %sel = non_max_suppression(%bx, %sx) {center_point_box=0, iou_threshold=0.4, max_output_boxes_per_class=100, size_symbol="m"} : i64[m,3]
        %col = gather(%sel, %two) {axis=1} : i64[m]
        return %col
      }
    }
    %first = slice(%keep) {starts=[0], ends=[6], steps=[1], size_symbol="c"} : i64[c]
    %ob = gather(%allb, %first) {axis=0} : f32[c,4]
    %os = gather(%alls, %first) {axis=0} : f32[c]
    %ol = gather(%alll, %first) {axis=0} : i64[c]
    return %ob, %os, %ol
  })";

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

// Scores for two classes and ten boxes in clusters of overlapping ones, all
// their coordinates shifted by `at`. At -8.5 the max coordinate is -1, so the
// batched NMS offsets no class (label * 0) and each class-1 box suppresses the
// class-0 box under it; a reduce_max seeing the padding's zeros would offset
// class 1 by 1 and keep both.
std::map<std::string, Tensor> post_feed(float threshold, float at) {
  std::map<std::string, Tensor> f;
  Tensor s(TensorType(DType::F32, {2, 10})), b(TensorType(DType::F32, {10, 4}));
  for (int i = 0; i < 20; ++i) s.data<float>()[i] = static_cast<float>((i * 7) % 20) / 20.0f;
  for (int k = 0; k < 10; ++k) {
    const float x = at + 2.0f * static_cast<float>(k / 3), y = at + 0.3f * static_cast<float>(k % 3);
    const float c[4] = {x, y, x + 1.5f, y + 1.5f};
    for (int q = 0; q < 4; ++q) b.data<float>()[k * 4 + q] = c[q];
  }
  f.emplace("s", std::move(s));
  f.emplace("b", std::move(b));
  f.emplace("t", scalar(threshold));
  return f;
}

const std::map<std::string, plan::Plan>& bounded_plans() {
  static const std::map<std::string, plan::Plan> ps = [] {
    std::map<std::string, plan::Plan> r;
    r["nonzero"] = bounded_plan(kNonzeroGather);
    r["nms"] = bounded_plan(kNmsGather);
    r["post"] = bounded_plan(kPostIf);
    r["topk"] = bounded_plan(kFixedKTopk);
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
    for (const auto& [name, counts] : sim_kernel_counts(p)) kernels()[name] = SimKernel{entries.at(name), counts};
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

// The If-guarded post-processing (kPostIf): both branches compiled in, the
// condition read on the device, every count from the kernels; the outputs
// equal the reference's stage-by-stage run for no box left (the then
// branch), fewer than the slice keeps and more, from one captured graph.
TEST_F(FakeGpuBoundedSizes, IfGuardedNmsAndClampedSliceRunFromOneCapturedGraph) {
  const plan::Plan& p = bounded_plans().at("post");
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  std::vector<std::string> syms;
  for (const plan::SizeCount& c : p.bounded_sizes.counts) syms.push_back(c.symbol + "<=" + std::to_string(c.bound));
  EXPECT_EQ(fmt::format("{}", fmt::join(syms, " ")), "n<=10 k<=10 n2<=10 k2<=10 m<=20 i<=20 c<=6");
  std::vector<uint8_t> bytes = bounded_plan_bytes("post");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "post.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  EXPECT_EQ(ctx.output_shape("ob"), (Shape{6, 4})) << "the bound before a run";
  const std::vector<int> before = stats();
  std::set<int64_t> kept;
  int runs = 0;
  for (float at : {3.0f, -8.5f})
    for (float t : {2.0f, 0.86f, 0.5f, -1.0f}) {
      std::map<std::string, Tensor> feed = post_feed(t, at);
      std::vector<Tensor> want = reference(kPostIf, feed);
      expect_equal(run_trimmed(ctx, feed), want, fmt::format("threshold {}, boxes at {}", t, at));
      kept.insert(want[0].shape()[0]);
      ++runs;
    }
  EXPECT_TRUE(kept.count(0)) << "the then branch (no box left)";
  EXPECT_TRUE(kept.count(6)) << "more kept than the slice takes";
  EXPECT_GE(kept.size(), 3u) << "a count between";
  const std::vector<int> after = stats();
  EXPECT_EQ(after[2] - before[2], runs) << "graph launches: no host read inside a run";
  EXPECT_EQ(after[4] - before[4], 0) << "direct launches";
  auto g = plan::load_graph(p, "post.plan");
  std::map<std::string, Tensor> feed = post_feed(0.5f, -8.5f);
  expect_equal(plan::trim_outputs(p.bounded_sizes, run_plan_on_sim(p, *g, feed)), reference(kPostIf, feed),
               "plan-on-sim");
}

// The count n is no output's dim: the runtime still says it (the API's
// data-dependent sizes), for each run, and not before one.
TEST_F(FakeGpuBoundedSizes, FixedKTopkOverTheCountNeverPicksPadding) {
  std::vector<uint8_t> bytes = bounded_plan_bytes("topk");
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "topk.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  ASSERT_EQ(e->bounded_sizes()->counts.size(), 1u);
  EXPECT_EQ(ctx.data_dependent_size(0), std::nullopt) << "a count before any run";
  EXPECT_THROW(ctx.data_dependent_size(1), Error);
  for (auto [t, selected] : {std::pair{0.0f, 6}, {0.7f, 5}, {3.5f, 2}}) {
    std::map<std::string, Tensor> feed;
    Tensor x(TensorType(DType::F32, {8}));
    const float v[8] = {-5, 1, 2, 3, -1, 4, 0.5f, 6};
    std::copy_n(v, 8, x.data<float>());
    feed.emplace("x", std::move(x));
    feed.emplace("t", scalar(t));
    expect_equal(run_trimmed(ctx, feed), reference(kFixedKTopk, feed), fmt::format("threshold {}", t));
    EXPECT_EQ(ctx.data_dependent_size(0), std::optional<int64_t>(selected)) << "threshold " << t;
  }
  const Tensor high = scalar(9.0f);
  ctx.bind_input("t", high.raw(), high.type(), false);
  EXPECT_EQ(ctx.data_dependent_size(0), std::nullopt) << "the count of an earlier run after new inputs";
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
    %s = reduce_mean(%v) {axes=[0], keepdims=1} : f32[1]
    return %s
  })");
  plan::BoundedSizes sizes;
  try {
    graph_at_bounds(*g, "mean.onnx", sizes);
    FAIL() << "a mean over the count must be refused (a sum, max, min or product sees the padding masked)";
  } catch (const Unsupported& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("mean.onnx: node (reduce_mean) producing %s reads a value whose size is decided at run time (n)"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("it reduces along a data-dependent dim"), std::string::npos) << m;
  }
}

// What the rewrites cannot keep exact at the bound, or in one CUDA Graph, is
// refused by name too: a clamped slice counting from the end (its entries are
// no prefix of the bound ones), and an if deciding sizes whose branch holds a
// region of its own (a loop: a host read per iteration).
TEST(GpuBoundedSizes, ClampedSliceFromTheEndAndRegionsInAnInlinedBranchAreRefused) {
  auto tail = parse_graph(R"(graph @tail(%x: f32[6]) -> (i64[c]) symbols(n in [0, 6], c in [0, 3]) {
    %i = nonzero(%x) {size_symbol="n"} : i64[1,n]
    %j = reshape(%i) {shape=[n]} : i64[n]
    %last = slice(%j) {starts=[-3], ends=[9223372036854775807], steps=[1], size_symbol="c"} : i64[c]
    return %last
  })");
  plan::BoundedSizes sizes;
  try {
    graph_at_bounds(*tail, "tail.onnx", sizes);
    FAIL() << "x[-3:] of a counted dim must be refused";
  } catch (const Unsupported& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("tail.onnx: node (slice) producing %last reads a value whose size is decided at run time"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("it clamps a data-dependent dim with a negative or run-time start"), std::string::npos) << m;
  }
  auto looped =
      parse_graph(R"(graph @looped(%c: bool[], %x: f32[6], %t: i64[]) -> (i64[k]) symbols(n in [0, 6], k in [0, 6]) {
    %r = if(%c, %x, %t) {size_symbol="k"} : i64[k] loc("guard") {
      graph @then(%a: f32[6], %ta: i64[]) -> (i64[0]) {
        %e = const i64[0] dense<[]>
        return %e
      }
      graph @else(%b: f32[6], %tb: i64[]) -> (i64[n]) {
        %w = loop(%tb, _, %b) {carried=1} : f32[6] loc("spin") {
          graph @body(%i: i64[], %d: bool[], %u: f32[6]) -> (bool[], f32[6]) {
            return %d, %u
          }
        }
        %nz = nonzero(%w) {size_symbol="n"} : i64[1,n]
        %col = reshape(%nz) {shape=[n]} : i64[n]
        return %col
      }
    }
    return %r
  })");
  try {
    graph_at_bounds(*looped, "looped.onnx", sizes);
    FAIL() << "a loop inside an inlined branch must be refused";
  } catch (const Unsupported& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("looped.onnx: node \"spin\" (loop) in a branch of node \"guard\" (if): an if deciding sizes in a "
                     "GPU plan inlines its branches, which may hold no regions of their own"),
              std::string::npos)
        << m;
  }
}

}  // namespace
}  // namespace kiln::fakegpu
