// ONNX Attention (opsets 23-25) onto kiln ops, following the ONNX reference
// (onnx/reference/ops/op_attention.py):
//
//   Q [B, Sq, Hq*D] or [B, Hq, Sq, D]; K, V likewise with Hkv heads
//   (3-D inputs name the heads with q_num_heads / kv_num_heads)
//   present_key/value = concat(past, K/V) on the sequence axis
//   K, V repeated per group when Hq is a multiple of Hkv (grouped-query)
//   bias = attn_mask (bool: 0 / -inf; shorter than the keys: padded with
//          -inf) + causal and sliding-window masks aligned to the bottom
//          right (query i sees key j <= i + past length)
//   Y = softmax(scale * Q K^T (softcapped) + bias) V, a row with every key
//       masked giving 0
//
// Without softcap and without the qk_matmul_output result this is kiln's
// fused `attention` op (nan_to_zero gives the zero rows); otherwise it is
// written out as matmul, softmax and pointwise ops. ONNX's own attention
// op is never looked up in kiln's op table (kiln's `attention` takes other
// operands).
#include <cmath>
#include <limits>

#include "frontend/import_context.h"

namespace kiln::adapters {

namespace {

struct AttentionBuild {
  ImportContext& c;

  Value* emit(const char* op, std::vector<Value*> ins, AttrMap a = {}) { return c.emit1(op, ins, a); }
  Value* reshape(Value* x, const Shape& s) {
    if (x->shape() == s) return x;
    AttrMap a;
    a.set("shape", std::vector<int64_t>(s));
    return emit("reshape", {x}, a);
  }
  Value* transpose(Value* x, std::vector<int64_t> perm) {
    AttrMap a;
    a.set("perm", perm);
    return emit("transpose", {x}, a);
  }
  Value* concat(std::vector<Value*> xs, int64_t axis) {
    AttrMap a;
    a.set("axis", axis);
    return emit("concat", xs, a);
  }
  Value* scalar(DType t, double v, const char* name) { return c.constant(Tensor::scalar(t, v), name); }

  // [B, S, H*D] -> [B, H, S, D]
  Value* heads_first(Value* x, int64_t heads, const char* what) {
    const Shape& s = x->shape();
    if (heads <= 0 || s[2] % heads)
      c.fail("{} {}: its head count {} must be positive and divide {}", what, x->type().str(), heads, s[2]);
    return transpose(reshape(x, {s[0], s[1], heads, s[2] / heads}), {0, 2, 1, 3});
  }

