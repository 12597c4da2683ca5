// The attention op: its reference kernel against a naive triple loop
// (masks of every broadcast shape, causal with Sq == Sk and Sq < Sk,
// nan_to_zero on fully masked rows), f16/bf16 against f32, and inference
// errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "ir/error.h"
#include "ops/registry.h"

namespace kiln {
namespace {

using Ins = std::vector<std::optional<Tensor>>;

std::vector<TensorType> infer(const Ins& ins, const AttrMap& attrs) {
  Graph g;
  std::vector<Value*> vs;
  for (size_t i = 0; i < ins.size(); ++i)
    vs.push_back(ins[i] ? g.add_constant(fmt::format("c{}", i), *ins[i]) : nullptr);
  InferContext ic("attention", vs, attrs, 1, "test node");
  return infer_types(op_registry().get("attention"), ic);
}

Tensor run(const Ins& ins, const AttrMap& attrs) {
  std::vector<TensorType> types = infer(ins, attrs);
  std::vector<const Tensor*> ptrs;
  for (const auto& t : ins) ptrs.push_back(t ? &*t : nullptr);
  return evaluate_op(op_registry().get("attention"), attrs, ptrs, types, "test node")[0];
}

Tensor random(DType dt, Shape s, uint32_t seed, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t(dt, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, u(rng));
  return t;
}

AttrMap attrs(double scale, int causal = 0, int nan_to_zero = 0) {
  AttrMap a;
  a.set("scale", float(scale));
  a.set("causal", int64_t(causal));
  if (nan_to_zero) a.set("nan_to_zero", int64_t(1));
  return a;
}

// The definition, written out in double: s = scale q.k + mask (+ -inf above
// the bottom-right diagonal), p = softmax(s), NaN p -> 0 when asked, o = p v.
std::vector<double> naive(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask, double scale,
                          bool causal, bool nan_to_zero) {
  int64_t B = q.shape()[0], H = q.shape()[1], Sq = q.shape()[2], D = q.shape()[3], Sk = k.shape()[2], Dv = v.shape()[3];
  auto at = [](const Tensor& t, std::vector<int64_t> idx) {  // numpy broadcast read
    int64_t off = 0, r = t.rank(), pad = 4 - r;
    for (int64_t d = 0; d < r; ++d) off = off * t.shape()[d] + (t.shape()[d] == 1 ? 0 : idx[pad + d]);
    return t.get_double(off);
  };
  std::vector<double> out(B * H * Sq * Dv);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Sq; ++i) {
        std::vector<double> s(Sk);
        for (int64_t j = 0; j < Sk; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += at(q, {b, h, i, d}) * at(k, {b, h, j, d});
          s[j] = scale * dot + (mask ? at(*mask, {b, h, i, j}) : 0.0);
          if (causal && j > i + Sk - Sq) s[j] = -INFINITY;
        }
        double mx = -INFINITY, sum = 0;
        for (double x : s) mx = std::max(mx, x);
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (double& x : s) {
          x /= sum;
          if (nan_to_zero && std::isnan(x)) x = 0;
        }
        for (int64_t e = 0; e < Dv; ++e) {
          double o = 0;
          for (int64_t j = 0; j < Sk; ++j) o += s[j] * at(v, {b, h, j, e});
          out[((b * H + h) * Sq + i) * Dv + e] = o;
        }
      }
  return out;
}

void expect_close(const Tensor& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.numel(), int64_t(want.size()));
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got.get_double(i))) << "element " << i;
    else EXPECT_NEAR(got.get_double(i), want[i], tol) << "element " << i;
  }
}

TEST(AttentionOp, MatchesNaiveWithoutMask) {
  Tensor q = random(DType::F32, {2, 3, 5, 4}, 1), k = random(DType::F32, {2, 3, 7, 4}, 2),
         v = random(DType::F32, {2, 3, 7, 6}, 3);
  Tensor o = run({q, k, v}, attrs(0.5));
  EXPECT_EQ(o.shape(), (Shape{2, 3, 5, 6}));
  expect_close(o, naive(q, k, v, nullptr, 0.5, false, false), 1e-5);
}

