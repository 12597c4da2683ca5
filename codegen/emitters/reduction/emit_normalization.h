// Normalization kernels: layer_normalization, group_normalization,
// instance_normalization, mean_variance_normalization, lp_normalization
// (statistics over groups of elements, then a normalize pass), and
// batch_normalization (inference form) and lrn (one element per thread).
// Numerics as ops/normalization_ops.cpp and ops/lrn_mvn_lp_ops.cpp: x read
// in the computation type (float for f16/bf16/f32, double for f64),
// statistics accumulated in double with two passes (sum, then squared
// deviations from the mean), the normalized value computed in double with
// the reference's formula, rounded to the computation type and stored.
//
// Statistics kernels: one block per normalized group (grid-stride over the
// groups, grid <= 65535); block = the group's size rounded up to a power of
// two in [32, 256]; each pass folds a strided share per thread, then warp
// shuffles and one partial per warp (block_fold). Reads: x three times (sum,
// squares, normalize), lp_normalization twice.
//
// Every kernel goes through an AnchorIO (codegen/core/kernel_io.h), so the same
// emitter is the anchor of fused `reduction` nodes; the record pass is the
// first (sum) pass, or for the per-element kernels the read of the element
// itself.
#pragma once
#include <vector>

#include "codegen/emitters/reduction/emit_reduction.h"
#include "codegen/core/kernel_io.h"
#include "ir/attribute.h"
#include "ir/op_registry.h"

namespace kiln::codegen {

// Whether emit_normalization handles op `name`.
bool normalization_supported(const std::string& name);

// The kernel for one normalization node: operands and results as inferred
// (layer_normalization: 1 to 3 results). `outputs` of the kernel: groups
// (or elements); `count`: elements per group. Throws kiln::Error for an op it
// does not handle or operands that do not fit.
ReductionKernel emit_normalization(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                   const std::vector<TensorType>& results, const AnchorIO& io);
ReductionKernel emit_normalization(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                   const std::vector<TensorType>& results);

}  // namespace kiln::codegen
