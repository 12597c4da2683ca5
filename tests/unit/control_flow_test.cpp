// Control-flow nodes (ir/control_flow.h) on the reference backend: the
// shared driver (backends/reference/control_flow_run.h) against results
// worked out by hand, deep copies of regions, and the run-time check that a
// loop's scan outputs got the trip count they were compiled for.
#include <gtest/gtest.h>

#include "backends/reference/executor.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace kiln {
namespace {

Tensor f32(Shape s, std::vector<float> v) { return Tensor::from(DType::F32, std::move(s), v); }
Tensor scalar_bool(bool b) { return Tensor::scalar(DType::Bool, b ? 1 : 0); }
Tensor scalar_i64(int64_t v) { return Tensor::scalar(DType::I64, double(v)); }
std::vector<float> values(const Tensor& t) {
  std::vector<float> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(float(t.get_double(i)));
  return r;
}

const char* kIf = R"(graph @m(%c: bool[], %x: f32[2]) -> (f32[2]) {
  %y = if(%c, %x) : f32[2] {
    graph @then(%p: f32[2]) -> (f32[2]) {
      %t = add(%p, %p) : f32[2]
      return %t
    }
    graph @else(%q: f32[2]) -> (f32[2]) {
      %e = neg(%q) : f32[2]
      return %e
    }
  }
  return %y
})";

TEST(ControlFlow, IfRunsTheBranchTheConditionPicks) {
  auto g = parse_graph(kIf);
  verify_graph(*g, op_registry());
  ReferenceExecutor ex(*g);
  EXPECT_EQ(values(ex.run({{"c", scalar_bool(true)}, {"x", f32({2}, {1, -2})}})[0]), (std::vector<float>{2, -4}));
  EXPECT_EQ(values(ex.run({{"c", scalar_bool(false)}, {"x", f32({2}, {1, -2})}})[0]), (std::vector<float>{-1, 2}));
}

TEST(ControlFlow, CloneCopiesEveryRegion) {
  auto g = parse_graph(kIf);
  auto c = g->clone();
  EXPECT_EQ(print_graph(*c), print_graph(*g));
  const Node& n = *c->nodes().front();
  ASSERT_EQ(n.num_regions(), 2);
  EXPECT_NE(n.region(1), g->nodes().front()->region(1));
  verify_graph(*c, op_registry());
}

// A while loop: doubles %x until its sum reaches %limit, at most %n times;
// the iteration number is carried out as a running total.
const char* kWhile = R"(graph @m(%n: i64[], %x: f32[2], %limit: f32[]) -> (f32[2], i64[]) {
  %zero = const i64[] splat<0>
  %yes = const bool[] splat<true>
  %v, %k = loop(%n, %yes, %x, %zero, %limit) {carried=2} : f32[2], i64[] {
    graph @body(%i: i64[], %c: bool[], %a: f32[2], %acc: i64[], %lim: f32[]) -> (bool[], f32[2], i64[]) {
      %b = add(%a, %a) : f32[2]
      %s = reduce_sum(%b) {axes=[0], keepdims=0} : f32[]
      %go = less(%s, %lim) : bool[]
      %acc2 = add(%acc, %i) : i64[]
      return %go, %b, %acc2
    }
  }
  return %v, %k
})";