TEST(AttentionOp, MasksBroadcastFromEveryShape) {
  Tensor q = random(DType::F32, {2, 3, 4, 8}, 4), k = random(DType::F32, {2, 3, 6, 8}, 5),
         v = random(DType::F32, {2, 3, 6, 8}, 6);
  // BERT's [B,1,1,Sk] padding mask, a [Sq,Sk] bias, a per-head [1,H,Sq,1], the full shape.
  for (Shape ms : {Shape{2, 1, 1, 6}, Shape{4, 6}, Shape{1, 3, 4, 1}, Shape{2, 3, 4, 6}, Shape{6}}) {
    Tensor mask = random(DType::F32, ms, 7, -3, 1);
    if (ms == Shape{2, 1, 1, 6}) mask.set_double(5, -10000.0);  // a padded key in batch 0
    Tensor o = run({q, k, v, mask}, attrs(0.35));
    expect_close(o, naive(q, k, v, &mask, 0.35, false, false), 1e-5);
  }
}

TEST(AttentionOp, CausalSquareAndBottomRightAligned) {
  for (int64_t sq : {5, 2, 1}) {
    Tensor q = random(DType::F32, {1, 2, sq, 4}, 8), k = random(DType::F32, {1, 2, 5, 4}, 9),
           v = random(DType::F32, {1, 2, 5, 3}, 10);
    Tensor o = run({q, k, v}, attrs(1.0, 1));
    expect_close(o, naive(q, k, v, nullptr, 1.0, true, false), 1e-5);
  }
  // Query 0 of a square causal attention sees only key 0: its output is v[0].
  Tensor q = random(DType::F32, {1, 1, 3, 2}, 11), k = random(DType::F32, {1, 1, 3, 2}, 12),
         v = random(DType::F32, {1, 1, 3, 2}, 13);
  Tensor o = run({q, k, v}, attrs(1.0, 1));
  EXPECT_FLOAT_EQ(o.get_double(0), v.get_double(0));
  EXPECT_FLOAT_EQ(o.get_double(1), v.get_double(1));
}

TEST(AttentionOp, CausalPlusMask) {
  Tensor q = random(DType::F32, {2, 2, 4, 4}, 14), k = random(DType::F32, {2, 2, 4, 4}, 15),
         v = random(DType::F32, {2, 2, 4, 4}, 16), mask = random(DType::F32, {2, 1, 1, 4}, 17);
  Tensor o = run({q, k, v, mask}, attrs(0.5, 1));
  expect_close(o, naive(q, k, v, &mask, 0.5, true, false), 1e-5);
}

TEST(AttentionOp, FullyMaskedRowIsNaNOrZero) {
  // Row 1 of the mask is all -inf: softmax gives NaN there; nan_to_zero gives 0.
  Tensor q = random(DType::F32, {1, 1, 3, 2}, 18), k = random(DType::F32, {1, 1, 3, 2}, 19),
         v = random(DType::F32, {1, 1, 3, 2}, 20);
  Tensor mask(DType::F32, {3, 3});
  for (int j = 0; j < 3; ++j) mask.set_double(3 + j, -INFINITY);
  Tensor nan_rows = run({q, k, v, mask}, attrs(1.0));
  expect_close(nan_rows, naive(q, k, v, &mask, 1.0, false, false), 1e-6);
  EXPECT_TRUE(std::isnan(nan_rows.get_double(2)));
  EXPECT_FALSE(std::isnan(nan_rows.get_double(0)));
  Tensor zero_rows = run({q, k, v, mask}, attrs(1.0, 0, 1));
  expect_close(zero_rows, naive(q, k, v, &mask, 1.0, false, true), 1e-6);
  EXPECT_EQ(zero_rows.get_double(2), 0.0);
  EXPECT_EQ(zero_rows.get_double(3), 0.0);
}

TEST(AttentionOp, LargeScoresStayFinite) {
  // Scores near 1e4: a naive exp would overflow; the max shift keeps them finite.
  Tensor q = random(DType::F32, {1, 1, 2, 2}, 21, 60, 70), k = random(DType::F32, {1, 1, 3, 2}, 22, 60, 70),
         v = random(DType::F32, {1, 1, 3, 2}, 23);
  Tensor o = run({q, k, v}, attrs(1.0));
  for (int64_t i = 0; i < o.numel(); ++i) EXPECT_TRUE(std::isfinite(o.get_double(i)));
  expect_close(o, naive(q, k, v, nullptr, 1.0, false, false), 1e-4);
}

