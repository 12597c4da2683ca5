// linear_attention: the recurrent (linear-time) attention of ONNX's
// LinearAttention-27 (DeltaNet, Gated DeltaNet, GLA, RetNet, RWKV-6 style
// models), on ONNX's 3-D packed operands.
//
//   linear_attention(q [B,T,Hq*dk], k [B,T,Hkv*dk], v [B,T,Hkv*dv],
//                    past_state? [B,Hkv,dk,dv], decay? [B,T,Hkv*dk | Hkv],
//                    beta? [B,T,Hkv | 1])
//     {update_rule: "linear" | "gated" | "delta" | "gated_delta" (required),
//      q_num_heads, kv_num_heads (required), scale: float (required)}
//   -> (output [B,T,Hq*dv] of q's dtype, present_state [B,Hkv,dk,dv] of
//       past_state's dtype, or q's when there is none)
//
// Per batch entry and kv head, with the state S [dk,dv] starting at
// past_state (or zeros), for t = 0..T-1:
//   gated:  S *= exp(decay_t)                (per key dim, or one per head)
//   delta:  v_t = beta_t * (v_t - S^T k_t)
//   S += k_t (x) v_t                         (outer product)
//   o_t[h] = scale * q_t[h]^T S   for every query head h of the kv head's
//                                 group (query head h reads kv head h / (Hq/Hkv))
// which is onnx/reference/ops/op_linear_attention.py step by step. The
// frontend resolves ONNX's scale=0 to 1/sqrt(dk) and checks that decay and
// beta come exactly with the rules that use them. Like ONNX's reference and
// its function body, everything is computed in float whatever the operand
// dtypes (the state of f16 models included) and rounded once at the end.
#include <cmath>

#include "ops/misc_internal.h"
#include "ops/op_helpers.h"

namespace kiln::ops {

namespace {

struct LinearAttentionRule {
  bool gated = false, delta = false;
};

LinearAttentionRule parse_rule(const std::string& rule) {
  if (rule == "linear") return {false, false};
  if (rule == "gated") return {true, false};
  if (rule == "delta") return {false, true};
  if (rule == "gated_delta") return {true, true};
  fail("update_rule '{}' is not linear, gated, delta or gated_delta", rule);
}

std::vector<TensorType> infer_linear_attention(InferContext& c) {
  const char* names[] = {"query", "key", "value", "past_state", "decay", "beta"};
  for (int i = 0; i < 3; ++i)
    if (!c.has_input(i)) c.fail("{} is required", names[i]);
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    require_float(c, i);
    if (c.dtype(i) == DType::F64) c.fail("{} is f64; LinearAttention takes f16, bf16 or f32", names[i]);
    // past_state may have its own dtype (ONNX's S); the others share q's (T).
    if (i != 3 && c.dtype(i) != c.dtype(0))
      c.fail("{} is {} but query is {} (they share one dtype)", names[i], c.type(i).str(), c.type(0).str());
  }
  for (int i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i) && i != 3 && c.rank(i) != 3)
      c.fail("{} {} must have rank 3 [batch, seq, heads * dim]", names[i], c.type(i).str());
  const LinearAttentionRule rule = parse_rule(c.attrs().get_string("update_rule", ""));
  const int64_t hq = c.attrs().require_int("q_num_heads"), hkv = c.attrs().require_int("kv_num_heads");
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0)
    c.fail("q_num_heads ({}) must be a positive multiple of kv_num_heads ({})", hq, hkv);
  const Shape &q = c.shape(0), &k = c.shape(1), &v = c.shape(2);
  if (k[0] != q[0] || v[0] != q[0] || k[1] != q[1] || v[1] != q[1])
    c.fail("batch and sequence dims differ: query {}, key {}, value {}", c.type(0).str(), c.type(1).str(),
           c.type(2).str());
  if (q[2] % hq != 0) c.fail("query's last dim {} is not a multiple of q_num_heads {}", q[2], hq);
  if (v[2] % hkv != 0) c.fail("value's last dim {} is not a multiple of kv_num_heads {}", v[2], hkv);
  const int64_t dk = q[2] / hq, dv = v[2] / hkv;
  if (k[2] != hkv * dk)
    c.fail("key {} must have kv_num_heads * d_k = {} * {} in its last dim", c.type(1).str(), hkv, dk);
  if (c.has_input(3) && c.shape(3) != Shape{q[0], hkv, dk, dv})
    c.fail("past_state {} must be [{}, {}, {}, {}] (batch, kv heads, d_k, d_v)", c.type(3).str(), q[0], hkv, dk, dv);
  if (rule.gated != c.has_input(4))
    c.fail("update_rule '{}' {} decay", c.attrs().get_string("update_rule", ""), rule.gated ? "requires" : "takes no");
  if (rule.delta != c.has_input(5))
    c.fail("update_rule '{}' {} beta", c.attrs().get_string("update_rule", ""), rule.delta ? "requires" : "takes no");
  auto check_packed = [&](int i, std::initializer_list<int64_t> widths, const char* what) {
    if (!c.has_input(i)) return;
    const Shape& s = c.shape(i);
    bool ok = s[0] == q[0] && s[1] == q[1];
    bool width_ok = false;
    for (int64_t w : widths) width_ok |= s[2] == w;
    if (!ok || !width_ok) c.fail("{} {} must be [{}, {}, {}]", names[i], c.type(i).str(), q[0], q[1], what);
  };
  check_packed(4, {hkv * dk, hkv}, "kv_num_heads * d_k or kv_num_heads");
  check_packed(5, {hkv, 1}, "kv_num_heads or 1");
  const float scale = c.attrs().get_float("scale", 0.0f);
  if (!std::isfinite(scale)) c.fail("scale {} must be finite", scale);
  const DType state = c.has_input(3) ? c.dtype(3) : c.dtype(0);
  return {TensorType(c.dtype(0), {q[0], q[1], hq * dv}), TensorType(state, {q[0], hkv, dk, dv})};
}

