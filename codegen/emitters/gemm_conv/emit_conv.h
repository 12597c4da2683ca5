// conv and conv_transpose (any number of spatial dims, groups, strides,
// dilations, pads; conv also layout "nhwc"), bare or as the anchor of a
// conv_epilogue fused node, as implicit GEMMs over the tiled core of
// codegen/emitters/gemm_conv/emit_gemm.h:
//
//   conv nchw:       per (image, group): [Mg] x [out positions], K = Cg * taps;
//                    A = the weights (k contiguous), B(k, p) = the input
//                    element tap k reads for output position p (0 in the
//                    padding) -- the position's window origin is computed
//                    once per thread and staging slot, only k is split into
//                    (channel, tap) per load.
//   conv nhwc:       per group: [N * out positions] x [Mg], K = taps * Cg
//                    (channel fastest, contiguous in x and w).
//   conv_transpose:  per (image, group): [Mg] x [out positions], K = Cg * taps;
//                    B(k, p) = x at i = (p + pad - tap * dilation) / stride
//                    where that divides and lands inside, else 0.
// The bias is added to the accumulator before the epilogue.
#pragma once
#include "codegen/emitters/gemm_conv/emit_gemm.h"

namespace kiln::codegen {

// The launches in order (two for a split-K GEMM: emit_gemm.h). Throws
// kiln::Unsupported for a node it does not handle (says why).
std::vector<ComputeKernel> emit_conv(const Epilogue& ep);

}  // namespace kiln::codegen
