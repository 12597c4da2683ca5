// Reference interpreter for pointwise Exprs: evaluates the expression over
// the broadcast output shape, chunk by chunk, each expression node computing
// a whole chunk at a time (fast enough for full-size models on the CPU).
#pragma once
#include <vector>

#include "ir/expr.h"
#include "ir/tensor.h"

namespace kiln {

// `inputs[i]` may be nullptr only if the Expr never reads input i.
void eval_pointwise(const Expr& e, const std::vector<const Tensor*>& inputs, Tensor& out);

}  // namespace kiln
