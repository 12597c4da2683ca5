// Normalization family: numerics against hand-computed values, inference
// errors, and the ONNX adapters' opset handling (group norm's per-group
// parameters before opset 21, batch norm's training forms).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "backends/reference/executor.h"
#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ops/registry.h"

namespace kiln {
namespace {

using Ins = std::vector<std::optional<Tensor>>;

// Infers and evaluates one kiln op on constant operands.
std::vector<Tensor> run_op(const std::string& op, const Ins& ins, const AttrMap& attrs, int num_outputs = 1) {
  Graph g;
  std::vector<Value*> vs;
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i]) {
      vs.push_back(nullptr);
      ptrs.push_back(nullptr);
      continue;
    }
    vs.push_back(g.add_constant(fmt::format("c{}", i), *ins[i]));
    ptrs.push_back(&vs.back()->data());
  }
  const OpDef& def = op_registry().get(op);
  InferContext ic(op, vs, attrs, num_outputs, "test node");
  std::vector<TensorType> types = infer_types(def, ic);
  return evaluate_op(def, attrs, ptrs, types, "test node");
}

Tensor f32(Shape s, std::vector<double> v) { return Tensor::from(DType::F32, std::move(s), v); }
Tensor i64(Shape s, std::vector<int64_t> v) { return Tensor::from(DType::I64, std::move(s), v); }

AttrMap attrs(std::initializer_list<std::pair<const char*, Attribute>> l) {
  AttrMap a;
  for (auto& [k, v] : l) a.set(k, v);
  return a;
}

void expect_near_all(const Tensor& t, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.get_double(i), want[i], tol) << "element " << i;
}

// ------------------------------------------------------------- lp normalization

// A slice whose norm is 0 gives 0, not 0 / 0 = NaN (onnx 1.23's definition); the others are x / ||x||.
TEST(NormalizationOps, LpNormalizationOfAZeroSliceIsZero) {
  Tensor x = f32({2, 2}, {3, 0, 4, 0});  // columns (3, 4) and (0, 0) along axis 0
  for (int64_t p : {1, 2}) {
    auto out = run_op("lp_normalization", {x}, attrs({{"axis", int64_t(0)}, {"p", p}}));
    const double n = p == 1 ? 7.0 : 5.0;
    expect_near_all(out[0], {3 / n, 0, 4 / n, 0});
  }
}

// ------------------------------------------------------------- group norm

TEST(NormalizationOps, GroupNormMatchesHandComputedWithEpsilon) {
  // x [1, 4, 2]: group 0 = channels 0,1 = {1,3,5,7}: mean 4, var 5;
  // group 1 = channels 2,3 = all 2: var 0, so only epsilon keeps it finite.
  Tensor x = f32({1, 4, 2}, {1, 3, 5, 7, 2, 2, 2, 2});
  Tensor scale = f32({4}, {1, 2, 3, 4}), bias = f32({4}, {0, 1, 10, 20});
  auto out = run_op("group_normalization", {x, scale, bias}, attrs({{"epsilon", 1.0f}, {"num_groups", int64_t(2)}}));
  double inv = 1 / std::sqrt(5.0 + 1.0);
  expect_near_all(out[0], {-3 * inv * 1 + 0, -1 * inv * 1 + 0, 1 * inv * 2 + 1, 3 * inv * 2 + 1, 10, 10, 20, 20});
}

TEST(NormalizationOps, GroupNormZeroEpsilonOnConstantGroupGivesNaN) {
  Tensor x = f32({1, 2, 2}, {2, 2, 2, 2});
  auto out = run_op("group_normalization", {x, f32({2}, {1, 1}), f32({2}, {0, 0})},
                    attrs({{"epsilon", 0.0f}, {"num_groups", int64_t(1)}}));
  EXPECT_TRUE(std::isnan(out[0].get_double(0)));  // 0 * (1/sqrt(0)) as the formula says
}

