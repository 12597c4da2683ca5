// The resize emitter (ops/resize_ops.cpp's `resize`, every mode, coordinate
// transform, nearest_mode, cubic_coeff_a / exclude_outside, antialias,
// tf_crop_and_resize with extrapolation_value, any rank).
//
// The per-axis taps and weights come from the reference's own plan
// (ops/resize_plan.h), computed once on the host and passed to the kernel as
// four tables (extra buffers after the input): tap ranges per output
// coordinate (`begin`), tap offsets (input index x the axis' stride),
// weights (double) and the outside-the-crop flags. One thread per output
// element (grid-stride loop, block 256): nearest copies one element bit for
// bit (any dtype); linear/cubic sum weight x value over the product of the
// axes' taps in double, in the reference's order (axis 0 outermost, the
// weight a running product in axis order), then round to the dtype (f16/bf16
// through float, as the reference stores them).
//
// Kernel: `NAME(KILN_PTR(T) out, KILN_PTR(const T) in0, KILN_PTR(const long
// long) begin, KILN_PTR(const long long) tap, KILN_PTR(const double) weight,
// KILN_PTR(const unsigned char) outside)`.
#pragma once
#include <vector>

#include "codegen/core/simple_kernel.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

struct ResizeKernel {
  OneLaunchKernel kernel;
  std::vector<Tensor> tables;  // begin (i64), tap (i64), weight (f64), outside (u8)
};

ResizeKernel emit_resize_op(const AttrMap& attrs, const TensorType& in, const TensorType& out);

}  // namespace kiln::codegen
