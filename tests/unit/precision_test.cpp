// The precision pass: reduced-precision graphs mean the same as the FP32
// graph within the FP16/BF16 tolerances of docs/precision.md (on the reference
// backend, random inputs in [-2, 2) and random weights), weight clamping is
// counted, graph inputs/outputs keep their dtypes and names, the pass is
// idempotent, and the policy table and the conformance tolerances behave.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "passes/precision_policy.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

using kiln::testing::expect_pass_keeps_meaning;
using kiln::testing::parse;

const Tolerance kF16Tol{2.5e-3, 1e-3};
const Tolerance kBF16Tol{2e-2, 1e-2};

// A dense constant of seeded values uniform in [-scale, scale).
std::string weights(const std::string& name, const std::vector<int64_t>& shape, uint64_t seed, double scale = 0.5) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(float(-scale), float(scale));
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<std::string> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(float_repr(u(rng)));
  return fmt::format("  %{} = const f32[{}] dense<[{}]>\n", name, fmt::join(shape, ","), fmt::join(v, ", "));
}

PassOptions with_precision(const std::string& p) {
  PassOptions o;
  o.precision = p;
  return o;
}

// Runs the pass (checking the verifier accepts the result) and its stats.
std::unique_ptr<Graph> run_precision(const Graph& g, const std::string& p, PassStats* stats = nullptr) {
  auto r = g.clone();
  PassStats st;
  create_pass("precision")->run(*r, with_precision(p), st);
  EXPECT_NO_THROW(verify_graph(*r, op_registry()));
  if (stats) *stats = st;
  return r;
}

int count_ops(const Graph& g, const std::string& op, DType result) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op() == op && node->output(0)->dtype() == result;
  return n;
}

// MLP with a softmax head: matmul + bias + relu + matmul + softmax.
std::unique_ptr<Graph> mlp() {
  return parse("graph @mlp(%x: f32[4,16]) -> (f32[4,8], f32[4,8]) {\n" + weights("w1", {16, 32}, 1) +
               weights("b1", {32}, 2) + weights("w2", {32, 8}, 3) +
               "  %h = matmul(%x, %w1) : f32[4,32]\n"
               "  %hb = add(%h, %b1) : f32[4,32]\n"
               "  %r = relu(%hb) : f32[4,32]\n"
               "  %o = matmul(%r, %w2) : f32[4,8]\n"
               "  %p = softmax(%o) {axis=1} : f32[4,8]\n"
               "  return %o, %p\n}\n");
}

// Conv net: conv + relu + max pool + conv + global average pool + gemm.
std::unique_ptr<Graph> convnet() {
  return parse("graph @cnn(%x: f32[1,3,8,8]) -> (f32[1,5]) {\n" + weights("w1", {8, 3, 3, 3}, 4) +
               weights("b1", {8}, 5) + weights("w2", {8, 8, 3, 3}, 6, 0.25) + weights("fc", {5, 8}, 7) +
               "  %c1 = conv(%x, %w1, %b1) {strides=[1,1], pads=[1,1,1,1], dilations=[1,1]} : f32[1,8,8,8]\n"
               "  %r1 = relu(%c1) : f32[1,8,8,8]\n"
               "  %p1 = max_pool(%r1) {kernel_shape=[2,2], strides=[2,2], pads=[0,0,0,0], dilations=[1,1]} : "
               "f32[1,8,4,4]\n"
               "  %c2 = conv(%p1, %w2) {strides=[1,1], pads=[1,1,1,1], dilations=[1,1]} : f32[1,8,4,4]\n"
               "  %s = add(%c2, %p1) : f32[1,8,4,4]\n"
               "  %g = global_average_pool(%s) : f32[1,8,1,1]\n"
               "  %f = reshape(%g) {shape=[1,8]} : f32[1,8]\n"
               "  %y = gemm(%f, %fc) {trans_b=1} : f32[1,5]\n"
               "  return %y\n}\n");
}

