// ONNX adapters for ops of the `ai.onnx.preview` domain (version 1), keyed
// "ai.onnx.preview:Op" in the adapter table (see preview_adapter_key):
//
//  - FlexAttention (onnx/reference/ops/aionnx_preview/op_flex_attention.py):
//    Q and K are each multiplied by sqrt(scale) in their dtype (scale taken in
//    float first, as the reference does), K/V heads repeated for grouped
//    queries, scores = Q' K'^T in the inputs' dtype, the softmax in the
//    compute dtype (softmax_precision, else float for f16/bf16 and the
//    inputs' own for f32/f64), probabilities times V in that dtype, the
//    result in V's dtype. Where the compute dtype is the inputs' (f32, f64)
//    this is kiln's fused attention with scale 1 on the pre-scaled Q' and K'.
//    The score_mod and prob_mod subgraphs map the whole score (probability)
//    tensor [B, H, L, S] in the compute dtype to one of the same shape: they
//    are imported inline on those tensors (ImportContext::inline_subgraph)
//    and their result cast to the compute dtype, as the reference does;
//    the fusion passes may then rebuild an attention kernel around them.
#include <onnx/onnx_pb.h>

#include <cmath>

#include "frontend/import_context.h"

namespace kiln::adapters {

namespace {

AttrMap cast_to(DType t) {
  AttrMap a;
  a.set("to", std::string(dtype_name(t)));
  return a;
}

Value* cast(ImportContext& c, Value* x, DType t) { return x->dtype() == t ? x : c.emit1("cast", {x}, cast_to(t)); }

DType softmax_dtype(ImportContext& c, DType in) {
  if (!c.attrs().has("softmax_precision")) return in == DType::F16 || in == DType::BF16 ? DType::F32 : in;
  switch (c.attrs().require_int("softmax_precision")) {
    case onnx::TensorProto::FLOAT:
      return DType::F32;
    case onnx::TensorProto::DOUBLE:
      return DType::F64;
    case onnx::TensorProto::FLOAT16:
      return DType::F16;
    case onnx::TensorProto::BFLOAT16:
      return DType::BF16;
    default:
      c.fail("softmax_precision {} is not float, double, float16 or bfloat16",
             c.attrs().require_int("softmax_precision"));
  }
}

// The mod subgraph `attr` applied to `x` (the whole score or probability
// tensor): one output of x's shape, cast to x's dtype.
Value* apply_mod(ImportContext& c, const std::string& attr, Value* x) {
  std::vector<Value*> outs = c.inline_subgraph(attr, {x});
  if (outs.size() != 1) c.fail("subgraph '{}' returns {} values; it must return one", attr, outs.size());
  if (outs[0]->shape() != x->shape())
    c.fail("subgraph '{}' maps {} to {}; it must keep the shape", attr, x->type().str(), outs[0]->type().str());
  return cast(c, outs[0], x->dtype());
}

void flex_attention(ImportContext& c) {
  c.only_attrs({"scale", "softmax_precision", "score_mod", "prob_mod"});
  const bool mods = c.has_subgraph("score_mod") || c.has_subgraph("prob_mod");
  Value *q = c.input(0), *k = c.input(1), *v = c.input(2);
  const DType t = q->dtype();
  if (!is_float(t)) c.fail("Q {} is not a floating type", q->type().str());
  for (Value* x : {q, k, v}) {
    if (x->type().rank() != 4) c.fail("{} must have rank 4 [batch, heads, seq, dim]", x->type().str());
    if (x->dtype() != t)
      c.fail("Q, K and V share one dtype; got {}, {}, {}", q->type().str(), k->type().str(), v->type().str());
  }
  const Shape &qs = q->shape(), &ks = k->shape(), &vs = v->shape();
  const int64_t B = qs[0], Hq = qs[1], E = qs[3], Hkv = ks[1], S = ks[2];
  if (ks[0] != B || vs[0] != B || vs[1] != Hkv || vs[2] != S || ks[3] != E)
    c.fail("Q {}, K {}, V {} do not agree (batch, kv heads, key length, head dim)", q->type().str(), k->type().str(),
           v->type().str());
  if (Hkv <= 0 || Hq % Hkv != 0) c.fail("{} query heads cannot share {} key/value heads", Hq, Hkv);
  // K and V heads repeated in place (np.repeat on axis 1) for grouped queries.
  if (Hq != Hkv) {
    const int64_t g = Hq / Hkv;
    auto repeat = [&](Value* x) {
      const Shape& s = x->shape();
      AttrMap r1, e, r2;
      r1.set("shape", std::vector<int64_t>{B, Hkv, 1, s[2], s[3]});
      e.set("shape", std::vector<int64_t>{B, Hkv, g, s[2], s[3]});
      r2.set("shape", std::vector<int64_t>{B, Hq, s[2], s[3]});
      return c.emit1("reshape", {c.emit1("expand", {c.emit1("reshape", {x}, r1)}, e)}, r2);
    };
    k = repeat(k);
    v = repeat(v);
  }
  const double scale = c.attrs().has("scale") ? c.attrs().get_float("scale", 1.0f) : 1.0 / std::sqrt(double(E));
  // np.sqrt(np.float32(scale)) cast to Q's dtype.
  const float root = std::sqrt(static_cast<float>(scale));
  Value* rs = c.constant(Tensor::scalar(t, root), "sqrt_scale");
  Value* qq = c.emit1("mul", {q, rs});
  Value* kk = c.emit1("mul", {k, rs});
  const DType ct = softmax_dtype(c, t);
  Value* y;
  if (ct == t && (t == DType::F32 || t == DType::F64) && !mods) {
    AttrMap a;
    a.set("scale", 1.0f);
    y = c.emit1("attention", {qq, kk, v}, a);
  } else {
    AttrMap perm, sm;
    perm.set("perm", std::vector<int64_t>{0, 1, 3, 2});
    sm.set("axis", int64_t(3));
    Value* scores = cast(c, c.emit1("matmul", {qq, c.emit1("transpose", {kk}, perm)}), ct);
    if (c.has_subgraph("score_mod")) scores = apply_mod(c, "score_mod", scores);
    Value* p = c.emit1("softmax", {scores}, sm);
    if (c.has_subgraph("prob_mod")) p = apply_mod(c, "prob_mod", p);
    y = cast(c, c.emit1("matmul", {p, cast(c, v, ct)}), v->dtype());
  }
  c.set_outputs({y});
}

}  // namespace

std::string preview_adapter_key(const std::string& op_type) { return domain_adapter_key("ai.onnx.preview", op_type); }

void register_preview(AdapterTable& t) { t.add(preview_adapter_key("FlexAttention"), flex_attention); }

}  // namespace kiln::adapters
