// Linear algebra and misc ops: shape rules and errors the conformance tests do
// not reach (matmul broadcasting, gemm transposes and C shapes, einsum edge
// cases), numerics against naive loops, and recurrent/signal op properties.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/shape_utils.h"
#include "ops/registry.h"

namespace kiln {
namespace {

std::vector<TensorType> infer(const std::string& op, const std::vector<TensorType>& ins, const AttrMap& a = {},
                              int nout = 1) {
  Graph g;
  std::vector<Value*> vs;
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(g.add_input(fmt::format("x{}", i), ins[i]));
  InferContext ic(op, vs, a, nout, "test");
  return infer_types(op_registry().get(op), ic);
}

Shape infer_shape(const std::string& op, const std::vector<Shape>& shapes, const AttrMap& a = {},
                  DType t = DType::F32) {
  std::vector<TensorType> ins;
  for (const Shape& s : shapes) ins.emplace_back(t, s);
  return infer(op, ins, a)[0].shape;
}

std::string infer_error(const std::string& op, const std::vector<TensorType>& ins, const AttrMap& a = {}) {
  try {
    infer(op, ins, a);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<Tensor> run(const std::string& op, const std::vector<Tensor>& ins, const AttrMap& a = {}, int nout = 1) {
  std::vector<TensorType> types;
  for (const Tensor& t : ins) types.push_back(t.type());
  std::vector<TensorType> outs = infer(op, types, a, nout);
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : ins) ptrs.push_back(&t);
  return evaluate_op(op_registry().get(op), a, ptrs, outs, "test");
}

Tensor random_tensor(DType t, Shape s, int seed, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  Tensor r(t, std::move(s));
  for (int64_t i = 0; i < r.numel(); ++i) {
    double v = d(rng);
    r.set_double(i, is_float(t) ? v : std::round(v));
  }
  return r;
}

void expect_near(const Tensor& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < got.numel(); ++i) EXPECT_NEAR(got.get_double(i), want[i], tol) << "element " << i;
}

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
  for (const Case& c : std::vector<Case>{{{2, 1, 3, 4}, {5, 4, 2}}, {{4, 3, 5}, {5, 2}}, {{3, 5}, {2, 5, 6}},
                                         {{1, 3, 5}, {4, 5, 6}}}) {
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
  Tensor ai = Tensor::from<int>(DType::I32, {2, 2}, {1, 2, 3, 4}), bi = Tensor::from<int>(DType::I32, {2, 2}, {5, 6, 7, 8});
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

AttrMap rnn_attrs(int64_t hidden, const std::string& dir) {
  AttrMap a;
  a.set("hidden_size", hidden);
  a.set("direction", dir);
  return a;
}

// Running with sequence_lens L gives the same as running on the first L
// steps; later Y rows are zero; Y_h is the last valid step (forward) or step 0 (reverse).
TEST(MiscOps, RecurrentSequenceLens) {
  int64_t S = 4, B = 2, I = 3, H = 2;
  for (std::string op : {"rnn", "gru", "lstm"}) {
    int64_t G = op == "rnn" ? 1 : op == "gru" ? 3 : 4;
    Tensor x = random_tensor(DType::F32, {S, B, I}, 40, -1, 1);
    Tensor w = random_tensor(DType::F32, {2, G * H, I}, 41, -1, 1);
    Tensor r = random_tensor(DType::F32, {2, G * H, H}, 42, -1, 1);
    Tensor bias = random_tensor(DType::F32, {2, 2 * G * H}, 43, -1, 1);
    Tensor lens = Tensor::from<int>(DType::I32, {B}, {4, 2});
    std::vector<Tensor> full = run(op, {x, w, r, bias, lens}, rnn_attrs(H, "bidirectional"), 2);
    ASSERT_EQ(full[0].shape(), (Shape{S, 2, B, H}));
    // Batch entry 1 alone, truncated to 2 steps.
    Tensor x1(DType::F32, {2, 1, I});
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t i = 0; i < I; ++i) x1.set_double(s * I + i, x.get_double((s * B + 1) * I + i));
    std::vector<Tensor> part = run(op, {x1, w, r, bias}, rnn_attrs(H, "bidirectional"), 2);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < 2; ++d)
        for (int64_t h = 0; h < H; ++h) {
          double got = full[0].get_double(((s * 2 + d) * B + 1) * H + h);
          double want = s < 2 ? part[0].get_double((s * 2 + d) * H + h) : 0.0;
          EXPECT_NEAR(got, want, 1e-6) << op << " s=" << s << " d=" << d;
        }
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t h = 0; h < H; ++h) {
        EXPECT_NEAR(full[1].get_double((d * B + 1) * H + h), part[1].get_double(d * H + h), 1e-6) << op;
        int64_t step = d == 0 ? 1 : 0;
        EXPECT_NEAR(part[1].get_double(d * H + h), part[0].get_double((step * 2 + d) * H + h), 1e-7) << op;
      }
  }
}

TEST(MiscOps, RecurrentShapeErrors) {
  TensorType x(DType::F32, {4, 2, 3}), w(DType::F32, {1, 8, 3}), r(DType::F32, {1, 8, 2});
  EXPECT_NE(infer_error("lstm", {x, w, r}, rnn_attrs(3, "forward")).find("W (operand 1)"), std::string::npos);
  EXPECT_NE(infer_error("rnn", {x, TensorType(DType::F32, {1, 2, 3}), TensorType(DType::F32, {1, 2, 2})},
                        rnn_attrs(2, "sideways"))
                .find("direction"),
            std::string::npos);
  AttrMap bad = rnn_attrs(2, "forward");
  bad.set("activations", std::vector<std::string>{"Sigmoid", "Tanh"});
  EXPECT_NE(infer_error("lstm", {x, TensorType(DType::F32, {1, 8, 3}), TensorType(DType::F32, {1, 8, 2})}, bad)
                .find("expected 3"),
            std::string::npos);
}

TEST(MiscOps, DftRoundTripsAndDelta) {
  Tensor x = random_tensor(DType::F64, {2, 7, 2}, 50);
  AttrMap f;
  f.set("axis", int64_t(1));
  Tensor X = run("dft", {x}, f)[0];
  AttrMap inv = f;
  inv.set("inverse", int64_t(1));
  Tensor back = run("dft", {X}, inv)[0];
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(back.get_double(i), x.get_double(i), 1e-12);
  // A real delta transforms to all ones; onesided keeps n/2 + 1 bins; length zero-pads.
  Tensor delta = Tensor::from<float>(DType::F32, {1, 4, 1}, {1, 0, 0, 0});
  AttrMap o = f;
  o.set("onesided", int64_t(1));
  o.set("length", int64_t(8));
  Tensor d = run("dft", {delta}, o)[0];
  ASSERT_EQ(d.shape(), (Shape{1, 5, 2}));
  for (int k = 0; k < 5; ++k) {
    EXPECT_NEAR(d.get_double(2 * k), 1.0, 1e-6);
    EXPECT_NEAR(d.get_double(2 * k + 1), 0.0, 1e-6);
  }
}

TEST(MiscOps, NmsNeedsKnownInputs) {
  AttrMap a;
  a.set("max_output_boxes_per_class", int64_t(3));
  std::string e = infer_error("non_max_suppression",
                              {TensorType(DType::F32, {1, 4, 4}), TensorType(DType::F32, {1, 1, 4})}, a);
  EXPECT_NE(e.find("must be known at compile time"), std::string::npos) << e;
}

}  // namespace
}  // namespace kiln
