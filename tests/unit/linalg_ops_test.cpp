// Linear algebra and misc ops: shape rules and errors the conformance tests do
// not reach (matmul broadcasting, gemm transposes and C shapes, einsum edge
// cases), numerics against naive loops, and recurrent/signal op properties.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <functional>
#include <random>

#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
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

// Infers with the operands as constants (so data-dependent inference sees
// them), then runs the reference kernel.
std::vector<Tensor> run(const std::string& op, const std::vector<Tensor>& ins, const AttrMap& a = {}, int nout = 1) {
  Graph g;
  std::vector<Value*> vs;
  // A default-constructed Tensor (rank 0 but no element) stands for an absent operand.
  auto absent = [](const Tensor& t) { return t.rank() == 0 && t.numel() == 0; };
  for (size_t i = 0; i < ins.size(); ++i)
    vs.push_back(absent(ins[i]) ? nullptr : g.add_constant(fmt::format("c{}", i), ins[i]));
  InferContext ic(op, vs, a, nout, "test");
  std::vector<TensorType> outs = infer_types(op_registry().get(op), ic);
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : ins) ptrs.push_back(absent(t) ? nullptr : &t);
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

TEST(MiscOps, DftInverseOfOneSidedSpectrumIsIrfft) {
  // A real signal of even (8) and odd (7) length: its one-sided spectrum
  // (len/2 + 1 bins) through inverse + onesided gives the signal back, real
  // ([..., 1]); the default length is 2 (bins - 1), the even one.
  for (int64_t len : {8, 7}) {
    Tensor x = random_tensor(DType::F64, {3, len, 1}, 60 + len);
    AttrMap f;
    f.set("axis", int64_t(1));
    f.set("onesided", int64_t(1));
    Tensor X = run("dft", {x}, f)[0];
    ASSERT_EQ(X.shape(), (Shape{3, len / 2 + 1, 2}));
    AttrMap inv = f;
    inv.set("inverse", int64_t(1));
    if (len % 2) inv.set("length", len);
    Tensor back = run("dft", {X}, inv)[0];
    ASSERT_EQ(back.shape(), (Shape{3, len, 1})) << len;
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(back.get_double(i), x.get_double(i), 1e-12) << len << " " << i;
  }
  // The imaginary parts of the DC and Nyquist bins are ignored (a real
  // signal's are zero): bins [1+5i, 0, 2+7i] of length 4 give
  // (1 + 2 (-1)^t) / 4 ... with DC 1 and Nyquist 2: t=0: 3/4, t=1: -1/4.
  Tensor spec = Tensor::from<double>(DType::F32, {3, 2}, {1, 5, 0, 0, 2, 7});
  AttrMap a;
  a.set("axis", int64_t(0));
  a.set("inverse", int64_t(1));
  a.set("onesided", int64_t(1));
  Tensor y = run("dft", {spec}, a)[0];
  ASSERT_EQ(y.shape(), (Shape{4, 1}));
  const double want[] = {0.75, -0.25, 0.75, -0.25};
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(y.get_double(t), want[t], 1e-7) << t;
}

