// ONNX adapters for the elementwise family (see import_context.h). Every ONNX
// elementwise op goes through an adapter here, so old-opset forms are
// normalised in one place: `consumed_inputs` (opset < 6) is dropped, legacy
// `broadcast`/`axis` (opset < 7) becomes numpy broadcasting by reshaping the
// second operand, attribute bounds become operands (Clip < 11), variadic
// Max/Min/Sum/Mean become chains of binary ops, and per-axis quantization
// parameters are reshaped to broadcast along their axis.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>

#include "frontend/import_context.h"
#include "frontend/tensor_proto.h"
#include "ops/shape_ops.h"

namespace kiln::adapters {

namespace {

// Attributes without the ones named (legacy hints that do not change meaning,
// or ones an adapter has already turned into something else).
AttrMap without(const AttrMap& a, std::initializer_list<const char*> names) {
  AttrMap r = a;
  for (const char* n : names) r.erase(n);
  return r;
}

// `v` with shape `shape` (same element count): a new constant when its value
// is known, a reshape node otherwise.
Value* reshaped(ImportContext& c, Value* v, const Shape& shape) {
  if (v->shape() == shape) return v;
  if (const Tensor* t = c.value_of(v)) return c.constant(t->reshaped(shape));
  AttrMap a;
  a.set("shape", std::vector<int64_t>(shape));
  return c.emit1("reshape", {v}, a);
}

// Operand 1 of an opset < 7 binary op. With broadcast=1 and an axis, its dims
// line up with operand 0's starting at `axis`; numpy aligns trailing dims, so
// append ones. Without an axis, legacy suffix broadcasting is numpy's.
Value* legacy_rhs(ImportContext& c) {
  Value* b = c.input(1);
  if (c.attrs().get_int("broadcast", 0) == 0 || !c.attrs().has("axis")) return b;
  int ra = c.input(0)->type().rank(), rb = b->type().rank();
  int64_t axis = c.attrs().require_int("axis");
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra)
    c.fail("broadcast axis {} does not fit operands {} and {}", c.attrs().require_int("axis"), c.input(0)->type().str(),
           b->type().str());
  Shape s = b->shape();
  s.resize(static_cast<size_t>(ra - axis), 1);
  return reshaped(c, b, s);
}

// ONNX ops that map 1:1 onto a kiln op, attributes unchanged.
Adapter direct(std::string kiln) {
  return [kiln](ImportContext& c) { c.import_as(kiln, without(c.attrs(), {"consumed_inputs"})); };
}

// Binary ops with numpy broadcasting (and the legacy form before opset 7).
Adapter binary(std::string kiln) {
  return [kiln](ImportContext& c) {
    if (c.num_inputs() != 2) c.fail("expects 2 operands, got {}", c.num_inputs());
    AttrMap a = without(c.attrs(), {"consumed_inputs", "broadcast", "axis"});
    c.set_outputs({c.emit1(kiln, {c.input(0), legacy_rhs(c)}, a)});
  };
}

// Max/Min/Sum/Mean: a left-to-right chain of binary ops (Mean divides once at
// the end). One operand gives an identity.
Adapter variadic(std::string kiln, bool mean) {
  return [kiln, mean](ImportContext& c) {
    if (c.num_inputs() < 1) c.fail("expects at least 1 operand");
    for (int i = 0; i < c.num_inputs(); ++i)
      if (!c.has_input(i)) c.fail("operand {} is missing", i);
    Value* acc = c.input(0);
    for (int i = 1; i < c.num_inputs(); ++i) acc = c.emit1(kiln, {acc, c.input(i)});
    if (mean && c.num_inputs() > 1) {
      Value* n = c.constant(Tensor::scalar(acc->dtype(), c.num_inputs()), "mean_count");
      acc = c.emit1("div", {acc, n});
    }
    if (c.num_inputs() == 1) acc = c.emit1("identity", {acc});
    c.set_outputs({acc});
  };
}

// A scalar holding the lowest (or highest) value of a dtype: -inf/+inf for floats.
Tensor extreme(DType t, bool high) {
  Tensor r(t, {});
  if (is_float(t)) {
    r.set_double(0, high ? INFINITY : -INFINITY);
  } else {
    dispatch_storage(t, [&](auto z) {
      using T = decltype(z);
      r.data<T>()[0] = high ? std::numeric_limits<T>::max() : std::numeric_limits<T>::lowest();
    });
  }
  return r;
}

void clip(ImportContext& c) {
  Value* x = c.input(0);
  DType t = x->dtype();
  Value *lo, *hi;
  if (c.opset() < 11) {  // bounds are attributes, defaulting to float's range
    const AttrMap& a = c.attrs();
    lo = c.constant(Tensor::scalar(t, a.get_float("min", std::numeric_limits<float>::lowest())), "clip_min");
    hi = c.constant(Tensor::scalar(t, a.get_float("max", std::numeric_limits<float>::max())), "clip_max");
  } else {
    if (c.num_inputs() > 3) c.fail("expects 1 to 3 operands, got {}", c.num_inputs());
    lo = c.has_input(1) ? c.input(1) : c.constant(extreme(t, false), "clip_min");
    hi = c.has_input(2) ? c.input(2) : c.constant(extreme(t, true), "clip_max");
  }
  c.set_outputs({c.emit1("clip", {x, lo, hi})});
}

void mod(ImportContext& c) {
  int64_t fmod = c.attrs().get_int("fmod", 0);
  if (fmod != 0 && fmod != 1) c.fail("fmod must be 0 or 1, not {}", fmod);
  // Mod-28 defines fmod=0 for floats too (A - floor(A/B)*B, the divisor's
  // sign: kiln's mod); before, floats required fmod=1.
  if (fmod == 0 && is_float(c.input(0)->dtype()) && c.opset() < 28)
    c.fail("fmod=0 is not defined for {} operands before opset 28 (ONNX requires fmod=1 for floating dtypes)",
           dtype_name(c.input(0)->dtype()));
  Value* r = c.emit1(fmod ? "fmod" : "mod", {c.input(0), c.input(1)});
  // Mod-28: a zero remainder with fmod=0 takes the divisor's sign (1 / (0 mod
  // -2) is -inf); kiln's mod gives +0. |r| * sign(b) is that signed zero.
  if (fmod == 0 && is_float(r->dtype())) {
    Value* zero = c.constant(Tensor(r->dtype(), {}), "zero");
    Value* signed_zero = c.emit1("mul", {c.emit1("abs", {r}), c.emit1("sign", {c.input(1)})});
    r = c.emit1("where", {c.emit1("equal", {r, zero}), signed_zero, r});
  }
  c.set_outputs({r});
}

DType unsigned_of(DType t) {
  switch (t) {
    case DType::I8:
      return DType::U8;
    case DType::I16:
      return DType::U16;
    case DType::I32:
      return DType::U32;
    case DType::I64:
      return DType::U64;
    default:
      return t;
  }
}

AttrMap cast_attrs(DType to);

// BitShift on unsigned types (opset 11) maps onto kiln's logical shifts.
// Opset 28 adds signed types: a left shift is the unsigned one on the same
// bits; a right shift is arithmetic, computed as ~(~x >> y) for negative x,
// which also gives -1 for a negative x shifted by a negative or too large
// amount (kiln's shift gives 0 there), as the spec asks.
void bit_shift(ImportContext& c) {
  std::string dir = c.attrs().get_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") c.fail("direction must be \"LEFT\" or \"RIGHT\", not \"{}\"", dir);
  const char* op = dir == "LEFT" ? "bit_shift_left" : "bit_shift_right";
  Value *x = c.input(0), *y = c.input(1);
  DType t = x->dtype();
  if (!is_signed_int(t)) return c.set_outputs({c.emit1(op, {x, y})});
  if (c.opset() < 28) c.fail("signed operands ({}) need opset 28 or newer", dtype_name(t));
  DType u = unsigned_of(t);
  Value* uy = c.emit1("cast", {y}, cast_attrs(u));
  if (dir == "LEFT") {
    Value* r = c.emit1(op, {c.emit1("cast", {x}, cast_attrs(u)), uy});
    return c.set_outputs({c.emit1("cast", {r}, cast_attrs(t))});
  }
  Value* all_ones = c.constant(Tensor::scalar(t, -1), "all_ones");
  Value* negative = c.emit1("less", {x, c.constant(Tensor(t, {}), "zero")});
  Value* flipped = c.emit1("where", {negative, c.emit1("bitwise_xor", {x, all_ones}), x});
  Value* shifted = c.emit1("cast", {c.emit1(op, {c.emit1("cast", {flipped}, cast_attrs(u)), uy})}, cast_attrs(t));
  c.set_outputs({c.emit1("where", {negative, c.emit1("bitwise_xor", {shifted, all_ones}), shifted})});
}

