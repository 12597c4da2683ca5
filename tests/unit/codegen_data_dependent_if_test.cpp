// An if whose branches decide sizes (ir/data_dependent.h,
// backends/data_dependent_run.h): torchvision's batched NMS behind its "no
// boxes?" guard, after a nonzero that picks the boxes over a score threshold
// and before a slice that keeps the first two. The run takes the branch the
// condition names, runs it as a graph of its own (binding the NMS count) and
// binds the if's size symbol to what the branch returned.
#include <gtest/gtest.h>

#include "backends/data_dependent_run.h"
#include "ir/data_dependent.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

using testing::parse;

const char* kGuardedNms = R"(
graph @guarded_nms(%boxes: f32[6,4], %scores: f32[6]) -> (i64[k], i64[f]) symbols(n in [0, 6], m in [0, 6], k in [0, 6], f in [0, 2]) {
  %half = const f32[] splat<0.5>
  %zero = const i64[] splat<0>
  %mask = greater(%scores, %half) : bool[6]
  %nz = nonzero(%mask) {size_symbol="n"} : i64[1,n]
  %idx = reshape(%nz) {shape=[n]} : i64[n]
  %b = gather(%boxes, %idx) {axis=0} : f32[n,4]
  %s = gather(%scores, %idx) {axis=0} : f32[n]
  %count = const i64[] dense<[n]>
  %none = equal(%count, %zero) : bool[]
  %keep = if(%none, %b, %s) {size_symbol="k"} : i64[k] {
    graph @then(%b: f32[n,4], %s: f32[n]) -> (i64[0]) {
      %empty = const i64[0] dense<[]>
      return %empty
    }
    graph @else(%b: f32[n,4], %s: f32[n]) -> (i64[m]) {
      %two = const i64[] splat<2>
      %b3 = reshape(%b) {shape=[1,n,4]} : f32[1,n,4]
      %s3 = reshape(%s) {shape=[1,1,n]} : f32[1,1,n]
      %sel = non_max_suppression(%b3, %s3) {center_point_box=0, iou_threshold=0.5, max_output_boxes_per_class=6, size_symbol="m"} : i64[m,3]
      %col = gather(%sel, %two) {axis=1} : i64[m]
      return %col
    }
  }
  %first = slice(%keep) {ends=[2], size_symbol="f", starts=[0], steps=[1]} : i64[f]
  return %keep, %first
}
)";

Tensor f32(Shape s, std::vector<float> v) { return Tensor::from(DType::F32, std::move(s), v); }

// Boxes 0 and 1 overlap (IoU 0.81), 2 and 4 are apart, 3 and 5 score low.
const Tensor kBoxes = f32({6, 4}, {0, 0, 1, 1, 0, 0, 0.9f, 0.9f, 2, 2, 3, 3, 7, 7, 8, 8, 5, 5, 6, 6, 9, 9, 10, 10});

std::vector<int64_t> ints(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

TEST(DataDependentIf, TheIfIsAStageBoundaryAndItsBranchSymbolsAreTheGraphs) {
  auto g = parse(kGuardedNms);
  ASSERT_TRUE(has_data_dependent_sizes(*g));
  const auto syms = data_dependent_symbols(*g);
  ASSERT_EQ(syms.size(), 4u);  // n, m (in the else branch), k (the if), f
  EXPECT_EQ(syms.at("m")->op(), "non_max_suppression");
  EXPECT_EQ(syms.at("k")->op(), "if");
}

TEST(DataDependentIf, ElseBranchRunsNmsOnTheKeptBoxes) {
  auto g = parse(kGuardedNms);
  for (const char* backend : {"ref", "sim"}) {
    SCOPED_TRACE(backend);
    Tensor scores = f32({6}, {0.9f, 0.8f, 0.7f, 0.1f, 0.6f, 0.2f});
    DataDependentRunResult r = run_with_data_dependent_sizes(backend, *g, {{"boxes", kBoxes}, {"scores", scores}});
    EXPECT_EQ(r.symbols.at("n"), 4);  // boxes 0, 1, 2, 4
    EXPECT_EQ(r.symbols.at("m"), 3);  // 1 suppressed by 0
    EXPECT_EQ(r.symbols.at("k"), 3);
    EXPECT_EQ(r.symbols.at("f"), 2);
    EXPECT_EQ(ints(r.outputs[0]), (std::vector<int64_t>{0, 2, 3}));  // positions among the kept boxes
    EXPECT_EQ(ints(r.outputs[1]), (std::vector<int64_t>{0, 2}));
  }
}

TEST(DataDependentIf, ThenBranchWhenNoBoxPasses) {
  auto g = parse(kGuardedNms);
  Tensor scores = f32({6}, {0.1f, 0.2f, 0.3f, 0.1f, 0.4f, 0.2f});
  DataDependentRunResult r = run_with_data_dependent_sizes("ref", *g, {{"boxes", kBoxes}, {"scores", scores}});
  EXPECT_EQ(r.symbols.at("n"), 0);
  EXPECT_EQ(r.symbols.count("m"), 0u);  // the else branch did not run
  EXPECT_EQ(r.symbols.at("k"), 0);
  EXPECT_EQ(r.outputs[0].shape(), (Shape{0}));
  EXPECT_EQ(r.outputs[1].shape(), (Shape{0}));
}

}  // namespace
}  // namespace kiln
