// Elementwise ops, part 1: the family's entry point and shared builders,
// binary arithmetic and unary math. Each op is a scalar Expr (ir/expr.h);
// broadcasting is numpy-style. See elementwise_parts.h for the other parts.
#include "ops/elementwise_parts.h"
#include "ops/families.h"

namespace kiln::ops {

void require_kinds(InferContext& c, int i, unsigned kinds) {
  DType t = c.dtype(i);
  unsigned k = is_float(t)          ? kFloatKind
               : is_signed_int(t)   ? kSignedKind
               : is_unsigned_int(t) ? kUnsignedKind
               : is_low_bit(t)      ? kLowBitKind
                                    : kBoolKind;
  if (k & kinds) return;
  std::string want;
  auto add = [&](unsigned bit, const char* what) {
    if (!(kinds & bit)) return;
    if (!want.empty()) want += ", ";
    want += what;
  };
  add(kFloatKind, "floating");
  add(kSignedKind, "signed integer");
  add(kUnsignedKind, "unsigned integer");
  add(kBoolKind, "bool");
  add(kLowBitKind, "low-bit");
  c.unsupported("operand {} has dtype {}; kiln's {} takes {} dtypes only", i, dtype_name(t), c.op(), want);
}

OpDef unary_op(std::string name, unsigned kinds, std::vector<AttrSpec> attrs, UnaryBody body, std::string doc) {
  OpDef d;
  d.name = std::move(name);
  d.category = OpCategory::Pointwise;
  d.symbolic_dims = true;  // same shape as operand 0, or broadcast
  d.attrs = std::move(attrs);
  d.infer = [kinds](InferContext& c) {
    require_kinds(c, 0, kinds);
    return same_as_input0(c);
  };
  d.expr = [body = std::move(body)](ExprBuilder& b, const AttrMap& a) {
    return b.finish(body(b, b.input(0), a), b.input_dtype(0));
  };
  d.doc = std::move(doc);
  return d;
}

OpDef binary_op(std::string name, unsigned kinds, BinaryBody body, std::string doc, bool bool_result) {
  OpDef d;
  d.name = std::move(name);
  d.category = OpCategory::Pointwise;
  d.symbolic_dims = true;  // same shape as operand 0, or broadcast
  d.min_inputs = d.max_inputs = 2;
  d.infer = [kinds, bool_result](InferContext& c) {
    require_kinds(c, 0, kinds);
    require_same_dtype(c);
    return broadcast_result(c, bool_result ? std::optional<DType>(DType::Bool) : std::nullopt);
  };
  d.expr = [body = std::move(body), bool_result](ExprBuilder& b, const AttrMap& a) {
    return b.finish(body(b, b.input(0), b.input(1), a), bool_result ? DType::Bool : b.input_dtype(0));
  };
  d.doc = std::move(doc);
  return d;
}

namespace {

OpDef arith(std::string name, ExprOp op, unsigned kinds, std::string doc) {
  return binary_op(
      std::move(name), kinds, [op](ExprBuilder& b, E x, E y, const AttrMap&) { return b.binary(op, x, y); },
      std::move(doc));
}

OpDef math1(std::string name, ExprOp op, unsigned kinds, std::string doc) {
  return unary_op(
      std::move(name), kinds, {}, [op](ExprBuilder& b, E x, const AttrMap&) { return b.unary(op, x); }, std::move(doc));
}

// pow: base and exponent may have different dtypes; the result has the base's.
OpDef pow_op() {
  OpDef d;
  d.name = "pow";
  d.category = OpCategory::Pointwise;
  d.symbolic_dims = true;  // same shape as operand 0, or broadcast
  d.min_inputs = d.max_inputs = 2;
  d.infer = [](InferContext& c) {
    require_kinds(c, 0, kNumeric);
    require_kinds(c, 1, kNumeric);
    return broadcast_result(c);
  };
  d.expr = [](ExprBuilder& b, const AttrMap&) { return b.finish(b.pow(b.input(0), b.input(1)), b.input_dtype(0)); };
  d.doc = "a ** b; the exponent may have another dtype, the result has the base's (integer results truncate)";
  return d;
}

}  // namespace

void register_elementwise_math(OpRegistry& r) {
  r.add(arith("add", ExprOp::Add, kNumeric, "a + b (integers wrap)"));
  r.add(arith("sub", ExprOp::Sub, kNumeric, "a - b (integers wrap)"));
  r.add(arith("mul", ExprOp::Mul, kNumeric, "a * b (integers wrap)"));
  r.add(arith("div", ExprOp::Div, kNumeric, "a / b; integers truncate toward zero (x / 0 gives 0)"));
  r.add(arith("mod", ExprOp::Mod, kNumeric, "remainder with the divisor's sign, as Python's % (x % 0 gives 0)"));
  r.add(arith("fmod", ExprOp::FMod, kNumeric, "remainder with the dividend's sign, as C's fmod and % (x % 0 gives 0)"));
  r.add(arith("max", ExprOp::Max, kNumeric, "larger of a and b; NaN if either is NaN"));
  r.add(arith("min", ExprOp::Min, kNumeric, "smaller of a and b; NaN if either is NaN"));
  r.add(pow_op());

  r.add(math1("neg", ExprOp::Neg, kSignedNumeric, "-x (integers wrap)"));
  r.add(math1("abs", ExprOp::Abs, kNumeric, "|x| (integers wrap)"));
  r.add(math1("sign", ExprOp::Sign, kNumeric, "-1, 0 or 1 by the sign of x; NaN stays NaN"));
  r.add(math1("reciprocal", ExprOp::Recip, kFloatKind, "1 / x"));
  r.add(math1("floor", ExprOp::Floor, kFloatKind, "largest integer <= x"));
  r.add(math1("ceil", ExprOp::Ceil, kFloatKind, "smallest integer >= x"));
  r.add(math1("round", ExprOp::Round, kFloatKind, "nearest integer, ties to even"));
  r.add(math1("sqrt", ExprOp::Sqrt, kFloatKind, "square root"));
  r.add(math1("exp", ExprOp::Exp, kFloatKind, "e ** x"));
  r.add(math1("log", ExprOp::Log, kFloatKind, "natural logarithm"));
  r.add(math1("sin", ExprOp::Sin, kFloatKind, "sine"));
  r.add(math1("cos", ExprOp::Cos, kFloatKind, "cosine"));
  r.add(math1("tan", ExprOp::Tan, kFloatKind, "tangent"));
  r.add(math1("asin", ExprOp::Asin, kFloatKind, "arcsine"));
  r.add(math1("acos", ExprOp::Acos, kFloatKind, "arccosine"));
  r.add(math1("atan", ExprOp::Atan, kFloatKind, "arctangent"));
  r.add(math1("sinh", ExprOp::Sinh, kFloatKind, "hyperbolic sine"));
  r.add(math1("cosh", ExprOp::Cosh, kFloatKind, "hyperbolic cosine"));
  r.add(math1("tanh", ExprOp::Tanh, kFloatKind, "hyperbolic tangent"));
  r.add(math1("asinh", ExprOp::Asinh, kFloatKind, "inverse hyperbolic sine"));
  r.add(math1("acosh", ExprOp::Acosh, kFloatKind, "inverse hyperbolic cosine"));
  r.add(math1("atanh", ExprOp::Atanh, kFloatKind, "inverse hyperbolic tangent"));
  r.add(math1("erf", ExprOp::Erf, kFloatKind, "error function"));
}

void register_elementwise_ops(OpRegistry& r) {
  register_elementwise_math(r);
  register_activation_ops(r);
  register_elementwise_logic(r);
}

}  // namespace kiln::ops
