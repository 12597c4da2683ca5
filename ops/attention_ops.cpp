// attention: softmax(scale * q k^T + mask) v over the last two dims, the
// compound op the recognize-patterns pass makes out of BERT/GPT-2/ViT
// exports (and the one a dedicated GPU kernel implements).
//
//   attention(q [B,H,Sq,D], k [B,Hk,Sk,D], v [B,Hk,Sk,Dv], mask?)
//     {scale: float (required), causal: int = 0, nan_to_zero: int = 0}
//   -> [B,H,Sq,Dv]
//
//   s[i,j] = scale * sum_d q[i,d] k[j,d] + mask[i,j]
//            (+ -inf where causal and j > i + Sk - Sq)
//   p[i,:] = softmax(s[i,:])       (a row of all -inf gives NaN, as softmax does)
//   p[i,j] = 0 where p[i,j] is NaN (nan_to_zero only)
//   out[i,:] = sum_j p[i,j] v[j,:]
//
// Hk = H, or grouped-query attention (Llama, Mistral): H a multiple of Hk,
// query head h reading key/value head h / (H / Hk), as the graphs' expand of
// the cache to H heads does without the copy.
// mask is additive, of q's dtype, broadcast to [B,H,Sq,Sk] numpy-style (rank
// <= 4; e.g. BERT's [B,1,1,Sk] padding mask). The causal mask is aligned to
// the bottom right (query i sees keys up to i + Sk - Sq, as FlashAttention and
// GPT-2 with past keys do); for Sq == Sk it is the usual lower triangle.
// nan_to_zero is what torch's SDPA export spells where(isnan(p), 0, p).
// The reference kernel computes in float (double for f64) with OpenBLAS per
// (batch, head); softmax sums accumulate in double. With k_capacity /
// v_capacity naming a symbol the run binds (a KV cache bound in place,
// runtime/in_place_cache.h; the executor gives its value as k_rows /
// v_rows), k / v hold each head's Sk rows that many rows apart, as the GPU
// kernels read them; otherwise (and always in meaning) they are dense.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/symbolic_dim.h"
#include "ops/linalg_internal.h"
#include "ops/misc_internal.h"
#include "ops/op_helpers.h"

namespace kiln::ops {

namespace {

void check_flag(InferContext& c, const char* name) {
  int64_t v = c.attrs().get_int(name, 0);
  if (v != 0 && v != 1) c.fail("{} must be 0 or 1, got {}", name, v);
}

std::vector<TensorType> infer_attention(InferContext& c) {
  const char* names[] = {"q", "k", "v", "mask"};
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) {
      if (i < 3) c.fail("{} is required", names[i]);
      continue;
    }
    require_float(c, i);
    if (c.dtype(i) != c.dtype(0))
      c.fail("{} is {} but q is {} (operands share one dtype)", names[i], c.type(i).str(), c.type(0).str());
  }
  for (int i = 0; i < 3; ++i)
    if (c.rank(i) != 4) c.fail("{} {} must have rank 4 [batch, heads, seq, dim]", names[i], c.type(i).str());
  const Shape &q = c.shape(0), &k = c.shape(1), &v = c.shape(2);
  if (k[0] != q[0] || v[0] != q[0] || v[1] != k[1])
    c.fail("batch and head dims differ: q {}, k {}, v {}", c.type(0).str(), c.type(1).str(), c.type(2).str());
  if (k[1] != q[1] && (is_symbolic_dim(q[1]) || is_symbolic_dim(k[1]) || k[1] <= 0 || q[1] % k[1] != 0))
    c.fail(
        "q {} has {} heads and k {} has {}: the query heads must equal the key/value heads or be a multiple of "
        "them (grouped-query attention)",
        c.type(0).str(), dim_str(q[1]), c.type(1).str(), dim_str(k[1]));
  if (k[3] != q[3]) c.fail("k {} has head dim {} but q {} has {}", c.type(1).str(), k[3], c.type(0).str(), q[3]);
  if (v[2] != k[2]) c.fail("v {} has {} keys but k {} has {}", c.type(2).str(), v[2], c.type(1).str(), k[2]);
  if (c.has_input(3)) {
    const Shape& m = c.shape(3);
    Shape scores = {q[0], q[1], q[2], k[2]};
    if (m.size() > 4) c.fail("mask {} has rank above 4", c.type(3).str());
    size_t off = 4 - m.size();
    for (size_t i = 0; i < m.size(); ++i)
      if (m[i] != 1 && m[i] != scores[off + i])
        c.fail("mask {} does not broadcast to the scores [{}]", c.type(3).str(), fmt::join(scores, ","));
  }
  for (int64_t d : {q[2], k[2], q[3], v[3]})
    if (d > std::numeric_limits<int>::max()) c.unsupported("dims above 2^31 - 1 (BLAS takes int sizes)");
  float scale = c.attrs().get_float("scale", 1.0f);
  if (!std::isfinite(scale)) c.fail("scale {} must be finite", scale);
  check_flag(c, "causal");
  check_flag(c, "nan_to_zero");
  return {TensorType(c.dtype(0), {q[0], q[1], q[2], v[3]})};
}