void prelu(ImportContext& c) {
  Value* x = c.input(0);
  Value* slope = c.input(1);
  // Before opset 7 a 1-D slope of C values is per channel (dim 1), not numpy-broadcast.
  if (c.opset() < 7 && slope->type().rank() == 1 && x->type().rank() >= 2 && slope->shape()[0] != 1) {
    if (slope->shape()[0] != x->shape()[1])
      c.fail("slope has {} values but the input has {} channels", slope->shape()[0], x->shape()[1]);
    Shape s(static_cast<size_t>(x->type().rank() - 1), 1);
    s[0] = slope->shape()[0];
    slope = reshaped(c, slope, s);
  }
  c.set_outputs({c.emit1("prelu", {x, slope})});
}

DType cast_target(ImportContext& c) {
  const Attribute* to = c.attrs().find("to");
  if (!to) c.fail("attribute 'to' is missing");
  if (attr_kind(*to) == AttrKind::String) {  // Cast-1: a TensorProto type name such as "FLOAT"
    onnx::TensorProto::DataType dt;
    if (!onnx::TensorProto::DataType_Parse(std::get<std::string>(*to), &dt))
      c.fail("'to' is \"{}\", which is not an ONNX type name", std::get<std::string>(*to));
    return dtype_from_onnx(dt, c.label());
  }
  return dtype_from_onnx(static_cast<int>(c.attrs().require_int("to")), c.label());
}