// The recurrence in float, one (batch, kv head) at a time: S is [dk, dv].
void linear_attention_reference(KernelContext& ctx) {
  const LinearAttentionRule rule = parse_rule(ctx.attrs.get_string("update_rule", ""));
  const Shape &qs = ctx.in(0).shape(), &vs = ctx.in(2).shape();
  const int64_t Hq = ctx.attrs.require_int("q_num_heads"), Hkv = ctx.attrs.require_int("kv_num_heads");
  const int64_t B = qs[0], T = qs[1], dk = qs[2] / Hq, dv = vs[2] / Hkv, G = Hq / Hkv;
  const float scale = ctx.attrs.get_float("scale", 1.0f);
  const std::vector<float> q = load_all<float>(ctx.in(0)), k = load_all<float>(ctx.in(1)),
                           v = load_all<float>(ctx.in(2));
  std::vector<float> past, decay, beta;
  if (ctx.has(3)) past = load_all<float>(ctx.in(3));
  if (ctx.has(4)) decay = load_all<float>(ctx.in(4));
  if (ctx.has(5)) beta = load_all<float>(ctx.in(5));
  const int64_t decay_w = ctx.has(4) ? ctx.in(4).shape()[2] / Hkv : 0;  // dk or 1
  const int64_t beta_h = ctx.has(5) ? ctx.in(5).shape()[2] : 0;         // Hkv or 1
  std::vector<float> out(static_cast<size_t>(B * T * Hq * dv)), present(static_cast<size_t>(B * Hkv * dk * dv));
  std::vector<float> vt(dv);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hkv; ++h) {
      float* S = present.data() + (b * Hkv + h) * dk * dv;
      if (ctx.has(3)) std::copy(past.begin() + (b * Hkv + h) * dk * dv, past.begin() + (b * Hkv + h + 1) * dk * dv, S);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t row = b * T + t;
        const float* kt = k.data() + row * Hkv * dk + h * dk;
        const float* vrow = v.data() + row * Hkv * dv + h * dv;
        if (rule.gated) {
          const float* g = decay.data() + row * Hkv * decay_w + h * decay_w;
          for (int64_t d = 0; d < dk; ++d) {
            const float f = std::exp(g[decay_w == 1 ? 0 : d]);
            for (int64_t m = 0; m < dv; ++m) S[d * dv + m] *= f;
          }
        }
        for (int64_t m = 0; m < dv; ++m) {
          float x = vrow[m];
          if (rule.delta) {
            float r = 0.0f;
            for (int64_t d = 0; d < dk; ++d) r += S[d * dv + m] * kt[d];
            x = beta[row * beta_h + (beta_h == 1 ? 0 : h)] * (x - r);
          }
          vt[m] = x;
        }
        for (int64_t d = 0; d < dk; ++d)
          for (int64_t m = 0; m < dv; ++m) S[d * dv + m] += kt[d] * vt[m];
        for (int64_t gi = 0; gi < G; ++gi) {
          const int64_t hq = h * G + gi;
          const float* qt = q.data() + row * Hq * dk + hq * dk;
          float* o = out.data() + row * Hq * dv + hq * dv;
          for (int64_t m = 0; m < dv; ++m) {
            float acc = 0.0f;
            for (int64_t d = 0; d < dk; ++d) acc += qt[d] * S[d * dv + m];
            o[m] = scale * acc;
          }
        }
      }
    }
  store_all(ctx.out(0), out);
  if (ctx.outputs.size() > 1) store_all(ctx.out(1), present);
}

OpDef linear_attention_op() {
  OpDef d;
  d.name = "linear_attention";
  d.category = OpCategory::Compute;
  d.min_inputs = 3;
  d.max_inputs = 6;
  d.min_outputs = 1;
  d.max_outputs = 2;
  d.attrs = {{"update_rule", AttrKind::String, true},
             {"q_num_heads", AttrKind::Int, true},
             {"kv_num_heads", AttrKind::Int, true},
             {"scale", AttrKind::Float, true}};
  d.infer = [](InferContext& c) {
    std::vector<TensorType> r = infer_linear_attention(c);
    if (c.num_outputs() == 1) r.resize(1);
    return r;
  };
  d.reference = linear_attention_reference;
  d.doc =
      "ONNX LinearAttention's recurrence on [B,T,H*D] operands: state S [B,Hkv,dk,dv] from past_state or 0; per "
      "step S *= exp(decay) (gated), v = beta (v - S^T k) (delta), S += k v^T, out = scale q^T S (query heads "
      "grouped over kv heads); results output and present_state, in float";
  return d;
}

}  // namespace

void register_linear_attention_ops(OpRegistry& r) { r.add(linear_attention_op()); }

}  // namespace kiln::ops