// One (batch, head): q [Sq,D], k [Sk,D], v [Sk,Dv] -> o [Sq,Dv]. mask points
// at this head's [Sq,Sk] block read with strides (mi, mj) (0 on broadcast
// dims), or is null. s is scratch of Sq*Sk.
template <typename T>
void attention_head(const T* q, const T* k, const T* v, T* o, const T* mask, int64_t mi, int64_t mj, int64_t Sq,
                    int64_t Sk, int64_t D, int64_t Dv, T scale, bool causal, bool nan_to_zero, T* s) {
  if constexpr (std::is_same_v<T, float>) linalg::gemm_f32(false, true, Sq, Sk, D, scale, q, D, k, D, 0.0f, s, Sk);
  else linalg::gemm_f64(false, true, Sq, Sk, D, scale, q, D, k, D, 0.0, s, Sk);
  const T inf = std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < Sq; ++i) {
    T* row = s + i * Sk;
    if (mask)
      for (int64_t j = 0; j < Sk; ++j) row[j] += mask[i * mi + j * mj];
    if (causal)
      for (int64_t j = std::max<int64_t>(i + Sk - Sq + 1, 0); j < Sk; ++j) row[j] = -inf;
    T mx = -inf;  // NaN propagates, as in the softmax op
    for (int64_t j = 0; j < Sk; ++j) {
      if (std::isnan(row[j])) {
        mx = row[j];
        break;
      }
      mx = std::max(mx, row[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < Sk; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    double inv = 1.0 / sum;
    for (int64_t j = 0; j < Sk; ++j) {
      T p = static_cast<T>(row[j] * inv);
      row[j] = nan_to_zero && std::isnan(p) ? T(0) : p;
    }
  }
  if constexpr (std::is_same_v<T, float>) linalg::gemm_f32(false, false, Sq, Dv, Sk, 1.0f, s, Sk, v, Dv, 0.0f, o, Dv);
  else linalg::gemm_f64(false, false, Sq, Dv, Sk, 1.0, s, Sk, v, Dv, 0.0, o, Dv);
}

// The rows between two heads of k (`attr` k_rows) or v (v_rows): the value
// of the capacity symbol the reference executor gives for a run that binds
// it (backends/reference/executor.cpp, attrs_at), else Sk (dense).
int64_t head_rows(const KernelContext& ctx, const char* attr, int64_t Sk) {
  const int64_t rows = ctx.attrs.get_int(attr, Sk);
  if (rows < Sk) fail("{}: {} {} is fewer than the {} keys", ctx.label, attr, rows, Sk);
  return rows;
}

// `heads` heads of `rows` rows of `d` elements, `stride_rows` rows apart in
// `t` (a KV cache's buffer), as one dense float vector.
std::vector<float> load_heads(const Tensor& t, int64_t heads, int64_t rows, int64_t stride_rows, int64_t d) {
  std::vector<float> r(static_cast<size_t>(heads * rows * d));
  const auto* p = static_cast<const uint16_t*>(t.raw());
  const bool half = t.dtype() == DType::F16;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < rows * d; ++i) {
      const uint16_t x = p[h * stride_rows * d + i];
      r[static_cast<size_t>(h * rows * d + i)] = half ? half_to_float(x) : bf16_to_float(x);
    }
  return r;
}

template <typename T>
void attention_kernel(KernelContext& ctx, const T* q, const T* k, const T* v, const T* mask, T* o, int64_t krows,
                      int64_t vrows) {
  const Shape &qs = ctx.in(0).shape(), &ks = ctx.in(1).shape(), &vs = ctx.in(2).shape();
  int64_t B = qs[0], H = qs[1], Sq = qs[2], D = qs[3], Sk = ks[2], Dv = vs[3];
  const int64_t Hk = ks[1], G = H / Hk;  // grouped-query: G query heads per key/value head
  T scale = static_cast<T>(ctx.attrs.get_float("scale", 1.0f));
  bool causal = ctx.attrs.get_int("causal", 0) != 0;
  bool nan_to_zero = ctx.attrs.get_int("nan_to_zero", 0) != 0;
  std::vector<int64_t> ms(4, 0);
  if (mask) ms = broadcast_strides(ctx.in(3).shape(), {B, H, Sq, Sk});
  std::vector<T> scratch(Sq * Sk);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      int64_t bh = b * H + h;
      const T* mp = mask ? mask + b * ms[0] + h * ms[1] : nullptr;
      const int64_t kvh = b * Hk + h / G;
      attention_head(q + bh * Sq * D, k + kvh * krows * D, v + kvh * vrows * Dv, o + bh * Sq * Dv, mp, ms[2], ms[3], Sq,
                     Sk, D, Dv, scale, causal, nan_to_zero, scratch.data());
    }
}

