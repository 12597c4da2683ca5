// Linear algebra: matmul (numpy semantics), gemm, det (einsum is in einsum_op.cpp).
// f32/f64 products go through OpenBLAS; f16/bf16 are widened to float and
// use the f32 path (float accumulation); integers use wrapping loops.
// The quantized matmul/conv ops live in quant_ops.cpp.

#include <algorithm>
#include <cmath>

#include "ops/blas_library.h"
#include "ops/families.h"
#include "ops/linalg_internal.h"
#include "ops/op_helpers.h"

namespace kiln::ops {

namespace linalg {

MatmulDims matmul_dims(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) fail("matmul operands must have rank >= 1 (got ranks {} and {})", a.size(), b.size());
  MatmulDims d;
  Shape a2 = a, b2 = b;
  if (a2.size() == 1) {
    a2.insert(a2.begin(), 1);
    d.a_vec = true;
  }
  if (b2.size() == 1) {
    b2.push_back(1);
    d.b_vec = true;
  }
  d.M = a2[a2.size() - 2];
  d.K = a2.back();
  d.N = b2.back();
  if (b2[b2.size() - 2] != d.K)
    fail("matmul inner dimensions differ: [{}] x [{}] ({} vs {})", dims_str(a), dims_str(b), dim_str(d.K),
         dim_str(b2[b2.size() - 2]));
  Shape ab(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
  try {
    d.batch = broadcast_shapes(ab, bb);
  } catch (const Error&) {
    fail("matmul batch dimensions do not broadcast: [{}] x [{}]", dims_str(a), dims_str(b));
  }
  d.out = d.batch;
  if (!d.a_vec) d.out.push_back(d.M);
  if (!d.b_vec) d.out.push_back(d.N);
  return d;
}

void matmul_batch_offsets(const Shape& a, const Shape& b, const MatmulDims& d, std::vector<int64_t>& a_off,
                          std::vector<int64_t>& b_off) {
  int ar = std::max<int>(0, static_cast<int>(a.size()) - 2), br = std::max<int>(0, static_cast<int>(b.size()) - 2);
  Shape ab(a.begin(), a.begin() + ar), bb(b.begin(), b.begin() + br);
  std::vector<int64_t> as = broadcast_strides(ab, d.batch), bs = broadcast_strides(bb, d.batch);
  int64_t nb = shape_numel(d.batch);
  a_off.assign(nb, 0);
  b_off.assign(nb, 0);
  int r = static_cast<int>(d.batch.size());
  std::vector<int64_t> idx(r, 0);
  int64_t ao = 0, bo = 0;
  for (int64_t i = 0; i < nb; ++i) {
    a_off[i] = ao * d.M * d.K;
    b_off[i] = bo * d.K * d.N;
    for (int k = r - 1; k >= 0; --k) {
      ++idx[k];
      ao += as[k];
      bo += bs[k];
      if (idx[k] < d.batch[k]) break;
      ao -= as[k] * idx[k];
      bo -= bs[k] * idx[k];
      idx[k] = 0;
    }
  }
}

MatmulDims infer_matmul_dims(InferContext& c, int ia, int ib) {
  try {
    return matmul_dims(c.shape(ia), c.shape(ib));
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
}

void gemm_f32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  blas::sgemm()(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
                alpha, A, int(std::max<int64_t>(1, lda)), B, int(std::max<int64_t>(1, ldb)), beta, C,
                int(std::max<int64_t>(1, ldc)));
}

void gemm_f64(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
              const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0.0 : beta * C[i * ldc + j];
    return;
  }
  blas::dgemm()(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
                alpha, A, int(std::max<int64_t>(1, lda)), B, int(std::max<int64_t>(1, ldb)), beta, C,
                int(std::max<int64_t>(1, ldc)));
}

}  // namespace linalg

