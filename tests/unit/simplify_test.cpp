// simplify: meaning checks on the reference backend (random inputs, and
// hand-picked edge values compared bit for bit where the pass claims the
// rewrite is exact), the stats it reports, and that it stops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backends/reference/executor.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "pass_test_util.h"

namespace kiln {
namespace {

using testing::expect_pass_keeps_meaning;
using testing::parse;

PassStats run_simplify(Graph& g) {
  PassStats st;
  create_pass("simplify")->run(g, {}, st);
  verify_graph(g, op_registry());
  return st;
}

size_t count_op(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (const auto& node : g.nodes()) n += node->op() == op;
  return n;
}

// Every rewrite kind on one graph keeps the results.
TEST(Simplify, KeepsMeaningOnMixedGraph) {
  auto g = parse(R"(
graph @mixed(%x: f32[2,3,4], %y: f32[4], %h: f16[2,3,4], %i: i32[3,4]) -> (f32[4,6], f32[2,3,4], f16[2,3,4], f32[3,4], f32[2,3,4]) {
  %one = const f32[] splat<1.0>
  %zero = const f32[4] splat<0.0>
  %two = const f32[] splat<2.0>
  %m1 = const f32[] splat<-1.0>
  %a = identity(%x) : f32[2,3,4]
  %b = mul(%a, %one) : f32[2,3,4]
  %c = add(%zero, %b) : f32[2,3,4]
  %t1 = transpose(%c) {perm=[2,0,1]} : f32[4,2,3]
  %t2 = transpose(%t1) {perm=[0,2,1]} : f32[4,3,2]
  %r1 = reshape(%t2) {shape=[4,6]} : f32[4,6]
  %r2 = reshape(%r1) {shape=[24]} : f32[24]
  %r3 = reshape(%r2) {shape=[4,6]} : f32[4,6]
  %ny = neg(%y) : f32[4]
  %s = add(%c, %ny) : f32[2,3,4]
  %p2 = pow(%s, %two) : f32[2,3,4]
  %p3 = sub(%p2, %ny) : f32[2,3,4]
  %u = cast(%h) {to="f32"} : f32[2,3,4]
  %v = cast(%u) {to="f16"} : f16[2,3,4]
  %nv = neg(%v) : f16[2,3,4]
  %nnv0 = neg(%nv) : f16[2,3,4]
  %nnv = abs(%nnv0) : f16[2,3,4]
  %w = cast(%i) {to="i64"} : i64[3,4]
  %wf = cast(%w) {to="f32"} : f32[3,4]
  %u1 = reshape(%x) {shape=[2,1,3,4]} : f32[2,1,3,4]
  %u2 = transpose(%u1) {perm=[1,0,2,3]} : f32[1,2,3,4]
  %u3 = reshape(%u2) {shape=[2,3,4]} : f32[2,3,4]
  %rp = pow(%u3, %m1) : f32[2,3,4]
  %rd = div(%one, %rp) : f32[2,3,4]
  %q = div(%rd, %one) : f32[2,3,4]
  %fin = add(%q, %p3) : f32[2,3,4]
  return %r3, %p3, %nnv, %wf, %fin
}
)");
  auto after = expect_pass_keeps_meaning(*g, {"simplify"});
  verify_graph(*after, op_registry());
  EXPECT_EQ(count_op(*after, "identity"), 0u);
  EXPECT_EQ(count_op(*after, "neg"), 0u);
  EXPECT_EQ(count_op(*after, "pow"), 0u);
  EXPECT_EQ(count_op(*after, "transpose"), 1u);  // the composed perm [2,1,0]... one transpose
  EXPECT_LT(after->num_nodes(), g->num_nodes());
}

// The stats name each rewrite kind.
TEST(Simplify, CountsEachRewriteKind) {
  auto g = parse(R"(
graph @kinds(%x: f32[2,3]) -> (f32[3,2]) {
  %one = const f32[] splat<1.0>
  %a = identity(%x) : f32[2,3]
  %b = mul(%a, %one) : f32[2,3]
  %c = reshape(%b) {shape=[6]} : f32[6]
  %d = reshape(%c) {shape=[3,2]} : f32[3,2]
  %e = neg(%d) : f32[3,2]
  %f = neg(%e) : f32[3,2]
  %g = relu(%f) : f32[3,2]
  return %g
}
)");
  PassStats st = run_simplify(*g);
  EXPECT_EQ(st.counters["identity"], 1);
  EXPECT_EQ(st.counters["mul-one"], 1);
  EXPECT_EQ(st.counters["reshape-reshape"], 1);
  EXPECT_EQ(st.counters["neg-neg"], 1);
  EXPECT_EQ(g->num_nodes(), 2u);  // reshape, relu
  // A second run finds nothing.
  PassStats again;
  EXPECT_FALSE(create_pass("simplify")->run(*g, {}, again));
}

// Runs `g` on one input tensor and returns output 0.
Tensor run1(const Graph& g, const std::string& name, const Tensor& x) {
  return ReferenceExecutor(g).run({{name, x}})[0];
}

// The rewrites said to be exact give the same bits on edge values: signed
// zeros, infinities, NaN, subnormals, the largest finite values.
TEST(Simplify, ExactRewritesKeepBitsOnEdgeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> vals = {0.0f,          -0.0f,          inf,  -inf,  std::nanf(""), 1e-45f, -1e-45f, 1.17e-38f,
                             3.4028235e38f, -3.4028235e38f, 1.0f, -1.0f, 0.1f,          3.0f,   1e20f,   -7.5f};
  Tensor x = Tensor::from(DType::F32, {16}, vals);
  const char* graphs[] = {
      "%one = const f32[] splat<1.0>\n %y = mul(%x, %one) : f32[16]",
      "%one = const f32[] splat<1.0>\n %y = div(%x, %one) : f32[16]",
      "%zero = const f32[] splat<0.0>\n %y = sub(%x, %zero) : f32[16]",
      "%zero = const f32[] splat<-0.0>\n %y = add(%x, %zero) : f32[16]",
      "%e = const f32[] splat<1.0>\n %y = pow(%x, %e) : f32[16]",
      "%e = const f32[] splat<2.0>\n %y = pow(%x, %e) : f32[16]",
      "%e = const f32[] splat<-1.0>\n %y = pow(%x, %e) : f32[16]",
      "%one = const f32[] splat<1.0>\n %y = div(%one, %x) : f32[16]",
      "%n = neg(%x) : f32[16]\n %y = neg(%n) : f32[16]",
      "%n = neg(%x) : f32[16]\n %y = add(%x, %n) : f32[16]",
      "%n = neg(%x) : f32[16]\n %y = sub(%x, %n) : f32[16]",
      "%h = cast(%x) {to=\"f64\"} : f64[16]\n %y = cast(%h) {to=\"f32\"} : f32[16]",
  };
  for (const char* body : graphs) {
    // (The result feeds a neg, which keeps every bit: a graph input cannot
    // stand in for a graph output.)
    auto g = parse(std::string("graph @g(%x: f32[16]) -> (f32[16]) {\n ") + body +
                   "\n %out = neg(%y) : f32[16]\n return %out\n}");
    auto after = g->clone();
    PassStats st = run_simplify(*after);
    EXPECT_FALSE(st.counters.empty()) << body;
    Tensor want = run1(*g, "x", x), got = run1(*after, "x", x);
    for (int64_t i = 0; i < want.numel(); ++i) {
      float w = want.data<float>()[i], v = got.data<float>()[i];
      if (std::isnan(w)) {
        EXPECT_TRUE(std::isnan(v)) << body << " at " << vals[i];
      } else {
        EXPECT_EQ(std::memcmp(&w, &v, 4), 0) << body << " at " << vals[i] << ": " << w << " vs " << v;
      }
    }
  }
}

// x + (+0.0) is rewritten too: the one inexact case, -0.0 where +0.0 was.
TEST(Simplify, AddPositiveZeroDiffersOnlyInTheSignOfZero) {
  auto g = parse(
      "graph @g(%x: f32[3]) -> (f32[3]) {\n %z = const f32[] splat<0.0>\n %r = relu(%x) : f32[3]\n"
      " %y = add(%r, %z) : f32[3]\n return %y\n}");
  auto after = g->clone();
  run_simplify(*after);
  Tensor x = Tensor::from(DType::F32, {3}, std::vector<float>{-0.0f, 2.0f, -3.0f});
  Tensor want = run1(*g, "x", x), got = run1(*after, "x", x);
  EXPECT_EQ(compare_tensors(got, want), "");
  EXPECT_EQ(count_op(*after, "add"), 0u);
}

// Lossless cast round trips give the operand back for every f16 and bf16
// bit pattern, and i32 -> i64 -> f32 equals i32 -> f32 even past 2^24.
TEST(Simplify, CastRoundTripsAreExact) {
  for (const char* t : {"f16", "bf16"}) {
    auto g =
        parse(fmt::format("graph @g(%x: {0}[65536]) -> ({0}[65536]) {{\n %a = cast(%x) {{to=\"f32\"}} : f32[65536]\n"
                          " %b = cast(%a) {{to=\"{0}\"}} : {0}[65536]\n %y = identity(%b) : {0}[65536]\n return %y\n}}",
                          t));
    auto after = g->clone();
    run_simplify(*after);
    EXPECT_EQ(after->num_nodes(), 1u);  // the identity returning the input stays
    Tensor x(*dtype_from_name(t), {65536});
    for (int i = 0; i < 65536; ++i) x.data<uint16_t>()[i] = uint16_t(i);
    Tensor want = run1(*g, "x", x);
    EXPECT_EQ(after->node_list()[0]->input(0), after->inputs()[0]);
    for (int i = 0; i < 65536; ++i) {
      float w =
          (std::string(t) == "f16") ? half_to_float(want.data<uint16_t>()[i]) : bf16_to_float(want.data<uint16_t>()[i]);
      if (!std::isnan(w)) {
        EXPECT_EQ(want.data<uint16_t>()[i], uint16_t(i)) << t << " " << i;
      }
    }
  }
  auto g = parse(
      "graph @g(%x: i32[4]) -> (f32[4]) {\n %a = cast(%x) {to=\"i64\"} : i64[4]\n"
      " %y = cast(%a) {to=\"f32\"} : f32[4]\n return %y\n}");
  auto after = g->clone();
  run_simplify(*after);
  EXPECT_EQ(after->num_nodes(), 1u);
  Tensor x = Tensor::from(DType::I32, {4}, std::vector<int64_t>{16777217, -2147483647 - 1, 2147483647, -3});
  EXPECT_EQ(compare_tensors(run1(*after, "x", x), run1(*g, "x", x), {0, 0}), "");
}

// A graph input returned through an identity is left (the output keeps its
// own name); a node result returned through one takes the output's name.
TEST(Simplify, GraphOutputsKeepTheirNames) {
  auto g = parse(R"(
graph @names(%x: f32[2]) -> (f32[2], f32[2]) {
  %keep = identity(%x) : f32[2]
  %r = relu(%x) : f32[2]
  %out = identity(%r) : f32[2]
  return %keep, %out
}
)");
  run_simplify(*g);
  ASSERT_EQ(g->outputs().size(), 2u);
  EXPECT_EQ(g->outputs()[0]->name(), "keep");
  EXPECT_EQ(g->outputs()[1]->name(), "out");
  EXPECT_EQ(g->outputs()[1]->producer()->op(), "relu");
}

// A long chain (every link needs the one before it simplified) still ends.
TEST(Simplify, LongChainsReachAFixedPoint) {
  std::string text =
      "graph @chain(%x: f32[2,3]) -> (f32[2,3]) {\n %one = const f32[] splat<1.0>\n %v0 = relu(%x) : f32[2,3]\n";
  for (int i = 1; i <= 200; ++i) {
    if (i % 4 == 1) text += fmt::format(" %v{} = reshape(%v{}) {{shape=[3,2]}} : f32[3,2]\n", i, i - 1);
    else if (i % 4 == 2) text += fmt::format(" %v{} = transpose(%v{}) {{perm=[1,0]}} : f32[2,3]\n", i, i - 1);
    else if (i % 4 == 3) text += fmt::format(" %v{} = mul(%v{}, %one) : f32[2,3]\n", i, i - 1);
    else
      text += fmt::format(
          " %t{} = transpose(%v{}) {{perm=[1,0]}} : f32[3,2]\n %v{} = reshape(%t{}) {{shape=[2,3]}} : f32[2,3]\n", i,
          i - 1, i, i);
  }
  text += " %y = identity(%v200) : f32[2,3]\n return %y\n}";
  auto g = parse(text);
  auto after = expect_pass_keeps_meaning(*g, {"simplify"});
  verify_graph(*after, op_registry());
  EXPECT_EQ(after->num_nodes(), 1u);  // everything but the relu cancels
}

}  // namespace
}  // namespace kiln
