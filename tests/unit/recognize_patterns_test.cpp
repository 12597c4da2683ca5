// recognize-patterns keeps the meaning: each decomposed form gives the same
// results on the reference backend before and after the pass, and the pass
// did rewrite it (so the comparison is not vacuous).
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace kiln {
namespace {

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op() == op;
  return n;
}

void expect_rewritten(const std::string& text, const std::string& op, int want_ops = 1, Tolerance tol = {1e-5, 1e-4}) {
  auto g = testing::parse(text);
  ASSERT_EQ(count_op(*g, op), 0);
  auto after = testing::expect_pass_keeps_meaning(*g, {"recognize-patterns"}, {}, tol);
  EXPECT_EQ(count_op(*after, op), want_ops) << "the pass did not rewrite to " << op;
}

TEST(RecognizePatterns, GeluErfKeepsMeaning) {
  expect_rewritten(R"(
graph @g(%x: f32[3,16]) -> (f32[3,16]) {
  %sqrt2 = const f32[] splat<1.4142135>
  %one = const f32[] splat<1.0>
  %half = const f32[] splat<0.5>
  %0 = div(%x, %sqrt2) : f32[3,16]
  %1 = erf(%0) : f32[3,16]
  %2 = add(%1, %one) : f32[3,16]
  %3 = mul(%x, %2) : f32[3,16]
  %y = mul(%3, %half) : f32[3,16]
  return %y
})",
                   "gelu");
}

TEST(RecognizePatterns, GeluTanhKeepsMeaning) {
  expect_rewritten(R"(
graph @g(%x: f32[3,16]) -> (f32[3,16]) {
  %half = const f32[] splat<0.5>
  %three = const f32[] splat<3.0>
  %k = const f32[] splat<0.044715>
  %s = const f32[] splat<0.7978846>
  %one = const f32[] splat<1.0>
  %0 = mul(%x, %half) : f32[3,16]
  %1 = pow(%x, %three) : f32[3,16]
  %2 = mul(%1, %k) : f32[3,16]
  %3 = add(%x, %2) : f32[3,16]
  %4 = mul(%3, %s) : f32[3,16]
  %5 = tanh(%4) : f32[3,16]
  %6 = add(%5, %one) : f32[3,16]
  %y = mul(%0, %6) : f32[3,16]
  return %y
})",
                   "gelu");
}

TEST(RecognizePatterns, GeluWithFourDigitConstantStaysWithinTolerance) {
  // 0.7071 for 1/sqrt(2): recognized, and exact gelu is within f32 tolerance of it on [-2, 2).
  expect_rewritten(R"(
graph @g(%x: f32[64]) -> (f32[64]) {
  %c = const f32[] splat<0.7071>
  %one = const f32[] splat<1.0>
  %half = const f32[] splat<0.5>
  %h = mul(%half, %x) : f32[64]
  %0 = mul(%c, %x) : f32[64]
  %1 = erf(%0) : f32[64]
  %2 = add(%one, %1) : f32[64]
  %y = mul(%h, %2) : f32[64]
  return %y
})",
                   "gelu", 1, {1e-4, 1e-4});
}

TEST(RecognizePatterns, LayerNormTorchKeepsMeaning) {
  expect_rewritten(R"(
graph @g(%x: f32[2,3,8], %gamma: f32[8], %beta: f32[8]) -> (f32[2,3,8]) {
  %two = const f32[] splat<2.0>
  %eps = const f32[] splat<1e-05>
  %mean = reduce_mean(%x) {axes=[2], keepdims=1} : f32[2,3,1]
  %d = sub(%x, %mean) : f32[2,3,8]
  %sq = pow(%d, %two) : f32[2,3,8]
  %var = reduce_mean(%sq) {axes=[2], keepdims=1} : f32[2,3,1]
  %ve = add(%var, %eps) : f32[2,3,1]
  %sd = sqrt(%ve) : f32[2,3,1]
  %n = div(%d, %sd) : f32[2,3,8]
  %s = mul(%n, %gamma) : f32[2,3,8]
  %y = add(%s, %beta) : f32[2,3,8]
  return %y
})",
                   "layer_normalization");
}

