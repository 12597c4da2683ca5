// Linear algebra ops: shape rules and errors the conformance tests do not
// reach (matmul broadcasting, gemm transposes and C shapes, einsum edge
// cases), and numerics against naive loops, quantized forms included
// (misc_ops_test.cpp: recurrent, signal and NMS ops; linalg_adapters_test.cpp:
// their ONNX adapters).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/shape_utils.h"
#include "linalg_ops_test_util.h"
#include "ops/registry.h"

namespace kiln {
namespace {

using namespace kiln::testing::linalg_ops;

// Naive numpy matmul on doubles for rank >= 2 operands with broadcast batches.
std::vector<double> naive_matmul(const Tensor& a, const Tensor& b, const Shape& out_batch) {
  int64_t M = a.shape()[a.rank() - 2], K = a.shape().back(), N = b.shape().back();
  int64_t nb = shape_numel(out_batch);
  std::vector<double> r;
  int ob = static_cast<int>(out_batch.size());
  for (int64_t bi = 0; bi < nb; ++bi) {
    // Batch index digits, right-aligned against each operand's batch dims.
    std::vector<int64_t> idx(ob);
    for (int64_t q = bi, k = ob - 1; k >= 0; --k) {
      idx[k] = q % out_batch[k];
      q /= out_batch[k];
    }
    auto offset = [&](const Tensor& t) {
      int tb = t.rank() - 2;
      int64_t off = 0, mul = t.shape()[tb] * t.shape()[tb + 1];
      for (int k = tb - 1; k >= 0; --k) {
        int64_t d = t.shape()[k];
        off += (d == 1 ? 0 : idx[ob - tb + k]) * mul;
        mul *= d;
      }
      return off;
    };
    int64_t ao = offset(a), bo = offset(b);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a.get_double(ao + i * K + k) * b.get_double(bo + k * N + j);
        r.push_back(s);
      }
  }
  return r;
}

TEST(LinalgOps, MatmulShapes) {
  EXPECT_EQ(infer_shape("matmul", {{3}, {3}}), Shape{});
  EXPECT_EQ(infer_shape("matmul", {{2, 3}, {3}}), Shape{2});
  EXPECT_EQ(infer_shape("matmul", {{3}, {3, 4}}), Shape{4});
  EXPECT_EQ(infer_shape("matmul", {{5, 3}, {7, 3, 4}}), (Shape{7, 5, 4}));
  EXPECT_EQ(infer_shape("matmul", {{2, 1, 3, 4}, {5, 4, 2}}), (Shape{2, 5, 3, 2}));
  EXPECT_EQ(infer_shape("matmul", {{6, 3}, {2, 3, 4}}), (Shape{2, 6, 4}));
  EXPECT_EQ(infer_shape("matmul", {{2, 3, 0}, {0, 4}}), (Shape{2, 3, 4}));
}

TEST(LinalgOps, MatmulErrors) {
  TensorType f(DType::F32, {2, 3});
  EXPECT_NE(infer_error("matmul", {f, TensorType(DType::F32, {4, 2})}).find("inner dimensions differ"),
            std::string::npos);
  EXPECT_NE(infer_error("matmul", {TensorType(DType::F32, {2, 2, 3}), TensorType(DType::F32, {3, 3, 4})})
                .find("batch dimensions do not broadcast"),
            std::string::npos);
  EXPECT_NE(infer_error("matmul", {TensorType(DType::F32, {}), f}).find("rank >= 1"), std::string::npos);
  EXPECT_NE(infer_error("matmul", {f, TensorType(DType::F64, {3, 2})}).find("f64"), std::string::npos);
  EXPECT_THROW(infer("matmul", {TensorType(DType::Bool, {2, 3}), TensorType(DType::Bool, {3, 2})}), Unsupported);
}

TEST(LinalgOps, MatmulBroadcastMatchesNaive) {
  struct Case {
    Shape a, b;
  };
  for (const Case& c :
       std::vector<Case>{{{2, 1, 3, 4}, {5, 4, 2}}, {{4, 3, 5}, {5, 2}}, {{3, 5}, {2, 5, 6}}, {{1, 3, 5}, {4, 5, 6}}}) {
    for (DType t : {DType::F32, DType::F64}) {
      Tensor a = random_tensor(t, c.a, 1), b = random_tensor(t, c.b, 2);
      Tensor y = run("matmul", {a, b})[0];
      Shape batch(y.shape().begin(), y.shape().end() - 2);
      expect_near(y, naive_matmul(a, b, batch), 1e-5);
    }
  }
}

TEST(LinalgOps, MatmulVectorsAndEmptyK) {
  Tensor a = Tensor::from<float>(DType::F32, {3}, {1, 2, 3});
  Tensor m = Tensor::from<float>(DType::F32, {3, 2}, {1, 0, 0, 1, 1, 1});
  expect_near(run("matmul", {a, a})[0], {14}, 0);
  expect_near(run("matmul", {a, m})[0], {4, 5}, 0);
  Tensor mt = Tensor::from<float>(DType::F32, {2, 3}, {1, 0, 1, 0, 1, 1});
  expect_near(run("matmul", {mt, a})[0], {4, 5}, 0);
  Tensor y = run("matmul", {Tensor(DType::F32, {2, 0}), Tensor(DType::F32, {0, 3})})[0];
  expect_near(y, std::vector<double>(6, 0.0), 0);
}

TEST(LinalgOps, MatmulIntegersWrapAndHalfFloats) {
  // int8 products wrap like the storage type: 100 * 2 = 200 -> -56.
  Tensor a = Tensor::from<int>(DType::I8, {1, 1}, {100}), b = Tensor::from<int>(DType::I8, {1, 1}, {2});
  EXPECT_EQ(run("matmul", {a, b})[0].get_int(0), -56);
  Tensor ai = random_tensor(DType::I32, {2, 3, 4}, 3, -50, 50), bi = random_tensor(DType::I32, {4, 5}, 4, -50, 50);
  Tensor yi = run("matmul", {ai, bi})[0];
  std::vector<double> want = naive_matmul(ai, bi, {2});
  for (int64_t i = 0; i < yi.numel(); ++i) EXPECT_EQ(yi.get_int(i), static_cast<int64_t>(want[i]));
  Tensor ah = random_tensor(DType::F16, {3, 8}, 5), bh = random_tensor(DType::BF16, {8, 2}, 6);
  Tensor yh = run("matmul", {ah, random_tensor(DType::F16, {8, 2}, 6)})[0];
  EXPECT_EQ(yh.dtype(), DType::F16);
  expect_near(yh, naive_matmul(ah, random_tensor(DType::F16, {8, 2}, 6), {}), 2e-2);
  Tensor yb = run("matmul", {random_tensor(DType::BF16, {3, 8}, 5), bh})[0];
  expect_near(yb, naive_matmul(random_tensor(DType::BF16, {3, 8}, 5), bh, {}), 0.1);
}

TEST(LinalgOps, GemmTransposesAndBias) {
  int64_t M = 3, N = 4, K = 5;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (Shape cs : {Shape{}, Shape{N}, Shape{M, 1}, Shape{M, N}}) {
        Tensor a = random_tensor(DType::F32, ta ? Shape{K, M} : Shape{M, K}, 10);
        Tensor b = random_tensor(DType::F32, tb ? Shape{N, K} : Shape{K, N}, 11);
        Tensor c = random_tensor(DType::F32, cs, 12);
        AttrMap at;
        at.set("trans_a", int64_t(ta));
        at.set("trans_b", int64_t(tb));
        at.set("alpha", 0.5f);
        at.set("beta", -2.0f);
        Tensor y = run("gemm", {a, b, c}, at)[0];
        ASSERT_EQ(y.shape(), (Shape{M, N}));
        std::vector<int64_t> cst = broadcast_strides(cs, {M, N});
        std::vector<double> want;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k)
              s += a.get_double(ta ? k * M + i : i * K + k) * b.get_double(tb ? j * K + k : k * N + j);
            want.push_back(0.5 * s - 2.0 * c.get_double(i * cst[0] + j * cst[1]));
          }
        expect_near(y, want, 1e-5);
      }
}

