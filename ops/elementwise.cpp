// Elementwise ops: math, activations, comparisons, logic, cast, where, clip.
// Each is a scalar Expr (see ir/expr.h); broadcasting is numpy-style.
#include "ops/families.h"
#include "ops/op_helpers.h"

namespace kiln::ops {

namespace {

// A binary arithmetic op with both operands of one dtype.
OpDef binary_arith(std::string name, ExprOp op, std::string doc) {
  OpDef d;
  d.name = std::move(name);
  d.category = OpCategory::Pointwise;
  d.min_inputs = d.max_inputs = 2;
  d.infer = [](InferContext& c) {
    require_same_dtype(c);
    return broadcast_result(c);
  };
  d.expr = [op](ExprBuilder& b, const AttrMap&) {
    E r = b.binary(op, b.input(0), b.input(1));
    return b.finish(r, b.input_dtype(0));
  };
  d.doc = std::move(doc);
  return d;
}

// A unary op on floats given by a builder function.
template <typename F>
OpDef unary_float(std::string name, std::vector<AttrSpec> attrs, F body, std::string doc) {
  OpDef d;
  d.name = std::move(name);
  d.category = OpCategory::Pointwise;
  d.attrs = std::move(attrs);
  d.infer = [](InferContext& c) {
    require_float(c, 0);
    return same_as_input0(c);
  };
  d.expr = [body](ExprBuilder& b, const AttrMap& a) { return b.finish(body(b, b.input(0), a), b.input_dtype(0)); };
  d.doc = std::move(doc);
  return d;
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  r.add(binary_arith("add", ExprOp::Add, "a + b"));
  r.add(binary_arith("sub", ExprOp::Sub, "a - b"));
  r.add(binary_arith("mul", ExprOp::Mul, "a * b"));
  r.add(binary_arith("div", ExprOp::Div, "a / b (integers truncate)"));
  r.add(unary_float("relu", {}, [](ExprBuilder& b, E x, const AttrMap&) { return b.max(x, b.zero(x)); },
                    "max(x, 0)"));
  r.add(unary_float("leaky_relu", {{"alpha", AttrKind::Float}},
                    [](ExprBuilder& b, E x, const AttrMap& a) {
                      return b.select(b.lt(x, b.zero(x)), b.mul(x, b.cnst(a.get_float("alpha", 0.01f), x)), x);
                    },
                    "x < 0 ? alpha * x : x"));
}

}  // namespace kiln::ops