OpDef attention_op() {
  OpDef d;
  d.name = "attention";
  d.symbolic_dims = true;  // dims compare and are copied, never computed
  d.category = OpCategory::Compute;
  d.min_inputs = 3;
  d.max_inputs = 4;
  // k_capacity / v_capacity (passes/kv_cache_in_place.cpp): k / v is a KV
  // cache's present that a caller may bind in place, one buffer whose rows
  // are `capacity` positions apart; the GPU kernel reads its rows through
  // that stride, the value of the named symbol at each run (the present's
  // own length unless bound in place). No change of meaning.
  d.attrs = {{"scale", AttrKind::Float, true},
             {"causal", AttrKind::Int},
             {"nan_to_zero", AttrKind::Int},
             {"k_capacity", AttrKind::String},
             {"v_capacity", AttrKind::String}};
  d.infer = infer_attention;
  d.reference = [](KernelContext& ctx) {
    bool has_mask = ctx.has(3);
    Tensor& out = ctx.out();
    const Shape &ks = ctx.in(1).shape(), &vs = ctx.in(2).shape();
    const int64_t Sk = ks[2], krows = head_rows(ctx, "k_rows", Sk), vrows = head_rows(ctx, "v_rows", Sk);
    switch (ctx.in(0).dtype()) {
      case DType::F32:
        attention_kernel<float>(ctx, ctx.in(0).data<float>(), ctx.in(1).data<float>(), ctx.in(2).data<float>(),
                                has_mask ? ctx.in(3).data<float>() : nullptr, out.data<float>(), krows, vrows);
        break;
      case DType::F64:
        attention_kernel<double>(ctx, ctx.in(0).data<double>(), ctx.in(1).data<double>(), ctx.in(2).data<double>(),
                                 has_mask ? ctx.in(3).data<double>() : nullptr, out.data<double>(), krows, vrows);
        break;
      default: {  // f16, bf16: computed in float, k and v loaded densely
        std::vector<float> q = load_all<float>(ctx.in(0)), o(out.numel());
        std::vector<float> k = load_heads(ctx.in(1), ks[0] * ks[1], Sk, krows, ks[3]),
                           v = load_heads(ctx.in(2), vs[0] * vs[1], Sk, vrows, vs[3]);
        std::vector<float> m;
        if (has_mask) m = load_all<float>(ctx.in(3));
        attention_kernel<float>(ctx, q.data(), k.data(), v.data(), has_mask ? m.data() : nullptr, o.data(), Sk, Sk);
        store_all(out, o);
      }
    }
  };
  d.doc =
      "softmax(scale * q k^T + mask) v; q [B,H,Sq,D], k [B,Hk,Sk,D], v [B,Hk,Sk,Dv] (Hk = H, or H a multiple of Hk: "
      "grouped-query, head h reads key/value head h / (H / Hk)), optional additive mask "
      "broadcast to [B,H,Sq,Sk]; causal=1 masks keys j > i + Sk - Sq; nan_to_zero=1 takes NaN probabilities "
      "as 0";
  return d;
}

}  // namespace

void register_attention_ops(OpRegistry& r) { r.add(attention_op()); }

}  // namespace kiln::ops