TEST(LinalgOps, GemmErrorsAndIntegers) {
  TensorType a(DType::F32, {3, 5}), b(DType::F32, {5, 4});
  EXPECT_NE(infer_error("gemm", {a, b, TensorType(DType::F32, {3})}).find("does not broadcast"), std::string::npos);
  EXPECT_NE(infer_error("gemm", {a, TensorType(DType::F32, {4, 5})}).find("inner dimensions"), std::string::npos);
  EXPECT_NE(infer_error("gemm", {TensorType(DType::F32, {2, 3, 5}), b}).find("2-D"), std::string::npos);
  Tensor ai = Tensor::from<int>(DType::I32, {2, 2}, {1, 2, 3, 4}),
         bi = Tensor::from<int>(DType::I32, {2, 2}, {5, 6, 7, 8});
  Tensor ci = Tensor::from<int>(DType::I32, {2}, {100, 200});
  Tensor y = run("gemm", {ai, bi, ci})[0];
  std::vector<int64_t> want = {119, 222, 143, 250};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.get_int(i), want[i]);
}

AttrMap eq(const std::string& e) {
  AttrMap a;
  a.set("equation", e);
  return a;
}

TEST(LinalgOps, EinsumMatchesNaiveLoops) {
  Tensor a = random_tensor(DType::F32, {3, 4}, 20), b = random_tensor(DType::F32, {4, 5}, 21);
  Tensor c = random_tensor(DType::F32, {5, 2}, 22), sq = random_tensor(DType::F64, {4, 4}, 23);
  // Explicit and implicit matmul.
  std::vector<double> ab = naive_matmul(a, b, {});
  expect_near(run("einsum", {a, b}, eq("ij,jk->ik"))[0], ab, 1e-5);
  expect_near(run("einsum", {a, b}, eq("ij,jk"))[0], ab, 1e-5);
  // Implicit output is sorted: "ba" is a transpose.
  Tensor t = run("einsum", {a}, eq("ba"))[0];
  ASSERT_EQ(t.shape(), (Shape{4, 3}));
  EXPECT_EQ(t.get_double(1 * 3 + 2), a.get_double(2 * 4 + 1));
  // Three operands.
  Tensor abm = Tensor::from<double>(DType::F32, {3, 5}, ab);
  expect_near(run("einsum", {a, b, c}, eq("ij,jk,kl->il"))[0], naive_matmul(abm, c, {}), 1e-4);
  // Diagonal, trace (implicit: repeated labels are summed), sum to scalar.
  std::vector<double> diag, trace{0}, total{0};
  for (int i = 0; i < 4; ++i) {
    diag.push_back(sq.get_double(i * 5));
    trace[0] += sq.get_double(i * 5);
  }
  for (int i = 0; i < 16; ++i) total[0] += sq.get_double(i);
  expect_near(run("einsum", {sq}, eq("ii->i"))[0], diag, 1e-12);
  Tensor tr = run("einsum", {sq}, eq("ii"))[0];
  EXPECT_EQ(tr.rank(), 0);
  expect_near(tr, trace, 1e-12);
  expect_near(run("einsum", {sq}, eq("ij->"))[0], total, 1e-12);
  // Outer product with spaces.
  Tensor u = Tensor::from<float>(DType::F32, {2}, {1, 2}), v = Tensor::from<float>(DType::F32, {3}, {3, 4, 5});
  expect_near(run("einsum", {u, v}, eq("i, j -> ij"))[0], {3, 4, 5, 6, 8, 10}, 0);
}