TEST(NormalizationOps, GroupNormRejectsBadGroupsAndParams) {
  Tensor x = f32({1, 6, 2}, std::vector<double>(12, 1.0));
  Tensor p6 = f32({6}, std::vector<double>(6, 1.0));
  EXPECT_THROW(run_op("group_normalization", {x, p6, p6}, attrs({{"num_groups", int64_t(4)}})), Error);
  EXPECT_THROW(run_op("group_normalization", {x, p6, p6}, attrs({{"num_groups", int64_t(0)}})), Error);
  EXPECT_THROW(run_op("group_normalization", {x, p6, p6}, {}), Error);  // num_groups is required
  Tensor p3 = f32({3}, {1, 1, 1});
  EXPECT_THROW(run_op("group_normalization", {x, p3, p3}, attrs({{"num_groups", int64_t(3)}})), Error);
}

TEST(NormalizationOps, InstanceNormIsGroupNormWithOneChannelPerGroup) {
  Tensor x = f32({1, 2, 3}, {1, 2, 3, 10, 10, 16});
  auto out = run_op("instance_normalization", {x, f32({2}, {2, 1}), f32({2}, {1, 0})}, attrs({{"epsilon", 0.0f}}));
  // channel 0: mean 2, var 2/3; channel 1: mean 12, var 8.
  double i0 = 1 / std::sqrt(2.0 / 3), i1 = 1 / std::sqrt(8.0);
  expect_near_all(out[0], {-i0 * 2 + 1, 1, i0 * 2 + 1, -2 * i1, -2 * i1, 4 * i1});
}

// ------------------------------------------------------------- batch norm

TEST(NormalizationOps, BatchNormUsesEpsilonAndPerChannelParams) {
  Tensor x = f32({1, 2, 2}, {1, 2, 3, 4});
  // channel 0: mean 1, var 0 -> denominator sqrt(0.25) = 0.5; channel 1: mean 0, var 3.75 -> 2.
  auto out =
      run_op("batch_normalization", {x, f32({2}, {2, 1}), f32({2}, {0.5, -1}), f32({2}, {1, 0}), f32({2}, {0, 3.75})},
             attrs({{"epsilon", 0.25f}}));
  expect_near_all(out[0], {0.5, (2 - 1) / 0.5 * 2 + 0.5, 3 / 2.0 - 1, 4 / 2.0 - 1});
}

TEST(NormalizationOps, BatchNormF16RoundsThroughFloat) {
  Tensor x = Tensor::from(DType::F16, {1, 1, 2}, std::vector<double>{1.5, -2.0});
  Tensor p = Tensor::from(DType::F16, {1}, std::vector<double>{1.0});
  Tensor z = Tensor::from(DType::F16, {1}, std::vector<double>{0.0});
  auto out = run_op("batch_normalization", {x, p, z, z, p}, attrs({{"epsilon", 0.0f}}));
  EXPECT_EQ(out[0].dtype(), DType::F16);
  expect_near_all(out[0], {1.5, -2.0}, 0);
}

TEST(NormalizationOps, BatchNormRejectsWrongParamShape) {
  Tensor x = f32({1, 2, 2}, {1, 2, 3, 4});
  Tensor p2 = f32({2}, {1, 1}), p3 = f32({3}, {1, 1, 1});
  EXPECT_THROW(run_op("batch_normalization", {x, p2, p2, p3, p2}, {}), Error);
  EXPECT_THROW(run_op("batch_normalization", {f32({2}, {1, 2}), p2, p2, p2, p2}, {}), Error);  // rank 1
  EXPECT_THROW(run_op("batch_normalization", {x, p2, p2, p2, p2}, attrs({{"epsilon", -1.0f}})), Error);
}

// ------------------------------------------------------------- layer norm

TEST(NormalizationOps, LayerNormProducesMeanAndInvStdDev) {
  Tensor x = f32({2, 2}, {1, 3, 10, 10});
  auto out = run_op("layer_normalization", {x, f32({2}, {1, 2}), f32({2}, {0, 5})},
                    attrs({{"axis", int64_t(1)}, {"epsilon", 1.0f}}), 3);
  ASSERT_EQ(out.size(), 3u);
  double inv0 = 1 / std::sqrt(1.0 + 1.0), inv1 = 1.0;  // row 0: var 1; row 1: var 0
  expect_near_all(out[0], {-inv0, 2 * inv0 + 5, 0, 5});
  EXPECT_EQ(out[1].shape(), (Shape{2, 1}));
  EXPECT_EQ(out[1].dtype(), DType::F32);
  expect_near_all(out[1], {2, 10});
  expect_near_all(out[2], {inv0, inv1});
}

