// Graphviz form of a graph: one box per node labelled with op, result type
// (dtype, shape, layout) and the ONNX node it came from; fused nodes drawn as
// clusters holding their bodies; graph inputs and outputs as ellipses.
// Constants are left out (they would drown the picture) and counted per node.
#pragma once
#include <string>

#include "ir/graph.h"

namespace kiln {

std::string print_dot(const Graph& g);

}  // namespace kiln
