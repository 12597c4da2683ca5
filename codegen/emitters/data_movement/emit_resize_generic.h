// The shape-generic resize (docs/dynamic_shapes.md, "Symbolic image sizes"):
// a float image resized by nearest, linear or cubic interpolation where some
// dims are symbolic, each symbolic axis to floor(in * scale) (the ONNX
// adapter's size, a polynomial over derived symbols for a non-integer scale,
// ir/floor_div_dims.h) or to sizes from Shape ops. The static emitter
// (emit_resize.h) passes tables of taps per output coordinate, which a
// symbolic length cannot size; this one computes each output coordinate's
// source coordinate in the kernel with the reference's own double
// arithmetic (ops/resize_ops.cpp, plan_axis: the coordinate transform, the
// nearest_mode rounding, or the linear / cubic taps (Keys' coefficients with
// cubic_coeff_a), exclude_outside's renormalisation, zero-weight taps
// dropped and indices clamped), sizes from `ks`. One thread per output
// element (grid-stride loop, block 256); linear and cubic sum weight x value
// in double in the reference's order. Not handled (kiln::Unsupported, named):
// tf_crop_and_resize, antialias when shrinking (or without scales, where
// the scale is out/in per run).
#pragma once
#include "codegen/core/kernel_shell.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

OpKernel emit_resize_generic(const AttrMap& attrs, const TensorType& in, const TensorType& out);

}  // namespace kiln::codegen