TEST(LinalgOps, EinsumEllipsisBroadcasts) {
  Tensor a = random_tensor(DType::F32, {2, 1, 3, 4}, 30), b = random_tensor(DType::F32, {5, 4, 2}, 31);
  Tensor y = run("einsum", {a, b}, eq("...ij,...jk->...ik"))[0];
  ASSERT_EQ(y.shape(), (Shape{2, 5, 3, 2}));
  expect_near(y, naive_matmul(a, b, {2, 5}), 1e-5);
  // Implicit output puts the ellipsis first.
  EXPECT_EQ(infer_shape("einsum", {{3, 2, 7}}, eq("i...")), (Shape{2, 7, 3}));
  // Batched diagonal as in the ONNX node test.
  Tensor x = random_tensor(DType::F64, {3, 4, 4}, 32);
  Tensor d = run("einsum", {x}, eq("...ii ->...i"))[0];
  ASSERT_EQ(d.shape(), (Shape{3, 4}));
  EXPECT_EQ(d.get_double(2 * 4 + 3), x.get_double(2 * 16 + 3 * 5));
  // Integer einsum.
  Tensor ia = Tensor::from<int>(DType::I64, {2, 2}, {1, 2, 3, 4});
  Tensor iy = run("einsum", {ia, ia}, eq("ij,ij->"))[0];
  EXPECT_EQ(iy.get_int(0), 30);
}

