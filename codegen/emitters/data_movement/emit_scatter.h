// The scatter emitter: scatter_elements and scatter_nd (ops/index_scatter.cpp)
// as one kernel each, parallel over the RESULT: the thread of result element
// p starts from data[p] and then searches, in the reference's order, the
// updates that land on p and combines each in turn (reduction none: the last
// one wins; add/mul/max/min: each counts). Every element's value is therefore
// computed exactly as the reference's sequential loop computes it, with no
// atomics and no write races: results are bit-identical to the reference for
// every dtype, floats included, and deterministic.
//
//   scatter_elements {axis}: the updates that can reach p differ from p only
//     along `axis` (and need p inside the indices' shape off the axis), so the
//     search is indices.shape[axis] long per element.
//   scatter_nd: p's position among the data's first k dims is compared with
//     each index tuple's: indices.numel() work per element (fine while the
//     tuples are few; large scatter_nd would want a sort first, not done).
//
// Combining follows ops/index_ops.cpp's combiner: integers wrap (computed in
// 64-bit unsigned), f16/bf16 through float rounded after each update,
// max/min return a quiet NaN when either side is NaN, bool add/max = or,
// mul/min = and. An index outside [-n, n) (an error in the reference) is
// skipped by the kernel.
//
// Kernel: `NAME(KILN_PTR(T) out, KILN_PTR(const T) in0 /*data*/,
// KILN_PTR(const I) in1 /*indices*/, KILN_PTR(const T) in2 /*updates*/)`,
// one thread per result element (codegen/core/simple_kernel.h's launch).
#pragma once
#include <vector>

#include "codegen/core/simple_kernel.h"
#include "ir/attribute.h"
#include "ir/op_registry.h"
#include "ir/tensor.h"

namespace kiln::codegen {

bool scatter_supported(const std::string& op);

// `operands`: data, indices, updates; `out` as inferred. Throws kiln::Error
// for another op, a bad reduction or operands that do not fit.
OneLaunchKernel emit_scatter_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                const TensorType& out);

}  // namespace kiln::codegen