TEST(MiscOps, NmsNeedsKnownInputs) {
  AttrMap a;
  a.set("max_output_boxes_per_class", int64_t(3));
  std::string e =
      infer_error("non_max_suppression", {TensorType(DType::F32, {1, 4, 4}), TensorType(DType::F32, {1, 1, 4})}, a);
  EXPECT_NE(e.find("must be known at compile time"), std::string::npos) << e;
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

TEST(MiscOps, WindowsByHand) {
  auto win = [](const std::string& op, int64_t n, int64_t periodic) {
    AttrMap a;
    a.set("size", n);
    a.set("periodic", periodic);
    return run(op, {}, a)[0];
  };
  expect_near(win("hann_window", 4, 1), {0, 0.5, 1, 0.5}, 1e-7);
  expect_near(win("hann_window", 5, 0), {0, 0.5, 1, 0.5, 0}, 1e-7);
  expect_near(win("hamming_window", 2, 1), {4.0 / 46, 1.0}, 1e-7);
  expect_near(win("blackman_window", 3, 0), {0, 1, 0}, 1e-7);
  AttrMap d;
  d.set("size", int64_t(3));
  d.set("dtype", std::string("f64"));
  EXPECT_EQ(run("hann_window", {}, d)[0].dtype(), DType::F64);
}

TEST(MiscOps, StftIsDftOfWindowedFrames) {
  Tensor sig = random_tensor(DType::F32, {1, 10, 1}, 70);
  Tensor win = Tensor::from<float>(DType::F32, {4}, {0.5f, 1.0f, 1.0f, 0.5f});
  AttrMap a;
  a.set("frame_step", int64_t(3));
  a.set("frame_length", int64_t(4));
  Tensor s = run("stft", {sig, win}, a)[0];
  ASSERT_EQ(s.shape(), (Shape{1, 3, 3, 2}));
  for (int64_t f = 0; f < 3; ++f) {
    Tensor frame(DType::F32, {1, 4, 1});
    for (int j = 0; j < 4; ++j) frame.set_double(j, sig.get_double(f * 3 + j) * win.get_double(j));
    AttrMap da;
    da.set("axis", int64_t(1));
    da.set("onesided", int64_t(1));
    Tensor d = run("dft", {frame}, da)[0];
    for (int64_t k = 0; k < 6; ++k) EXPECT_NEAR(s.get_double(f * 6 + k), d.get_double(k), 1e-6);
  }
}

TEST(MiscOps, NmsSelectsByScoreAndIou) {
  // Boxes 0 and 1 overlap with IoU 0.81 (> 0.5); box 2 is apart. Scores 0.9, 0.95, 0.3.
  Tensor boxes = Tensor::from<float>(DType::F32, {1, 3, 4}, {0, 0, 10, 10, 1, 1, 10, 10, 20, 20, 30, 30});
  Tensor scores = Tensor::from<float>(DType::F32, {1, 1, 3}, {0.9f, 0.95f, 0.3f});
  AttrMap a;
  a.set("max_output_boxes_per_class", int64_t(10));
  a.set("iou_threshold", 0.5f);
  Tensor y = run("non_max_suppression", {boxes, scores}, a)[0];
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  std::vector<int64_t> want = {0, 0, 1, 0, 0, 2};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.get_int(i), want[i]);
  a.set("score_threshold", 0.5f);
  EXPECT_EQ(run("non_max_suppression", {boxes, scores}, a)[0].shape(), (Shape{1, 3}));
  a.set("iou_threshold", 0.9f);
  EXPECT_EQ(run("non_max_suppression", {boxes, scores}, a)[0].shape(), (Shape{2, 3}));
  // Center-point form of the same boxes selects the same.
  Tensor cb = Tensor::from<float>(DType::F32, {1, 3, 4}, {5, 5, 10, 10, 5.5, 5.5, 9, 9, 25, 25, 10, 10});
  AttrMap c;
  c.set("max_output_boxes_per_class", int64_t(10));
  c.set("iou_threshold", 0.5f);
  c.set("center_point_box", int64_t(1));
  Tensor yc = run("non_max_suppression", {cb, scores}, c)[0];
  ASSERT_EQ(yc.shape(), (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(yc.get_int(i), want[i]);
}

// One LSTM step with H = I = 1 written out: peepholes, clip and input_forget.
TEST(MiscOps, LstmStepByHand) {
  double x = 3, h0 = 0.5, c0 = -0.25;
  double w[4] = {0.5, -1, 2, 1}, r[4] = {1, 0.5, -0.5, 2}, wb[4] = {0.1, 0.2, 0.3, 0.4}, rb[4] = {0, -0.1, 0.1, 0};
  double p[3] = {0.3, -0.2, 0.6};  // i, o, f
  for (int forget = 0; forget < 2; ++forget) {
    auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
    auto clip = [](double v) { return std::clamp(v, -1.0, 1.0); };
    auto pre = [&](int g) { return w[g] * x + r[g] * h0 + wb[g] + rb[g]; };
    double i = sig(clip(pre(0) + p[0] * c0));
    double f = forget ? 1 - i : sig(clip(pre(2) + p[2] * c0));
    double cand = std::tanh(clip(pre(3)));
    double c = f * c0 + i * cand;
    double o = sig(clip(pre(1) + p[1] * c));
    double h = o * std::tanh(c);
    AttrMap a = rnn_attrs(1, "forward");
    a.set("clip", 1.0f);
    a.set("input_forget", int64_t(forget));
    Tensor X = Tensor::from<double>(DType::F64, {1, 1, 1}, {x});
    Tensor W = Tensor::from<double>(DType::F64, {1, 4, 1}, {w[0], w[1], w[2], w[3]});
    Tensor R = Tensor::from<double>(DType::F64, {1, 4, 1}, {r[0], r[1], r[2], r[3]});
    Tensor B = Tensor::from<double>(DType::F64, {1, 8}, {wb[0], wb[1], wb[2], wb[3], rb[0], rb[1], rb[2], rb[3]});
    Tensor L = Tensor::from<int>(DType::I32, {1}, {1});
    Tensor H0 = Tensor::from<double>(DType::F64, {1, 1, 1}, {h0}),
           C0 = Tensor::from<double>(DType::F64, {1, 1, 1}, {c0});
    Tensor P = Tensor::from<double>(DType::F64, {1, 3}, {p[0], p[1], p[2]});
    std::vector<Tensor> y = run("lstm", {X, W, R, B, L, H0, C0, P}, a, 3);
    EXPECT_NEAR(y[0].get_double(0), h, 1e-12) << forget;
    EXPECT_NEAR(y[1].get_double(0), h, 1e-12) << forget;
    EXPECT_NEAR(y[2].get_double(0), c, 1e-12) << forget;
  }
}

// layout = 1 is layout = 0 with batch and sequence (and state batch/direction) swapped.
TEST(MiscOps, RecurrentLayoutOneIsATranspose) {
  int64_t S = 3, B = 2, I = 2, H = 3;
  Tensor x = random_tensor(DType::F32, {S, B, I}, 80, -1, 1), h0 = random_tensor(DType::F32, {2, B, H}, 81, -1, 1);
  Tensor w = random_tensor(DType::F32, {2, 3 * H, I}, 82, -1, 1),
         r = random_tensor(DType::F32, {2, 3 * H, H}, 83, -1, 1);
  Tensor xt(DType::F32, {B, S, I}), h0t(DType::F32, {B, 2, H});
  for (int64_t s = 0; s < S; ++s)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < I; ++i) xt.set_double((b * S + s) * I + i, x.get_double((s * B + b) * I + i));
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) h0t.set_double((b * 2 + d) * H + h, h0.get_double((d * B + b) * H + h));
  AttrMap a = rnn_attrs(H, "bidirectional");
  a.set("linear_before_reset", int64_t(1));
  std::vector<Tensor> y0 = run("gru", {x, w, r, Tensor(), Tensor(), h0}, a, 2);
  a.set("layout", int64_t(1));
  std::vector<Tensor> y1 = run("gru", {xt, w, r, Tensor(), Tensor(), h0t}, a, 2);
  ASSERT_EQ(y1[0].shape(), (Shape{B, S, 2, H}));
  ASSERT_EQ(y1[1].shape(), (Shape{B, 2, H}));
  for (int64_t s = 0; s < S; ++s)
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          EXPECT_EQ(y1[0].get_double(((b * S + s) * 2 + d) * H + h), y0[0].get_double(((s * 2 + d) * B + b) * H + h));
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        EXPECT_EQ(y1[1].get_double((b * 2 + d) * H + h), y0[1].get_double((d * B + b) * H + h));
}