TEST(LinalgOps, EinsumErrors) {
  TensorType m(DType::F32, {3, 4});
  EXPECT_NE(infer_error("einsum", {m}, eq("ij,jk->ik")).find("2 operand terms"), std::string::npos);
  EXPECT_NE(infer_error("einsum", {m}, eq("i1->i")).find("unexpected character"), std::string::npos);
  EXPECT_NE(infer_error("einsum", {m}, eq("ij->k")).find("not in any operand"), std::string::npos);
  EXPECT_NE(infer_error("einsum", {m}, eq("ij->ii")).find("appears twice"), std::string::npos);
  EXPECT_NE(infer_error("einsum", {m}, eq("ijk->i")).find("rank 2"), std::string::npos);
  EXPECT_NE(infer_error("einsum", {m}, eq("ii->i")).find("dimension 'i'"), std::string::npos);
  EXPECT_NE(infer_error("einsum", {m}, eq("i.j->i")).find("'...'"), std::string::npos);
  EXPECT_NE(infer_error("einsum", {TensorType(DType::F32, {2, 3, 4})}, eq("...j->j")).find("no '...'"),
            std::string::npos);
}

TEST(LinalgOps, DetPivotsAndSingular) {
  Tensor x = Tensor::from<double>(DType::F64, {3, 2, 2}, {0, 1, 1, 0, 2, 0, 0, 3, 1, 2, 2, 4});
  expect_near(run("det", {x})[0], {-1, 6, 0}, 1e-12);
  Tensor y = Tensor::from<float>(DType::F32, {3, 3}, {2, -1, 0, -1, 2, -1, 0, -1, 2});
  expect_near(run("det", {y})[0], {4}, 1e-5);
  EXPECT_NE(infer_error("det", {TensorType(DType::F32, {2, 3})}).find("[..., M, M]"), std::string::npos);
}

