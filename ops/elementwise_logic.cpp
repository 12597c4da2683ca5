// Elementwise ops, part 3: comparisons, logic, bitwise ops, where, clip,
// cast, identity and linear (de)quantization.
#include <limits>

#include "ir/low_bit.h"
#include "ops/elementwise_parts.h"

namespace kiln::ops {

namespace {

using A = const AttrMap&;

OpDef compare(std::string name, ExprOp op, unsigned kinds, std::string doc) {
  return binary_op(
      std::move(name), kinds, [op](ExprBuilder& b, E x, E y, A) { return b.binary(op, x, y); }, std::move(doc),
      /*bool_result=*/true);
}

OpDef bitwise(std::string name, ExprOp op, unsigned kinds, std::string doc) {
  return binary_op(
      std::move(name), kinds, [op](ExprBuilder& b, E x, E y, A) { return b.binary(op, x, y); }, std::move(doc));
}

// A unary test on floats giving bool.
OpDef predicate(std::string name, std::vector<AttrSpec> attrs, UnaryBody body, std::string doc) {
  OpDef d;
  d.name = std::move(name);
  d.category = OpCategory::Pointwise;
  d.symbolic_dims = true;  // same shape as operand 0, or broadcast
  d.attrs = std::move(attrs);
  d.infer = [](InferContext& c) {
    require_kinds(c, 0, kFloatKind);
    return std::vector<TensorType>{TensorType(DType::Bool, c.shape(0))};
  };
  d.expr = [body = std::move(body)](ExprBuilder& b, A a) { return b.finish(body(b, b.input(0), a), DType::Bool); };
  d.doc = std::move(doc);
  return d;
}

OpDef where_op() {
  OpDef d;
  d.name = "where";
  d.category = OpCategory::Pointwise;
  d.symbolic_dims = true;  // same shape as operand 0, or broadcast
  d.min_inputs = d.max_inputs = 3;
  d.infer = [](InferContext& c) {
    if (c.dtype(0) != DType::Bool) c.fail("condition is {}; it must be bool", dtype_name(c.dtype(0)));
    if (c.dtype(1) != c.dtype(2))
      c.fail("operands 1 and 2 must have one dtype, got {} and {}", dtype_name(c.dtype(1)), dtype_name(c.dtype(2)));
    return broadcast_result(c, c.dtype(1));
  };
  d.expr = [](ExprBuilder& b, A) { return b.finish(b.select(b.input(0), b.input(1), b.input(2)), b.input_dtype(1)); };
  d.doc = "cond ? a : b, all three broadcast";
  return d;
}

OpDef clip_op() {
  OpDef d;
  d.name = "clip";
  d.category = OpCategory::Pointwise;
  d.symbolic_dims = true;  // same shape as operand 0, or broadcast
  d.min_inputs = d.max_inputs = 3;
  d.infer = [](InferContext& c) {
    require_kinds(c, 0, kNumeric);
    require_same_dtype(c);
    std::vector<TensorType> r = broadcast_result(c);
    if (r[0].shape != c.shape(0))
      c.fail("bounds {} and {} do not broadcast to the input's shape {}", c.type(1).str(), c.type(2).str(),
             c.type(0).str());
    return r;
  };
  d.expr = [](ExprBuilder& b, A) {
    return b.finish(b.min(b.max(b.input(0), b.input(1)), b.input(2)), b.input_dtype(0));
  };
  d.doc = "min(max(x, lo), hi): hi wins when lo > hi; NaN stays NaN (an absent bound is the dtype's extreme)";
  return d;
}

// ONNX Cast's round_mode name -> E8M0Round (ir/low_bit.h).
int e8m0_round_mode(const std::string& m) { return m == "down" ? 1 : m == "nearest" ? 2 : 0; }

OpDef cast_op() {
  OpDef d;
  d.name = "cast";
  d.category = OpCategory::Pointwise;
  d.symbolic_dims = true;  // same shape as operand 0, or broadcast
  d.attrs = {{"to", AttrKind::String, true}, {"saturate", AttrKind::Int}, {"round_mode", AttrKind::String}};
  d.infer = [](InferContext& c) {
    std::string to = c.attrs().get_string("to", "");
    std::optional<DType> t = dtype_from_name(to);
    if (!t) c.fail("'to' is \"{}\", which is not a kiln dtype", to);
    std::string mode = c.attrs().get_string("round_mode", "up");
    if (mode != "up" && mode != "down" && mode != "nearest")
      c.fail("round_mode is \"{}\"; it must be \"up\", \"down\" or \"nearest\"", mode);
    return std::vector<TensorType>{TensorType(*t, c.shape(0))};
  };
  d.expr = [](ExprBuilder& b, A a) {
    DType to = *dtype_from_name(a.get_string("to", ""));
    bool saturate = a.get_int("saturate", 1) != 0;
    return b.finish(b.cast(b.input(0), to, saturate, e8m0_round_mode(a.get_string("round_mode", "up"))), to);
  };
  d.doc =
      "converts to dtype `to`: floats to integers truncate toward zero and saturate (NaN gives 0), integers wrap, "
      "to bool is x != 0, to f16/bf16 rounds to nearest even; to the low-bit types as ONNX's Cast: float8 and "
      "float4 round to nearest even, `saturate` (default 1) clamps float8 overflow to the largest finite value "
      "(0: Inf or NaN), float4e2m1 always saturates, f8e8m0 rounds by `round_mode` (up, down, nearest), floats to "
      "i4/u4/i2/u2 truncate and wrap";
  return d;
}

// Saturation range of a quantized integer dtype.
std::pair<double, double> int_range(DType t) {
  if (is_low_bit_int(t)) {
    auto [lo, hi] = low_bit_int_range(t);
    return {double(lo), double(hi)};
  }
  return dispatch_storage(t, [](auto z) -> std::pair<double, double> {
    using T = decltype(z);
    return {double(std::numeric_limits<T>::lowest()), double(std::numeric_limits<T>::max())};
  });
}

bool quantizable(DType q) {
  return (is_int(q) && q != DType::I64 && q != DType::U64) || (is_low_bit(q) && q != DType::F8E8M0);
}

// Integers: y = saturate(round_half_even(x / scale) + zero_point).
// float8: y = cast(x / scale) with ONNX Cast's `saturate` (the zero point,
// zero by the spec, only gives the type). float4e2m1: y = cast(x / scale +
// zero_point), which saturates. y has the zero point's dtype. The quotient is
// computed as onnx.reference does: in `precision` when given (x and the scale
// converted to it first), else in the operands' common type (f16 / bf16 when
// both are; f32 or f64 otherwise), rounded once to that type.
OpDef quantize_op() {
  OpDef d;
  d.name = "quantize_linear";
  d.category = OpCategory::Pointwise;
  d.min_inputs = d.max_inputs = 3;
  d.attrs = {{"saturate", AttrKind::Int}, {"precision", AttrKind::String}};
  d.infer = [](InferContext& c) {
    require_kinds(c, 0, kFloatKind | kSignedKind);
    require_kinds(c, 1, kFloatKind);
    DType q = c.dtype(2);
    if (!quantizable(q))
      c.unsupported("zero point has dtype {}; kiln quantizes to 2- to 32-bit integers, float8 and float4e2m1",
                    dtype_name(q));
    std::string p = c.attrs().get_string("precision", "");
    if (!p.empty() && (!dtype_from_name(p) || !is_float(*dtype_from_name(p))))
      c.fail("precision is \"{}\", which is not a floating dtype", p);
    std::vector<TensorType> r = broadcast_result(c, q);
    if (r[0].shape != c.shape(0))
      c.fail("scale {} and zero point {} do not broadcast to the input's shape {}", c.type(1).str(), c.type(2).str(),
             c.type(0).str());
    return r;
  };
  d.expr = [](ExprBuilder& b, A a) {
    DType xd = b.input_dtype(0), sd = b.input_dtype(1), q = b.input_dtype(2);
    DType cd = xd == DType::F64 || sd == DType::F64 ? DType::F64 : DType::F32;
    DType qt = cd;  // the quotient's type
    if (std::string p = a.get_string("precision", ""); !p.empty()) qt = *dtype_from_name(p);
    else if (xd == sd && (xd == DType::F16 || xd == DType::BF16)) qt = xd;
    const DType wide = qt == DType::F64 ? DType::F64 : DType::F32;
    E x = b.cast(b.cast(b.input(0), qt), wide), s = b.cast(b.cast(b.input(1), qt), wide);
    E v = b.cast(b.cast(b.div(x, s), qt), cd);
    if (is_low_bit_float(q)) {
      if (q == DType::F4E2M1) v = b.add(v, b.cast(b.input(2), cd));
      return b.finish(b.cast(v, q, a.get_int("saturate", 1) != 0), q);
    }
    v = b.add(b.unary(ExprOp::Round, v), b.cast(b.input(2), cd));
    auto [lo, hi] = int_range(q);
    v = b.min(b.max(v, b.cnst(lo, v)), b.cnst(hi, v));
    return b.finish(b.cast(v, q), q);
  };
  d.doc =
      "integers: saturate(round_half_even(x / scale) + zero_point); float8: cast(x / scale) with `saturate`; "
      "float4e2m1: cast(x / scale + zero_point); in the zero point's dtype, the quotient in `precision` or the "
      "operands' type";
  return d;
}

// y = (x - zero_point) * scale (a float8 / float4 x: x * scale, its zero
// point being zero by the spec); y has the scale's dtype.
OpDef dequantize_op() {
  OpDef d;
  d.name = "dequantize_linear";
  d.category = OpCategory::Pointwise;
  d.min_inputs = d.max_inputs = 3;
  d.infer = [](InferContext& c) {
    require_kinds(c, 0, kIntKinds | kLowBitKind);
    require_kinds(c, 1, kFloatKind);
    if (c.dtype(0) == DType::F8E8M0) c.unsupported("float8e8m0 input is not a quantized type");
    if (c.dtype(2) != c.dtype(0))
      c.fail("zero point is {} but the input is {}", dtype_name(c.dtype(2)), dtype_name(c.dtype(0)));
    std::vector<TensorType> r = broadcast_result(c, c.dtype(1));
    if (r[0].shape != c.shape(0))
      c.fail("scale {} and zero point {} do not broadcast to the input's shape {}", c.type(1).str(), c.type(2).str(),
             c.type(0).str());
    return r;
  };
  d.expr = [](ExprBuilder& b, A) {
    DType out = b.input_dtype(1);
    DType cd = out == DType::F64 ? DType::F64 : DType::F32;
    E diff = is_low_bit_float(b.input_dtype(0))
                 ? b.cast(b.input(0), cd)
                 : b.cast(b.sub(b.cast(b.input(0), DType::I64), b.cast(b.input(2), DType::I64)), cd);  // exact
    E v = b.mul(diff, b.cast(b.input(1), cd));
    return b.finish(v, out);
  };
  d.doc = "(x - zero_point) * scale, in the scale's dtype (float8/float4 x: x * scale)";
  return d;
}

}  // namespace

void register_elementwise_logic(OpRegistry& r) {
  r.add(compare("equal", ExprOp::Eq, kAnyKind, "a == b"));
  r.add(compare("less", ExprOp::Lt, kNumeric, "a < b"));
  r.add(compare("less_or_equal", ExprOp::Le, kNumeric, "a <= b"));
  r.add(compare("greater", ExprOp::Gt, kNumeric, "a > b"));
  r.add(compare("greater_or_equal", ExprOp::Ge, kNumeric, "a >= b"));

  r.add(unary_op(
      "not", kBoolKind, {}, [](ExprBuilder& b, E x, A) { return b.unary(ExprOp::Not, x); }, "logical not"));
  r.add(compare("and", ExprOp::And, kBoolKind, "logical and"));
  r.add(compare("or", ExprOp::Or, kBoolKind, "logical or"));
  r.add(compare("xor", ExprOp::Xor, kBoolKind, "logical xor"));

  r.add(bitwise("bitwise_and", ExprOp::BitAnd, kIntKinds, "a & b"));
  r.add(bitwise("bitwise_or", ExprOp::BitOr, kIntKinds, "a | b"));
  r.add(bitwise("bitwise_xor", ExprOp::BitXor, kIntKinds, "a ^ b"));
  r.add(unary_op(
      "bitwise_not", kIntKinds, {}, [](ExprBuilder& b, E x, A) { return b.unary(ExprOp::BitNot, x); }, "~x"));
  r.add(bitwise("bit_shift_left", ExprOp::Shl, kUnsignedKind, "a << b (0 when b >= the bit width)"));
  r.add(bitwise("bit_shift_right", ExprOp::Shr, kUnsignedKind, "a >> b (0 when b >= the bit width)"));

  r.add(predicate(
      "isnan", {}, [](ExprBuilder& b, E x, A) { return b.unary(ExprOp::IsNan, x); }, "x is NaN"));
  r.add(predicate(
      "isinf", {{"detect_positive", AttrKind::Int}, {"detect_negative", AttrKind::Int}},
      [](ExprBuilder& b, E x, A a) {
        bool pos = a.get_int("detect_positive", 1) != 0, neg = a.get_int("detect_negative", 1) != 0;
        if (pos && neg) return b.binary(ExprOp::Or, b.unary(ExprOp::IsPosInf, x), b.unary(ExprOp::IsNegInf, x));
        if (pos) return b.unary(ExprOp::IsPosInf, x);
        if (neg) return b.unary(ExprOp::IsNegInf, x);
        return b.constant(0, DType::Bool);
      },
      "x is +inf (if detect_positive) or -inf (if detect_negative); both default to 1"));

  r.add(where_op());
  r.add(clip_op());
  r.add(cast_op());
  r.add(unary_op(
      "identity", kAnyKind | kLowBitKind, {}, [](ExprBuilder&, E x, A) { return x; }, "x"));
  r.add(quantize_op());
  r.add(dequantize_op());
}

}  // namespace kiln::ops
