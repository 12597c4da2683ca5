// Reduction family: reduce_*, argmax/argmin, topk, cumsum, softmax family,
// and their ONNX adapters. Expected values are computed by hand (or noted
// as numpy's) in each test.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ops/reduction_spec.h"
#include "ops/registry.h"
#include "backends/run_on_backend.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Infers and evaluates one kiln op on the reference path.
std::vector<Tensor> run_op(const std::string& op, const AttrMap& attrs, const std::vector<Tensor>& ins,
                           int num_outputs = 1) {
  Graph g;
  std::vector<Value*> vals;
  for (size_t i = 0; i < ins.size(); ++i) vals.push_back(g.add_input(fmt::format("x{}", i), ins[i].type()));
  const OpDef& def = op_registry().get(op);
  InferContext ic(op, vals, attrs, num_outputs, "test");
  std::vector<TensorType> types = infer_types(def, ic);
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : ins) ptrs.push_back(&t);
  return evaluate_op(def, attrs, ptrs, types, "test");
}

Tensor run1(const std::string& op, const AttrMap& attrs, const Tensor& x) { return run_op(op, attrs, {x})[0]; }

AttrMap reduce_attrs(std::vector<int64_t> axes, int64_t keepdims) {
  AttrMap a;
  a.set("axes", std::move(axes));
  a.set("keepdims", keepdims);
  return a;
}

AttrMap axis_attrs(int64_t axis) {
  AttrMap a;
  a.set("axis", axis);
  return a;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get_double(i));
  return r;
}

void expect_near_all(const Tensor& t, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    double got = t.get_double(static_cast<int64_t>(i));
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got)) << "element " << i;
    else if (std::isinf(want[i])) EXPECT_EQ(got, want[i]) << "element " << i;
    else EXPECT_NEAR(got, want[i], tol * std::max(1.0, std::fabs(want[i]))) << "element " << i;
  }
}

// ---- reduce_* ---------------------------------------------------------------

// x = [[[1,2],[3,4],[5,6]], [[7,8],[9,10],[11,12]]] (2x3x2).
Tensor x232() { return Tensor::from<double>(DType::F32, {2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}); }

TEST(ReduceOps, SumOverMiddleAxisKeepdims) {
  Tensor r = run1("reduce_sum", reduce_attrs({1}, 1), x232());
  EXPECT_EQ(r.shape(), (Shape{2, 1, 2}));
  expect_near_all(r, {9, 12, 27, 30});
  Tensor r2 = run1("reduce_sum", reduce_attrs({1}, 0), x232());
  EXPECT_EQ(r2.shape(), (Shape{2, 2}));
}

TEST(ReduceOps, EveryVariantOverTwoAxes) {
  // Reducing axes 0 and 2 leaves one value per middle index: {1,2,7,8}, {3,4,9,10}, {5,6,11,12}.
  Tensor x = x232();
  auto r = [&](const char* op) { return run1(op, reduce_attrs({0, 2}, 0), x); };
  expect_near_all(r("reduce_sum"), {18, 26, 34});
  expect_near_all(r("reduce_mean"), {4.5, 6.5, 8.5});
  expect_near_all(r("reduce_max"), {8, 10, 12});
  expect_near_all(r("reduce_min"), {1, 3, 5});
  expect_near_all(r("reduce_prod"), {112, 1080, 3960});
  expect_near_all(r("reduce_l1"), {18, 26, 34});
  expect_near_all(r("reduce_sum_square"), {118, 206, 326});
  expect_near_all(r("reduce_l2"), {std::sqrt(118.0), std::sqrt(206.0), std::sqrt(326.0)});
  expect_near_all(r("reduce_log_sum"), {std::log(18.0), std::log(26.0), std::log(34.0)});
  double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(7.0) + std::exp(8.0));
  EXPECT_NEAR(r("reduce_log_sum_exp").get_double(0), lse0, 1e-5);
  EXPECT_EQ(r("reduce_sum").shape(), (Shape{3}));
}

TEST(ReduceOps, L1UsesAbsoluteValues) {
  Tensor x = Tensor::from<double>(DType::F32, {4}, {-1, 2, -3, 4});
  expect_near_all(run1("reduce_l1", reduce_attrs({0}, 0), x), {10});
  expect_near_all(run1("reduce_sum", reduce_attrs({0}, 0), x), {2});
}

