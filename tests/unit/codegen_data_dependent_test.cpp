// codegen/emitters/misc/emit_data_dependent.h against the reference: the
// bounded nonzero (several dtypes and ranks, more elements than one chunk of
// the block scan, an empty input, a scalar) and the bounded
// non_max_suppression (corner and center boxes, with and without a score
// threshold, several batches and classes, ties) give the reference's results
// bit for bit, padding and count included, on the simulator; every kernel
// compiles with NVRTC for sm_80 and sm_90 without spills. Then whole graphs
// with data-dependent sizes run stage by stage on sim as on ref.
#include <gtest/gtest.h>

#include <random>

#include "backends/data_dependent_run.h"
#include "backends/run_on_backend.h"
#include "ir/error.h"  // before codegen_graph_check.h, which uses kiln::Error
#include "tests/unit/codegen_graph_check.h"

namespace kiln {
namespace {

using testing::parse;

// Runs `g` on ref and sim with `feed`; every result must be identical.
void expect_same(const Graph& g, const std::map<std::string, Tensor>& feed) {
  std::vector<Tensor> want = run_on_backend("ref", const_cast<Graph&>(g), feed);
  std::vector<Tensor> got = run_on_backend("sim", const_cast<Graph&>(g), feed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].type(), want[i].type()) << "result " << i;
    EXPECT_EQ(compare_tensors(got[i], want[i], {0, 0}), "") << "result " << i << "\n" << print_graph(g);
  }
}

// A tensor of `t` whose elements are zero with probability 1/2 (f16/bf16:
// +-0 bit patterns among them), else a small non-zero value.
Tensor half_zero(const TensorType& t, uint64_t seed) {
  Tensor x(t);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool zero = rng() % 2 == 0;
    const int64_t v = zero ? 0 : 1 + static_cast<int64_t>(rng() % 5);
    if (t.dtype == DType::F16 || t.dtype == DType::BF16) {
      x.data<uint16_t>()[i] = zero ? (rng() % 2 ? 0x8000 : 0) : (t.dtype == DType::F16 ? 0x3c00 : 0x3f80);
    } else if (t.dtype == DType::F32) {
      x.data<float>()[i] = zero ? (rng() % 2 ? -0.0f : 0.0f) : static_cast<float>(v) - 3.5f;
    } else {
      x.set_int(i, t.dtype == DType::Bool ? (v != 0) : v);
    }
  }
  return x;
}

std::unique_ptr<Graph> bounded_nonzero(const TensorType& x) {
  const int64_t rank = std::max(x.rank(), 1), n = x.numel();
  return parse(fmt::format(R"(
graph @nonzero(%x: {0}) -> (i64[{1},{2}], i64[]) {{
  %y, %c = nonzero(%x) {{bounded=1}} : i64[{1},{2}], i64[]
  return %y, %c
}}
)",
                           x.str(), rank, n));
}

TEST(CodegenDataDependent, BoundedNonzeroMatchesReference) {
  const std::vector<TensorType> cases = {
      TensorType(DType::F32, {3, 4, 50}),  // 600 elements: three chunks of the scan
      TensorType(DType::F16, {7, 9}),     TensorType(DType::BF16, {33}), TensorType(DType::I32, {2, 2, 2, 2}),
      TensorType(DType::Bool, {300}),     TensorType(DType::I64, {}),    TensorType(DType::U8, {0, 3}),
  };
  std::vector<std::unique_ptr<Graph>> graphs;
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(cases[c].str());
    graphs.push_back(bounded_nonzero(cases[c]));
    expect_same(*graphs.back(), {{"x", half_zero(cases[c], c + 1)}});
  }
  std::vector<const Graph*> all;
  for (const auto& g : graphs) all.push_back(g.get());
  testing::expect_kernels_compile(all, "bounded nonzero");
}

