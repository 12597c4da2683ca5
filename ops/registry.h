// Access to kiln's populated op registry and to reference evaluation of a
// single op. The definitions are in this folder, one file per family.
#pragma once
#include <vector>

#include "ir/op_registry.h"

namespace kiln {

// The registry with every op kiln defines (built once, thread-safe).
const OpRegistry& op_registry();

// Evaluates one op on the CPU reference path: interprets the Expr of a
// pointwise op, or calls the op's reference kernel. `out_types` are the
// inferred result types.
std::vector<Tensor> evaluate_op(const OpDef& def, const AttrMap& attrs, const std::vector<const Tensor*>& inputs,
                                const std::vector<TensorType>& out_types, const std::string& label);

}  // namespace kiln
