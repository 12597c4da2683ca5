// Plans computed at the bounds of their data-dependent sizes
// (compiler/gpu_bounded_sizes.h, runtime/plan_bounded_sizes.h): the graph at
// the bounds keeps the imported graph's meaning through the default pipeline
// (fp32 and fp16, checked on the reference backend against the imported
// graph run stage by stage); the `bounded sizes` section round-trips and its
// loader checks name what disagrees; the trim moves a sub-box to the front;
// the runtime's CPU path runs such a plan and trims its outputs.
#include <gtest/gtest.h>

#include "backends/compare.h"
#include "backends/reference/data_dependent_stages.h"
#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/gpu_bounded_sizes.h"
#include "compiler/plan_writer.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "runtime/engine.h"
#include "runtime/plan_graph.h"

namespace kiln {
namespace {

// Positive entries' coordinates and values, scaled and shifted (a pointwise
// chain after the gather that fusion merges), and a top-k with k an input.
constexpr const char* kSelect =
    R"(graph @sel(%x: f32[4,6], %t: f32[], %k: i64[1]) -> (i64[2,n], f32[n], f32[4,k]) symbols(n in [0, 24], k in [0, 6]) {
    %p = greater(%x, %t) : bool[4,6]
    %i = nonzero(%p) {size_symbol="n"} : i64[2,n]
    %c = transpose(%i) {perm=[1,0]} : i64[n,2]
    %v = gather_nd(%x, %c) : f32[n]
    %e = exp(%v) : f32[n]
    %s = mul(%e, %v) : f32[n]
    %y = tanh(%s) : f32[n]
    %top, %ti = topk(%x, %k) {axis=1, largest=1, size_symbol="k", sorted=1} : f32[4,k], i64[4,k]
    return %i, %y, %top
  })";

std::map<std::string, Tensor> feed(float threshold, int64_t k) {
  std::map<std::string, Tensor> f;
  Tensor x(TensorType(DType::F32, {4, 6})), t(TensorType(DType::F32, {})), kk(TensorType(DType::I64, {1}));
  for (int i = 0; i < 24; ++i) x.data<float>()[i] = 0.25f * static_cast<float>((i * 7) % 24) - 2.9f;
  t.data<float>()[0] = threshold;
  kk.data<int64_t>()[0] = k;
  f.emplace("x", std::move(x));
  f.emplace("t", std::move(t));
  f.emplace("k", std::move(kk));
  return f;
}

std::vector<Tensor> stage_by_stage(const std::map<std::string, Tensor>& in) {
  auto g = parse_graph(kSelect);
  return run_data_dependent_stages(
             *g, in, [](Graph& s, const std::map<std::string, Tensor>& f) { return ReferenceExecutor(s).run(f); })
      .outputs;
}

void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want, Tolerance tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].shape(), want[i].shape()) << what << " output " << i;
    EXPECT_EQ(compare_tensors(got[i], want[i], tol), "") << what << " output " << i;
  }
}

TEST(PlanBoundedSizes, TheGraphAtTheBoundsKeepsItsMeaningThroughThePasses) {
  for (const char* precision : {"fp32", "fp16"}) {
    auto g = parse_graph(kSelect);
    plan::BoundedSizes sizes;
    std::unique_ptr<Graph> at = graph_at_bounds(*g, "sel", sizes);
    ASSERT_EQ(sizes.counts.size(), 2u);
    EXPECT_TRUE(at->symbols().empty());
    ASSERT_EQ(at->outputs().size(), 5u) << "three outputs and two counts";
    std::unique_ptr<Graph> before = at->clone();
    CompileOptions o;
    o.pass.target = "sm_90";
    o.pass.precision = precision;
    CompileReport r = compile_graph(*at, o);
    EXPECT_LT(r.nodes_out, r.nodes_in) << "the passes changed nothing (" << precision << ")";
    for (auto [t, k] : {std::pair{0.1f, int64_t{3}}, {9.0f, 0}, {-9.0f, 6}}) {
      std::map<std::string, Tensor> in = feed(t, k);
      const std::vector<Tensor> want = stage_by_stage(in);
      const std::string what = fmt::format("{} at threshold {} k {}", precision, t, k);
      expect_close(plan::trim_outputs(sizes, ReferenceExecutor(*before).run(in)), want, {0, 0}, what + " (lowered)");
      const Tolerance tol = std::string(precision) == "fp32" ? Tolerance{1e-5, 1e-4} : Tolerance{2.5e-3, 1e-3};
      expect_close(plan::trim_outputs(sizes, ReferenceExecutor(*at).run(in)), want, tol, what + " (after passes)");
    }
  }
}

plan::Plan cpu_plan(plan::BoundedSizes* sizes) {
  auto g = parse_graph(kSelect);
  std::unique_ptr<Graph> at = graph_at_bounds(*g, "sel", *sizes);
  CompileOptions o;
  o.pass.target = "cpu";
  compile_graph(*at, o);
  plan::Plan p = build_plan(*at, {"cpu", "fp32", {}});
  p.bounded_sizes = *sizes;
  return p;
}