// ---- adapters ------------------------------------------------------------------

// A one-node ONNX model with float inputs of the given dims.
onnx::ModelProto one_node(int64_t opset, const std::string& op, const std::vector<std::pair<std::string, Shape>>& ins,
                          int nout, const std::function<void(onnx::NodeProto&)>& attrs,
                          int elem = onnx::TensorProto::FLOAT) {
  onnx::ModelProto m;
  m.set_ir_version(opset >= 14 ? 8 : 6);
  m.add_opset_import()->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("n");
  for (auto& [name, dims] : ins) {
    n->add_input(name);
    if (name.empty()) continue;
    auto* in = g->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  for (int i = 0; i < nout; ++i) {
    n->add_output(fmt::format("y{}", i));
    g->add_output()->set_name(fmt::format("y{}", i));
  }
  attrs(*n);
  return m;
}

void set_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

ImportResult import(const onnx::ModelProto& m) { return import_onnx_bytes(m.SerializeAsString(), ".", "m.onnx"); }

TEST(LinalgAdapters, GemmOpset6BroadcastZeroNeedsFullC) {
  auto model = [](Shape c, int64_t broadcast) {
    return one_node(6, "Gemm", {{"a", {2, 3}}, {"b", {3, 4}}, {"c", c}}, 1,
                    [&](onnx::NodeProto& n) { set_int(n, "broadcast", broadcast); });
  };
  EXPECT_EQ(import(model({2, 4}, 0)).graph->outputs()[0]->type().str(), "f32[2,4]");
  EXPECT_EQ(import(model({4}, 1)).graph->outputs()[0]->type().str(), "f32[2,4]");
  try {
    import(model({4}, 0));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broadcast=0"), std::string::npos) << e.what();
  }
  // transA/transB become trans_a/trans_b.
  ImportResult r = import(one_node(13, "Gemm", {{"a", {3, 2}}, {"b", {4, 3}}}, 1, [](onnx::NodeProto& n) {
    set_int(n, "transA", 1);
    set_int(n, "transB", 1);
  }));
  const Node& g = *r.graph->nodes().front();
  EXPECT_EQ(g.op(), "gemm");
  EXPECT_EQ(g.attrs().get_int("trans_a", 0), 1);
  EXPECT_EQ(g.attrs().get_int("trans_b", 0), 1);
  EXPECT_EQ(g.output()->type().str(), "f32[2,4]");
}

TEST(LinalgAdapters, ConvIntegerAutoPadBecomesExplicitPads) {
  auto model = [](const std::string& ap) {
    return one_node(
        10, "ConvInteger", {{"x", {1, 1, 5, 5}}, {"w", {1, 1, 2, 2}}}, 1,
        [&](onnx::NodeProto& n) {
          auto* a = n.add_attribute();
          a->set_name("auto_pad");
          a->set_type(onnx::AttributeProto::STRING);
          a->set_s(ap);
          auto* s = n.add_attribute();
          s->set_name("strides");
          s->set_type(onnx::AttributeProto::INTS);
          s->add_ints(2);
          s->add_ints(2);
        },
        onnx::TensorProto::UINT8);
  };
  // out = ceil(5/2) = 3; total pad = (3-1)*2 + 2 - 5 = 1.
  ImportResult up = import(model("SAME_UPPER"));
  EXPECT_EQ(up.graph->nodes().front()->attrs().get_ints("pads"), (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(up.graph->outputs()[0]->type().str(), "i32[1,1,3,3]");
  ImportResult lo = import(model("SAME_LOWER"));
  EXPECT_EQ(lo.graph->nodes().front()->attrs().get_ints("pads"), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(import(model("VALID")).graph->outputs()[0]->type().str(), "i32[1,1,2,2]");
}

TEST(MiscAdapters, RnnActivationParametersBecomePositional) {
  ImportResult r =
      import(one_node(14, "GRU", {{"X", {2, 1, 3}}, {"W", {2, 12, 3}}, {"R", {2, 12, 4}}}, 2, [](onnx::NodeProto& n) {
        set_int(n, "hidden_size", 4);
        auto* d = n.add_attribute();
        d->set_name("direction");
        d->set_type(onnx::AttributeProto::STRING);
        d->set_s("bidirectional");
        auto* acts = n.add_attribute();
        acts->set_name("activations");
        acts->set_type(onnx::AttributeProto::STRINGS);
        for (const char* s : {"HardSigmoid", "tanh", "LeakyRelu", "ScaledTanh"}) acts->add_strings(s);
        auto* al = n.add_attribute();
        al->set_name("activation_alpha");
        al->set_type(onnx::AttributeProto::FLOATS);
        for (float f : {0.3f, 0.1f, 2.0f}) al->add_floats(f);
      }));
  const Node& g = *r.graph->nodes().front();
  EXPECT_EQ(g.op(), "gru");
  EXPECT_EQ(g.attrs().get_strings("activations"),
            (std::vector<std::string>{"HardSigmoid", "Tanh", "LeakyRelu", "ScaledTanh"}));
  EXPECT_EQ(g.attrs().get_floats("activation_alpha"), (std::vector<float>{0.3f, 0.0f, 0.1f, 2.0f}));
  EXPECT_EQ(g.attrs().get_floats("activation_beta"), (std::vector<float>{0.5f, 0.0f, 0.0f, 1.0f}));
  EXPECT_EQ(g.output(0)->type().str(), "f32[2,2,1,4]");
}

}  // namespace
}  // namespace kiln
