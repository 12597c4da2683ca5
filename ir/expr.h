// Scalar expressions: how a pointwise op says what it computes, once.
//
// A pointwise op's definition builds an Expr from its operands (with their
// dtypes) and attributes. The reference backend interprets it over whole
// chunks of elements (ops/pointwise_eval.cpp); codegen prints it as CUDA C. So the
// meaning of add, relu, gelu, where... is written in exactly one place.
//
// Each expression node has a result dtype. On the CPU, f64 nodes evaluate in
// double and f32/f16/bf16 nodes at float precision (as generated CUDA code
// computes them; f16/bf16 round only at a Cast or the final store); integer
// and bool nodes evaluate in int64, wrapped to their dtype. A Cast from
// floating to integer truncates toward zero and saturates (NaN gives 0), as
// CUDA's cvt.rzi does; to f16/bf16 it rounds once, to nearest even.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

enum class ExprOp : uint8_t {
  Input,
  Const,
  // unary
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Recip,
  Floor,
  Ceil,
  Round /* half to even */,
  Sign,
  Sin,
  Cos,
  Tan,
  Asin,
  Acos,
  Atan,
  Sinh,
  Cosh,
  Tanh,
  Asinh,
  Acosh,
  Atanh,
  Erf,
  Not /* logical */,
  BitNot,
  IsNan,
  IsPosInf,
  IsNegInf,
  // binary
  Add,
  Sub,
  Mul,
  Div /* ints truncate */,
  Pow,
  Max,
  Min,
  Mod /* result takes the divisor's sign (Python) */,
  FMod /* C fmod, dividend's sign */,
  Eq,
  Lt,
  Le,
  Gt,
  Ge,
  And,
  Or,
  Xor,
  BitAnd,
  BitOr,
  BitXor,
  Shl,
  Shr,
  // ternary: cond ? a : b
  Select,
  // conversion to the node's dtype
  Cast,
  // the operand's stored bits read as the node's dtype (same bit width)
  BitCast,
};

std::string_view expr_op_name(ExprOp op);

struct ExprNode {
  ExprOp op;
  DType dtype;                 // result dtype
  int a = -1, b = -1, c = -1;  // operand node indices
  int input = -1;              // for Input
  double value = 0;            // for Const
  // For a Cast to a low-bit float: ONNX Cast's `saturate` and, for
  // f8e8m0, its round_mode (ir/low_bit.h E8M0Round).
  bool saturate = true;
  uint8_t round_mode = 0;
};

// A DAG of ExprNodes in evaluation order; the last node is the result.
struct Expr {
  std::vector<ExprNode> nodes;
  DType result_dtype() const { return nodes.back().dtype; }
  std::string str() const;  // readable form for docs and debugging
};

// Handle to a node under construction.
struct E {
  int id = -1;
  DType dtype = DType::F32;
};

// Builds an Expr. Operators on E go through the builder passed explicitly,
// keeping op definitions short:  b.max(x, b.zero(x))
class ExprBuilder {
 public:
  explicit ExprBuilder(std::vector<DType> input_dtypes) : in_(std::move(input_dtypes)) {}
  int num_inputs() const { return static_cast<int>(in_.size()); }
  DType input_dtype(int i) const { return in_[i]; }

  E input(int i);
  E constant(double v, DType dtype);
  E zero(E like) { return constant(0, like.dtype); }
  E one(E like) { return constant(1, like.dtype); }
  E cnst(double v, E like) { return constant(v, like.dtype); }

  E unary(ExprOp op, E a);
  // Arithmetic result has a's dtype; comparisons and logic give bool.
  E binary(ExprOp op, E a, E b);
  E select(E cond, E a, E b);
  E cast(E a, DType to, bool saturate = true, int round_mode = 0);
  E bitcast(E a, DType to);

  E add(E a, E b) { return binary(ExprOp::Add, a, b); }
  E sub(E a, E b) { return binary(ExprOp::Sub, a, b); }
  E mul(E a, E b) { return binary(ExprOp::Mul, a, b); }
  E div(E a, E b) { return binary(ExprOp::Div, a, b); }
  E max(E a, E b) { return binary(ExprOp::Max, a, b); }
  E min(E a, E b) { return binary(ExprOp::Min, a, b); }
  E pow(E a, E b) { return binary(ExprOp::Pow, a, b); }
  E lt(E a, E b) { return binary(ExprOp::Lt, a, b); }
  E gt(E a, E b) { return binary(ExprOp::Gt, a, b); }
  E le(E a, E b) { return binary(ExprOp::Le, a, b); }
  E ge(E a, E b) { return binary(ExprOp::Ge, a, b); }
  E eq(E a, E b) { return binary(ExprOp::Eq, a, b); }
  E neg(E a) { return unary(ExprOp::Neg, a); }
  E exp(E a) { return unary(ExprOp::Exp, a); }
  E log(E a) { return unary(ExprOp::Log, a); }
  E tanh(E a) { return unary(ExprOp::Tanh, a); }
  E sqrt(E a) { return unary(ExprOp::Sqrt, a); }
  E erf(E a) { return unary(ExprOp::Erf, a); }
  E abs(E a) { return unary(ExprOp::Abs, a); }

  // Finishes: `result` becomes the last node (cast to `out` if it differs).
  Expr finish(E result, DType out);

 private:
  E push(ExprNode n);
  std::vector<DType> in_;
  std::vector<ExprNode> nodes_;
};

}  // namespace kiln
