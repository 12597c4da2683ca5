// Linear algebra: matmul (numpy semantics), gemm, einsum, det.
// f32/f64 products go through OpenBLAS; f16/bf16 are widened to float and
// use the f32 path (float accumulation); integers use wrapping loops.
// The quantized matmul/conv ops live in quant_ops.cpp.
#include <cblas.h>

#include <algorithm>
#include <cmath>

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
    fail("matmul inner dimensions differ: [{}] x [{}] ({} vs {})", fmt::join(a, ","), fmt::join(b, ","), d.K,
         b2[b2.size() - 2]);
  Shape ab(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
  try {
    d.batch = broadcast_shapes(ab, bb);
  } catch (const Error&) {
    fail("matmul batch dimensions do not broadcast: [{}] x [{}]", fmt::join(a, ","), fmt::join(b, ","));
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
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
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
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
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

void require_numeric(InferContext& c, int i) {
  if (c.dtype(i) == DType::Bool) c.unsupported("operand {} is bool; kiln's {} needs numbers", i, c.op());
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

std::vector<uint64_t> load_wrapping(const Tensor& t) {
  std::vector<int64_t> v = load_all<int64_t>(t);
  return std::vector<uint64_t>(v.begin(), v.end());
}
void store_wrapping(Tensor& t, const std::vector<uint64_t>& v) {
  store_all<int64_t>(t, std::vector<int64_t>(v.begin(), v.end()));
}

OpDef matmul_op() {
  OpDef d;
  d.name = "matmul";
  d.min_inputs = d.max_inputs = 2;
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
      case DType::F32: batched_matmul(a.data<float>(), b.data<float>(), out.data<float>(), m, ao, bo); break;
      case DType::F64: batched_matmul(a.data<double>(), b.data<double>(), out.data<double>(), m, ao, bo); break;
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
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.attrs = {{"trans_a", AttrKind::Int}, {"trans_b", AttrKind::Int}, {"alpha", AttrKind::Float},
             {"beta", AttrKind::Float}};
  d.infer = [](InferContext& c) {
    require_same_dtype(c);
    require_numeric(c, 0);
    if (c.rank(0) != 2 || c.rank(1) != 2) c.fail("gemm operands must be 2-D, got ranks {} and {}", c.rank(0), c.rank(1));
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

// ---- einsum ---------------------------------------------------------------

// Labels: 'A'-'Z' -> 0..25, 'a'-'z' -> 26..51 (so label order is character
// order, as numpy sorts implicit outputs); ellipsis dims -> 52 + j.
constexpr int kEllipsisBase = 52;

struct EinsumSpec {
  std::vector<std::vector<int>> in_labels;  // per operand, the label of each dim
  std::vector<int> out_labels;
  std::vector<int64_t> size;  // per label; 0 when unused
};

int letter_label(char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return 26 + (ch - 'a');
  return -1;
}
char label_letter(int l) { return l < 26 ? char('A' + l) : char('a' + l - 26); }

// Splits a term into letters and the position of "..." (-1 when none).
struct Term {
  std::vector<int> letters;
  int ellipsis_at = -1;  // index into letters where the ellipsis sits
};

Term parse_term(const std::string& t, const std::string& eq) {
  Term r;
  for (size_t i = 0; i < t.size();) {
    if (t[i] == '.') {
      if (t.compare(i, 3, "...") != 0 || r.ellipsis_at >= 0)
        fail("einsum equation '{}': '.' must appear as one '...' per term", eq);
      r.ellipsis_at = static_cast<int>(r.letters.size());
      i += 3;
      continue;
    }
    int l = letter_label(t[i]);
    if (l < 0) fail("einsum equation '{}': unexpected character '{}'", eq, t[i]);
    r.letters.push_back(l);
    ++i;
  }
  return r;
}

EinsumSpec parse_einsum(const std::string& equation, const std::vector<Shape>& shapes) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ' && ch != '\t') eq += ch;
  EinsumSpec s;
  std::string lhs = eq, rhs;
  bool has_arrow = false;
  if (auto p = eq.find("->"); p != std::string::npos) {
    has_arrow = true;
    lhs = eq.substr(0, p);
    rhs = eq.substr(p + 2);
    if (rhs.find("->") != std::string::npos) fail("einsum equation '{}' has more than one '->'", equation);
  }
  std::vector<std::string> terms;
  size_t start = 0;
  for (size_t i = 0; i <= lhs.size(); ++i)
    if (i == lhs.size() || lhs[i] == ',') {
      terms.push_back(lhs.substr(start, i - start));
      start = i + 1;
    }
  if (terms.size() != shapes.size())
    fail("einsum equation '{}' has {} operand terms but the op has {} operands", equation, terms.size(), shapes.size());
  std::vector<Term> parsed;
  int max_ell = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    parsed.push_back(parse_term(terms[k], equation));
    int nl = static_cast<int>(parsed[k].letters.size()), rank = static_cast<int>(shapes[k].size());
    if (parsed[k].ellipsis_at < 0 ? rank != nl : rank < nl)
      fail("einsum equation '{}': term '{}' does not match operand {} of rank {}", equation, terms[k], k, rank);
    if (parsed[k].ellipsis_at >= 0) max_ell = std::max(max_ell, rank - nl);
  }
  s.size.assign(kEllipsisBase + max_ell, -1);
  std::vector<int> count(kEllipsisBase, 0);
  for (size_t k = 0; k < parsed.size(); ++k) {
    const Term& t = parsed[k];
    int rank = static_cast<int>(shapes[k].size());
    int ne = t.ellipsis_at < 0 ? 0 : rank - static_cast<int>(t.letters.size());
    std::vector<int> labels;
    for (int i = 0; i <= static_cast<int>(t.letters.size()); ++i) {
      if (i == t.ellipsis_at)
        for (int j = 0; j < ne; ++j) labels.push_back(kEllipsisBase + max_ell - ne + j);
      if (i < static_cast<int>(t.letters.size())) {
        labels.push_back(t.letters[i]);
        ++count[t.letters[i]];
      }
    }
    for (int dim = 0; dim < rank; ++dim) {
      int l = labels[dim];
      int64_t n = shapes[k][dim];
      int64_t& sz = s.size[l];
      // Sizes must agree; a size-1 dim broadcasts (as in numpy).
      if (sz < 0 || sz == 1) {
        sz = n;
      } else if (n != sz && n != 1) {
        fail("einsum equation '{}': dimension '{}' is {} in operand {} but {} elsewhere", equation,
             l < kEllipsisBase ? std::string(1, label_letter(l)) : std::string("..."), n, k, sz);
      }
    }
    s.in_labels.push_back(std::move(labels));
  }
  if (has_arrow) {
    Term out = parse_term(rhs, equation);
    std::vector<bool> seen(kEllipsisBase, false);
    for (int i = 0; i <= static_cast<int>(out.letters.size()); ++i) {
      if (i == out.ellipsis_at)
        for (int j = 0; j < max_ell; ++j) s.out_labels.push_back(kEllipsisBase + j);
      if (i < static_cast<int>(out.letters.size())) {
        int l = out.letters[i];
        if (seen[l]) fail("einsum equation '{}': output label '{}' appears twice", equation, label_letter(l));
        if (!count[l]) fail("einsum equation '{}': output label '{}' is not in any operand", equation, label_letter(l));
        seen[l] = true;
        s.out_labels.push_back(l);
      }
    }
    if (out.ellipsis_at < 0 && max_ell > 0)
      fail("einsum equation '{}': operands have '...' dims but the output has no '...'", equation);
  } else {
    for (int j = 0; j < max_ell; ++j) s.out_labels.push_back(kEllipsisBase + j);
    for (int l = 0; l < kEllipsisBase; ++l)
      if (count[l] == 1) s.out_labels.push_back(l);
  }
  return s;
}

template <typename T>
void einsum_kernel(const EinsumSpec& s, const std::vector<std::vector<T>>& ins, const std::vector<Shape>& shapes,
                   std::vector<T>& out) {
  int nl = static_cast<int>(s.size.size());
  int nin = static_cast<int>(ins.size());
  // Stride of each label in each operand (repeated labels add up: a diagonal).
  std::vector<std::vector<int64_t>> stride(nin, std::vector<int64_t>(nl, 0));
  for (int k = 0; k < nin; ++k) {
    std::vector<int64_t> st = strides_of(shapes[k]);
    for (size_t dim = 0; dim < shapes[k].size(); ++dim)
      if (shapes[k][dim] != 1) stride[k][s.in_labels[k][dim]] += st[dim];
  }
  std::vector<bool> is_out(nl, false);
  for (int l : s.out_labels) is_out[l] = true;
  std::vector<int> sum_labels;
  for (int l = 0; l < nl; ++l)
    if (s.size[l] >= 0 && !is_out[l]) sum_labels.push_back(l);
  int64_t nsum = 1;
  for (int l : sum_labels) nsum *= s.size[l];
  int no = static_cast<int>(s.out_labels.size()), ns = static_cast<int>(sum_labels.size());
  std::vector<int64_t> oidx(no, 0), sidx(ns, 0), base(nin, 0), off(nin, 0);
  for (size_t o = 0; o < out.size(); ++o) {
    T acc = T(0);
    if (nsum > 0) {
      std::fill(sidx.begin(), sidx.end(), 0);
      off = base;
      for (int64_t it = 0; it < nsum; ++it) {
        T p = ins[0][off[0]];
        for (int k = 1; k < nin; ++k) p = p * ins[k][off[k]];
        acc = acc + p;
        for (int q = ns - 1; q >= 0; --q) {
          int l = sum_labels[q];
          ++sidx[q];
          for (int k = 0; k < nin; ++k) off[k] += stride[k][l];
          if (sidx[q] < s.size[l]) break;
          for (int k = 0; k < nin; ++k) off[k] -= stride[k][l] * sidx[q];
          sidx[q] = 0;
        }
      }
    }
    out[o] = acc;
    for (int q = no - 1; q >= 0; --q) {
      int l = s.out_labels[q];
      ++oidx[q];
      for (int k = 0; k < nin; ++k) base[k] += stride[k][l];
      if (oidx[q] < s.size[l]) break;
      for (int k = 0; k < nin; ++k) base[k] -= stride[k][l] * oidx[q];
      oidx[q] = 0;
    }
  }
}

EinsumSpec einsum_spec(InferContext& c) {
  std::vector<Shape> shapes;
  for (int i = 0; i < c.num_inputs(); ++i) shapes.push_back(c.shape(i));
  try {
    return parse_einsum(c.attrs().get_string("equation", ""), shapes);
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
}

OpDef einsum_op() {
  OpDef d;
  d.name = "einsum";
  d.min_inputs = 1;
  d.max_inputs = -1;
  d.attrs = {{"equation", AttrKind::String, true}};
  d.infer = [](InferContext& c) {
    for (int i = 0; i < c.num_inputs(); ++i)
      if (!c.has_input(i)) c.fail("operand {} is missing", i);
    require_same_dtype(c);
    require_numeric(c, 0);
    EinsumSpec s = einsum_spec(c);
    Shape out;
    for (int l : s.out_labels) out.push_back(s.size[l]);
    return std::vector<TensorType>{TensorType(c.dtype(0), out)};
  };
  d.reference = [](KernelContext& ctx) {
    std::vector<Shape> shapes;
    for (size_t i = 0; i < ctx.inputs.size(); ++i) shapes.push_back(ctx.in(int(i)).shape());
    EinsumSpec s = parse_einsum(ctx.attrs.get_string("equation", ""), shapes);
    Tensor& out = ctx.out();
    auto run = [&](auto z) {
      using T = decltype(z);
      std::vector<std::vector<T>> ins;
      for (size_t i = 0; i < ctx.inputs.size(); ++i) {
        if constexpr (std::is_same_v<T, uint64_t>) ins.push_back(load_wrapping(ctx.in(int(i))));
        else ins.push_back(load_all<T>(ctx.in(int(i))));
      }
      std::vector<T> r(out.numel());
      einsum_kernel(s, ins, shapes, r);
      if constexpr (std::is_same_v<T, uint64_t>) store_wrapping(out, r);
      else store_all(out, r);
    };
    if (is_float(out.dtype())) run(double{});
    else run(uint64_t{});
  };
  d.doc = "Einstein summation; equation in explicit form 'ij,jk->ik' (implicit form and '...' accepted)";
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
  r.add(einsum_op());
  r.add(det_op());
  register_quant_ops(r);
}

}  // namespace kiln::ops