TEST(LinalgOps, MatmulIntegerZeroPointsPerRowAndColumn) {
  Tensor a = Tensor::from<int>(DType::U8, {2, 3}, {10, 20, 30, 40, 50, 60});
  Tensor b = Tensor::from<int>(DType::U8, {3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor azp = Tensor::from<int>(DType::U8, {2}, {10, 40}), bzp = Tensor::from<int>(DType::U8, {2}, {1, 2});
  Tensor y = run("matmul_integer", {a, b, azp, bzp})[0];
  EXPECT_EQ(y.dtype(), DType::I32);
  // (a - [10;40]) = [[0,10,20],[0,10,20]]; (b - [1,2]) = [[0,0],[2,2],[4,4]].
  std::vector<int64_t> want = {100, 100, 100, 100};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.get_int(i), want[i]);
  EXPECT_NE(infer_error("matmul_integer", {a.type(), b.type(), TensorType(DType::U8, {3})}).find("one per row"),
            std::string::npos);
}

TEST(LinalgOps, ConvIntegerPadsWithZeroPoint) {
  // 1x1x2x2 input, 1x1x1x1 weight of 1, x_zero_point 5, pads 1: padded cells are 0, not -5.
  Tensor x = Tensor::from<int>(DType::U8, {1, 1, 2, 2}, {6, 7, 8, 9});
  Tensor w = Tensor::from<int>(DType::U8, {1, 1, 1, 1}, {1});
  AttrMap a;
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  Tensor y = run("conv_integer", {x, w, Tensor::scalar(DType::U8, 5)}, a)[0];
  ASSERT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  std::vector<int64_t> want = {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(y.get_int(i), want[i]) << i;
}

TEST(LinalgOps, QlinearMatmulRoundsHalfToEvenAndSaturates) {
  // y = rint(a * b * (1 * 1 / 2)) + y_zp: 5/2 = 2.5 -> 2, 7/2 = 3.5 -> 4, 600/2 -> 255.
  Tensor a = Tensor::from<int>(DType::U8, {3, 1}, {5, 7, 200});
  Tensor b = Tensor::from<int>(DType::U8, {1, 1}, {1});
  Tensor one = Tensor::scalar(DType::F32, 1), two = Tensor::scalar(DType::F32, 2), zp = Tensor::scalar(DType::U8, 0);
  Tensor b3 = Tensor::from<int>(DType::U8, {1, 1}, {3});
  Tensor y = run("qlinear_matmul", {a, one, zp, b, one, zp, two, zp})[0];
  EXPECT_EQ(y.dtype(), DType::U8);
  EXPECT_EQ(y.get_int(0), 2);
  EXPECT_EQ(y.get_int(1), 4);
  EXPECT_EQ(y.get_int(2), 100);
  Tensor ys = run("qlinear_matmul", {a, one, zp, b3, one, zp, two, zp})[0];
  EXPECT_EQ(ys.get_int(2), 255);  // 600 / 2 saturates
  // An i8 result saturates at -128.
  Tensor yi = run("qlinear_matmul", {a, one, zp, b3, one, zp, two, Tensor::scalar(DType::I8, -100)})[0];
  EXPECT_EQ(yi.dtype(), DType::I8);
  EXPECT_EQ(yi.get_int(0), -92);  // rint(7.5) = 8 - 100
  EXPECT_EQ(yi.get_int(2), 127);
}

TEST(LinalgOps, DynamicQuantizeLinearByHand) {
  Tensor x = Tensor::from<float>(DType::F32, {4}, {-1.0f, 0.0f, 1.0f, 2.55f});
  std::vector<Tensor> r = run("dynamic_quantize_linear", {x}, {}, 3);
  float scale = 3.55f / 255.0f;
  EXPECT_FLOAT_EQ(r[1].get_double(0), scale);
  EXPECT_EQ(r[2].get_int(0), 72);  // rint(1 / scale) = rint(71.83)
  std::vector<int64_t> want = {0, 72, 144, 255};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r[0].get_int(i), want[i]) << i;
  // All-positive data keeps 0 in range: zero point 0.
  std::vector<Tensor> p = run("dynamic_quantize_linear", {Tensor::from<float>(DType::F32, {2}, {1, 2})}, {}, 3);
  EXPECT_EQ(p[2].get_int(0), 0);
  EXPECT_EQ(p[0].get_int(1), 255);
}

// Naive grouped, strided, dilated conv of (x - xzp) and (w - wzp[m]) for 2-D.
std::vector<int64_t> naive_conv2d(const Tensor& x, const Tensor& w, int64_t xzp, const std::vector<int64_t>& wzp,
                                  int64_t group, std::vector<int64_t> st, std::vector<int64_t> dil,
                                  std::vector<int64_t> pads, Shape& out_shape) {
  int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t M = w.shape()[0], CG = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  int64_t OH = (H + pads[0] + pads[2] - ((KH - 1) * dil[0] + 1)) / st[0] + 1;
  int64_t OW = (W + pads[1] + pads[3] - ((KW - 1) * dil[1] + 1)) / st[1] + 1;
  out_shape = {N, M, OH, OW};
  std::vector<int64_t> r;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t s = 0, g = m / (M / group);
          for (int64_t c = 0; c < CG; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * st[0] + kh * dil[0] - pads[0], iw = ow * st[1] + kw * dil[1] - pads[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                int64_t xv = x.get_int(((n * C + g * CG + c) * H + ih) * W + iw) - xzp;
                int64_t wv = w.get_int(((m * CG + c) * KH + kh) * KW + kw) - wzp[m];
                s += xv * wv;
              }
          r.push_back(s);
        }
  return r;
}

TEST(LinalgOps, ConvIntegerGroupsStridesDilationsMatchNaive) {
  Tensor x = random_tensor(DType::U8, {2, 4, 7, 6}, 60, 0, 255);
  Tensor w = random_tensor(DType::I8, {6, 2, 3, 2}, 61, -128, 127);
  std::vector<int64_t> wzp = {3, -4, 0, 7, 1, -1};
  Tensor wzt = Tensor::from<int64_t>(DType::I8, {6}, wzp);
  AttrMap a;
  a.set("group", int64_t(2));
  a.set("strides", std::vector<int64_t>{2, 1});
  a.set("dilations", std::vector<int64_t>{1, 2});
  a.set("pads", std::vector<int64_t>{1, 0, 2, 1});
  Tensor y = run("conv_integer", {x, w, Tensor::scalar(DType::U8, 128), wzt}, a)[0];
  Shape want_shape;
  std::vector<int64_t> want = naive_conv2d(x, w, 128, wzp, 2, {2, 1}, {1, 2}, {1, 0, 2, 1}, want_shape);
  ASSERT_EQ(y.shape(), want_shape);
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.get_int(i), want[i]) << i;
}