TEST(RecognizePatterns, LayerNormTwoAxesReciprocalKeepsMeaning) {
  expect_rewritten(R"(
graph @g(%x: f32[2,3,4]) -> (f32[2,3,4]) {
  %eps = const f32[] splat<1e-06>
  %gamma = const f32[3,4] splat<1.5>
  %mean = reduce_mean(%x) {axes=[1,2], keepdims=1} : f32[2,1,1]
  %d = sub(%x, %mean) : f32[2,3,4]
  %sq = mul(%d, %d) : f32[2,3,4]
  %var = reduce_mean(%sq) {axes=[1,2], keepdims=1} : f32[2,1,1]
  %ve = add(%eps, %var) : f32[2,1,1]
  %sd = sqrt(%ve) : f32[2,1,1]
  %r = reciprocal(%sd) : f32[2,1,1]
  %n = mul(%d, %r) : f32[2,3,4]
  %y = mul(%gamma, %n) : f32[2,3,4]
  return %y
})",
                   "layer_normalization");
}

TEST(RecognizePatterns, LayerNormOnnxExpansionWithStatisticsKeepsMeaning) {
  expect_rewritten(R"(
graph @g(%x: f32[6,20], %w: f32[1,20], %b: f32[1,20]) -> (f32[6,20], f32[2,3,1,1], f32[6,1]) {
  %eps = const f32[] splat<1e-05>
  %mean = reduce_mean(%x) {axes=[1], keepdims=1} : f32[6,1]
  %sq = mul(%x, %x) : f32[6,20]
  %msq = reduce_mean(%sq) {axes=[1], keepdims=1} : f32[6,1]
  %sqm = mul(%mean, %mean) : f32[6,1]
  %var = sub(%msq, %sqm) : f32[6,1]
  %ve = add(%var, %eps) : f32[6,1]
  %sd = sqrt(%ve) : f32[6,1]
  %d = sub(%x, %mean) : f32[6,20]
  %n = div(%d, %sd) : f32[6,20]
  %s = mul(%n, %w) : f32[6,20]
  %y = add(%s, %b) : f32[6,20]
  %m4 = reshape(%mean) {shape=[2,3,1,1]} : f32[2,3,1,1]
  %inv = reciprocal(%sd) : f32[6,1]
  return %y, %m4, %inv
})",
                   "layer_normalization");
}

TEST(RecognizePatterns, AttentionBertSdpaKeepsMeaning) {
  expect_rewritten(R"(
graph @g(%q: f32[2,2,4,8], %k4: f32[2,4,2,8], %v: f32[2,2,4,8], %mask: f32[2,1,1,4]) -> (f32[2,2,4,8]) {
  %c = const f32[] splat<0.59460354>
  %zero = const f32[] splat<0.0>
  %kt = transpose(%k4) {perm=[0,2,3,1]} : f32[2,2,8,4]
  %qs = mul(%q, %c) : f32[2,2,4,8]
  %ks = mul(%kt, %c) : f32[2,2,8,4]
  %s = matmul(%qs, %ks) : f32[2,2,4,4]
  %sm = add(%s, %mask) : f32[2,2,4,4]
  %p = softmax(%sm) {axis=3} : f32[2,2,4,4]
  %nan = isnan(%p) : bool[2,2,4,4]
  %p2 = where(%nan, %zero, %p) : f32[2,2,4,4]
  %o = matmul(%p2, %v) : f32[2,2,4,8]
  return %o
})",
                   "attention");
}

TEST(RecognizePatterns, AttentionFullyMaskedRowsStayZeroWithNanGuard) {
  // Row 2 of the mask is all -inf: SDPA's where(isnan(p), 0, p) makes it 0, and so does the op.
  expect_rewritten(R"(
graph @g(%q: f32[1,2,4,8], %k: f32[1,2,4,8], %v: f32[1,2,4,8]) -> (f32[1,2,4,8]) {
  %zero = const f32[] splat<0.0>
  %c = const f32[] splat<0.125>
  %mask = const f32[1,1,4,4] dense<[0.0, 0.0, -inf, 0.0, 0.0, 0.0, 0.0, 0.0, -inf, -inf, -inf, -inf, 0.0, -inf, 0.0, 0.0]>
  %kt = transpose(%k) {perm=[0,1,3,2]} : f32[1,2,8,4]
  %s = matmul(%q, %kt) : f32[1,2,4,4]
  %ss = mul(%s, %c) : f32[1,2,4,4]
  %sm = add(%ss, %mask) : f32[1,2,4,4]
  %p = softmax(%sm) {axis=3} : f32[1,2,4,4]
  %nan = isnan(%p) : bool[1,2,4,4]
  %p2 = where(%nan, %zero, %p) : f32[1,2,4,4]
  %o = matmul(%p2, %v) : f32[1,2,4,8]
  return %o
})",
                   "attention");
}

