#include "ir/expr.h"

#include <fmt/format.h>

#include "ir/attribute.h"
#include "ir/error.h"

namespace kiln {

std::string_view expr_op_name(ExprOp op) {
  static constexpr std::string_view names[] = {
      "input", "const", "neg", "abs",    "exp",    "log",    "sqrt",     "recip",    "floor",  "ceil", "round",
      "sign",  "sin",   "cos", "tan",    "asin",   "acos",   "atan",     "sinh",     "cosh",   "tanh", "asinh",
      "acosh", "atanh", "erf", "not",    "bitnot", "isnan",  "isposinf", "isneginf", "add",    "sub",  "mul",
      "div",   "pow",   "max", "min",    "mod",    "fmod",   "eq",       "lt",       "le",     "gt",   "ge",
      "and",   "or",    "xor", "bitand", "bitor",  "bitxor", "shl",      "shr",      "select", "cast", "bitcast"};
  return names[static_cast<int>(op)];
}

std::string Expr::str() const {
  std::vector<std::string> s(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ExprNode& n = nodes[i];
    switch (n.op) {
      case ExprOp::Input:
        s[i] = fmt::format("in{}", n.input);
        break;
      case ExprOp::Const:
        s[i] = double_repr(n.value);
        break;
      case ExprOp::Cast:
        s[i] = fmt::format("{}({})", dtype_name(n.dtype), s[n.a]);
        break;
      case ExprOp::BitCast:
        s[i] = fmt::format("bitcast<{}>({})", dtype_name(n.dtype), s[n.a]);
        break;
      case ExprOp::Select:
        s[i] = fmt::format("({} ? {} : {})", s[n.a], s[n.b], s[n.c]);
        break;
      default:
        if (n.b < 0) s[i] = fmt::format("{}({})", expr_op_name(n.op), s[n.a]);
        else s[i] = fmt::format("{}({}, {})", expr_op_name(n.op), s[n.a], s[n.b]);
    }
  }
  return s.back();
}

E ExprBuilder::push(ExprNode n) {
  nodes_.push_back(n);
  return E{static_cast<int>(nodes_.size()) - 1, n.dtype};
}

E ExprBuilder::input(int i) {
  KILN_CHECK(i >= 0 && i < num_inputs(), "expr input {} of {}", i, num_inputs());
  return push({ExprOp::Input, in_[i], -1, -1, -1, i, 0});
}

E ExprBuilder::constant(double v, DType dtype) { return push({ExprOp::Const, dtype, -1, -1, -1, -1, v}); }

E ExprBuilder::unary(ExprOp op, E a) {
  DType t = a.dtype;
  if (op == ExprOp::Not || op == ExprOp::IsNan || op == ExprOp::IsPosInf || op == ExprOp::IsNegInf) t = DType::Bool;
  return push({op, t, a.id});
}

E ExprBuilder::binary(ExprOp op, E a, E b) {
  DType t = a.dtype;
  switch (op) {
    case ExprOp::Eq:
    case ExprOp::Lt:
    case ExprOp::Le:
    case ExprOp::Gt:
    case ExprOp::Ge:
    case ExprOp::And:
    case ExprOp::Or:
    case ExprOp::Xor:
      t = DType::Bool;
      break;
    default:
      break;
  }
  return push({op, t, a.id, b.id});
}

E ExprBuilder::select(E cond, E a, E b) { return push({ExprOp::Select, a.dtype, cond.id, a.id, b.id}); }

E ExprBuilder::cast(E a, DType to, bool saturate, int round_mode) {
  if (a.dtype == to) return a;
  ExprNode n{ExprOp::Cast, to, a.id};
  n.saturate = saturate;
  n.round_mode = static_cast<uint8_t>(round_mode);
  return push(n);
}

E ExprBuilder::bitcast(E a, DType to) {
  if (a.dtype == to) return a;
  return push({ExprOp::BitCast, to, a.id});
}

Expr ExprBuilder::finish(E result, DType out) {
  KILN_CHECK(result.id >= 0, "empty expression");
  if (result.id != static_cast<int>(nodes_.size()) - 1 || result.dtype != out) {
    // Make the result the last node; a Cast also serves as a copy.
    nodes_.push_back({ExprOp::Cast, out, result.id});
  }
  Expr e;
  e.nodes = std::move(nodes_);
  nodes_.clear();
  return e;
}

}  // namespace kiln