TEST(ReduceOps, EmptySetFollowsOnnx) {
  // A reduced dim of size 0: the result is each combiner's identity, mapped.
  Tensor x(DType::F32, {2, 0, 3});
  auto r = [&](const char* op) {
    Tensor t = run1(op, reduce_attrs({1}, 1), x);
    EXPECT_EQ(t.shape(), (Shape{2, 1, 3})) << op;
    return t.get_double(0);
  };
  EXPECT_EQ(r("reduce_sum"), 0.0);
  EXPECT_EQ(r("reduce_prod"), 1.0);
  EXPECT_EQ(r("reduce_max"), -kInf);
  EXPECT_EQ(r("reduce_min"), kInf);
  EXPECT_EQ(r("reduce_l1"), 0.0);
  EXPECT_EQ(r("reduce_l2"), 0.0);
  EXPECT_EQ(r("reduce_sum_square"), 0.0);
  EXPECT_EQ(r("reduce_log_sum"), -kInf);
  EXPECT_EQ(r("reduce_log_sum_exp"), -kInf);
  EXPECT_TRUE(std::isnan(r("reduce_mean")));
}

TEST(ReduceOps, EmptySetIntegersUseDtypeLimits) {
  Tensor x(DType::I32, {0, 2});
  EXPECT_EQ(run1("reduce_max", reduce_attrs({0}, 0), x).get_int(1), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(run1("reduce_min", reduce_attrs({0}, 0), x).get_int(1), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(run1("reduce_prod", reduce_attrs({0}, 0), x).get_int(0), 1);
  EXPECT_EQ(run1("reduce_mean", reduce_attrs({0}, 0), x).get_int(0), 0);  // 0/0: 0, not a crash
  Tensor u(DType::U8, {0});
  EXPECT_EQ(run1("reduce_max", reduce_attrs({0}, 0), u).get_int(0), 0);
  EXPECT_EQ(run1("reduce_min", reduce_attrs({0}, 0), u).get_int(0), 255);
  // log(0) = -inf saturates to the dtype's lowest instead of an undefined cast.
  EXPECT_EQ(run1("reduce_log_sum", reduce_attrs({0}, 0), x).get_int(0), std::numeric_limits<int32_t>::min());
}

TEST(ReduceOps, EmptyAxesReduceNothing) {
  // kiln's axes=[] means "no reduced dim": each element is pre/post-mapped alone.
  Tensor x = Tensor::from<double>(DType::F32, {3}, {-2, 0, 3});
  expect_near_all(run1("reduce_sum", reduce_attrs({}, 1), x), {-2, 0, 3});
  expect_near_all(run1("reduce_sum_square", reduce_attrs({}, 1), x), {4, 0, 9});
  expect_near_all(run1("reduce_l2", reduce_attrs({}, 1), x), {2, 0, 3});
}

TEST(ReduceOps, NaNPropagatesThroughMaxAndMin) {
  Tensor x = Tensor::from<double>(DType::F32, {2, 3}, {1, NAN, 3, 5, 4, NAN});
  expect_near_all(run1("reduce_max", reduce_attrs({1}, 0), x), {NAN, NAN});
  expect_near_all(run1("reduce_min", reduce_attrs({1}, 0), x), {NAN, NAN});
  // The NaN is the last element in the second row and the middle one in the
  // first; columns 0 and 2 mix NaN with numbers too.
  expect_near_all(run1("reduce_max", reduce_attrs({0}, 0), x), {5, NAN, NAN});
  Tensor y = Tensor::from<double>(DType::F32, {3}, {-kInf, -5, -kInf});
  expect_near_all(run1("reduce_max", reduce_attrs({0}, 0), y), {-5});
}

TEST(ReduceOps, LogSumExpIsStable) {
  // exp(1000) overflows even in double; the max shift keeps it finite.
  Tensor x = Tensor::from<double>(DType::F32, {2, 2}, {1000, 1000, -kInf, -kInf});
  expect_near_all(run1("reduce_log_sum_exp", reduce_attrs({1}, 0), x), {1000 + std::log(2.0), -kInf});
  Tensor y = Tensor::from<double>(DType::F32, {2}, {kInf, 1});
  expect_near_all(run1("reduce_log_sum_exp", reduce_attrs({0}, 0), y), {kInf});
  // Down columns (the kept trailing dim is folded side by side): each column has its own shift.
  Tensor z = Tensor::from<double>(DType::F32, {2, 2}, {1000, -1000, 1000, -1001});
  expect_near_all(run1("reduce_log_sum_exp", reduce_attrs({0}, 0), z),
                  {1000 + std::log(2.0), -1000 + std::log(1 + std::exp(-1.0))});
}

TEST(ReduceOps, IntegersAccumulateExactly) {
  Tensor x = Tensor::from<int64_t>(DType::I64, {2, 2}, {1, 2, -1, -2});
  // numpy: np.mean then astype(int64) truncates toward zero: 1.5 -> 1, -1.5 -> -1.
  EXPECT_EQ(values(run1("reduce_mean", reduce_attrs({1}, 0), x)), (std::vector<double>{1, -1}));
  Tensor big = Tensor::from<int64_t>(DType::I64, {2}, {int64_t(1) << 40, 3});
  EXPECT_EQ(run1("reduce_prod", reduce_attrs({0}, 0), big).get_int(0), int64_t(3) << 40);
  Tensor i = Tensor::from<int64_t>(DType::I32, {2}, {3, 4});
  EXPECT_EQ(run1("reduce_l2", reduce_attrs({0}, 0), i).get_int(0), 5);
  EXPECT_EQ(run1("reduce_sum_square", reduce_attrs({0}, 0), i).get_int(0), 25);
  // u64 values above 2^63 compare as unsigned.
  Tensor u(DType::U64, {2});
  u.data<uint64_t>()[0] = 5;
  u.data<uint64_t>()[1] = (uint64_t(1) << 63) + 7;
  Tensor m = run1("reduce_max", reduce_attrs({0}, 0), u);
  EXPECT_EQ(m.data<uint64_t>()[0], (uint64_t(1) << 63) + 7);
}

TEST(ReduceOps, HalfPrecisionComputesInFloat) {
  // f16 steps by 2 at 2048: accumulating in f16 would give 2048 (2048 + 1
  // rounds back to 2048 twice); float accumulation gives 2050.
  Tensor x = Tensor::from<double>(DType::F16, {3}, {2048, 1, 1});
  Tensor r = run1("reduce_sum", reduce_attrs({0}, 0), x);
  EXPECT_EQ(r.dtype(), DType::F16);
  EXPECT_EQ(r.get_double(0), 2050.0);
  Tensor b = Tensor::from<double>(DType::BF16, {2}, {3, 4});
  EXPECT_EQ(run1("reduce_l2", reduce_attrs({0}, 0), b).get_double(0), 5.0);
}

TEST(ReduceOps, BoolOnlyForMaxAndMin) {
  Tensor x = Tensor::from<int>(DType::Bool, {3}, {0, 1, 0});
  EXPECT_EQ(run1("reduce_max", reduce_attrs({0}, 0), x).get_int(0), 1);
  EXPECT_EQ(run1("reduce_min", reduce_attrs({0}, 0), x).get_int(0), 0);
  EXPECT_THROW(run1("reduce_sum", reduce_attrs({0}, 0), x), Error);
}

TEST(ReduceOps, InferenceRejectsBadAxes) {
  Tensor x = x232();
  EXPECT_THROW(run1("reduce_sum", reduce_attrs({-1}, 1), x), Error);  // kiln axes are normalized
  EXPECT_THROW(run1("reduce_sum", reduce_attrs({3}, 1), x), Error);
  EXPECT_THROW(run1("reduce_sum", reduce_attrs({2, 0}, 1), x), Error);  // unsorted
  EXPECT_THROW(run1("reduce_sum", reduce_attrs({1, 1}, 1), x), Error);  // duplicate
  EXPECT_THROW(run1("reduce_sum", reduce_attrs({1}, 2), x), Error);     // keepdims not 0/1
  EXPECT_THROW(run1("reduce_sum", AttrMap{}, x), Error);                // axes required
}

TEST(ReduceOps, SpecsDescribeEveryReduceOp) {
  for (const ops::ReductionSpec& s : ops::reduction_specs()) {
    EXPECT_NE(op_registry().find(s.op), nullptr) << s.op;
    EXPECT_EQ(ops::find_reduction_spec(s.op), &s);
  }
  const ops::ReductionSpec* l2 = ops::find_reduction_spec("reduce_l2");
  ASSERT_NE(l2, nullptr);
  EXPECT_EQ(l2->pre, ops::ReduceMap::Square);
  EXPECT_EQ(l2->combiner, ops::ReduceCombiner::Sum);
  EXPECT_EQ(l2->post, ops::ReduceMap::Sqrt);
  EXPECT_EQ(ops::find_reduction_spec("softmax"), nullptr);
}

// ---- argmax / argmin ---------------------------------------------------------

AttrMap arg_attrs(int64_t axis, int64_t keepdims, int64_t last) {
  AttrMap a;
  a.set("axis", axis);
  a.set("keepdims", keepdims);
  a.set("select_last_index", last);
  return a;
}

TEST(ArgOps, TiesPickFirstUnlessSelectLast) {
  Tensor x = Tensor::from<double>(DType::F32, {4}, {1, 3, 3, 2});
  EXPECT_EQ(run1("argmax", arg_attrs(0, 0, 0), x).get_int(0), 1);
  EXPECT_EQ(run1("argmax", arg_attrs(0, 0, 1), x).get_int(0), 2);
  Tensor y = Tensor::from<double>(DType::I32, {4}, {2, 0, 5, 0});
  EXPECT_EQ(run1("argmin", arg_attrs(0, 0, 0), y).get_int(0), 1);
  EXPECT_EQ(run1("argmin", arg_attrs(0, 1, 1), y).get_int(0), 3);
}

TEST(ArgOps, AxisZeroOfMatrixAndShapes) {
  // [[1,9,3],[4,2,6]]: column-wise argmax = [1,0,1], argmin = [0,1,0].
  Tensor x = Tensor::from<double>(DType::F64, {2, 3}, {1, 9, 3, 4, 2, 6});
  Tensor r = run1("argmax", arg_attrs(0, 1, 0), x);
  EXPECT_EQ(r.dtype(), DType::I64);
  EXPECT_EQ(r.shape(), (Shape{1, 3}));
  EXPECT_EQ(r.to_int_vector(), (std::vector<int64_t>{1, 0, 1}));
  Tensor m = run1("argmin", arg_attrs(0, 0, 0), x);
  EXPECT_EQ(m.shape(), (Shape{3}));
  EXPECT_EQ(m.to_int_vector(), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(run1("argmax", arg_attrs(-1, 0, 0), x).to_int_vector(), (std::vector<int64_t>{1, 2}));
}

TEST(ArgOps, NaNWinsLikeNumpy) {
  Tensor x = Tensor::from<double>(DType::F32, {4}, {1, NAN, 7, NAN});
  EXPECT_EQ(run1("argmax", arg_attrs(0, 0, 0), x).get_int(0), 1);
  EXPECT_EQ(run1("argmin", arg_attrs(0, 0, 0), x).get_int(0), 1);
  EXPECT_EQ(run1("argmax", arg_attrs(0, 0, 1), x).get_int(0), 3);
}

TEST(ArgOps, RejectsEmptyAxisAndBadAxis) {
  EXPECT_THROW(run1("argmax", arg_attrs(0, 1, 0), Tensor(DType::F32, {0, 3})), Error);
  EXPECT_THROW(run1("argmax", arg_attrs(2, 1, 0), Tensor(DType::F32, {2, 3})), Error);
  EXPECT_THROW(run1("argmax", arg_attrs(0, 1, 0), Tensor(DType::F32, {})), Error);
}

// ---- topk ----------------------------------------------------------------

AttrMap topk_attrs(int64_t k, int64_t axis, int64_t largest) {
  AttrMap a;
  a.set("k", k);
  a.set("axis", axis);
  a.set("largest", largest);
  a.set("sorted", int64_t(1));
  return a;
}

TEST(TopKOps, TiesKeepLowerIndexFirst) {
  Tensor x = Tensor::from<double>(DType::F32, {5}, {3, 1, 3, 2, 1});
  auto r = run_op("topk", topk_attrs(3, 0, 1), {x}, 2);
  EXPECT_EQ(values(r[0]), (std::vector<double>{3, 3, 2}));
  EXPECT_EQ(r[1].to_int_vector(), (std::vector<int64_t>{0, 2, 3}));
  auto s = run_op("topk", topk_attrs(3, 0, 0), {x}, 2);
  EXPECT_EQ(values(s[0]), (std::vector<double>{1, 1, 2}));
  EXPECT_EQ(s[1].to_int_vector(), (std::vector<int64_t>{1, 4, 3}));
}

TEST(TopKOps, AlongFirstAxisOfMatrix) {
  // [[1,8],[5,2],[3,9]] top-2 along axis 0: values [[5,9],[3,8]], indices [[1,2],[2,0]].
  Tensor x = Tensor::from<double>(DType::I32, {3, 2}, {1, 8, 5, 2, 3, 9});
  auto r = run_op("topk", topk_attrs(2, 0, 1), {x}, 2);
  EXPECT_EQ(r[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(r[0].dtype(), DType::I32);
  EXPECT_EQ(values(r[0]), (std::vector<double>{5, 9, 3, 8}));
  EXPECT_EQ(r[1].to_int_vector(), (std::vector<int64_t>{1, 2, 2, 0}));
}

TEST(TopKOps, NaNRanksHighestAndValuesKeepBits) {
  Tensor x = Tensor::from<double>(DType::F16, {4}, {1, NAN, 0.1, 5});
  auto big = run_op("topk", topk_attrs(2, 0, 1), {x}, 2);
  EXPECT_EQ(big[1].to_int_vector(), (std::vector<int64_t>{1, 3}));
  auto small = run_op("topk", topk_attrs(4, 0, 0), {x}, 2);
  EXPECT_EQ(small[1].to_int_vector(), (std::vector<int64_t>{2, 0, 3, 1}));
  EXPECT_EQ(small[0].data<uint16_t>()[0], x.data<uint16_t>()[2]);  // f16 0.1 copied exactly
}

TEST(TopKOps, RejectsKOutOfRange) {
  Tensor x(DType::F32, {3});
  EXPECT_THROW(run_op("topk", topk_attrs(4, 0, 1), {x}, 2), Error);
  EXPECT_THROW(run_op("topk", topk_attrs(-1, 0, 1), {x}, 2), Error);
  EXPECT_EQ(run_op("topk", topk_attrs(0, 0, 1), {x}, 2)[0].numel(), 0);
}

// ---- cumsum --------------------------------------------------------------

AttrMap cumsum_attrs(int64_t axis, int64_t exclusive, int64_t reverse) {
  AttrMap a;
  a.set("axis", axis);
  a.set("exclusive", exclusive);
  a.set("reverse", reverse);
  return a;
}

TEST(CumSumOps, ModesAlongAxisZero) {
  // [[1,2],[3,4],[5,6]] along axis 0.
  Tensor x = Tensor::from<double>(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(values(run1("cumsum", cumsum_attrs(0, 0, 0), x)), (std::vector<double>{1, 2, 4, 6, 9, 12}));
  EXPECT_EQ(values(run1("cumsum", cumsum_attrs(0, 1, 0), x)), (std::vector<double>{0, 0, 1, 2, 4, 6}));
  EXPECT_EQ(values(run1("cumsum", cumsum_attrs(0, 0, 1), x)), (std::vector<double>{9, 12, 8, 10, 5, 6}));
  EXPECT_EQ(values(run1("cumsum", cumsum_attrs(0, 1, 1), x)), (std::vector<double>{8, 10, 5, 6, 0, 0}));
  EXPECT_EQ(values(run1("cumsum", cumsum_attrs(1, 0, 0), x)), (std::vector<double>{1, 3, 3, 7, 5, 11}));
}

TEST(CumSumOps, IntegersWrapLikeTheDtype) {
  Tensor x = Tensor::from<double>(DType::I8, {3}, {100, 100, -50});
  // int8: 100, 200 -> -56, 150 -> -106.
  EXPECT_EQ(values(run1("cumsum", cumsum_attrs(0, 0, 0), x)), (std::vector<double>{100, -56, -106}));
  EXPECT_THROW(run1("cumsum", cumsum_attrs(1, 0, 0), x), Error);
}

// ---- softmax family ---------------------------------------------------------

TEST(SoftmaxOps, StableForLargeInputs) {
  // softmax([1000, 1001]) = [1/(1+e), e/(1+e)]; naive exp overflows.
  Tensor x = Tensor::from<double>(DType::F32, {2}, {1000, 1001});
  double e = std::exp(1.0);
  expect_near_all(run1("softmax", axis_attrs(0), x), {1 / (1 + e), e / (1 + e)}, 1e-6);
  expect_near_all(run1("log_softmax", axis_attrs(-1), x), {-std::log(1 + e), 1 - std::log(1 + e)}, 1e-6);
}

TEST(SoftmaxOps, AlongNonLastAxis) {
  // [[0, 1], [ln 3, 1]] along axis 0: column 0 -> [1/4, 3/4], column 1 -> [1/2, 1/2].
  Tensor x = Tensor::from<double>(DType::F64, {2, 2}, {0, 1, std::log(3.0), 1});
  expect_near_all(run1("softmax", axis_attrs(0), x), {0.25, 0.5, 0.75, 0.5}, 1e-12);
  expect_near_all(run1("log_softmax", axis_attrs(0), x), {std::log(0.25), std::log(0.5), std::log(0.75), std::log(0.5)},
                  1e-12);
}

TEST(SoftmaxOps, BertSizedRowsSumToOne) {
  // [12,128,128] as in BERT attention: every row sums to 1 and keeps its argmax.
  Tensor x(DType::F32, {12, 128, 128});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 7919) % 1000) / 50.0f;
  Tensor r = run1("softmax", axis_attrs(-1), x);
  for (int64_t row = 0; row < 12 * 128; row += 97) {
    double s = 0;
    int64_t best = 0;
    for (int64_t j = 0; j < 128; ++j) {
      s += r.data<float>()[row * 128 + j];
      if (x.data<float>()[row * 128 + j] > x.data<float>()[row * 128 + best]) best = j;
    }
    EXPECT_NEAR(s, 1.0, 1e-5);
    for (int64_t j = 0; j < 128; ++j) EXPECT_LE(r.data<float>()[row * 128 + j], r.data<float>()[row * 128 + best]);
  }
}

TEST(SoftmaxOps, HardmaxMarksFirstMaximum) {
  Tensor x = Tensor::from<double>(DType::F32, {2, 3}, {1, 3, 3, 2, NAN, 5});
  EXPECT_EQ(values(run1("hardmax", axis_attrs(1), x)), (std::vector<double>{0, 1, 0, 0, 1, 0}));
  // Columns: 1 < 2, 3 < NaN (NaN counts as the maximum), 3 < 5.
  EXPECT_EQ(values(run1("hardmax", axis_attrs(0), x)), (std::vector<double>{0, 0, 0, 1, 1, 1}));
  Tensor t = Tensor::from<double>(DType::F32, {2, 2}, {4, 1, 4, 1});
  EXPECT_EQ(values(run1("hardmax", axis_attrs(0), t)), (std::vector<double>{1, 1, 0, 0}));
}

TEST(SoftmaxOps, HalfPrecisionAndDtypeChecks) {
  Tensor x = Tensor::from<double>(DType::F16, {2}, {0, 0});
  expect_near_all(run1("softmax", axis_attrs(0), x), {0.5, 0.5});
  EXPECT_THROW(run1("softmax", axis_attrs(0), Tensor(DType::I32, {2})), Unsupported);
  EXPECT_THROW(run1("softmax", axis_attrs(1), Tensor(DType::F32, {2})), Error);
}

// ---- ONNX adapters -----------------------------------------------------------

// A one-node ONNX model with float inputs of the given shapes and optional
// i64 initializers.
struct OnnxModel {
  onnx::ModelProto m;
  onnx::NodeProto* node;

  OnnxModel(const std::string& op, int64_t opset) {
    m.set_ir_version(8);
    auto* os = m.add_opset_import();
    os->set_domain("");
    os->set_version(opset);
    m.mutable_graph()->set_name("t");
    node = m.mutable_graph()->add_node();
    node->set_op_type(op);
    node->set_name("n");
  }
  void input(const std::string& name, const Shape& s) {
    auto* vi = m.mutable_graph()->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : s) tt->mutable_shape()->add_dim()->set_dim_value(d);
    node->add_input(name);
  }
  void const_i64(const std::string& name, const std::vector<int64_t>& v) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    node->add_input(name);
  }
  void output(const std::string& name) {
    m.mutable_graph()->add_output()->set_name(name);
    node->add_output(name);
  }
  void attr_int(const std::string& name, int64_t v) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  void attr_ints(const std::string& name, const std::vector<int64_t>& v) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  ImportResult import() const { return import_onnx_bytes(m.SerializeAsString(), ".", "t.onnx"); }
  std::vector<Tensor> run(const Tensor& x) const {
    ImportResult r = import();
    return run_on_backend("ref", *r.graph, {{"x", x}});
  }
};

std::vector<std::string> ops_of(const Graph& g) {
  std::vector<std::string> r;
  for (const auto& n : g.nodes()) r.push_back(n->op());
  return r;
}

TEST(ReductionAdapters, AxesOperandNormalizedAndSorted) {
  OnnxModel m("ReduceMean", 18);
  m.input("x", {2, 3, 2});
  m.const_i64("axes", {-1, 0});
  m.output("y");
  m.attr_int("keepdims", 0);
  ImportResult r = m.import();
  ASSERT_EQ(ops_of(*r.graph), (std::vector<std::string>{"reduce_mean"}));
  const Node& n = *r.graph->nodes().front();
  EXPECT_EQ(n.attrs().get_ints("axes"), (std::vector<int64_t>{0, 2}));
  expect_near_all(m.run(x232())[0], {4.5, 6.5, 8.5});
}

TEST(ReductionAdapters, AxesAttributeAtOldOpset) {
  OnnxModel m("ReduceSum", 11);
  m.input("x", {2, 3, 2});
  m.output("y");
  m.attr_ints("axes", {1});
  expect_near_all(m.run(x232())[0], {9, 12, 27, 30});
}

TEST(ReductionAdapters, EmptyAxesReduceAllOrNoop) {
  OnnxModel all("ReduceMax", 18);
  all.input("x", {2, 3, 2});
  all.output("y");
  Tensor r = all.run(x232())[0];
  EXPECT_EQ(r.shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(r.get_double(0), 12);

  OnnxModel noop("ReduceSumSquare", 18);
  noop.input("x", {2, 3, 2});
  noop.const_i64("axes", {});
  noop.output("y");
  noop.attr_int("noop_with_empty_axes", 1);
  ImportResult g = noop.import();
  EXPECT_TRUE(ops_of(*g.graph).empty());  // identity, as the ONNX spec says
  expect_near_all(noop.run(x232())[0], values(x232()));
}

TEST(ReductionAdapters, RejectsDuplicateAxesAndUnknownAttributes) {
  OnnxModel dup("ReduceSum", 13);
  dup.input("x", {2, 3, 2});
  dup.const_i64("axes", {1, -2});
  dup.output("y");
  EXPECT_THROW(dup.import(), Error);

  OnnxModel extra("ReduceSum", 13);
  extra.input("x", {2, 3, 2});
  extra.output("y");
  extra.attr_ints("axes", {1});  // an attribute only before opset 13
  EXPECT_THROW(extra.import(), Unsupported);
}

TEST(ReductionAdapters, TopKAttributeKAtOpset1) {
  OnnxModel m("TopK", 1);
  m.input("x", {5});
  m.output("v");
  m.output("i");
  m.attr_int("k", 2);
  auto r = m.run(Tensor::from<double>(DType::F32, {5}, {3, 9, 3, 9, 1}));
  EXPECT_EQ(values(r[0]), (std::vector<double>{9, 9}));
  EXPECT_EQ(r[1].to_int_vector(), (std::vector<int64_t>{1, 3}));
}

TEST(ReductionAdapters, OldSoftmaxFlattensAtAxis) {
  if (!op_registry().find("reshape")) GTEST_SKIP() << "kiln reshape is not defined in this build yet";
  // Opset < 13 with axis=1 on [2,2,2]: softmax over the 4 trailing elements of each batch.
  OnnxModel m("Softmax", 11);
  m.input("x", {2, 2, 2});
  m.output("y");
  ImportResult g = m.import();
  EXPECT_EQ(ops_of(*g.graph), (std::vector<std::string>{"reshape", "softmax", "reshape"}));
  Tensor x = Tensor::from<double>(DType::F32, {2, 2, 2}, {0, 0, 0, 0, 0, std::log(3.0), 0, 0});
  Tensor y = m.run(x)[0];
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  expect_near_all(y, {0.25, 0.25, 0.25, 0.25, 1.0 / 6, 0.5, 1.0 / 6, 1.0 / 6});
}

TEST(ReductionAdapters, OldSoftmaxOnLastAxisNeedsNoReshape) {
  OnnxModel m("LogSoftmax", 9);
  m.input("x", {2, 3, 1});
  m.output("y");
  m.attr_int("axis", 1);  // trailing dim is 1: same as one-axis log_softmax on axis 1
  ImportResult g = m.import();
  EXPECT_EQ(ops_of(*g.graph), (std::vector<std::string>{"log_softmax"}));
  Tensor y = m.run(Tensor::from<double>(DType::F32, {2, 3, 1}, {0, 0, 0, 1, 1, 1}))[0];
  expect_near_all(y, std::vector<double>(6, -std::log(3.0)));
}

}  // namespace
}  // namespace kiln