  // [B, Hkv, S, D] -> [B, Hkv * groups, S, D], each head repeated in place.
  Value* repeat_heads(Value* x, int64_t groups) {
    if (groups == 1) return x;
    const Shape& s = x->shape();
    Value* e = reshape(x, {s[0], s[1], 1, s[2], s[3]});
    AttrMap a;
    a.set("shape", std::vector<int64_t>{s[0], s[1], groups, s[2], s[3]});
    return reshape(emit("expand", {e}, a), {s[0], s[1] * groups, s[2], s[3]});
  }
};

// The additive mask of kiln's dtype `t` from attn_mask (bool or t), padded
// with "masked" to `keys` on its last axis.
Value* additive_mask(AttentionBuild& b, Value* m, DType t, int64_t keys) {
  ImportContext& c = b.c;
  if (m->dtype() != DType::Bool && m->dtype() != t)
    c.fail("attn_mask is {}; it must be bool or Q's dtype {}", m->type().str(), dtype_name(t));
  if (m->type().rank() < 1 || m->type().rank() > 4) c.fail("attn_mask {} must have rank 1 to 4", m->type().str());
  if (m->shape().back() > keys) c.fail("attn_mask {} covers more than the {} keys", m->type().str(), keys);
  if (m->shape().back() < keys) {
    Shape pad = m->shape();
    pad.back() = keys - pad.back();
    Tensor fill(m->dtype(), pad);
    if (m->dtype() != DType::Bool)
      for (int64_t i = 0; i < fill.numel(); ++i) fill.set_double(i, -INFINITY);
    m = b.concat({m, c.constant(std::move(fill), "attn_mask_pad")}, m->type().rank() - 1);
  }
  if (m->dtype() == DType::Bool) m = b.emit("where", {m, b.scalar(t, 0, "attend"), b.scalar(t, -INFINITY, "masked")});
  return m;
}

// Causal and sliding-window masks for Sq queries after `past` keys over Sk
// keys: 0 where query i may see key j, -inf elsewhere; null when neither.
Value* position_mask(ImportContext& c, DType t, int64_t sq, int64_t sk, int64_t past, bool causal, int64_t left,
                     int64_t right) {
  if (!causal && left < 0 && right < 0) return nullptr;
  Tensor m(t, {sq, sk});
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j) {
      int64_t diff = i + past - j;
      bool ok = (!causal || diff >= 0) && (left < 0 || diff <= left) && (right < 0 || -diff <= right);
      m.set_double(i * sk + j, ok ? 0.0 : -INFINITY);
    }
  return c.constant(std::move(m), "attention_position_mask");
}

// With nonpad_kv_seqlen (opset 24, an external cache: batch b holds lens[b]
// valid keys) the masks depend on the run: key j is padding when
// j >= lens[b], and the causal / window frontier of query i is
// i + lens[b] - Sq. Returns the additive [B, 1, Sq, Sk] mask.
Value* cache_mask(AttentionBuild& b, Value* lens, DType t, int64_t batch, int64_t sq, int64_t sk, bool causal,
                  int64_t left, int64_t right) {
  ImportContext& c = b.c;
  if (lens->dtype() != DType::I64 || lens->shape() != Shape{batch})
    c.fail("nonpad_kv_seqlen is {}; it must be i64[{}]", lens->type().str(), batch);
  Value* l = b.reshape(lens, {batch, 1, 1, 1});
  Tensor keys(DType::I64, {1, 1, 1, sk}), diff(DType::I64, {sq, sk});
  for (int64_t j = 0; j < sk; ++j) keys.set_double(j, double(j));
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j) diff.set_double(i * sk + j, double(i - j - sq));
  Value* allowed = b.emit("less", {c.constant(std::move(keys), "key_index"), l});  // [B,1,1,Sk]
  Value* d = b.emit("add", {c.constant(std::move(diff), "query_minus_key"), l});   // [B,1,Sq,Sk]
  auto bound = [&](const char* op, Value* x, int64_t v) {
    allowed = b.emit("and", {allowed, b.emit(op, {x, b.scalar(DType::I64, double(v), "bound")})});
  };
  if (causal) bound("greater_or_equal", d, 0);
  if (left >= 0) bound("less_or_equal", d, left);
  if (right >= 0) bound("greater_or_equal", d, -right);
  return b.emit("where", {allowed, b.scalar(t, 0, "attend"), b.scalar(t, -INFINITY, "masked")});
}

}  // namespace

