// The plan's graph: the IR text parsed back, with the constants' data taken
// from the weights section (large constants print by reference only).
#pragma once
#include <memory>
#include <vector>

#include "ir/graph.h"
#include "runtime/plan_format.h"

namespace kiln::plan {

// Every constant of `g` and of the bodies of its nodes, depth first: the
// graph's constants in order, then each node's body (in node order). The
// writer stores weights in this order; the loader walks the parsed graph the
// same way. The graph's own constants come first, so the top-level constant
// i is weights entry i.
std::vector<Value*> walk_constants(const Graph& g);

// Parses the graph text, attaches the weights and verifies the graph.
// Throws kiln::Error naming `what` when the text does not parse or the
// constants do not match the weights (count, types).
std::unique_ptr<Graph> load_graph(const Plan& p, std::string_view what = "plan");

}  // namespace kiln::plan
