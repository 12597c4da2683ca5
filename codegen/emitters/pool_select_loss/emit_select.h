// The select/scan emitter: argmax, argmin, hardmax, cumsum, cumprod and topk along one
// axis, the operand viewed as [outer, n, inner] around the axis (as
// ops/reduction_select_ops.cpp and ops/softmax_ops.cpp do).
//
// argmax / argmin / hardmax: the reference's ranking (a NaN ranks above every
// number for argmax and below for argmin, i.e. both pick NaN; ties go to the
// first index, or the last with select_last_index; hardmax = the first argmax
// set to 1). Lines with n >= 128 and inner < 32: one block per line, each
// thread folds a strided share and a (value, index) warp-shuffle tree combines
// them (the ranking with the index tie-break is associative, so the answer is
// exact); otherwise one thread per line (consecutive threads on consecutive
// inner positions, so reads coalesce).
//
// cumsum / cumprod: floats accumulate in double, integers in 64 bits wrapping
// like the dtype, as the reference. Lines with n >= 128 and inner < 32: one
// block per line, each thread scans a contiguous chunk, a block-wide exclusive
// scan of the chunk totals gives each chunk's offset (3 barriers per line; the
// exclusive prefix is shuffled from the previous lane, never recovered by
// subtracting, so a product needs no division); otherwise a thread per line
// walks it sequentially (the reference's order: exact).
//
// topk: one block per line, the line (values in the compute type, i32 indices)
// in dynamic shared memory padded to a power of two P and bitonic-sorted by
// the reference's order (largest: NaN first, then descending; smallest:
// ascending, NaN last; ties by the lower index), then the first k written.
// Lines up to 4096 elements (P * (value + 4) bytes of shared memory <= 48 KiB);
// longer lines are kiln::Unsupported.
//
// Reads of operand 0 and stores of results go through the KILN_LOAD_X /
// KILN_STORE seams (codegen/core/kernel_shell.h).
#pragma once
#include <string_view>
#include <vector>

#include "codegen/core/kernel_shell.h"
#include "ir/attribute.h"
#include "ir/op_registry.h"
#include "ir/tensor.h"

namespace kiln::codegen {

bool select_supported(std::string_view op);

// The kernels of an argmax/argmin/hardmax/cumsum/cumprod/topk node (topk with one or
// two results). Throws kiln::Error for inconsistent types, kiln::Unsupported
// for what the emitter does not do (topk lines longer than 4096).
// `seams`: a fused anchor's loads/stores (codegen/core/kernel_shell.h); every
// kernel here has a read-once pass (KILN_LOAD_X_ONCE).
std::vector<OpKernel> emit_select_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                     const std::vector<TensorType>& results, const KernelSeams* seams = nullptr);

}  // namespace kiln::codegen