std::unique_ptr<Graph> bounded_nms(int64_t B, int64_t C, int64_t n, int64_t per_class, const std::string& extra) {
  const int64_t bound = B * C * std::min(per_class, n);
  return parse(fmt::format(R"(
graph @nms(%b: f32[{0},{2},4], %s: f32[{0},{1},{2}]) -> (i64[{3},3], i64[]) {{
  %y, %c = non_max_suppression(%b, %s) {{bounded=1, iou_threshold=0.5, max_output_boxes_per_class={4}{5}}} : i64[{3},3], i64[]
  return %y, %c
}}
)",
                           B, C, n, bound, per_class, extra));
}

// Boxes in clusters (so many overlap), scores quantised to 1/16 (ties).
std::map<std::string, Tensor> nms_inputs(int64_t B, int64_t C, int64_t n, bool center, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  Tensor boxes(TensorType(DType::F32, {B, n, 4})), scores(TensorType(DType::F32, {B, C, n}));
  for (int64_t i = 0; i < B * n; ++i) {
    float cy = std::floor(u(rng) * 4) * 3 + u(rng), cx = std::floor(u(rng) * 4) * 3 + u(rng);
    float h = 1 + u(rng) * 2, w = 1 + u(rng) * 2;
    float* p = boxes.data<float>() + i * 4;
    if (center) {
      p[0] = cx, p[1] = cy, p[2] = w, p[3] = h;
    } else {  // corners, some given in the other order
      bool flip = rng() % 4 == 0;
      p[0] = flip ? cy + h : cy, p[1] = cx, p[2] = flip ? cy : cy + h, p[3] = cx + w;
    }
  }
  for (int64_t i = 0; i < scores.numel(); ++i) scores.data<float>()[i] = std::floor(u(rng) * 16) / 16;
  return {{"b", boxes}, {"s", scores}};
}

TEST(CodegenDataDependent, BoundedNmsMatchesReference) {
  struct Case {
    int64_t B, C, n, per_class;
    bool center;
    std::string extra;
  };
  const std::vector<Case> cases = {
      {1, 1, 6, 3, false, ", score_threshold=0.0"},      // a whole-number threshold: the literal must be 0.0f
      {2, 3, 300, 100, false, ", score_threshold=0.3"},  // more boxes than threads
      {2, 2, 50, 100, true, ", center_point_box=1"},     // the cap above n
      {1, 2, 40, 0, false, ""},                          // nothing may be kept
  };
  std::vector<std::unique_ptr<Graph>> graphs;
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    SCOPED_TRACE(fmt::format("case {}", c));
    graphs.push_back(bounded_nms(k.B, k.C, k.n, k.per_class, k.extra));
    auto feed = nms_inputs(k.B, k.C, k.n, k.center, 10 + c);
    expect_same(*graphs.back(), feed);
    if (c == 1) {  // some boxes kept, some suppressed, the cap not reached
      std::vector<Tensor> r = run_on_backend("sim", *graphs.back(), feed);
      const int64_t count = r[1].data<int64_t>()[0];
      const Tensor& scores = feed.at("s");
      int64_t candidates = 0;
      for (int64_t i = 0; i < scores.numel(); ++i) candidates += scores.data<float>()[i] > 0.3f;
      EXPECT_GT(count, 0);
      EXPECT_LT(count, candidates);
      EXPECT_LT(count, k.B * k.C * k.per_class);
    }
  }
  std::vector<const Graph*> all;
  for (const auto& g : graphs) all.push_back(g.get());
  testing::expect_kernels_compile(all, "bounded non_max_suppression");
}