TEST(ControlFlow, LoopStopsWhenTheBodysConditionTurnsFalse) {
  auto g = parse_graph(kWhile);
  verify_graph(*g, op_registry());
  ReferenceExecutor ex(*g);
  // sums 3, 6, 12, 24: stops after the iteration that reaches 10 (3 runs, i = 0+1+2).
  auto r = ex.run({{"n", scalar_i64(100)}, {"x", f32({2}, {0.5f, 1.0f})}, {"limit", Tensor::scalar(DType::F32, 10)}});
  EXPECT_EQ(values(r[0]), (std::vector<float>{4, 8}));
  EXPECT_EQ(r[1].get_int(0), 3);
  // The trip count ends it first.
  r = ex.run({{"n", scalar_i64(1)}, {"x", f32({2}, {0.5f, 1.0f})}, {"limit", Tensor::scalar(DType::F32, 10)}});
  EXPECT_EQ(values(r[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(r[1].get_int(0), 0);
}

const char* kScanLoop = R"(graph @m(%n: i64[], %x: f32[2]) -> (f32[2], f32[3,2]) {
  %v, %s = loop(%n, _, %x) {carried=1} : f32[2], f32[3,2] {
    graph @body(%i: i64[], %c: bool[], %a: f32[2]) -> (bool[], f32[2], f32[2]) {
      %b = add(%a, %a) : f32[2]
      return %c, %b, %a
    }
  }
  return %v, %s
})";

TEST(ControlFlow, LoopScanOutputsStackEveryIteration) {
  auto g = parse_graph(kScanLoop);
  verify_graph(*g, op_registry());
  auto r = ReferenceExecutor(*g).run({{"n", scalar_i64(3)}, {"x", f32({2}, {1, 2})}});
  EXPECT_EQ(values(r[0]), (std::vector<float>{8, 16}));
  EXPECT_EQ(values(r[1]), (std::vector<float>{1, 2, 2, 4, 4, 8}));
}

TEST(ControlFlow, LoopScanOutputOfAnotherLengthIsAnError) {
  auto g = parse_graph(kScanLoop);
  try {
    ReferenceExecutor(*g).run({{"n", scalar_i64(2)}, {"x", f32({2}, {1, 2})}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the loop ran 2 iterations but its scan outputs were compiled for 3"),
              std::string::npos)
        << e.what();
  }
}

// Scan over axis 1, backwards, the output stacked on axis 1 and reversed
// back; a captured value is added to every element.
TEST(ControlFlow, ScanSlicesAndStacksOnTheirAxes) {
  auto g = parse_graph(R"(graph @m(%s0: f32[2], %xs: f32[2,3], %k: f32[]) -> (f32[2], f32[2,3]) {
  %s, %ys = scan(%s0, %xs, %k) {batched=0, carried=1, input_axes=[1], input_reverse=[1], output_axes=[1], output_reverse=[1], scan_inputs=1} : f32[2], f32[2,3] {
    graph @body(%st: f32[2], %x: f32[2], %kk: f32[]) -> (f32[2], f32[2]) {
      %n = add(%st, %x) : f32[2]
      %y = add(%n, %kk) : f32[2]
      return %n, %y
    }
  }
  return %s, %ys
})");
  verify_graph(*g, op_registry());
  auto r = ReferenceExecutor(*g).run(
      {{"s0", f32({2}, {0, 0})}, {"xs", f32({2, 3}, {1, 2, 3, 10, 20, 30})}, {"k", Tensor::scalar(DType::F32, 100)}});
  EXPECT_EQ(values(r[0]), (std::vector<float>{6, 60}));
  // Backwards: running sums 3, 5, 6 (row 0) computed for t = 2, 1, 0; stored
  // reversed, so position t holds the sum from t to the end.
  EXPECT_EQ(values(r[1]), (std::vector<float>{106, 105, 103, 160, 150, 130}));
}

// Scan-8: the body runs once per batch element.
TEST(ControlFlow, BatchedScanRunsPerBatchElement) {
  auto g = parse_graph(R"(graph @m(%s0: f32[2,1], %xs: f32[2,3,1]) -> (f32[2,1], f32[2,3,1]) {
  %s, %ys = scan(%s0, %xs) {batched=1, carried=1, input_axes=[0], input_reverse=[0], output_axes=[0], output_reverse=[0], scan_inputs=1} : f32[2,1], f32[2,3,1] {
    graph @body(%st: f32[1], %x: f32[1]) -> (f32[1], f32[1]) {
      %n = add(%st, %x) : f32[1]
      return %n, %n
    }
  }
  return %s, %ys
})");
  verify_graph(*g, op_registry());
  auto r = ReferenceExecutor(*g).run({{"s0", f32({2, 1}, {0, 1})}, {"xs", f32({2, 3, 1}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_EQ(values(r[0]), (std::vector<float>{6, 16}));
  EXPECT_EQ(values(r[1]), (std::vector<float>{1, 3, 6, 5, 10, 16}));
}

}  // namespace
}  // namespace kiln
