// Index-family ops whose operands are not plain data + i32/i64 indices, so
// they do not fit emit_injective's table: one_hot (indices of any numeric
// dtype, values [off, on]), eye_like (the operand only gives the shape; the
// result has its own dtype) and compress (a bool condition). One thread per
// result element (codegen/core/simple_kernel.h's launch), elements copied bit
// for bit as unsigned integers of their size.
//
//   one_hot {depth, axis}: position p of the index (ints: negative + depth;
//     floats: truncated, NaN/out of range none; u64 unsigned) ->
//     out = p == o_axis ? values[1] : values[0]
//   eye_like {k, dtype}: out = (o1 - o0 == k) ? 1 : 0 in the result's dtype
//   compress {axis?}: the j-th kept slice is at the j-th true entry of the
//     condition, found by a scan of it (its length is one axis, small next
//     to the data); a true entry past the axis (an error in the reference)
//     gives zero bytes.
// Not done: one_hot with f16/bf16/bool indices.
#pragma once
#include <vector>

#include "codegen/core/simple_kernel.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

bool index_select_supported(const std::string& op);

OneLaunchKernel emit_index_select_op(const std::string& op, const AttrMap& attrs,
                                     const std::vector<TensorType>& operands, const TensorType& out);

}  // namespace kiln::codegen
