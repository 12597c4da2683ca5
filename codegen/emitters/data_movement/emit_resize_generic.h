// The shape-generic resize (docs/dynamic_shapes.md, "Symbolic image sizes"):
// a float image resized by nearest or linear interpolation where some dims
// are symbolic, each symbolic axis by the integer scale the ONNX adapter
// checked (ops/resize_ops.cpp, infer_symbolic_resize). The static emitter
// (emit_resize.h) passes tables of taps per output coordinate, which a
// symbolic length cannot size; this one computes each output coordinate's
// source coordinate in the kernel with the reference's own double
// arithmetic (ops/resize_ops.cpp, plan_axis: the coordinate transform, the
// nearest_mode rounding or the two linear taps with zero-weight taps
// dropped and indices clamped), sizes from `ks`. One thread per output
// element (grid-stride loop, block 256); linear sums weight x value in
// double in the reference's order. Not handled (kiln::Unsupported, named):
// cubic, tf_crop_and_resize, exclude_outside, antialias when shrinking.
#pragma once
#include "codegen/core/kernel_shell.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

OpKernel emit_resize_generic(const AttrMap& attrs, const TensorType& in, const TensorType& out);

}  // namespace kiln::codegen
