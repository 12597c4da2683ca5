// The loss emitter: nll_loss and softmax_cross_entropy_loss (reductions
// none/sum/mean, ignore_index, an optional weight operand, sce's optional
// log_prob result), computed in double as ops/loss_ops.cpp does.
//
// Kernels, in launch order:
//  - sce with a log_prob result: one thread per (n, d) line walks the C
//    classes three times (max, sum of exp(x - max), then x - lse), in the
//    reference's order, so log_prob matches it bit for bit;
//  - the loss: reduction none: one thread per element (sce recomputes its
//    line's lse the same way); sum/mean: ONE block of 256 threads folds every
//    element's -w * logp and, for mean, the weights of the non-ignored targets
//    (mean = sum / weights, all ignored -> 0/0 = NaN as the reference), with a
//    warp-shuffle tree in double (only the fold order differs from the
//    reference's sequential sum).
// A target outside [0, C) that is not ignore_index stops the kernel
// (KILN_TRAP: __trap() on the GPU, an error naming the kernel in the
// simulator), as the reference raises an error.
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

bool loss_supported(std::string_view op);

std::vector<OpKernel> emit_loss_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                   const std::vector<TensorType>& results);

}  // namespace kiln::codegen
