// Conv-family ops emitted as per-output gathers (no GEMM): col2im and
// deform_conv (ops/conv_ops.cpp). One thread per result element (grid-stride
// loop, block 256; codegen/core/simple_kernel.h).
//
//   col2im {image_shape, block_shape, strides, pads, dilations}: the thread
//     of image element (n, c, y...) visits the block positions kp in order
//     and adds the one column entry (if any) that lands on y: column i with
//     i*stride - pad + k*dilation = y. The reference scatters in the same kp
//     order and each kp adds at most once per element, so the sum (in the
//     reference's type: float for f16/bf16/f32, double for f64, long long for
//     integers) is bit-identical, with no atomics.
//   deform_conv {strides, pads, dilations, group, offset_group} with
//     operands x, w, offset[, b[, mask]]: the thread of (n, m, o...) forms,
//     for each input channel of m's group and each kernel tap, the reference's
//     sampled column value (N-linear over the 2^nd corners in double, zero
//     outside, times the mask, rounded to the compute type) and accumulates
//     w x value in double; then rounds to the compute type and adds the bias
//     as the reference does. The reference multiplies through OpenBLAS in
//     float, so f32 results agree within rounding, not bit for bit. A bias
//     missing while the mask is given (an empty operand 3) is not handled.
#pragma once
#include <vector>

#include "codegen/core/simple_kernel.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

bool conv_gather_supported(const std::string& op);

OneLaunchKernel emit_conv_gather_op(const std::string& op, const AttrMap& attrs,
                                    const std::vector<TensorType>& operands, const TensorType& out);

}  // namespace kiln::codegen
