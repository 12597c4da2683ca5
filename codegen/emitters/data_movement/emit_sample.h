// The sampling emitter: grid_sample and roi_align (ops/sample_ops.cpp), one
// thread per result element (grid-stride loop, block 256; codegen/
// simple_kernel.h).
//
//   grid_sample {mode linear|nearest|cubic, padding_mode zeros|border|
//     reflection, align_corners}, 1-D to 3-D spatial: the thread of
//     (n, c, o...) reads its grid point, maps each coordinate to the input
//     (un-normalise, round half to even for nearest, border clamp /
//     reflection), builds the axis' taps (1, 2 or 4) and sums weight x value
//     over their product in double, in the reference's order, with the
//     reference's zero / clamp / reflect rule per tap. A non-finite
//     coordinate gives 0 (zeros padding) or NaN, as the reference does.
//   roi_align {mode avg|max, output_height/width, sampling_ratio,
//     spatial_scale, half_pixel|output_half_pixel}: the thread of
//     (roi, c, ph, pw) walks the bin's sampling grid, bilinear weights and
//     corner clamping exactly as the reference computes them; avg divides
//     the sum by the sample count, max keeps the largest weighted corner.
//     A batch index outside [0, N) (an error in the reference) gives 0.
//
// All arithmetic is double (the reference's), inputs read through float
// for f16/bf16, results rounded through float for f16/bf16 as the
// reference's store does. Channels recompute their (shared) sample
// positions: cheap next to the memory traffic, and no shared memory or
// barrier is needed.
//
// Kernels: grid_sample `NAME(out, in0 /*x*/, in1 /*grid*/)`, roi_align
// `NAME(out, in0 /*x*/, in1 /*rois*/, in2 /*batch_indices*/)`.
#pragma once
#include <vector>

#include "codegen/core/simple_kernel.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

bool sample_supported(const std::string& op);

OneLaunchKernel emit_sample_op(const std::string& op, const AttrMap& attrs, const std::vector<TensorType>& operands,
                               const TensorType& out);

}  // namespace kiln::codegen