TEST(RecognizePatterns, AttentionGpt2CausalKeepsMeaning) {
  expect_rewritten(R"(
graph @g(%q: f32[1,2,4,8], %k4: f32[1,4,2,8], %v: f32[1,2,4,8]) -> (f32[1,2,4,8]) {
  %c = const f32[] splat<0.125>
  %mask = const f32[1,1,4,4] dense<[0.0, -3.4028235e+38, -3.4028235e+38, -3.4028235e+38, 0.0, 0.0, -3.4028235e+38, -3.4028235e+38, 0.0, 0.0, 0.0, -3.4028235e+38, 0.0, 0.0, 0.0, 0.0]>
  %kt = transpose(%k4) {perm=[0,2,3,1]} : f32[1,2,8,4]
  %s = matmul(%q, %kt) : f32[1,2,4,4]
  %ss = mul(%s, %c) : f32[1,2,4,4]
  %sm = add(%ss, %mask) : f32[1,2,4,4]
  %p = softmax(%sm) {axis=3} : f32[1,2,4,4]
  %pc = cast(%p) {to="f32"} : f32[1,2,4,4]
  %o = matmul(%pc, %v) : f32[1,2,4,8]
  return %o
})",
                   "attention");
}

// Llama's grouped-query attention (repeat_kv on k and v, a causal mask
// from a where): the op reads the 2 key/value heads itself, and the
// expands are gone.
TEST(RecognizePatterns, AttentionGroupedQueryKeepsMeaningWithoutTheRepeat) {
  const char* text = R"(
graph @g(%q: f32[2,4,3,8], %kc: f32[2,2,5,8], %vc: f32[2,2,5,6], %mask: f32[2,1,1,5]) -> (f32[2,4,3,6]) {
  %c = const f32[] splat<0.35>
  %ku = reshape(%kc) {shape=[2,2,1,5,8]} : f32[2,2,1,5,8]
  %ke = expand(%ku) {shape=[2,2,2,5,8]} : f32[2,2,2,5,8]
  %k = reshape(%ke) {shape=[2,4,5,8]} : f32[2,4,5,8]
  %vu = reshape(%vc) {shape=[2,2,1,5,6]} : f32[2,2,1,5,6]
  %ve = expand(%vu) {shape=[2,2,2,5,6]} : f32[2,2,2,5,6]
  %v = reshape(%ve) {shape=[2,4,5,6]} : f32[2,4,5,6]
  %kt = transpose(%k) {perm=[0,1,3,2]} : f32[2,4,8,5]
  %s = matmul(%q, %kt) : f32[2,4,3,5]
  %ss = mul(%s, %c) : f32[2,4,3,5]
  %sm = add(%ss, %mask) : f32[2,4,3,5]
  %p = softmax(%sm) {axis=-1} : f32[2,4,3,5]
  %o = matmul(%p, %v) : f32[2,4,3,6]
  return %o
})";
  expect_rewritten(text, "attention");
  auto g = testing::parse(text);
  auto after = testing::expect_pass_keeps_meaning(*g, {"recognize-patterns"}, {}, {1e-5, 1e-4});
  EXPECT_EQ(count_op(*after, "expand"), 0) << "the repeat of the key/value heads stays";
}

TEST(RecognizePatterns, AttentionWhereCausalBottomRightKeepsMeaning) {
  expect_rewritten(R"(
graph @g(%q: f32[1,1,2,8], %k: f32[1,1,4,8], %v: f32[1,1,4,8], %pad: f32[1,1,1,4]) -> (f32[1,1,2,8]) {
  %fill = const f32[] splat<-3.4028235e+38>
  %c = const f32[] splat<2.0>
  %tril = const bool[2,4] dense<[true, true, true, false, true, true, true, true]>
  %kt = transpose(%k) {perm=[0,1,3,2]} : f32[1,1,8,4]
  %s = matmul(%q, %kt) : f32[1,1,2,4]
  %ss = div(%s, %c) : f32[1,1,2,4]
  %w = where(%tril, %ss, %fill) : f32[1,1,2,4]
  %sm = add(%pad, %w) : f32[1,1,2,4]
  %p = softmax(%sm) {axis=3} : f32[1,1,2,4]
  %o = matmul(%p, %v) : f32[1,1,2,8]
  return %o
})",
                   "attention");
}

TEST(RecognizePatterns, AttentionComputedWhereMaskKeepsMeaning) {
  // Random bool keys: some rows may be fully masked (NaN before and after).
  expect_rewritten(R"(
graph @g(%q: f32[2,2,4,8], %k: f32[2,2,4,8], %v: f32[2,2,4,8], %keep: bool[2,1,1,4]) -> (f32[2,2,4,8]) {
  %fill = const f32[] splat<-inf>
  %kt = transpose(%k) {perm=[0,1,3,2]} : f32[2,2,8,4]
  %s = matmul(%q, %kt) : f32[2,2,4,4]
  %w = where(%keep, %s, %fill) : f32[2,2,4,4]
  %p = softmax(%w) {axis=3} : f32[2,2,4,4]
  %o = matmul(%p, %v) : f32[2,2,4,8]
  return %o
})",
                   "attention");
}

