// The shape-generic cumsum / cumprod (docs/dynamic_shapes.md, "Shape-generic
// GPU kernels"): the running sum or product along one axis of an operand
// whose dims may be symbolic (RoBERTa's position ids, the cumsum of a
// [batch, seq] mask along seq). The operand is viewed as [outer, n, inner]
// around the axis as in the static scan (emit_select.h), each of the three
// extents a constant or a polynomial read from `ks`. Floats accumulate in
// double, integers in 64 bits wrapping like the dtype, as the reference.
//
// Which kernel a line gets cannot follow the line's length at run time (one
// kernel serves every shape), so it follows what is known at compile time:
// a block per line (chunks scanned by the threads, a block-wide scan of the
// chunk totals, the chunk length computed from `ks`) when `inner` is a
// constant below 32 and `n` symbolic or at least 128, as the static kernel
// decides for its lengths; otherwise a thread per line walking it in the
// reference's order. Grids are GridAxisExprs over the line count.
#pragma once
#include <string>

#include "codegen/core/kernel_shell.h"
#include "ir/attribute.h"
#include "ir/tensor.h"

namespace kiln::codegen {

// `op` is "cumsum" or "cumprod"; `x` has at least one symbolic dim and `y`
// its type. Throws kiln::Error for inconsistent types.
OpKernel emit_scan_generic(const std::string& op, const AttrMap& attrs, const TensorType& x, const TensorType& y);

}  // namespace kiln::codegen