// The bounded form's third operand, the number of valid boxes (a GPU plan
// computed at the bounds feeds it a box list whose own count is decided at
// run time): on sim as on ref, and what NMS gives over those boxes alone.
TEST(CodegenDataDependent, BoundedNmsTakesOnlyTheValidBoxes) {
  const int64_t n = 40;
  auto g = parse(R"(
graph @nms(%b: f32[1,40,4], %s: f32[1,2,40], %v: i64[1]) -> (i64[60,3], i64[]) {
  %y, %c = non_max_suppression(%b, %s, %v) {bounded=1, iou_threshold=0.5, max_output_boxes_per_class=30} : i64[60,3], i64[]
  return %y, %c
}
)");
  auto feed = nms_inputs(1, 2, n, false, 7);
  for (int64_t valid : {int64_t(0), int64_t(7), int64_t(25), n, int64_t(100)}) {
    SCOPED_TRACE(fmt::format("{} valid", valid));
    Tensor v(TensorType(DType::I64, {1}));
    v.set_int(0, valid);
    feed["v"] = v;
    expect_same(*g, feed);
    // The same NMS over the first `valid` boxes only (a static graph).
    const int64_t m = std::min(valid, n);
    if (m == 0) {
      EXPECT_EQ(run_on_backend("ref", *g, feed)[1].get_int(0), 0);
      continue;
    }
    auto alone = bounded_nms(1, 2, m, 30, "");
    Tensor b(TensorType(DType::F32, {1, m, 4})), s(TensorType(DType::F32, {1, 2, m}));
    std::copy_n(feed.at("b").data<float>(), m * 4, b.data<float>());
    for (int c = 0; c < 2; ++c) std::copy_n(feed.at("s").data<float>() + c * n, m, s.data<float>() + c * m);
    std::vector<Tensor> want = run_on_backend("ref", *alone, {{"b", b}, {"s", s}});
    std::vector<Tensor> got = run_on_backend("sim", *g, feed);
    const int64_t count = want[1].get_int(0);
    ASSERT_EQ(got[1].get_int(0), count);
    for (int64_t i = 0; i < count * 3; ++i) EXPECT_EQ(got[0].get_int(i), want[0].get_int(i)) << "entry " << i;
  }
  testing::expect_kernels_compile({g.get()}, "bounded non_max_suppression with a valid count");
}

TEST(CodegenDataDependent, GraphsRunStageByStageOnSim) {
  // nonzero -> gather -> mul, and NMS -> gather of the kept box rows, and a
  // topk whose k is an input: every stage's and lowered node's kernels on
  // the simulator give what the reference gives.
  auto g = parse(R"(
graph @pipeline(%x: f32[64], %boxes: f32[1,40,4], %scores: f32[1,2,40], %k: i64[1]) -> (f32[n], i64[m,3], f32[m,4], f32[t]) symbols(n in [0, 64], m in [0, 20], t in [0, 64]) {
  %two = const f32[] splat<2.0>
  %col = const i64[1] dense<[2]>
  %i = nonzero(%x) {size_symbol="n"} : i64[1,n]
  %j = reshape(%i) {shape=[n]} : i64[n]
  %g = gather(%x, %j) {axis=0} : f32[n]
  %y = mul(%g, %two) : f32[n]
  %sel = non_max_suppression(%boxes, %scores) {iou_threshold=0.4, max_output_boxes_per_class=10, size_symbol="m"} : i64[m,3]
  %bi = gather(%sel, %col) {axis=1} : i64[m,1]
  %bj = reshape(%bi) {shape=[m]} : i64[m]
  %flat = reshape(%boxes) {shape=[40,4]} : f32[40,4]
  %kept = gather(%flat, %bj) {axis=0} : f32[m,4]
  %v, %vi = topk(%x, %k) {axis=0, largest=1, size_symbol="t", sorted=1} : f32[t], i64[t]
  return %y, %sel, %kept, %v
}
)");
  auto nms = nms_inputs(1, 2, 40, false, 3);
  std::map<std::string, Tensor> feed = {{"boxes", nms.at("b")}, {"scores", nms.at("s")}};
  feed["x"] = half_zero(TensorType(DType::F32, {64}), 4);
  feed["k"] = Tensor::from(DType::I64, {1}, std::vector<int64_t>{5});
  expect_same(*g, feed);
  DataDependentRunResult r = run_with_data_dependent_sizes("sim", *g, feed);
  EXPECT_GT(r.symbols.at("n"), 0);
  EXPECT_GT(r.symbols.at("m"), 0);
  EXPECT_EQ(r.symbols.at("t"), 5);
  EXPECT_EQ(r.outputs[2].shape(), (Shape{r.symbols.at("m"), 4}));
}

}  // namespace
}  // namespace kiln