namespace {

using namespace linalg;

// BLAS takes int dimensions.
void check_blas_dims(InferContext& c, std::initializer_list<int64_t> dims) {
  for (int64_t d : dims)
    if (d > INT32_MAX) c.unsupported("matrix dimension {} exceeds 2^31-1", d);
}

// Batched C = A x B over float/double buffers with BLAS, integers by loops.
template <typename T>
void batched_matmul(const T* A, const T* B, T* C, const MatmulDims& d, const std::vector<int64_t>& a_off,
                    const std::vector<int64_t>& b_off) {
  int64_t nb = static_cast<int64_t>(a_off.size());
  // A batch of A rows against one shared B (x[B,S,K] @ w[K,N]) is one tall GEMM.
  bool shared_b = nb > 1, contiguous_a = true;
  for (int64_t i = 0; i < nb; ++i) {
    shared_b &= b_off[i] == 0;
    contiguous_a &= a_off[i] == i * d.M * d.K;
  }
  int64_t M = d.M;
  if (shared_b && contiguous_a && d.M * nb <= INT32_MAX) {
    M *= nb;
    nb = 1;
  }
  for (int64_t i = 0; i < nb; ++i) {
    const T* a = A + a_off[i];
    const T* b = B + b_off[i];
    T* c = C + i * M * d.N;
    if constexpr (std::is_same_v<T, float>) {
      gemm_f32(false, false, M, d.N, d.K, 1.0f, a, d.K, b, d.N, 0.0f, c, d.N);
    } else if constexpr (std::is_same_v<T, double>) {
      gemm_f64(false, false, M, d.N, d.K, 1.0, a, d.K, b, d.N, 0.0, c, d.N);
    } else {
      std::fill(c, c + M * d.N, T(0));
      gemm_int_acc(M, d.N, d.K, a, b, c);
    }
  }
}

OpDef matmul_op() {
  OpDef d;
  d.name = "matmul";
  d.symbolic_dims = true;  // dims compare and broadcast, never computed
  d.min_inputs = d.max_inputs = 2;
  d.attrs = {{"tf32", AttrKind::Int}};  // set by the precision pass: may use TF32 math
  d.infer = [](InferContext& c) {
    require_same_dtype(c);
    require_numeric(c, 0);
    MatmulDims m = infer_matmul_dims(c, 0, 1);
    check_blas_dims(c, {m.M, m.N, m.K});
    return std::vector<TensorType>{TensorType(c.dtype(0), m.out)};
  };
  d.reference = [](KernelContext& ctx) {
    const Tensor &a = ctx.in(0), &b = ctx.in(1);
    Tensor& out = ctx.out();
    MatmulDims m = matmul_dims(a.shape(), b.shape());
    std::vector<int64_t> ao, bo;
    matmul_batch_offsets(a.shape(), b.shape(), m, ao, bo);
    switch (a.dtype()) {
      case DType::F32:
        batched_matmul(a.data<float>(), b.data<float>(), out.data<float>(), m, ao, bo);
        break;
      case DType::F64:
        batched_matmul(a.data<double>(), b.data<double>(), out.data<double>(), m, ao, bo);
        break;
      case DType::F16:
      case DType::BF16: {
        std::vector<float> av = load_all<float>(a), bv = load_all<float>(b), cv(out.numel());
        batched_matmul(av.data(), bv.data(), cv.data(), m, ao, bo);
        store_all(out, cv);
        break;
      }
      default: {
        std::vector<uint64_t> av = load_wrapping(a), bv = load_wrapping(b), cv(out.numel());
        batched_matmul(av.data(), bv.data(), cv.data(), m, ao, bo);
        store_wrapping(out, cv);
      }
    }
  };
  d.doc = "numpy matmul: 1-D operands promoted, batch dims broadcast";
  return d;
}

// gemm: Y = alpha * op(A) op(B) + beta * C, A and B 2-D, C broadcast to [M,N].
struct GemmDims {
  int64_t M, N, K;
};
GemmDims gemm_dims(const Shape& a, const Shape& b, bool ta, bool tb) {
  GemmDims g;
  g.M = ta ? a[1] : a[0];
  g.K = ta ? a[0] : a[1];
  g.N = tb ? b[0] : b[1];
  return g;
}

template <typename T>
void gemm_typed(const T* A, const T* B, T* Y, const GemmDims& g, bool ta, bool tb, double alpha, bool has_c) {
  if constexpr (std::is_same_v<T, float>) {
    gemm_f32(ta, tb, g.M, g.N, g.K, float(alpha), A, ta ? g.M : g.K, B, tb ? g.K : g.N, has_c ? 1.0f : 0.0f, Y, g.N);
  } else {
    gemm_f64(ta, tb, g.M, g.N, g.K, alpha, A, ta ? g.M : g.K, B, tb ? g.K : g.N, has_c ? 1.0 : 0.0, Y, g.N);
  }
}

OpDef gemm_op() {
  OpDef d;
  d.name = "gemm";
  d.symbolic_dims = true;  // dims compare, never computed
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.attrs = {{"trans_a", AttrKind::Int},
             {"trans_b", AttrKind::Int},
             {"alpha", AttrKind::Float},
             {"beta", AttrKind::Float},
             {"tf32", AttrKind::Int}};  // tf32: set by the precision pass
  d.infer = [](InferContext& c) {
    require_same_dtype(c);
    require_numeric(c, 0);
    if (c.rank(0) != 2 || c.rank(1) != 2)
      c.fail("gemm operands must be 2-D, got ranks {} and {}", c.rank(0), c.rank(1));
    bool ta = c.attrs().get_int("trans_a", 0) != 0, tb = c.attrs().get_int("trans_b", 0) != 0;
    GemmDims g = gemm_dims(c.shape(0), c.shape(1), ta, tb);
    int64_t kb = tb ? c.shape(1)[1] : c.shape(1)[0];
    if (kb != g.K) c.fail("gemm inner dimensions differ: op(A) is [{},{}], op(B) is [{},{}]", g.M, g.K, kb, g.N);
    check_blas_dims(c, {g.M, g.N, g.K});
    if (c.has_input(2)) {
      const Shape& cs = c.shape(2);
      Shape want{g.M, g.N};
      bool ok = cs.size() <= 2;
      for (size_t i = 0; ok && i < cs.size(); ++i) {
        int64_t w = want[2 - cs.size() + i];
        ok = cs[i] == w || cs[i] == 1;
      }
      if (!ok) c.fail("gemm C of shape [{}] does not broadcast to [{},{}]", fmt::join(cs, ","), g.M, g.N);
    }
    return std::vector<TensorType>{TensorType(c.dtype(0), {g.M, g.N})};
  };
  d.reference = [](KernelContext& ctx) {
    const Tensor &a = ctx.in(0), &b = ctx.in(1);
    bool ta = ctx.attrs.get_int("trans_a", 0) != 0, tb = ctx.attrs.get_int("trans_b", 0) != 0;
    double alpha = ctx.attrs.get_float("alpha", 1.0f), beta = ctx.attrs.get_float("beta", 1.0f);
    GemmDims g = gemm_dims(a.shape(), b.shape(), ta, tb);
    Tensor& out = ctx.out();
    bool has_c = ctx.has(2) && beta != 0;  // beta == 0 ignores C (as ONNX Runtime does)
    // Y starts as beta * C broadcast, and the product accumulates onto it.
    auto fill_c = [&](auto* y) {
      using T = std::remove_pointer_t<decltype(y)>;
      if (!has_c) return;
      const Tensor& cc = ctx.in(2);
      std::vector<T> cv = load_all<T>(cc);
      std::vector<int64_t> st = broadcast_strides(cc.shape(), {g.M, g.N});
      for (int64_t i = 0; i < g.M; ++i)
        for (int64_t j = 0; j < g.N; ++j) y[i * g.N + j] = static_cast<T>(beta * double(cv[i * st[0] + j * st[1]]));
    };
    switch (a.dtype()) {
      case DType::F32:
        fill_c(out.data<float>());
        gemm_typed(a.data<float>(), b.data<float>(), out.data<float>(), g, ta, tb, alpha, has_c);
        break;
      case DType::F64:
        fill_c(out.data<double>());
        gemm_typed(a.data<double>(), b.data<double>(), out.data<double>(), g, ta, tb, alpha, has_c);
        break;
      case DType::F16:
      case DType::BF16: {
        std::vector<float> av = load_all<float>(a), bv = load_all<float>(b), y(out.numel());
        fill_c(y.data());
        gemm_typed(av.data(), bv.data(), y.data(), g, ta, tb, alpha, has_c);
        store_all(out, y);
        break;
      }
      default: {
        // Integers: exact wrapping product, then alpha/beta applied in double.
        std::vector<uint64_t> av = load_wrapping(a), bv = load_wrapping(b), acc(g.M * g.N, 0);
        std::vector<uint64_t> at(g.M * g.K), bt(g.K * g.N);
        for (int64_t i = 0; i < g.M; ++i)
          for (int64_t k = 0; k < g.K; ++k) at[i * g.K + k] = ta ? av[k * g.M + i] : av[i * g.K + k];
        for (int64_t k = 0; k < g.K; ++k)
          for (int64_t j = 0; j < g.N; ++j) bt[k * g.N + j] = tb ? bv[j * g.K + k] : bv[k * g.N + j];
        gemm_int_acc(g.M, g.N, g.K, at.data(), bt.data(), acc.data());
        std::vector<int64_t> cv(g.M * g.N, 0), r(g.M * g.N);
        if (has_c) {
          const Tensor& cc = ctx.in(2);
          std::vector<int64_t> craw = load_all<int64_t>(cc);
          std::vector<int64_t> st = broadcast_strides(cc.shape(), {g.M, g.N});
          for (int64_t i = 0; i < g.M; ++i)
            for (int64_t j = 0; j < g.N; ++j) cv[i * g.N + j] = craw[i * st[0] + j * st[1]];
        }
        bool exact = alpha == 1.0 && (!has_c || beta == 1.0);
        for (int64_t i = 0; i < g.M * g.N; ++i)
          r[i] = exact ? static_cast<int64_t>(acc[i] + static_cast<uint64_t>(cv[i]))
                       : static_cast<int64_t>(alpha * double(static_cast<int64_t>(acc[i])) + beta * double(cv[i]));
        store_all(out, r);
      }
    }
  };
  d.doc = "alpha * op(A) op(B) + beta * C; op transposes when trans_a/trans_b; C broadcasts to [M,N]";
  return d;
}

// ---- det --------------------------------------------------------------------

OpDef det_op() {
  OpDef d;
  d.name = "det";
  d.infer = [](InferContext& c) {
    require_float(c, 0);
    const Shape& s = c.shape(0);
    if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2])
      c.fail("det needs [..., M, M] input, got [{}]", fmt::join(s, ","));
    return std::vector<TensorType>{TensorType(c.dtype(0), Shape(s.begin(), s.end() - 2))};
  };
  d.reference = [](KernelContext& ctx) {
    const Tensor& x = ctx.in(0);
    int64_t n = x.shape().back();
    std::vector<double> v = load_all<double>(x), r(ctx.out().numel());
    std::vector<double> m(n * n);
    for (size_t b = 0; b < r.size(); ++b) {
      std::copy(v.begin() + b * n * n, v.begin() + (b + 1) * n * n, m.begin());
      // LU with partial pivoting: det = sign * prod(U diagonal).
      double det = 1;
      for (int64_t col = 0; col < n && det != 0; ++col) {
        int64_t piv = col;
        for (int64_t i = col + 1; i < n; ++i)
          if (std::fabs(m[i * n + col]) > std::fabs(m[piv * n + col])) piv = i;
        if (m[piv * n + col] == 0) {
          det = 0;
          break;
        }
        if (piv != col) {
          for (int64_t j = 0; j < n; ++j) std::swap(m[piv * n + j], m[col * n + j]);
          det = -det;
        }
        double p = m[col * n + col];
        det *= p;
        for (int64_t i = col + 1; i < n; ++i) {
          double f = m[i * n + col] / p;
          if (f == 0) continue;
          for (int64_t j = col + 1; j < n; ++j) m[i * n + j] -= f * m[col * n + j];
        }
      }
      r[b] = det;
    }
    store_all(ctx.out(), r);
  };
  d.doc = "determinant of each [M,M] matrix in the trailing two dims (LU with partial pivoting, double)";
  return d;
}

}  // namespace

void register_linalg_ops(OpRegistry& r) {
  r.add(matmul_op());
  r.add(gemm_op());
  register_einsum_op(r);
  r.add(det_op());
  register_quant_ops(r);
}

}  // namespace kiln::ops