TEST(AttentionOp, HalfPrecisionComputesInFloat) {
  for (DType dt : {DType::F16, DType::BF16, DType::F64}) {
    Tensor q = random(dt, {1, 2, 4, 8}, 24), k = random(dt, {1, 2, 4, 8}, 25), v = random(dt, {1, 2, 4, 8}, 26),
           mask = random(dt, {1, 1, 1, 4}, 27);
    Tensor o = run({q, k, v, mask}, attrs(0.25, 1));
    EXPECT_EQ(o.dtype(), dt);
    // The naive loop reads the same rounded operands, so only the output rounding differs.
    expect_close(o, naive(q, k, v, &mask, 0.25, true, false),
                 dt == DType::BF16  ? 2e-2
                 : dt == DType::F16 ? 3e-3
                                    : 1e-12);
  }
}

// Grouped-query attention (Llama, Mistral): 6 query heads on 2 key/value
// heads read heads 0,0,0,1,1,1 -- what the graphs' expand of the cache to 6
// heads computes, checked against the definition on that expanded cache.
TEST(AttentionOp, GroupedQueryHeadsReadTheirGroupsKeysAndValues) {
  Tensor q = random(DType::F32, {2, 6, 3, 8}, 11), k = random(DType::F32, {2, 2, 7, 8}, 12),
         v = random(DType::F32, {2, 2, 7, 5}, 13), mask = random(DType::F32, {2, 1, 1, 7}, 14, -3, 1);
  auto expand = [](const Tensor& t, int64_t heads) {
    const Shape& s = t.shape();
    Tensor e(t.dtype(), {s[0], heads, s[2], s[3]});
    const int64_t group = heads / s[1], row = s[2] * s[3];
    for (int64_t b = 0; b < s[0]; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < row; ++i)
          e.set_double((b * heads + h) * row + i, t.get_double((b * s[1] + h / group) * row + i));
    return e;
  };
  Tensor o = run({q, k, v, mask}, attrs(0.3, 1));
  EXPECT_EQ(o.shape(), (Shape{2, 6, 3, 5}));
  Tensor ke = expand(k, 6), ve = expand(v, 6);
  expect_close(o, naive(q, ke, ve, &mask, 0.3, true, false), 1e-5);
  // Heads that do not divide: an error naming both.
  Tensor q5 = random(DType::F32, {2, 5, 3, 8}, 15);
  EXPECT_THROW(infer({q5, k, v}, attrs(1.0)), Error);
  EXPECT_THROW(infer({q, k, random(DType::F32, {2, 3, 7, 5}, 16)}, attrs(1.0)), Error);  // k and v heads differ
}

TEST(AttentionOp, InferenceErrors) {
  Tensor q(DType::F32, {1, 2, 4, 8}), k(DType::F32, {1, 2, 5, 8}), v(DType::F32, {1, 2, 5, 3});
  EXPECT_EQ(infer({q, k, v}, attrs(1.0))[0].shape, (Shape{1, 2, 4, 3}));
  EXPECT_THROW(infer({Tensor(DType::F32, {2, 4, 8}), k, v}, attrs(1.0)), Error);           // rank 3
  EXPECT_THROW(infer({q, Tensor(DType::F32, {1, 1, 5, 8}), v}, attrs(1.0)), Error);        // heads differ
  EXPECT_THROW(infer({q, Tensor(DType::F32, {1, 2, 5, 7}), v}, attrs(1.0)), Error);        // head dim
  EXPECT_THROW(infer({q, k, Tensor(DType::F32, {1, 2, 6, 3})}, attrs(1.0)), Error);        // key count
  EXPECT_THROW(infer({q, k, Tensor(DType::F16, {1, 2, 5, 3})}, attrs(1.0)), Error);        // dtype
  EXPECT_THROW(infer({Tensor(DType::I32, {1, 2, 4, 8}), k, v}, attrs(1.0)), Error);        // not float
  EXPECT_THROW(infer({q, k, v, Tensor(DType::F32, {1, 2, 4, 4})}, attrs(1.0)), Error);     // mask Sk 4 != 5
  EXPECT_THROW(infer({q, k, v, Tensor(DType::F32, {1, 1, 1, 1, 5})}, attrs(1.0)), Error);  // mask rank 5
  EXPECT_NO_THROW(infer({q, k, v, Tensor(DType::F32, {4, 1})}, attrs(1.0)));
  EXPECT_THROW(infer({q, k, v}, attrs(1.0, 2)), Error);          // causal 2
  EXPECT_THROW(infer({q, k, v}, attrs(INFINITY)), Error);        // scale inf
  EXPECT_THROW(infer({q, k, v}, AttrMap{}), Error);              // scale missing
  EXPECT_THROW(infer({q, std::nullopt, v}, attrs(1.0)), Error);  // k absent
}

}  // namespace
}  // namespace kiln