AttrMap cast_attrs(DType to) {
  AttrMap a;
  a.set("to", std::string(dtype_name(to)));
  return a;
}

// Cast's attributes besides `to`: `saturate` (opset 19+) only affects float8
// targets and `round_mode` (opset 24+) only float8e8m0 targets; each is
// kept on kiln's cast only where it matters, so other casts print as before.
AttrMap cast_attrs_of(ImportContext& c, DType to) {
  AttrMap a = cast_attrs(to);
  if (is_low_bit_float(to) && to != DType::F4E2M1 && c.attrs().get_int("saturate", 1) == 0)
    a.set("saturate", int64_t(0));
  std::string mode = c.attrs().get_string("round_mode", "up");
  if (mode != "up" && mode != "down" && mode != "nearest")
    c.fail("round_mode is \"{}\"; it must be \"up\", \"down\" or \"nearest\"", mode);
  if (to == DType::F8E8M0 && mode != "up") a.set("round_mode", mode);
  return a;
}

// A cast to or from strings is cast_string (ops/string_cast.cpp: ONNX's
// text forms of numbers); kiln's cast is numeric, an Expr.
void cast_to(ImportContext& c, DType to) {
  if (to == DType::String || c.input(0)->dtype() == DType::String)
    return c.set_outputs({c.emit1("cast_string", {c.input(0)}, cast_attrs(to))});
  c.set_outputs({c.emit1("cast", {c.input(0)}, cast_attrs_of(c, to))});
}