// Transformer block: attention with a scaled softmax, residual, layer norm,
// and an erf GELU feed-forward.
std::unique_ptr<Graph> block() {
  return parse("graph @block(%x: f32[1,6,16]) -> (f32[1,6,16]) {\n" + weights("wq", {16, 16}, 8) +
               weights("wk", {16, 16}, 9) + weights("wv", {16, 16}, 10) + weights("w1", {16, 32}, 11) +
               weights("w2", {32, 16}, 12) + weights("g", {16}, 13) + weights("b", {16}, 14) +
               "  %scale = const f32[] splat<0.25>\n"
               "  %rt2 = const f32[] splat<1.4142135>\n"
               "  %one = const f32[] splat<1.0>\n"
               "  %half = const f32[] splat<0.5>\n"
               "  %q = matmul(%x, %wq) : f32[1,6,16]\n"
               "  %k = matmul(%x, %wk) : f32[1,6,16]\n"
               "  %v = matmul(%x, %wv) : f32[1,6,16]\n"
               "  %kt = transpose(%k) {perm=[0,2,1]} : f32[1,16,6]\n"
               "  %s = matmul(%q, %kt) : f32[1,6,6]\n"
               "  %ss = mul(%s, %scale) : f32[1,6,6]\n"
               "  %p = softmax(%ss) {axis=2} : f32[1,6,6]\n"
               "  %a = matmul(%p, %v) : f32[1,6,16]\n"
               "  %res = add(%a, %x) : f32[1,6,16]\n"
               "  %n = layer_normalization(%res, %g, %b) {axis=2, epsilon=1e-5} : f32[1,6,16]\n"
               "  %h = matmul(%n, %w1) : f32[1,6,32]\n"
               "  %hd = div(%h, %rt2) : f32[1,6,32]\n"
               "  %he = erf(%hd) : f32[1,6,32]\n"
               "  %h1 = add(%he, %one) : f32[1,6,32]\n"
               "  %hm = mul(%h, %h1) : f32[1,6,32]\n"
               "  %gelu = mul(%hm, %half) : f32[1,6,32]\n"
               "  %o = matmul(%gelu, %w2) : f32[1,6,16]\n"
               "  %y = add(%o, %n) : f32[1,6,16]\n"
               "  return %y\n}\n");
}

TEST(Precision, MlpKeepsMeaningWithinFp16AndBf16Tolerances) {
  auto g = mlp();
  auto h = expect_pass_keeps_meaning(*g, {"precision"}, with_precision("fp16"), kF16Tol);
  EXPECT_EQ(count_ops(*h, "matmul", DType::F16), 2);
  EXPECT_EQ(count_ops(*h, "softmax", DType::F32), 1);
  auto b = expect_pass_keeps_meaning(*g, {"precision"}, with_precision("bf16"), kBF16Tol);
  EXPECT_EQ(count_ops(*b, "matmul", DType::BF16), 2);
}

TEST(Precision, ConvNetKeepsMeaningWithinFp16AndBf16Tolerances) {
  auto g = convnet();
  auto h = expect_pass_keeps_meaning(*g, {"precision"}, with_precision("fp16"), kF16Tol);
  EXPECT_EQ(count_ops(*h, "conv", DType::F16), 2);
  EXPECT_EQ(count_ops(*h, "max_pool", DType::F16), 1);
  EXPECT_EQ(count_ops(*h, "global_average_pool", DType::F32), 1);
  EXPECT_EQ(count_ops(*h, "gemm", DType::F16), 1);
  expect_pass_keeps_meaning(*g, {"precision"}, with_precision("bf16"), kBF16Tol);
}

TEST(Precision, TransformerBlockKeepsMeaningWithinFp16AndBf16Tolerances) {
  auto g = block();
  auto h = expect_pass_keeps_meaning(*g, {"precision"}, with_precision("fp16"), kF16Tol);
  EXPECT_EQ(count_ops(*h, "matmul", DType::F16), 7);
  EXPECT_EQ(count_ops(*h, "softmax", DType::F32), 1);
  EXPECT_EQ(count_ops(*h, "layer_normalization", DType::F32), 1);
  EXPECT_EQ(count_ops(*h, "erf", DType::F32), 1);
  expect_pass_keeps_meaning(*g, {"precision"}, with_precision("bf16"), kBF16Tol);
}

// The comparison is not vacuous: the fp16 graph differs from the fp32 one,
// and by more than FP32's tolerance allows, yet within FP16's.
TEST(Precision, ReducedResultsReallyDiffer) {
  auto g = block();
  auto h = run_precision(*g, "fp16");
  auto feed = kiln::testing::random_inputs(*g);
  Tensor want = ReferenceExecutor(*g).run(feed)[0];
  Tensor got = ReferenceExecutor(*h).run(feed)[0];
  ASSERT_EQ(got.dtype(), DType::F32);
  EXPECT_NE(compare_tensors(got, want, {1e-5, 1e-4}), "");
  EXPECT_EQ(compare_tensors(got, want, kF16Tol), "");
}

TEST(Precision, Fp32AndTf32KeepNumbersExactly) {
  auto g = mlp();
  PassStats st;
  auto f = run_precision(*g, "fp32", &st);
  EXPECT_EQ(print_graph(*f), print_graph(*g));
  auto t = run_precision(*g, "tf32", &st);
  EXPECT_EQ(st.counters["tf32-marked"], 2);
  // The reference backend computes TF32-marked ops in full FP32.
  expect_pass_keeps_meaning(*g, {"precision"}, with_precision("tf32"), {0, 0});
}