void attention(ImportContext& c) {
  for (auto& [name, a] : c.attrs()) {
    static const char* known[] = {
        "is_causal", "kv_num_heads",      "q_num_heads",      "qk_matmul_output_mode", "scale",
        "softcap",   "softmax_precision", "left_window_size", "right_window_size"};
    bool ok = false;
    for (const char* k : known) ok |= name == k;
    if (!ok) c.unsupported("attribute '{}' is not supported", name);
  }
  AttentionBuild b{c};
  Value *q = c.input(0), *k = c.input(1), *v = c.input(2);
  DType t = q->dtype();
  if (!is_float(t)) c.fail("Q is {}, not a floating type", q->type().str());
  int rank = q->type().rank();
  if ((rank != 3 && rank != 4) || k->type().rank() != rank || v->type().rank() != rank)
    c.fail("Q {}, K {} and V {} must all have rank 3 or all rank 4", q->type().str(), k->type().str(), v->type().str());
  const int64_t batch = q->shape()[0], sq_in = rank == 3 ? q->shape()[1] : q->shape()[2];
  if (rank == 3) {
    q = b.heads_first(q, c.attrs().get_int("q_num_heads", 0), "Q");
    k = b.heads_first(k, c.attrs().get_int("kv_num_heads", 0), "K");
    v = b.heads_first(v, c.attrs().get_int("kv_num_heads", 0), "V");
  } else if (c.attrs().has("q_num_heads") || c.attrs().has("kv_num_heads")) {
    c.fail("q_num_heads and kv_num_heads are for 3-D inputs only");
  }
  if (c.has_input(4) != c.has_input(5)) c.fail("past_key and past_value must be given together");
  if (c.has_input(6) && c.has_input(4)) c.fail("nonpad_kv_seqlen cannot be combined with past_key/past_value");
  int64_t past = 0;
  if (c.has_input(4)) {
    past = c.input(4)->shape().size() == 4 ? c.input(4)->shape()[2] : 0;
    k = b.concat({c.input(4), k}, 2);
    v = b.concat({c.input(5), v}, 2);
  }
  Value *present_k = k, *present_v = v;
  const int64_t hq = q->shape()[1], hkv = k->shape()[1], sq = q->shape()[2], sk = k->shape()[2];
  if (v->shape()[1] != hkv || hkv <= 0 || hq % hkv) c.fail("{} query heads cannot share {} key/value heads", hq, hkv);
  k = b.repeat_heads(k, hq / hkv);
  v = b.repeat_heads(v, hq / hkv);

  Value* bias = c.has_input(3) ? additive_mask(b, c.input(3), t, sk) : nullptr;
  int64_t causal = c.attrs().get_int("is_causal", 0);
  if (causal != 0 && causal != 1) c.fail("is_causal must be 0 or 1, not {}", causal);
  int64_t left = c.attrs().get_int("left_window_size", -1), right = c.attrs().get_int("right_window_size", -1);
  Value* pos = c.has_input(6) ? cache_mask(b, c.input(6), t, batch, sq, sk, causal, left, right)
                              : position_mask(c, t, sq, sk, past, causal, left, right);
  if (pos) bias = bias ? b.emit("add", {bias, pos}) : pos;

  double scale = c.attrs().has("scale") ? c.attrs().get_float("scale", 1.0f) : 1.0 / std::sqrt(double(q->shape()[3]));
  double softcap = c.attrs().get_float("softcap", 0.0f);
  int64_t mode = c.attrs().get_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) c.fail("qk_matmul_output_mode must be 0 to 3, not {}", mode);
  bool want_qk = c.num_outputs() > 3 && c.output_used(3);

  Value *y, *qk = nullptr;
  if (softcap == 0 && !want_qk) {
    AttrMap a;
    a.set("scale", static_cast<float>(scale));
    a.set("nan_to_zero", int64_t(1));
    std::vector<Value*> ins = {q, k, v};
    if (bias) ins.push_back(bias);
    y = b.emit("attention", ins, a);
  } else {
    Value* s = b.emit("matmul", {b.emit("mul", {q, b.scalar(t, scale, "scale")}), b.transpose(k, {0, 1, 3, 2})});
    if (softcap > 0) {
      Value* cap = b.scalar(t, softcap, "softcap");
      s = b.emit("mul", {b.emit("tanh", {b.emit("div", {s, cap})}), cap});
    }
    Value* biased = bias ? b.emit("add", {s, bias}) : s;
    AttrMap sm;
    sm.set("axis", int64_t(3));
    Value* p = b.emit("softmax", {biased}, sm);
    p = b.emit("where", {b.emit("isnan", {p}), b.scalar(t, 0, "zero"), p});
    y = b.emit("matmul", {p, v});
    qk = mode == 3 ? p : mode == 2 ? biased : s;
  }
  if (rank == 3) y = b.reshape(b.transpose(y, {0, 2, 1, 3}), {batch, sq_in, hq * y->shape()[3]});
  c.set_outputs({y, present_k, present_v, qk});
}

}  // namespace kiln::adapters