TEST(LinalgOps, QlinearConvPerChannelScales) {
  // 1x1 kernels: y[m] = rint(x * w[m] * x_scale * w_scale[m] / y_scale) + y_zp (+ bias before scaling).
  Tensor x = Tensor::from<int>(DType::U8, {1, 1, 1, 2}, {10, 20});
  Tensor w = Tensor::from<int>(DType::U8, {2, 1, 1, 1}, {2, 3});
  Tensor ws = Tensor::from<float>(DType::F32, {2}, {0.5f, 0.25f});
  Tensor bias = Tensor::from<int>(DType::I32, {2}, {4, -60});
  Tensor f1 = Tensor::scalar(DType::F32, 1), zp = Tensor::scalar(DType::U8, 0),
         wzp = Tensor::from<int>(DType::U8, {2}, {0, 0});
  Tensor y = run("qlinear_conv", {x, f1, zp, w, ws, wzp, f1, Tensor::scalar(DType::U8, 5), bias})[0];
  ASSERT_EQ(y.shape(), (Shape{1, 2, 1, 2}));
  // m=0: (20+4)*0.5+5 = 17, (40+4)*0.5+5 = 27; m=1: (30-60)*0.25+5 = -2.5 -> 0 (saturates), (60-60)*.25+5 = 5.
  std::vector<int64_t> want = {17, 27, 0, 5};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.get_int(i), want[i]) << i;
}

}  // namespace
}  // namespace kiln