TEST(Precision, WeightClampingIsCounted) {
  auto g = parse(
      "graph @c(%x: f32[2,6]) -> (f32[2,6]) {\n"
      "  %w = const f32[6,6] splat<0.5>\n"
      "  %b = const f32[6] dense<[1e5, -7e4, 65504, 65519, inf, 1.0]>\n"
      "  %m = matmul(%x, %w) : f32[2,6]\n"
      "  %a = add(%m, %b) : f32[2,6]\n"
      "  return %a\n}\n");
  PassStats st;
  auto h = run_precision(*g, "fp16", &st);
  // 1e5, -7e4 and 65519 are beyond 65504; 65504 is not; inf stays inf.
  EXPECT_EQ(st.counters["weight-values-clamped"], 3);
  ASSERT_EQ(st.notes.size(), 1u);
  EXPECT_NE(st.notes[0].find("3 constant value(s) outside the f16 range were clamped to +-65504"), std::string::npos);
  const Tensor* b = nullptr;
  for (Value* c : h->constants())
    if (c->name() == "b.f16") b = &c->data();
  ASSERT_NE(b, nullptr);
  std::vector<double> want = {65504, -65504, 65504, 65504, INFINITY, 1};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b->get_double(i), want[i]) << i;

  // BF16 has FP32's exponent range, but FLT_MAX would round up to infinity.
  auto g2 = parse(
      "graph @c(%x: f32[2,2]) -> (f32[2,2]) {\n"
      "  %w = const f32[2,2] dense<[3.4028235e38, -1e30, 1.0, -3.4e38]>\n"
      "  %m = matmul(%x, %w) : f32[2,2]\n"
      "  return %m\n}\n");
  auto h2 = run_precision(*g2, "bf16", &st);
  EXPECT_EQ(st.counters["weight-values-clamped"], 2);
  for (Value* c : h2->constants()) {
    ASSERT_EQ(c->dtype(), DType::BF16);
    EXPECT_EQ(c->data().get_double(0), max_finite(DType::BF16));
    EXPECT_EQ(c->data().get_double(3), -max_finite(DType::BF16));
  }
  // No clamping, no warning.
  auto h3 = run_precision(*mlp(), "fp16", &st);
  EXPECT_EQ(st.counters.count("weight-values-clamped"), 0u);
  EXPECT_TRUE(st.notes.empty());
}

TEST(Precision, GraphInputsAndOutputsKeepDtypesAndNames) {
  auto g = convnet();
  auto h = run_precision(*g, "fp16");
  ASSERT_EQ(h->inputs().size(), 1u);
  EXPECT_EQ(h->inputs()[0]->type(), g->inputs()[0]->type());
  ASSERT_EQ(h->outputs().size(), 1u);
  EXPECT_EQ(h->outputs()[0]->type(), g->outputs()[0]->type());
  EXPECT_EQ(h->outputs()[0]->name(), "y");
  EXPECT_EQ(h->outputs()[0]->producer()->op(), "cast");
  // Casts only at the borders here: in, out, and around the f32 pooling.
  EXPECT_EQ(count_ops(*h, "cast", DType::F16), 2);
  EXPECT_EQ(count_ops(*h, "cast", DType::F32), 2);
}

TEST(Precision, RunningTwiceChangesNothing) {
  for (auto make : {mlp, convnet, block}) {
    auto g = make();
    auto once = run_precision(*g, "fp16");
    PassStats st;
    auto twice = once->clone();
    EXPECT_FALSE(create_pass("precision")->run(*twice, with_precision("fp16"), st));
    EXPECT_EQ(print_graph(*twice), print_graph(*once));
  }
}