TEST(NormalizationOps, LayerNormAxisZeroWithoutBiasAndF16StatsInF32) {
  Tensor x = Tensor::from(DType::F16, {2, 2}, std::vector<double>{0, 1, 2, 3});
  Tensor s = Tensor::from(DType::F16, {2, 2}, std::vector<double>{1, 1, 1, 1});
  auto out = run_op("layer_normalization", {x, s}, attrs({{"axis", int64_t(-2)}, {"epsilon", 0.0f}}), 2);
  // mean 1.5, var 1.25
  double inv = 1 / std::sqrt(1.25);
  EXPECT_EQ(out[0].dtype(), DType::F16);
  expect_near_all(out[0], {-1.5 * inv, -0.5 * inv, 0.5 * inv, 1.5 * inv}, 1e-3);
  EXPECT_EQ(out[1].dtype(), DType::F32);
  EXPECT_EQ(out[1].shape(), (Shape{1, 1}));
  expect_near_all(out[1], {1.5});
}

TEST(NormalizationOps, LayerNormIsStableForLargeOffsets) {
  // Values near 1e4 with spread 1: a one-pass E[x^2] - E[x]^2 in float loses it.
  Tensor x = f32({1, 4}, {10000.5, 10001.5, 10002.5, 10003.5});
  auto out =
      run_op("layer_normalization", {x, f32({4}, {1, 1, 1, 1})}, attrs({{"axis", int64_t(1)}, {"epsilon", 0.0f}}));
  double inv = 1 / std::sqrt(1.25);
  expect_near_all(out[0], {-1.5 * inv, -0.5 * inv, 0.5 * inv, 1.5 * inv}, 1e-5);
}

TEST(NormalizationOps, LayerNormRejectsScaleOutsideNormalizedDims) {
  Tensor x = f32({2, 3}, std::vector<double>(6, 1.0));
  EXPECT_THROW(run_op("layer_normalization", {x, f32({2}, {1, 1})}, attrs({{"axis", int64_t(1)}})), Error);
  EXPECT_THROW(run_op("layer_normalization", {x, f32({2, 1}, {1, 1})}, attrs({{"axis", int64_t(1)}})), Unsupported);
  EXPECT_THROW(run_op("layer_normalization", {x, f32({3}, {1, 1, 1})}, attrs({{"axis", int64_t(2)}})), Error);
}

// ---------------------------------------------------------- lrn, mvn, lp

TEST(NormalizationOps, LrnSumsTheChannelWindow) {
  // C = 3, size = 2: window for c is [c, c+1] (floor(1/2) = 0 before, ceil(1/2) = 1 after).
  Tensor x = f32({1, 3, 1}, {1, 2, 3});
  auto out = run_op("lrn", {x}, attrs({{"size", int64_t(2)}, {"alpha", 2.0f}, {"beta", 0.5f}, {"bias", 1.0f}}));
  expect_near_all(out[0],
                  {1 / std::sqrt(1 + 1.0 * (1 + 4)), 2 / std::sqrt(1 + 1.0 * (4 + 9)), 3 / std::sqrt(1 + 1.0 * 9)});
}

TEST(NormalizationOps, MeanVarianceNormalizationAddsEpsilonToStd) {
  Tensor x = f32({2, 2}, {1, 3, 5, 5});
  auto out = run_op("mean_variance_normalization", {x}, attrs({{"axes", std::vector<int64_t>{1}}}));
  expect_near_all(out[0], {-1 / (1 + 1e-9), 1 / (1 + 1e-9), 0, 0});
  EXPECT_THROW(run_op("mean_variance_normalization", {x}, attrs({{"axes", std::vector<int64_t>{2}}})), Error);
  EXPECT_THROW(run_op("mean_variance_normalization", {x}, attrs({{"axes", std::vector<int64_t>{1, -1}}})), Error);
}

