// Prints a Graph as kiln IR text (grammar in docs/ir.md). The text parses
// back to a graph that prints identically.
#pragma once
#include <string>

#include "ir/graph.h"

namespace kiln {

struct PrintOptions {
  // Constants with at most this many elements print their values inline
  // (dense<[...]> or splat<v>); larger ones print by reference and digest.
  int64_t inline_elements = 16;
};

std::string print_graph(const Graph& g, const PrintOptions& opts = {});

}  // namespace kiln
