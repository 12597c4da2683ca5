// einsum as one kernel: one thread per output element (grid-stride loop,
// 256 threads per block, up to 8192 blocks) summing the product of the
// operands over the contracted labels in nested loops with the sizes and
// strides baked in. Floats accumulate in double and integers in wrapping
// 64-bit arithmetic, as the reference (ops/einsum_op.cpp) does. Contractions
// that are matmuls run much faster through the tiled GEMM; this generic
// kernel is what every einsum equation gets for now.
#pragma once
#include "codegen/emitters/gemm_conv/emit_gemm.h"

namespace kiln::codegen {

ComputeKernel emit_einsum(const Epilogue& ep);

}  // namespace kiln::codegen
