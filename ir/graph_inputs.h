// Checks a run's named input tensors against a graph's inputs, as every
// executor does before running: each graph input given once with its exact
// dtype and shape, and no name that is not a graph input.
#pragma once
#include <map>
#include <string>
#include <unordered_map>

#include "ir/graph.h"
#include "ir/symbolic_dim.h"

namespace kiln {

// The graph's input values bound to the given tensors; kiln::Error naming the
// input for a missing one, a wrong dtype/shape or an unknown name. With
// `symbols`, a graph with symbolic dims takes its inputs at those values.
std::unordered_map<const Value*, Tensor> bind_graph_inputs(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                                           const SymbolBindings* symbols = nullptr);

}  // namespace kiln