void cast(ImportContext& c) { cast_to(c, cast_target(c)); }

void cast_like(ImportContext& c) { cast_to(c, c.input(1)->dtype()); }

// Inference-mode dropout: y = x, mask all true. Training mode is random and
// unsupported, except with ratio 0, where it is the identity too.
void dropout(ImportContext& c) {
  Value* x = c.input(0);
  bool training = false;
  double ratio = 0.5;
  if (c.opset() < 7) {
    training = c.attrs().get_int("is_test", 0) == 0;
    ratio = c.attrs().get_float("ratio", 0.5f);
  } else if (c.opset() < 12) {
    ratio = c.attrs().get_float("ratio", 0.5f);
  } else {
    if (c.has_input(2)) {
      const Tensor* t = c.value(2);
      if (!t) c.unsupported("training_mode must be known at compile time");
      if (t->numel() != 1) c.fail("training_mode must be a scalar, got {}", t->type().str());
      training = t->get_double(0) != 0;
    }
    if (training && c.has_input(1)) {
      const Tensor* r = c.value(1);
      if (!r) c.unsupported("training-mode dropout with a ratio unknown at compile time is random");
      if (r->numel() != 1) c.fail("ratio must be a scalar, got {}", r->type().str());
      ratio = r->get_double(0);
    }
  }
  if (training && ratio != 0)
    c.unsupported("training-mode dropout (ratio {}) is random; kiln compiles inference graphs", ratio);
  std::vector<Value*> outs = {c.emit1("identity", {x})};
  if (c.num_outputs() > 1 && c.output_used(1)) {
    // The mask is bool from opset 10, the input's dtype before.
    Tensor mask(c.opset() < 10 ? x->dtype() : DType::Bool, x->shape());
    for (int64_t i = 0; i < mask.numel(); ++i) mask.set_double(i, 1);
    outs.push_back(c.constant(std::move(mask), "dropout_mask"));
  }
  c.set_outputs(outs);
}

// Scale / zero point of a (de)quantization, made to broadcast against x: a
// scalar as it is; a 1-D tensor along `axis` reshaped to [C, 1, ..., 1];
// with `block_size` (opset 21+, blocked quantization) a tensor of x's rank
// whose dim `axis` holds ceil(D / block_size) blocks, each value repeated
// block_size times along that axis (and the last block cut to D).
Value* along_axis(ImportContext& c, Value* v, int64_t axis, const Value* x, int64_t block_size, const char* what) {
  int rank = x->type().rank();
  if (block_size < 0) c.fail("block_size {} is negative", block_size);
  if (block_size == 0 && v->type().rank() == 0) return v;
  int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  if (block_size == 0) {
    if (v->type().rank() != 1)
      c.fail("{} has rank {}; without block_size it must be a scalar or 1-D", what, v->type().rank());
    if (v->shape()[0] == 1) return reshaped(c, v, {});  // one value: per tensor, whatever the axis
    if (a < 0 || a >= rank) c.fail("axis {} is out of range for an input of rank {}", axis, rank);
    if (v->shape()[0] != x->shape()[a] && v->shape()[0] != 1)
      c.fail("{} has {} values but axis {} of the input has {}", what, v->shape()[0], axis, x->shape()[a]);
    Shape s(static_cast<size_t>(rank - a), 1);
    s[0] = v->shape()[0];
    return reshaped(c, v, s);
  }
  if (a < 0 || a >= rank) c.fail("axis {} is out of range for an input of rank {}", axis, rank);
  const Shape& xs = x->shape();
  const Shape& vs = v->shape();
  const int64_t blocks = (xs[a] + block_size - 1) / block_size;
  Shape want = xs;
  want[a] = blocks;
  if (vs != want)
    c.fail("{} has shape [{}]; with block_size {} along axis {} of an input [{}] it must be [{}]", what,
           fmt::join(vs, ","), block_size, axis, fmt::join(xs, ","), fmt::join(want, ","));
  Shape split = vs;  // [.., blocks, 1, ..] -> [.., blocks, block_size, ..] -> [.., blocks * block_size, ..]
  split.insert(split.begin() + a + 1, 1);
  Value* r = reshaped(c, v, split);
  split[a + 1] = block_size;
  AttrMap ea;
  ea.set("shape", std::vector<int64_t>(split));
  r = c.emit1("expand", {r}, ea);
  Shape merged = vs;
  merged[a] = blocks * block_size;
  AttrMap ra;
  ra.set("shape", std::vector<int64_t>(merged));
  r = c.emit1("reshape", {r}, ra);
  if (merged[a] != xs[a]) {
    ops::SliceSpec sl = ops::canonical_slice(merged, {0}, {xs[a]}, {a}, {1});
    AttrMap sa;
    sa.set("starts", sl.starts);
    sa.set("ends", sl.ends);
    sa.set("steps", sl.steps);
    r = c.emit1("slice", {r}, sa);
  }
  return r;
}