TEST(RecognizePatterns, AttentionVitAndRank3KeepMeaning) {
  expect_rewritten(R"(
graph @g(%q: f32[1,3,5,4], %k: f32[1,3,5,4], %v: f32[1,3,5,6]) -> (f32[1,3,5,6]) {
  %c = const f32[] splat<0.70710677>
  %kt = transpose(%k) {perm=[0,1,3,2]} : f32[1,3,4,5]
  %qs = mul(%q, %c) : f32[1,3,5,4]
  %ks = mul(%c, %kt) : f32[1,3,4,5]
  %s = matmul(%qs, %ks) : f32[1,3,5,5]
  %p = softmax(%s) {axis=-1} : f32[1,3,5,5]
  %o = matmul(%p, %v) : f32[1,3,5,6]
  return %o
})",
                   "attention");
  expect_rewritten(R"(
graph @g(%q: f32[6,5,4], %kt: f32[6,4,3], %v: f32[6,3,4], %bias: f32[5,3]) -> (f32[6,5,4]) {
  %c = const f32[] splat<0.5>
  %s = matmul(%q, %kt) : f32[6,5,3]
  %ss = mul(%c, %s) : f32[6,5,3]
  %sb = add(%ss, %bias) : f32[6,5,3]
  %p = softmax(%sb) {axis=2} : f32[6,5,3]
  %o = matmul(%p, %v) : f32[6,5,4]
  return %o
})",
                   "attention");
}

TEST(RecognizePatterns, AttentionF16KeepsMeaning) {
  // f16 scores: the op computes in float, within f16's tolerance of the f16 chain.
  expect_rewritten(R"(
graph @g(%q: f16[1,2,4,8], %k: f16[1,2,4,8], %v: f16[1,2,4,8]) -> (f16[1,2,4,8]) {
  %c = const f16[] splat<0.35351562>
  %kt = transpose(%k) {perm=[0,1,3,2]} : f16[1,2,8,4]
  %s = matmul(%q, %kt) : f16[1,2,4,4]
  %ss = mul(%s, %c) : f16[1,2,4,4]
  %p = softmax(%ss) {axis=3} : f16[1,2,4,4]
  %o = matmul(%p, %v) : f16[1,2,4,8]
  return %o
})",
                   "attention", 1, {2.5e-3, 1e-3});
}

TEST(RecognizePatterns, AttentionF16WithF32SoftmaxKeepsMeaning) {
  expect_rewritten(R"(
graph @g(%q: f16[1,2,4,8], %k: f16[1,2,4,8], %v: f16[1,2,4,8], %mask: f16[1,1,4,4]) -> (f16[1,2,4,8]) {
  %c = const f16[] splat<0.35351562>
  %kt = transpose(%k) {perm=[0,1,3,2]} : f16[1,2,8,4]
  %s = matmul(%q, %kt) : f16[1,2,4,4]
  %ss = mul(%s, %c) : f16[1,2,4,4]
  %sm = add(%ss, %mask) : f16[1,2,4,4]
  %up = cast(%sm) {to="f32"} : f32[1,2,4,4]
  %p = softmax(%up) {axis=3} : f32[1,2,4,4]
  %down = cast(%p) {to="f16"} : f16[1,2,4,4]
  %o = matmul(%down, %v) : f16[1,2,4,8]
  return %o
})",
                   "attention", 1, {2.5e-3, 1e-3});
}

TEST(RecognizePatterns, LeavesExtraUsersAlone) {
  auto g = testing::parse(R"(
graph @g(%x: f32[4]) -> (f32[4], f32[4]) {
  %c = const f32[] splat<1.4142135>
  %one = const f32[] splat<1.0>
  %half = const f32[] splat<0.5>
  %0 = div(%x, %c) : f32[4]
  %1 = erf(%0) : f32[4]
  %2 = add(%1, %one) : f32[4]
  %3 = mul(%x, %2) : f32[4]
  %y = mul(%3, %half) : f32[4]
  return %y, %2
})");
  PassStats st;
  EXPECT_FALSE(create_pass("recognize-patterns")->run(*g, {}, st));
  EXPECT_EQ(count_op(*g, "gelu"), 0);
  EXPECT_EQ(g->num_nodes(), 5u);
}

}  // namespace
}  // namespace kiln
