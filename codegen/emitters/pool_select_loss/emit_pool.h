// The pooling emitter: max_pool (with its optional i64 indices result and
// storage_order), average_pool (count_include_pad), lp_pool, their global
// forms and max_unpool, channels-first or layout "nhwc" (as the layout pass
// tags them), 1-D to N-D windows with pads, strides, dilations and ceil_mode.
//
// Window and global pools: one thread per result element (a grid-stride
// loop), which walks its window in the reference's order (ops/pool_ops.cpp:
// spatial dims outermost first, taps inside the input only), so sums (float
// for f16/bf16/f32, double for f64) and max ties match the reference bit for
// bit: max keeps the first tap unless a later one is strictly greater (a NaN
// first tap stays), an all-padding window gives the dtype's lowest value and
// index 0 of its plane, average divides by the taps inside the input (or
// inside the padded input with count_include_pad), lp sums |x|^p (p 1 and 2
// without pow, as the reference). In layout nhwc consecutive threads take
// consecutive channels, so reads and writes coalesce.
//
// max_unpool: a zero fill, then the scatter of x to the positions its indices
// name, where several elements name one position the highest input position
// winning (the reference's "later duplicates win"): f32/f64 claim positions
// with atomicMax(i + 1) on the zeroed result's bits and a third kernel
// gathers each position's winner; f16/bf16 (no room for a claim) let each
// element look for a later one with the same index (quadratic in the worst
// case). See docs/codegen.md.
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

// Whether emit_pool_op handles `op`.
bool pool_supported(std::string_view op);

// The kernels of a pool node (in launch order) from its attributes, operand
// types and result types (as inference gives them; max_pool with one or two
// results). Throws kiln::Error for inconsistent types, kiln::Unsupported for
// an op this emitter does not handle. `seams`: a fused anchor's loads/stores
// (codegen/core/kernel_shell.h; not for max_unpool). Window pools read overlapping
// windows, so they have no read-once pass (KILN_LOAD_X_ONCE); global pools do.
std::vector<OpKernel> emit_pool_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                   const std::vector<TensorType>& results, const KernelSeams* seams = nullptr);

}  // namespace kiln::codegen
