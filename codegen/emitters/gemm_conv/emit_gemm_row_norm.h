// A matmul whose fused epilogue ends in a layer norm of each result row
// (docs/fusion.md, "A layer norm after a matmul"): BERT's
//   dense (matmul) -> + bias -> cast -> + residual -> LayerNorm -> cast
// as one fused gemm_epilogue node and two launches instead of three:
//   1. the matmul split in K (row_norm_gemm_tile, the performance model's
//      cheapest split with a reduction kernel), each block writing its f32
//      partial tile to the workspace, as every split-K GEMM does
//      (emit_gemm_mma.cpp);
//   2. the split's reduction kernel, which is the layer norm's row kernel
//      (emit_rowwise.cpp, the same one a fused `reduction` node gets): it
//      reads each row's element as the sum of its partials in split order
//      (the order of the plain split-K reduction, so the bits do not depend
//      on scheduling), runs the epilogue before the norm on it (bias,
//      casts, the residual add; those of its values the node returns are
//      written on the way), normalizes the row and runs the epilogue after
//      it (the cast to f16) at the store.
// The layer norm needs whole rows, which no GEMM tile has; the split's
// reduction launch does, so the norm rides it where the GEMM is split anyway
// or where splitting it costs less than the norm's own launch. Where neither
// holds, or for a shape-generic node, a SIMT GEMM, an anchor other than
// matmul, or an epilogue with layout ops, this emitter refuses (and the fuser
// leaves the layer norm a kernel of its own).
#pragma once
#include <cstdint>
#include <vector>

#include "codegen/emitters/gemm_conv/emit_gemm.h"
#include "codegen/emitters/reduction/emit_reduction.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace kiln::codegen {

// The layer_normalization in the body of fused gemm_epilogue node `n`, or
// null (no such node, or not a gemm_epilogue).
const Node* row_norm_of(const Node& n);

struct RowNormGemmKernels {
  ComputeKernel gemm;                  // the split GEMM writing partial sums
  ReductionKernel norm;                // their sums, the epilogue and the layer norm
  std::vector<Tensor> norm_constants;  // the norm kernel's buffers after the node's inputs
  int64_t workspace_f32 = 0;           // the partial sums, shared by both
};

// The two kernels of `n` (row_norm_of(n) not null). Throws kiln::Unsupported
// naming the node where the rules above refuse.
RowNormGemmKernels emit_gemm_row_norm(const Node& n, const OpRegistry& ops);

}  // namespace kiln::codegen