TEST(NormalizationOps, LpNormalizationUsesAbsoluteValuesForP1) {
  Tensor x = f32({2, 2}, {3, -4, -1, 1});
  auto p1 = run_op("lp_normalization", {x}, attrs({{"axis", int64_t(1)}, {"p", int64_t(1)}}));
  expect_near_all(p1[0], {3 / 7.0, -4 / 7.0, -0.5, 0.5});
  auto p2 = run_op("lp_normalization", {x}, attrs({{"axis", int64_t(0)}, {"p", int64_t(2)}}));
  expect_near_all(p2[0], {3 / std::sqrt(10.0), -4 / std::sqrt(17.0), -1 / std::sqrt(10.0), 1 / std::sqrt(17.0)});
  EXPECT_THROW(run_op("lp_normalization", {x}, attrs({{"axis", int64_t(1)}, {"p", int64_t(3)}})), Error);
}

// ------------------------------------------------------------------ losses

// log-probabilities [N=2, C=3, D=2] chosen so -logp[n, c, d] = 10*c + n + d/10.
Tensor nll_input() {
  std::vector<double> v;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int d = 0; d < 2; ++d) v.push_back(-(10.0 * c + n + d / 10.0));
  return f32({2, 3, 2}, v);
}

TEST(NormalizationOps, NllLossReductionsWithIgnoreIndex) {
  Tensor x = nll_input();
  Tensor t = i64({2, 2}, {2, -1, 0, 1});  // (0,1) ignored
  Tensor w = f32({3}, {0.5, 2, 4});
  AttrMap none = attrs({{"reduction", std::string("none")}, {"ignore_index", int64_t(-1)}});
  auto l = run_op("nll_loss", {x, t, w}, none);
  EXPECT_EQ(l[0].shape(), (Shape{2, 2}));
  expect_near_all(l[0], {4 * 20.0, 0, 0.5 * 1, 2 * 11.1}, 1e-5);
  AttrMap sum = attrs({{"reduction", std::string("sum")}, {"ignore_index", int64_t(-1)}});
  expect_near_all(run_op("nll_loss", {x, t, w}, sum)[0], {80 + 0.5 + 22.2}, 1e-4);
  // Weighted mean divides by the weights of non-ignored targets only: 4 + 0.5 + 2.
  AttrMap mean = attrs({{"reduction", std::string("mean")}, {"ignore_index", int64_t(-1)}});
  auto m = run_op("nll_loss", {x, t, w}, mean);
  EXPECT_EQ(m[0].shape(), Shape{});
  expect_near_all(m[0], {(80 + 0.5 + 22.2) / 6.5}, 1e-4);
  // Unweighted mean divides by the count of non-ignored targets.
  expect_near_all(run_op("nll_loss", {x, t}, mean)[0], {(20 + 1 + 11.1) / 3}, 1e-4);
  // Without ignore_index the same -1 target is an error.
  EXPECT_THROW(run_op("nll_loss", {x, t}, attrs({{"reduction", std::string("mean")}})), Error);
}

TEST(NormalizationOps, NllLossAllIgnoredMeanIsNaN) {
  Tensor t = i64({2, 2}, {7, 7, 7, 7});
  auto m =
      run_op("nll_loss", {nll_input(), t}, attrs({{"reduction", std::string("mean")}, {"ignore_index", int64_t(7)}}));
  EXPECT_TRUE(std::isnan(m[0].get_double(0)));  // 0 / 0, as the ONNX reference computes
}

TEST(NormalizationOps, NllLossTargetOutOfRangeIsAnError) {
  Tensor t = i64({2, 2}, {0, 3, 0, 0});  // 3 >= C
  AttrMap a = attrs({{"reduction", std::string("sum")}, {"ignore_index", int64_t(-100)}});
  EXPECT_THROW(run_op("nll_loss", {nll_input(), t}, a), Error);
  Tensor neg = Tensor::from(DType::I32, {2, 2}, std::vector<int64_t>{0, -2, 0, 0});
  EXPECT_THROW(run_op("nll_loss", {nll_input(), neg}, a), Error);
}

