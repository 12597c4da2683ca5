// Checks what a pass can break: operands defined before use, use lists
// consistent, unique value names, graph outputs defined, every node's op known
// with declared attributes, and result types equal to what inference says.
// Errors name the node.
#pragma once
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace kiln {

void verify_graph(const Graph& g, const OpRegistry& registry);

}  // namespace kiln