// Cast chains fold only where the middle dtype holds every value exactly:
// i16 -> f32 -> f16 reads the i16 directly; i32 -> f32 -> f64 must not
// (16777217 is not an f32), and meaning is kept exactly either way.
TEST(Precision, CastFoldingIsExact) {
  auto g = parse(
      "graph @c(%a: i16[2], %b: i32[2], %x: f32[2]) -> (f16[2], f64[2], f32[2]) {\n"
      "  %a1 = cast(%a) {to=\"f32\"} : f32[2]\n"
      "  %a2 = cast(%a1) {to=\"f16\"} : f16[2]\n"
      "  %b1 = cast(%b) {to=\"f32\"} : f32[2]\n"
      "  %b2 = cast(%b1) {to=\"f64\"} : f64[2]\n"
      "  %x1 = cast(%x) {to=\"f32\"} : f32[2]\n"
      "  %x2 = relu(%x1) : f32[2]\n"
      "  return %a2, %b2, %x2\n}\n");
  PassStats st;
  auto h = run_precision(*g, "fp16", &st);
  EXPECT_EQ(st.counters["casts-folded"], 2);  // a1 skipped, x1 gone
  int casts = 0;
  for (const auto& n : h->nodes()) casts += n->op() == "cast";
  EXPECT_EQ(casts, 3);  // a -> f16, b -> f32 -> f64
  std::map<std::string, Tensor> feed;
  feed["a"] = Tensor::from<int64_t>(DType::I16, {2}, std::vector<int64_t>{-32768, 2049});
  feed["b"] = Tensor::from<int64_t>(DType::I32, {2}, std::vector<int64_t>{16777217, -3});
  feed["x"] = Tensor::from<double>(DType::F32, {2}, std::vector<double>{-1.5, 2.5});
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed), got = ReferenceExecutor(*h).run(feed);
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(got[i].same_bytes(want[i])) << i;
  EXPECT_EQ(got[1].get_double(0), 16777216.0);  // the f32 rounding the model asked for
}

TEST(PrecisionPolicy, TableIsSortedAndNamesRegisteredOps) {
  const auto& t = precision_table();
  for (size_t i = 1; i < t.size(); ++i) EXPECT_LT(t[i - 1].first, t[i].first);
  for (const auto& [op, cls] : t) {
    EXPECT_NE(op_registry().find(op), nullptr) << op;
    EXPECT_EQ(precision_class(op), cls) << op;
  }
  EXPECT_EQ(precision_class("conv"), PrecisionClass::Reduced);
  EXPECT_EQ(precision_class("softmax"), PrecisionClass::Float32);
  EXPECT_EQ(precision_class("reshape"), PrecisionClass::Follow);
  EXPECT_EQ(precision_class("cast"), PrecisionClass::Cast);
  EXPECT_EQ(precision_class("attention"), PrecisionClass::Reduced);
  EXPECT_EQ(precision_class("multi_head_attention"), PrecisionClass::Reduced);
  EXPECT_EQ(precision_class("lstm"), PrecisionClass::Float32);  // not in the table: FP32
  EXPECT_EQ(precision_class("no_such_op"), PrecisionClass::Float32);
  // Every Reduced op accumulates GEMM-like; none of the reductions is Reduced.
  for (const auto& [op, cls] : t) {
    if (op.starts_with("reduce_sum") || op.starts_with("reduce_mean") || op.ends_with("normalization")) {
      EXPECT_EQ(cls, PrecisionClass::Float32) << op;
    }
  }
}

TEST(PrecisionTolerance, RunToleranceFollowsPrecision) {
  auto eq = [](Tolerance a, Tolerance b) { return a.atol == b.atol && a.rtol == b.rtol; };
  EXPECT_TRUE(eq(run_tolerance(DType::F32, "fp32"), {1e-5, 1e-4}));
  EXPECT_TRUE(eq(run_tolerance(DType::F32, "fp16"), kF16Tol));
  EXPECT_TRUE(eq(run_tolerance(DType::F32, "tf32"), kF16Tol));
  EXPECT_TRUE(eq(run_tolerance(DType::F32, "bf16"), kBF16Tol));
  EXPECT_TRUE(eq(run_tolerance(DType::BF16, "fp16"), kBF16Tol));  // never tighter than the output's own
  EXPECT_TRUE(eq(run_tolerance(DType::I64, "bf16"), {0, 0}));
  EXPECT_TRUE(eq(parse_tolerance("1e-2,0.05"), {1e-2, 0.05}));
  EXPECT_THROW(parse_tolerance("1e-2"), Error);
  EXPECT_THROW(parse_tolerance("a,b"), Error);
  EXPECT_THROW(parse_tolerance("1,-1"), Error);
  EXPECT_THROW(parse_tolerance("1,2x"), Error);
}

TEST(PrecisionTolerance, ErrorStats) {
  Tensor want = Tensor::from<double>(DType::F32, {4}, std::vector<double>{1, -4, 0.5, NAN});
  Tensor got = Tensor::from<double>(DType::F32, {4}, std::vector<double>{1.01, -4.1, 0.5, NAN});
  ErrorStats e = error_stats(got, want, {0.01, 0.01});
  EXPECT_NEAR(e.max_abs, 0.1, 1e-6);
  EXPECT_NEAR(e.max_rel, 0.1 / 4, 1e-6);
  EXPECT_NEAR(e.tol_ratio, 0.1 / (0.01 + 0.04), 1e-5);
}

}  // namespace
}  // namespace kiln