TEST(NormalizationOps, NllLossRejectsBadShapesAndReduction) {
  AttrMap a = attrs({{"reduction", std::string("sum")}});
  EXPECT_THROW(run_op("nll_loss", {nll_input(), i64({2, 3}, {0, 0, 0, 0, 0, 0})}, a), Error);
  EXPECT_THROW(run_op("nll_loss", {nll_input(), i64({2, 2}, {0, 0, 0, 0}), f32({2}, {1, 1})}, a), Error);
  EXPECT_THROW(run_op("nll_loss", {nll_input(), f32({2, 2}, {0, 0, 0, 0})}, a), Error);
  EXPECT_THROW(run_op("nll_loss", {nll_input(), i64({2, 2}, {0, 0, 0, 0})}, attrs({{"reduction", std::string("avg")}})),
               Error);
}

TEST(NormalizationOps, SoftmaxCrossEntropyGivesLogProbAndLoss) {
  // N = 1, C = 2, no extra dims: scores {0, ln 3} -> p = {1/4, 3/4}.
  Tensor x = f32({2, 2}, {0, std::log(3.0), 1000, 1000});
  Tensor t = i64({2}, {0, 1});
  auto out = run_op("softmax_cross_entropy_loss", {x, t}, attrs({{"reduction", std::string("none")}}), 2);
  expect_near_all(out[0], {std::log(4.0), std::log(2.0)}, 1e-6);  // large equal scores stay finite
  expect_near_all(out[1], {-std::log(4.0), std::log(0.75), -std::log(2.0), -std::log(2.0)}, 1e-6);
  auto mean =
      run_op("softmax_cross_entropy_loss", {x, t, f32({2}, {1, 3})}, attrs({{"reduction", std::string("mean")}}));
  expect_near_all(mean[0], {(std::log(4.0) + 3 * std::log(2.0)) / 4}, 1e-6);
}

// ----------------------------------------------------------- ONNX adapters

// A one-node ONNX model; inputs with data become initializers.
struct OnnxNode {
  std::string op;
  int64_t opset;
  std::vector<std::pair<std::string, Tensor>> inputs;  // name, value
  std::vector<std::string> outputs;
  std::vector<onnx::AttributeProto> attrs;
  std::vector<std::string> initializers;  // input names given as initializers
};

onnx::AttributeProto int_attr(const std::string& name, int64_t v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}

std::string build_model(const OnnxNode& spec) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(spec.opset);
  auto* g = m.mutable_graph();
  g->set_name("t");
  auto* n = g->add_node();
  n->set_op_type(spec.op);
  for (auto& [name, t] : spec.inputs) {
    n->add_input(name);
    bool init = std::find(spec.initializers.begin(), spec.initializers.end(), name) != spec.initializers.end();
    if (init) {
      *g->add_initializer() = tensor_to_proto(t, name);
      continue;
    }
    auto* vi = g->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype_to_onnx(t.dtype()));
    for (int64_t d : t.shape()) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  for (const std::string& o : spec.outputs) {
    n->add_output(o);
    if (!o.empty()) g->add_output()->set_name(o);
  }
  for (const auto& a : spec.attrs) *n->add_attribute() = a;
  return m.SerializeAsString();
}

std::vector<Tensor> import_and_run(const OnnxNode& spec) {
  ImportResult r = import_onnx_bytes(build_model(spec), ".", "test.onnx");
  std::map<std::string, Tensor> feeds;
  for (auto& [name, t] : spec.inputs)
    if (std::find(spec.initializers.begin(), spec.initializers.end(), name) == spec.initializers.end()) feeds[name] = t;
  return ReferenceExecutor(*r.graph).run(feeds);
}