void quantize(ImportContext& c) {
  Value* x = c.input(0);
  int64_t axis = c.attrs().get_int("axis", 1);
  int64_t block_size = c.attrs().get_int("block_size", 0);
  DType q = DType::U8;
  if (c.attrs().has("output_dtype") && c.attrs().get_int("output_dtype", 0) != 0)
    q = dtype_from_onnx(static_cast<int>(c.attrs().get_int("output_dtype", 0)), c.label());
  Value* zp;  // an absent zero point is one scalar 0, whatever the scale's form
  if (c.has_input(2)) {
    zp = c.input(2);
    if (c.attrs().has("output_dtype") && c.attrs().get_int("output_dtype", 0) != 0 && zp->dtype() != q)
      c.fail("output_dtype {} differs from the zero point's dtype {}", dtype_name(q), dtype_name(zp->dtype()));
    zp = along_axis(c, zp, axis, x, block_size, "zero point");
  } else {
    zp = c.constant(Tensor(q, {}), "zero_point");
  }
  AttrMap attrs;
  // `saturate` (opset 19+) only matters for float8 outputs.
  if (c.attrs().get_int("saturate", 1) == 0) attrs.set("saturate", int64_t(0));
  // `precision` (opset 23+): the type x / y_scale is computed in.
  if (int64_t p = c.attrs().get_int("precision", 0); p != 0) {
    DType pd = dtype_from_onnx(static_cast<int>(p), c.label());
    if (!is_float(pd)) c.fail("precision {} is not a floating type", dtype_name(pd));
    attrs.set("precision", std::string(dtype_name(pd)));
  }
  Value* scale = along_axis(c, c.input(1), axis, x, block_size, "scale");
  c.set_outputs({c.emit1("quantize_linear", {x, scale, zp}, attrs)});
}

void dequantize(ImportContext& c) {
  Value* x = c.input(0);
  int64_t axis = c.attrs().get_int("axis", 1);
  int64_t block_size = c.attrs().get_int("block_size", 0);
  Value* zp = c.has_input(2) ? along_axis(c, c.input(2), axis, x, block_size, "zero point")
                             : c.constant(Tensor(x->dtype(), {}), "zero_point");
  Value* scale = along_axis(c, c.input(1), axis, x, block_size, "scale");
  Value* y = c.emit1("dequantize_linear", {x, scale, zp});
  // `output_dtype` (opset 23+): the result's type, by default the scale's.
  if (int64_t od = c.attrs().get_int("output_dtype", 0); od != 0) {
    DType want = dtype_from_onnx(static_cast<int>(od), c.label());
    if (!is_float(want)) c.fail("output_dtype {} is not a floating type", dtype_name(want));
    if (want != y->dtype()) y = c.emit1("cast", {y}, cast_attrs(want));
  }
  c.set_outputs({y});
}

}  // namespace

