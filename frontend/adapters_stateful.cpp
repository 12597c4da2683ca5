// ONNX adapters for the stateful sequence ops of opset 27 (see
// import_context.h), the blocks of recurrent LLMs (Mamba, Gated DeltaNet):
//
//  - CausalConvWithState: the ONNX function body in kiln ops: concat(past
//    state or zeros, input) along the sequence, a depthwise conv without
//    padding (with the bias), SiLU in float for activation silu/swish, and
//    the padded sequence's last k-1 positions as present_state. The conv and
//    pointwise kernels that exist run it; no new emitter.
//  - LinearAttention: kiln's linear_attention op (ops/linear_attention_op.cpp),
//    with scale=0 resolved to 1/sqrt(d_k) and the operand slots kept.
#include <cmath>

#include "frontend/import_context.h"
#include "ops/shape_ops.h"

namespace kiln::adapters {

namespace {

AttrMap cast_to(DType t) {
  AttrMap a;
  a.set("to", std::string(dtype_name(t)));
  return a;
}

// x[:, :, start:end] (a rank-3 value).
Value* slice_seq(ImportContext& c, Value* x, int64_t start, int64_t end) {
  ops::SliceSpec s = ops::canonical_slice(x->shape(), {start}, {end}, {2}, {1});
  AttrMap a;
  a.set("starts", s.starts);
  a.set("ends", s.ends);
  a.set("steps", s.steps);
  return c.emit1("slice", {x}, a);
}

void causal_conv_with_state(ImportContext& c) {
  c.only_attrs({"activation"});
  const std::string act = c.attrs().get_string("activation", "none");
  if (act != "none" && act != "silu" && act != "swish") c.fail("activation '{}' is not none, silu or swish", act);
  Value* x = c.input(0);
  Value* w = c.input(1);
  const DType t = x->dtype();
  if (!is_float(t)) c.fail("input {} is not a floating type", x->type().str());
  if (x->type().rank() != 3) c.fail("input {} must have rank 3 (batch, channels, length)", x->type().str());
  const int64_t B = x->shape()[0], C = x->shape()[1], L = x->shape()[2];
  if (w->dtype() != t || w->type().rank() != 3 || w->shape()[0] != C || w->shape()[1] != 1)
    c.fail("weight {} must be {}[{}, 1, k] (depthwise, one kernel per channel)", w->type().str(), dtype_name(t), C);
  const int64_t k = w->shape()[2];
  if (k < 1) c.fail("kernel size {} must be at least 1", k);
  Value* bias = c.has_input(2) ? c.input(2) : nullptr;
  if (bias && (bias->dtype() != t || bias->shape() != Shape{C}))
    c.fail("bias {} must be {}[{}]", bias->type().str(), dtype_name(t), C);
  Value* past = c.has_input(3) ? c.input(3) : nullptr;
  if (past && (past->dtype() != t || past->shape() != Shape{B, C, k - 1}))
    c.fail("past_state {} must be {}[{}, {}, {}] (batch, channels, k - 1)", past->type().str(), dtype_name(t), B, C,
           k - 1);

  // The left-padded sequence [B, C, k - 1 + L].
  Value* padded = x;
  if (k > 1) {
    Value* left = past ? past : c.constant(Tensor(t, {B, C, k - 1}), "zero_state");
    AttrMap a;
    a.set("axis", int64_t(2));
    padded = c.emit1("concat", {left, x}, a);
  }
  AttrMap conv;
  conv.set("strides", std::vector<int64_t>{1});
  conv.set("dilations", std::vector<int64_t>{1});
  conv.set("pads", std::vector<int64_t>{0, 0});
  conv.set("group", C);
  std::vector<Value*> conv_in = {padded, w};
  if (bias) conv_in.push_back(bias);
  Value* y = c.emit1("conv", conv_in, conv);
  if (act != "none") {
    // SiLU in float, rounded back once, as ONNX's reference and function body do.
    Value* f = t == DType::F32 ? y : c.emit1("cast", {y}, cast_to(DType::F32));
    f = c.emit1("mul", {f, c.emit1("sigmoid", {f})});
    y = t == DType::F32 ? f : c.emit1("cast", {f}, cast_to(t));
  }
  const int64_t padded_len = k - 1 + L;
  Value* present = c.output_used(1) ? slice_seq(c, padded, padded_len - (k - 1), padded_len) : nullptr;
  c.set_outputs({y, present});
}

void linear_attention(ImportContext& c) {
  c.only_attrs({"update_rule", "scale", "q_num_heads", "kv_num_heads", "chunk_size"});
  const std::string rule = c.attrs().get_string("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    c.fail("update_rule '{}' is not linear, gated, delta or gated_delta", rule);
  for (const char* a : {"q_num_heads", "kv_num_heads"})
    if (!c.attrs().has(a)) c.fail("attribute '{}' is required", a);
  const int64_t hq = c.attrs().require_int("q_num_heads"), hkv = c.attrs().require_int("kv_num_heads");
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0)
    c.fail("q_num_heads ({}) must be a positive multiple of kv_num_heads ({})", hq, hkv);
  // chunk_size only tunes ONNX's chunk-parallel prefill; the result does not depend on it.
  if (c.attrs().get_int("chunk_size", 64) < 1)
    c.fail("chunk_size {} must be positive", c.attrs().get_int("chunk_size", 64));
  Value* q = c.input(0);
  if (q->type().rank() != 3) c.fail("query {} must have rank 3 [batch, seq, heads * dim]", q->type().str());
  if (q->shape()[2] % hq != 0) c.fail("query's last dim {} is not a multiple of q_num_heads {}", q->shape()[2], hq);
  const int64_t dk = q->shape()[2] / hq;
  float scale = c.attrs().get_float("scale", 0.0f);
  if (scale == 0.0f) {
    if (dk == 0) c.fail("d_k is 0: no default scale 1/sqrt(d_k)");
    scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));
  }
  AttrMap a;
  a.set("update_rule", rule);
  a.set("q_num_heads", hq);
  a.set("kv_num_heads", hkv);
  a.set("scale", scale);
  std::vector<Value*> ins;
  for (int i = 0; i < 6; ++i) ins.push_back(c.has_input(i) ? c.input(i) : nullptr);
  while (!ins.back()) ins.pop_back();
  std::vector<Value*> r = c.emit("linear_attention", ins, a, 2);
  c.set_outputs({r[0], c.output_used(1) ? r[1] : nullptr});
}

}  // namespace

void register_stateful(AdapterTable& t) {
  t.add("CausalConvWithState", since_opset(27, causal_conv_with_state));
  t.add("LinearAttention", since_opset(27, linear_attention));
}

}  // namespace kiln::adapters