TEST(NormalizationAdapters, GroupNormOpset18RepeatsPerGroupParams) {
  Tensor x = f32({1, 4, 1}, {1, 3, 0, 4});
  OnnxNode spec{
      "GroupNormalization",        18,        {{"x", x}, {"s", f32({2}, {2, 3})}, {"b", f32({2}, {1, -1})}}, {"y"},
      {int_attr("num_groups", 2)}, {"s", "b"}};
  // group 0: {1, 3}, mean 2, var 1; group 1: {0, 4}, mean 2, var 4 (epsilon 1e-5 default).
  double i0 = 1 / std::sqrt(1 + 1e-5), i1 = 1 / std::sqrt(4 + 1e-5);
  std::vector<double> want{-i0 * 2 + 1, i0 * 2 + 1, -2 * i1 * 3 - 1, 2 * i1 * 3 - 1};
  expect_near_all(import_and_run(spec)[0], want, 1e-5);
  // Opset 21 takes per-channel params: the same result with them spelled out.
  spec.opset = 21;
  spec.inputs[1].second = f32({4}, {2, 2, 3, 3});
  spec.inputs[2].second = f32({4}, {1, 1, -1, -1});
  expect_near_all(import_and_run(spec)[0], want, 1e-5);
  // Per-channel params at opset 18 contradict the spec there.
  spec.opset = 18;
  EXPECT_THROW(import_and_run(spec), Error);
}

TEST(NormalizationAdapters, GroupNormOpset18RuntimeParamsAreRepeatedInTheGraph) {
  // Per-group params that are graph inputs are expanded with reshape/mul/reshape.
  if (!op_registry().find("reshape")) GTEST_SKIP() << "kiln op 'reshape' (shape family) is not registered yet";
  Tensor x = f32({1, 4, 1}, {1, 3, 0, 4});
  OnnxNode spec{"GroupNormalization",        18, {{"x", x}, {"s", f32({2}, {2, 3})}, {"b", f32({2}, {1, -1})}}, {"y"},
                {int_attr("num_groups", 2)}, {}};
  double i0 = 1 / std::sqrt(1 + 1e-5), i1 = 1 / std::sqrt(4 + 1e-5);
  expect_near_all(import_and_run(spec)[0], {-i0 * 2 + 1, i0 * 2 + 1, -2 * i1 * 3 - 1, 2 * i1 * 3 - 1}, 1e-5);
}

OnnxNode batch_norm_spec(int64_t opset) {
  Tensor x = f32({1, 2, 1}, {1, 2});
  Tensor p = f32({2}, {1, 1});
  return OnnxNode{"BatchNormalization", opset, {{"x", x}, {"s", p}, {"b", p}, {"m", p}, {"v", p}}, {"y"}, {}, {}};
}

TEST(NormalizationAdapters, BatchNormOlderTrainingFormsAreUnsupported) {
  OnnxNode s6 = batch_norm_spec(6);
  EXPECT_THROW(import_and_run(s6), Unsupported);  // is_test defaults to 0 (training) before opset 7
  s6.attrs = {int_attr("is_test", 1)};
  expect_near_all(import_and_run(s6)[0], {1 * 0 / std::sqrt(1 + 1e-5) + 1, 1 / std::sqrt(1 + 1e-5) + 1}, 1e-6);
  OnnxNode s7 = batch_norm_spec(7);
  s7.attrs = {int_attr("spatial", 0)};
  EXPECT_THROW(import_and_run(s7), Unsupported);
  OnnxNode s9 = batch_norm_spec(9);
  s9.outputs = {"y", "mean_out"};
  EXPECT_THROW(import_and_run(s9), Unsupported);
  // training_mode=1 (opset 14+) is imported (FrontendTraining.*): one
  // sample per channel has variance 0, so y is the bias.
  OnnxNode s15 = batch_norm_spec(15);
  s15.attrs = {int_attr("training_mode", 1)};
  expect_near_all(import_and_run(s15)[0], {1, 1}, 1e-6);
  s15.attrs = {int_attr("bogus", 1)};
  EXPECT_THROW(import_and_run(s15), Unsupported);
}

}  // namespace
}  // namespace kiln
