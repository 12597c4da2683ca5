// Elementwise ops, part 2: activations. Each is a scalar Expr built from the
// ExprOps of ir/expr.h; attributes are ONNX's, with ONNX's defaults.
#include <cmath>

#include "ops/elementwise_parts.h"

namespace kiln::ops {

namespace {

using A = const AttrMap&;

float attr(A a, const char* name, float dflt) { return a.get_float(name, dflt); }

// Numerically stable logistic: exp never overflows to inf/inf.
E sigmoid(ExprBuilder& b, E x) {
  E pos = b.div(b.one(x), b.add(b.one(x), b.exp(b.neg(x))));
  E ex = b.exp(x);
  E neg = b.div(ex, b.add(b.one(x), ex));
  return b.select(b.ge(x, b.zero(x)), pos, neg);
}

// log(1 + exp(x)) as max(x, 0) + log(1 + exp(-|x|)): no overflow for large x.
E softplus(ExprBuilder& b, E x) { return b.add(b.max(x, b.zero(x)), b.log(b.add(b.one(x), b.exp(b.neg(b.abs(x)))))); }

// max(0, min(1, alpha * x + beta))
E hard_sigmoid(ExprBuilder& b, E x, float alpha, float beta) {
  E lin = b.add(b.mul(b.cnst(alpha, x), x), b.cnst(beta, x));
  return b.max(b.zero(x), b.min(b.one(x), lin));
}

E gelu(ExprBuilder& b, E x, const std::string& approximate) {
  E half_x = b.mul(b.cnst(0.5, x), x);
  if (approximate == "tanh") {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    E cube = b.mul(b.mul(x, x), x);
    E inner = b.mul(b.cnst(std::sqrt(2.0 / M_PI), x), b.add(x, b.mul(b.cnst(0.044715, x), cube)));
    return b.mul(half_x, b.add(b.one(x), b.tanh(inner)));
  }
  // 0.5 x (1 + erf(x / sqrt(2)))
  return b.mul(half_x, b.add(b.one(x), b.erf(b.mul(x, b.cnst(M_SQRT1_2, x)))));
}

// y = x < -lambd ? x + bias : x > lambd ? x - bias : 0, computed in floating
// point (integer operands in f64, then truncated back).
E shrink(ExprBuilder& b, E x, float bias, float lambd) {
  DType out = x.dtype;
  if (!is_float(out)) x = b.cast(x, DType::F64);
  E lo = b.add(x, b.cnst(bias, x));
  E hi = b.sub(x, b.cnst(bias, x));
  E r = b.select(b.lt(x, b.cnst(-double(lambd), x)), lo, b.select(b.gt(x, b.cnst(lambd, x)), hi, b.zero(x)));
  return b.cast(r, out);
}

OpDef prelu_op() {
  OpDef d;
  d.name = "prelu";
  d.category = OpCategory::Pointwise;
  d.min_inputs = d.max_inputs = 2;
  d.infer = [](InferContext& c) {
    require_kinds(c, 0, kNumeric);
    require_same_dtype(c);
    std::vector<TensorType> r = broadcast_result(c);
    if (r[0].shape != c.shape(0))
      c.fail("slope {} does not broadcast to the input's shape {} (the input may not grow)", c.type(1).str(),
             c.type(0).str());
    return r;
  };
  d.expr = [](ExprBuilder& b, A) {
    E x = b.input(0), s = b.input(1);
    return b.finish(b.select(b.lt(x, b.zero(x)), b.mul(s, x), x), b.input_dtype(0));
  };
  d.doc = "x < 0 ? slope * x : x, slope broadcast to x (per channel: slope [C,1,1])";
  return d;
}

}  // namespace

void register_activation_ops(OpRegistry& r) {
  const AttrKind F = AttrKind::Float;
  r.add(unary_op(
      "relu", kNumeric, {}, [](ExprBuilder& b, E x, A) { return b.max(x, b.zero(x)); }, "max(x, 0); NaN stays NaN"));
  r.add(unary_op(
      "leaky_relu", kFloatKind, {{"alpha", F}},
      [](ExprBuilder& b, E x, A a) {
        return b.select(b.lt(x, b.zero(x)), b.mul(x, b.cnst(attr(a, "alpha", 0.01f), x)), x);
      },
      "x < 0 ? alpha * x : x (alpha = 0.01)"));
  r.add(prelu_op());
  r.add(unary_op(
      "sigmoid", kFloatKind, {}, [](ExprBuilder& b, E x, A) { return sigmoid(b, x); }, "1 / (1 + exp(-x))"));
  r.add(unary_op(
      "hard_sigmoid", kFloatKind, {{"alpha", F}, {"beta", F}},
      [](ExprBuilder& b, E x, A a) { return hard_sigmoid(b, x, attr(a, "alpha", 0.2f), attr(a, "beta", 0.5f)); },
      "max(0, min(1, alpha * x + beta)) (alpha = 0.2, beta = 0.5)"));
  r.add(unary_op(
      "hard_swish", kFloatKind, {}, [](ExprBuilder& b, E x, A) { return b.mul(x, hard_sigmoid(b, x, 1.0f / 6, 0.5f)); },
      "x * max(0, min(1, x / 6 + 0.5))"));
  r.add(unary_op(
      "elu", kFloatKind, {{"alpha", F}},
      [](ExprBuilder& b, E x, A a) {
        E neg = b.mul(b.cnst(attr(a, "alpha", 1.0f), x), b.sub(b.exp(x), b.one(x)));
        return b.select(b.lt(x, b.zero(x)), neg, x);
      },
      "x < 0 ? alpha * (exp(x) - 1) : x (alpha = 1)"));
  r.add(unary_op(
      "selu", kFloatKind, {{"alpha", F}, {"gamma", F}},
      [](ExprBuilder& b, E x, A a) {
        E alpha = b.cnst(attr(a, "alpha", 1.67326319217681884765625f), x);
        E gamma = b.cnst(attr(a, "gamma", 1.05070102214813232421875f), x);
        E neg = b.mul(gamma, b.sub(b.mul(alpha, b.exp(x)), alpha));
        return b.select(b.gt(x, b.zero(x)), b.mul(gamma, x), neg);
      },
      "x > 0 ? gamma * x : gamma * (alpha * exp(x) - alpha) (alpha = 1.6733, gamma = 1.0507)"));
  OpDef celu = unary_op(
      "celu", kFloatKind, {{"alpha", F}},
      [](ExprBuilder& b, E x, A a) {
        E alpha = b.cnst(attr(a, "alpha", 1.0f), x);
        E neg = b.mul(alpha, b.sub(b.exp(b.div(x, alpha)), b.one(x)));
        return b.add(b.max(b.zero(x), x), b.min(b.zero(x), neg));
      },
      "max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) (alpha = 1)");
  celu.infer = [inner = celu.infer](InferContext& c) {
    if (c.attrs().get_float("alpha", 1.0f) == 0.0f) c.fail("alpha must not be 0");
    return inner(c);
  };
  r.add(std::move(celu));
  r.add(unary_op(
      "thresholded_relu", kFloatKind, {{"alpha", F}},
      [](ExprBuilder& b, E x, A a) { return b.select(b.gt(x, b.cnst(attr(a, "alpha", 1.0f), x)), x, b.zero(x)); },
      "x > alpha ? x : 0 (alpha = 1)"));
  r.add(unary_op(
      "softplus", kFloatKind, {}, [](ExprBuilder& b, E x, A) { return softplus(b, x); }, "log(1 + exp(x))"));
  r.add(unary_op(
      "softsign", kFloatKind, {}, [](ExprBuilder& b, E x, A) { return b.div(x, b.add(b.one(x), b.abs(x))); },
      "x / (1 + |x|)"));
  r.add(unary_op(
      "mish", kFloatKind, {}, [](ExprBuilder& b, E x, A) { return b.mul(x, b.tanh(softplus(b, x))); },
      "x * tanh(log(1 + exp(x)))"));
  OpDef g = unary_op(
      "gelu", kFloatKind, {{"approximate", AttrKind::String}},
      [](ExprBuilder& b, E x, A a) { return gelu(b, x, a.get_string("approximate", "none")); },
      "0.5 x (1 + erf(x / sqrt 2)); approximate=\"tanh\": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))");
  g.infer = [inner = g.infer](InferContext& c) {
    std::string ap = c.attrs().get_string("approximate", "none");
    if (ap != "none" && ap != "tanh") c.fail("approximate must be \"none\" or \"tanh\", not \"{}\"", ap);
    return inner(c);
  };
  r.add(std::move(g));
  OpDef s = unary_op(
      "shrink", kNumeric, {{"bias", F}, {"lambd", F}},
      [](ExprBuilder& b, E x, A a) { return shrink(b, x, attr(a, "bias", 0.0f), attr(a, "lambd", 0.5f)); },
      "x < -lambd ? x + bias : x > lambd ? x - bias : 0 (bias = 0, lambd = 0.5)");
  r.add(std::move(s));
}

}  // namespace kiln::ops
