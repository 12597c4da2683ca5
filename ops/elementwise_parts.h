// Shared pieces of the elementwise family, which is split over several files:
//   elementwise.cpp       entry point, arithmetic and unary math
//   activation_ops.cpp    relu, sigmoid, gelu, elu and the other activations
//   elementwise_logic.cpp comparisons, logic, bitwise, where, clip, cast,
//                         identity, quantize/dequantize
// register_elementwise_ops (families.h) is the only entry point; it calls the
// register_* functions below.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ops/op_helpers.h"

namespace kiln::ops {

// Which kinds of dtypes an operand may have (bit set).
enum DTypeKinds : unsigned {
  kFloatKind = 1,
  kSignedKind = 2,
  kUnsignedKind = 4,
  kBoolKind = 8,
  // The low-bit storage types (f8*, f4e2m1, i4, u4, i2, u2): not part of
  // kAnyKind, an op takes them only by naming this kind.
  kLowBitKind = 16,
  kIntKinds = kSignedKind | kUnsignedKind,
  kSignedNumeric = kFloatKind | kSignedKind,
  kNumeric = kFloatKind | kIntKinds,
  kAnyKind = kNumeric | kBoolKind,
};

// Rejects operand i unless its dtype is of an allowed kind, with
// ctx.unsupported naming the dtype and the op.
void require_kinds(InferContext& c, int i, unsigned kinds);

using UnaryBody = std::function<E(ExprBuilder&, E x, const AttrMap&)>;
using BinaryBody = std::function<E(ExprBuilder&, E a, E b, const AttrMap&)>;

// out = body(x): same dtype and shape as the operand.
OpDef unary_op(std::string name, unsigned kinds, std::vector<AttrSpec> attrs, UnaryBody body, std::string doc);
// out = body(a, b) with numpy broadcasting; both operands of one dtype. The
// result has the operands' dtype, or bool when `bool_result`.
OpDef binary_op(std::string name, unsigned kinds, BinaryBody body, std::string doc, bool bool_result = false);

void register_elementwise_math(OpRegistry& r);   // elementwise.cpp
void register_activation_ops(OpRegistry& r);     // activation_ops.cpp
void register_elementwise_logic(OpRegistry& r);  // elementwise_logic.cpp

}  // namespace kiln::ops