TEST(PlanBoundedSizes, TheSectionRoundTripsAndTheLoaderChecksIt) {
  plan::BoundedSizes sizes;
  plan::Plan p = cpu_plan(&sizes);
  std::vector<uint8_t> bytes = plan::serialize(p);
  plan::Plan back = plan::deserialize(bytes.data(), bytes.size(), "sel.plan");
  EXPECT_EQ(back.bounded_sizes, sizes);
  EXPECT_NO_THROW(plan::load_graph(back, "sel.plan"));
  auto load_fails = [&](plan::Plan damaged, const std::string& expect) {
    std::vector<uint8_t> b = plan::serialize(damaged);
    plan::Plan d = plan::deserialize(b.data(), b.size(), "bad.plan");
    try {
      plan::load_graph(d, "bad.plan");
      ADD_FAILURE() << "loaded: " << expect;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  plan::Plan d = p;
  d.bounded_sizes.outputs[0][1] = dim_poly(12);
  load_fails(d, "section 'bounded sizes': output 0 dim 1 is 12 at the bounds, the graph's %i has 24");
  d = p;
  d.bounded_sizes.counts[1].output = 3;
  load_fails(d, "section 'bounded sizes': count 1 (k) is output 3, expected 4");
  d = p;
  d.bounded_sizes.outputs.pop_back();
  load_fails(d, "section 'bounded sizes' has 2 outputs and 2 counts, the graph has 5 outputs");
  d = p;
  d.bounded_sizes.outputs[2][1] = dim_poly(symbol_dim("m"));
  load_fails(d, "output 2 dim 1 uses 'm', which is no count's symbol");
}

TEST(PlanBoundedSizes, TheTrimMovesTheSubBoxToTheFront) {
  // [2,3,4] laid out at the bound, trimmed to [2,2,3].
  std::vector<int32_t> v(24);
  for (int i = 0; i < 24; ++i) v[i] = i;
  plan::trim_in_place(v.data(), DType::I32, {2, 3, 4}, {2, 2, 3});
  EXPECT_EQ(std::vector<int32_t>(v.begin(), v.begin() + 12),
            (std::vector<int32_t>{0, 1, 2, 4, 5, 6, 12, 13, 14, 16, 17, 18}));
  std::vector<int32_t> none(8, 7);
  plan::trim_in_place(none.data(), DType::I32, {2, 4}, {2, 0});  // nothing to move, nothing written
  EXPECT_EQ(none, std::vector<int32_t>(8, 7));
}

TEST(PlanBoundedSizes, TheRuntimesCpuPathTrimsToTheCounts) {
  plan::BoundedSizes sizes;
  std::vector<uint8_t> bytes = plan::serialize(cpu_plan(&sizes));
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "sel.plan", rt::Backend::Cpu);
  ASSERT_EQ(e->outputs().size(), 3u);
  EXPECT_EQ(e->outputs()[2].api_shape, (std::vector<int64_t>{4, -1}));
  rt::Context ctx(e);
  for (int64_t k : {2, 6, 0}) {
    std::map<std::string, Tensor> in = feed(0.5f, k);
    for (const auto& [name, t] : in) ctx.bind_input(name, t.raw(), t.type(), false);
    std::vector<Tensor> outs;
    for (const rt::TensorDesc& d : e->outputs()) {
      outs.emplace_back(TensorType(d.type.dtype, ctx.output_shape(d.name)));
      ctx.bind_output(d.name, outs.back().raw(), outs.back().type(), false);
    }
    ctx.run();
    const std::vector<Tensor> want = stage_by_stage(in);
    for (size_t i = 0; i < outs.size(); ++i) {
      Tensor got(TensorType(outs[i].dtype(), ctx.output_shape(e->outputs()[i].name)));
      if (got.nbytes()) std::memcpy(got.raw(), outs[i].raw(), got.nbytes());
      EXPECT_EQ(got.shape(), want[i].shape()) << "k " << k << " output " << i;
      EXPECT_EQ(compare_tensors(got, want[i], {1e-5, 1e-4}), "") << "k " << k << " output " << i;
    }
  }
  // k past the axis: the run's error names the node; no shapes are left.
  std::map<std::string, Tensor> in = feed(0.5f, 7);
  // The loop's buffers are gone: bind new ones.
  for (const auto& [name, t] : in) ctx.bind_input(name, t.raw(), t.type(), false);
  std::vector<Tensor> bound;
  for (const rt::TensorDesc& d : e->outputs()) {
    bound.emplace_back(TensorType(d.type.dtype, ctx.output_shape(d.name)));
    ctx.bind_output(d.name, bound.back().raw(), bound.back().type(), false);
  }
  try {
    ctx.run();
    FAIL() << "k = 7 ran";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("producing %top: the run gave its result size k = 7, outside [0, 6]"),
              std::string::npos)
        << err.what();
  }
  EXPECT_EQ(ctx.output_shape("top"), (Shape{4, 6})) << "the bound again after a failed run";
}

}  // namespace
}  // namespace kiln
