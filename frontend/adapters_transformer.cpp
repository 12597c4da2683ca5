// ONNX adapters for the transformer ops of opsets 23-24 (see import_context.h):
// RMSNormalization, RotaryEmbedding, Attention, TensorScatter, Swish and
// SwiGLU (opset 28). Each is written
// here as kiln ops whose kernels already exist (reductions, pointwise chains,
// slices, kiln's fused `attention`), following the ONNX reference
// (onnx/reference/ops/op_*.py); the fusion passes turn the pieces back into a
// few kernels, so the GPU and the simulator run them without new emitters.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>

#include "frontend/import_context.h"
#include "frontend/tensor_proto.h"
#include "ops/shape_ops.h"

namespace kiln::adapters {

namespace {

// Small builders over ImportContext::emit, one kiln op each.
struct Build {
  ImportContext& c;

  Value* scalar(DType t, double v, const char* name) { return c.constant(Tensor::scalar(t, v), name); }
  Value* op(const char* kiln, std::vector<Value*> ins) { return c.emit1(kiln, ins); }
  Value* cast(Value* x, DType to) {
    if (x->dtype() == to) return x;
    AttrMap a;
    a.set("to", std::string(dtype_name(to)));
    return c.emit1("cast", {x}, a);
  }
  Value* reshape(Value* x, const Shape& s) {
    if (x->shape() == s) return x;
    AttrMap a;
    a.set("shape", std::vector<int64_t>(s));
    return c.emit1("reshape", {x}, a);
  }
  Value* transpose(Value* x, std::vector<int64_t> perm) {
    AttrMap a;
    a.set("perm", perm);
    return c.emit1("transpose", {x}, a);
  }
  // x[..., start:end:step] on the last axis.
  Value* slice_last(Value* x, int64_t start, int64_t end, int64_t step = 1) {
    int r = x->type().rank();
    ops::SliceSpec s = ops::canonical_slice(x->shape(), {start}, {end}, {r - 1}, {step});
    AttrMap a;
    a.set("starts", s.starts);
    a.set("ends", s.ends);
    a.set("steps", s.steps);
    return c.emit1("slice", {x}, a);
  }
  Value* concat(std::vector<Value*> xs, int64_t axis) {
    AttrMap a;
    a.set("axis", axis);
    return c.emit1("concat", xs, a);
  }
  Value* expand(Value* x, const Shape& s) {
    AttrMap a;
    a.set("shape", std::vector<int64_t>(s));
    return c.emit1("expand", {x}, a);
  }
};

DType stash_type(ImportContext& c) {
  int64_t st = c.attrs().get_int("stash_type", onnx::TensorProto::FLOAT);
  if (st != onnx::TensorProto::FLOAT && st != onnx::TensorProto::DOUBLE)
    c.unsupported("stash_type {} (not float or double) is not supported", st);
  return st == onnx::TensorProto::DOUBLE ? DType::F64 : DType::F32;
}

// RMSNormalization-23: Y = X / sqrt(mean(X^2 over dims [axis, rank)) + epsilon)
// * scale, computed in the stash type (float by default) and rounded to X's
// type before the scale multiplies, as the ONNX function body does.
void rms_normalization(ImportContext& c) {
  c.only_attrs({"axis", "epsilon", "stash_type"});
  Build b{c};
  Value* x = c.input(0);
  Value* scale = c.input(1);
  if (!is_float(x->dtype())) c.fail("X is {}, not a floating type", x->type().str());
  int r = x->type().rank();
  if (r == 0) c.fail("X is a scalar; RMSNormalization needs rank >= 1");
  int64_t axis = c.attrs().get_int("axis", -1);
  if (axis < -r || axis >= r) c.fail("axis {} is out of range for rank {}", axis, r);
  if (axis < 0) axis += r;
  DType stash = stash_type(c);
  Value* xs = b.cast(x, stash);
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < r; ++i) axes.push_back(i);
  AttrMap red;
  red.set("axes", axes);
  red.set("keepdims", int64_t(1));
  Value* mean = c.emit1("reduce_mean", {b.op("mul", {xs, xs})}, red);
  Value* eps = b.scalar(stash, c.attrs().get_float("epsilon", 1e-5f), "epsilon");
  Value* rms = b.op("sqrt", {b.op("add", {mean, eps})});
  Value* y = b.cast(b.op("div", {xs, rms}), x->dtype());
  c.set_outputs({b.op("mul", {y, scale})});
}

// Swish-24: x * sigmoid(alpha * x).
void swish(ImportContext& c) {
  c.only_attrs({"alpha"});
  Build b{c};
  Value* x = c.input(0);
  if (!is_float(x->dtype())) c.fail("X is {}, not a floating type", x->type().str());
  Value* ax = b.op("mul", {b.scalar(x->dtype(), c.attrs().get_float("alpha", 1.0f), "alpha"), x});
  c.set_outputs({b.op("mul", {x, b.op("sigmoid", {ax})})});
}

// RotaryEmbedding-23 on X [B, S, hidden] (num_heads given) or [B, H, S, D]:
// the first rotary_embedding_dim (default D) features of each head are
// rotated pairwise, pairs being (i, i + d/2) or, interleaved, (2i, 2i + 1):
//   real = cos * x1 - sin * x2,  imag = sin * x1 + cos * x2
// with cos/sin [max_pos, d/2] gathered by position_ids [B, S], or given as
// [B, S, d/2] without position_ids.
void rotary_embedding(ImportContext& c) {
  c.only_attrs({"interleaved", "num_heads", "rotary_embedding_dim"});
  Build b{c};
  Value* x = c.input(0);
  const Shape xs = x->shape();
  int r = x->type().rank();
  if (r != 3 && r != 4) c.fail("X {} must have rank 3 or 4", x->type().str());
  if (!is_float(x->dtype())) c.fail("X is {}, not a floating type", x->type().str());
  int64_t B = xs[0], S = r == 4 ? xs[2] : xs[1], H, D;
  if (r == 4) {
    H = xs[1], D = xs[3];
    x = b.transpose(x, {0, 2, 1, 3});  // [B, S, H, D]
  } else {
    H = c.attrs().get_int("num_heads", 0);
    if (H <= 0 || xs[2] % H) c.fail("num_heads {} must be positive and divide the hidden size {}", H, xs[2]);
    D = xs[2] / H;
    x = b.reshape(x, {B, S, H, D});
  }
  int64_t rd = c.attrs().get_int("rotary_embedding_dim", 0);
  if (rd == 0) rd = D;
  if (rd < 0 || rd > D || rd % 2) c.fail("rotary_embedding_dim {} must be even and at most the head size {}", rd, D);
  bool interleaved = c.attrs().get_int("interleaved", 0) != 0;
  Value *cos = c.input(1), *sin = c.input(2);
  if (c.has_input(3)) {
    Value* pos = c.input(3);
    AttrMap g;
    g.set("axis", int64_t(0));
    cos = c.emit1("gather", {cos, pos}, g);
    sin = c.emit1("gather", {sin, pos}, g);
  }
  for (Value* t : {cos, sin})
    if (t->shape() != Shape{B, S, rd / 2})
      c.fail("cos/sin cache gives {} but [{}, {}, {}] is needed", t->type().str(), B, S, rd / 2);
  cos = b.cast(b.reshape(cos, {B, S, 1, rd / 2}), x->dtype());
  sin = b.cast(b.reshape(sin, {B, S, 1, rd / 2}), x->dtype());
  Value *x1, *x2;
  if (interleaved) {
    x1 = b.slice_last(x, 0, rd, 2);
    x2 = b.slice_last(x, 1, rd, 2);
  } else {
    x1 = b.slice_last(x, 0, rd / 2);
    x2 = b.slice_last(x, rd / 2, rd);
  }
  Value* real = b.op("sub", {b.op("mul", {cos, x1}), b.op("mul", {sin, x2})});
  Value* imag = b.op("add", {b.op("mul", {sin, x1}), b.op("mul", {cos, x2})});
  Value* rotated;
  if (interleaved) {
    Shape pair = {B, S, H, rd / 2, 1};
    rotated = b.reshape(b.concat({b.reshape(real, pair), b.reshape(imag, pair)}, 4), {B, S, H, rd});
  } else {
    rotated = b.concat({real, imag}, 3);
  }
  Value* y = rd < D ? b.concat({rotated, b.slice_last(x, rd, D)}, 3) : rotated;
  c.set_outputs({r == 4 ? b.transpose(y, {0, 2, 1, 3}) : b.reshape(y, xs)});
}

// SwiGLU-28: Swish_alpha(A) * B, A and B of one shape.
void swiglu(ImportContext& c) {
  c.only_attrs({"alpha"});
  Build b{c};
  Value *a = c.input(0), *v = c.input(1);
  if (!is_float(a->dtype())) c.fail("A is {}, not a floating type", a->type().str());
  if (a->type() != v->type()) c.fail("A {} and B {} must have one type and shape", a->type().str(), v->type().str());
  Value* ax = b.op("mul", {b.scalar(a->dtype(), c.attrs().get_float("alpha", 1.0f), "alpha"), a});
  c.set_outputs({b.op("mul", {b.op("mul", {a, b.op("sigmoid", {ax})}), v})});
}

// TensorScatter-24 (a KV-cache write): present = past with update's slices
// along `axis` written at write_indices[b] + i (modulo the cache length in
// circular mode): a scatter_elements whose index, built here, is
// write_indices[b] + i broadcast over update's shape.
void tensor_scatter(ImportContext& c) {
  c.only_attrs({"axis", "mode"});
  Build b{c};
  Value *past = c.input(0), *update = c.input(1);
  const Shape &ps = past->shape(), &us = update->shape();
  int r = past->type().rank();
  int64_t axis = c.attrs().get_int("axis", -2);
  if (axis < -r || axis >= r) c.fail("axis {} is out of range for rank {}", axis, r);
  if (axis < 0) axis += r;
  if (axis == 0) c.fail("axis 0 is the batch axis; the sequence axis must come after it");
  std::string mode = c.attrs().get_string("mode", "linear");
  if (mode != "linear" && mode != "circular") c.fail("mode must be \"linear\" or \"circular\", not \"{}\"", mode);
  if (update->type().rank() != r || update->dtype() != past->dtype())
    c.fail("update {} does not match the cache {}", update->type().str(), past->type().str());
  for (int i = 0; i < r; ++i)
    if (i == axis ? us[i] > ps[i] : us[i] != ps[i])
      c.fail("update {} does not fit the cache {} (axis {})", update->type().str(), past->type().str(), axis);
  Shape one(static_cast<size_t>(r), 1);
  one[axis] = us[axis];
  Tensor steps(DType::I64, one);
  for (int64_t i = 0; i < us[axis]; ++i) steps.set_double(i, double(i));
  Value* idx = c.constant(std::move(steps), "sequence_step");
  if (c.has_input(2)) {
    Value* w = c.input(2);
    if (w->dtype() != DType::I64 || w->shape() != Shape{ps[0]})
      c.fail("write_indices is {}; it must be i64[{}]", w->type().str(), ps[0]);
    Shape per_batch(static_cast<size_t>(r), 1);
    per_batch[0] = ps[0];
    idx = b.op("add", {b.reshape(w, per_batch), idx});
  }
  if (mode == "circular") idx = b.op("mod", {idx, b.scalar(DType::I64, double(ps[axis]), "cache_length")});
  idx = b.expand(idx, us);
  AttrMap a;
  a.set("axis", axis);
  a.set("reduction", std::string("none"));
  c.set_outputs({c.emit1("scatter_elements", {past, idx, update}, a)});
}

}  // namespace

void attention(ImportContext& c);  // adapters_attention.cpp

void register_transformer(AdapterTable& t) {
  t.add("RMSNormalization", since_opset(23, rms_normalization));
  t.add("RotaryEmbedding", since_opset(23, rotary_embedding));
  t.add("Swish", since_opset(24, swish));
  t.add("SwiGLU", since_opset(28, swiglu));
  t.add("Attention", since_opset(23, attention));
  t.add("TensorScatter", since_opset(24, tensor_scatter));
}

}  // namespace kiln::adapters