void register_elementwise(AdapterTable& t) {
  const std::pair<const char*, const char*> unary[] = {
      {"Neg", "neg"},
      {"Abs", "abs"},
      {"Reciprocal", "reciprocal"},
      {"Floor", "floor"},
      {"Ceil", "ceil"},
      {"Round", "round"},
      {"Sign", "sign"},
      {"Sqrt", "sqrt"},
      {"Exp", "exp"},
      {"Log", "log"},
      {"Sin", "sin"},
      {"Cos", "cos"},
      {"Tan", "tan"},
      {"Asin", "asin"},
      {"Acos", "acos"},
      {"Atan", "atan"},
      {"Sinh", "sinh"},
      {"Cosh", "cosh"},
      {"Tanh", "tanh"},
      {"Asinh", "asinh"},
      {"Acosh", "acosh"},
      {"Atanh", "atanh"},
      {"Erf", "erf"},
      {"Sigmoid", "sigmoid"},
      {"HardSigmoid", "hard_sigmoid"},
      {"HardSwish", "hard_swish"},
      {"Relu", "relu"},
      {"LeakyRelu", "leaky_relu"},
      {"Elu", "elu"},
      {"Selu", "selu"},
      {"Celu", "celu"},
      {"ThresholdedRelu", "thresholded_relu"},
      {"Softplus", "softplus"},
      {"Softsign", "softsign"},
      {"Mish", "mish"},
      {"Gelu", "gelu"},
      {"Shrink", "shrink"},
      {"Not", "not"},
      {"IsNaN", "isnan"},
      {"IsInf", "isinf"},
      {"BitwiseNot", "bitwise_not"},
      {"Where", "where"},
  };
  for (auto& [onnx_op, kiln_op] : unary) t.add(onnx_op, direct(kiln_op));
  // Identity also passes a sequence or an optional through (they are
  // unrolled at import, adapters_sequence.cpp).
  t.add("Identity", [](ImportContext& c) {
    if (c.num_inputs() == 1 && !c.operand(0).is_tensor()) return c.set_output_values({c.operand(0)});
    if (c.num_inputs() == 1 && c.input(0)->dtype() == DType::String)  // a copy; identity is a numeric Expr
      return c.set_outputs({c.emit1("cast_string", {c.input(0)}, cast_attrs(DType::String))});
    direct("identity")(c);
  });

  const std::pair<const char*, const char*> binaries[] = {
      {"Add", "add"},
      {"Sub", "sub"},
      {"Mul", "mul"},
      {"Div", "div"},
      {"Pow", "pow"},
      {"And", "and"},
      {"Or", "or"},
      {"Xor", "xor"},
      {"Less", "less"},
      {"Greater", "greater"},
      {"LessOrEqual", "less_or_equal"},
      {"GreaterOrEqual", "greater_or_equal"},
      {"BitwiseAnd", "bitwise_and"},
      {"BitwiseOr", "bitwise_or"},
      {"BitwiseXor", "bitwise_xor"},
  };
  for (auto& [onnx_op, kiln_op] : binaries) t.add(onnx_op, binary(kiln_op));
  // Equal also compares strings (opset 19+), by their bytes.
  t.add("Equal", [](ImportContext& c) {
    if (c.num_inputs() == 2 && c.input(0)->dtype() == DType::String) {
      c.only_attrs({});
      return c.set_outputs({c.emit1("string_equal", {c.input(0), c.input(1)})});
    }
    binary("equal")(c);
  });

  t.add("Max", variadic("max", false));
  t.add("Min", variadic("min", false));
  t.add("Sum", variadic("add", false));
  t.add("Mean", variadic("add", true));
  t.add("Mod", mod);
  t.add("BitShift", bit_shift);
  t.add("PRelu", prelu);
  t.add("Clip", clip);
  t.add("Cast", cast);
  t.add("CastLike", cast_like);
  t.add("Dropout", dropout);
  t.add("QuantizeLinear", quantize);
  t.add("DequantizeLinear", dequantize);
}

}  // namespace kiln::adapters
