// Shape values with symbolic dims (docs/dynamic_shapes.md).
// Exported models compute Reshape targets from Shape: Shape -> Gather ->
// Unsqueeze -> Concat (and Mul/Add/Div on the gathered dims). With symbolic
// input dims, Shape gives an i64 tensor holding symbolic dims
// (ir/symbolic_dim.h); the importer's compile-time evaluation may move such
// elements (gather, concat, slice, reshape...) and do integer arithmetic on
// them as polynomials, and nothing else: a comparison or any other op on
// them has no compile-time value, so whatever needs one fails clearly
// instead of reading a handle as a number.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// Whether `t` is an i64 tensor (of shape-value size) holding a symbolic dim.
bool holds_symbolic_values(const Tensor& t);
// Its elements as text: "[batch, seq, 768]".
std::string describe_symbolic_values(const Tensor& t);

// The results of `n` on operand values of which some hold symbolic dims, or
// nullopt when the op cannot be evaluated on them at compile time.
std::optional<std::vector<Tensor>> evaluate_on_symbolic_values(const Node& n, const std::vector<const Tensor*>& ins,
                                                               const std::vector<TensorType>& types,
                                                               const std::string& label);

}  // namespace kiln
