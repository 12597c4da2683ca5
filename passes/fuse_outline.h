// Turns the fuser's final groups into `fused` nodes: each group of two or more
// nodes (not only views) becomes one node whose body holds the group's nodes.
// Operands are the values the group reads from outside (small constants,
// at most 16 elements, are copied into the body instead); results are the
// group's values that outside nodes or the graph outputs use. The graph is
// then put back into a topological order (a group may take nodes from both
// sides of an outside node), keeping the original order where it can.
#pragma once
#include <memory>

#include "passes/fusion_rules.h"
#include "passes/pass.h"

namespace kiln::fusion {

// Whether a final group becomes a fused node: two or more nodes, not only views.
bool becomes_fused_node(const Group& grp);

// A scratch graph whose one node is the fused node `grp` would become (its
// operands are the scratch graph's inputs), for asking codegen before the
// group is formed (passes/fusion_capabilities.h). `grp` need not be one of
// s's groups: the fuser builds the union it is about to make. Null when the
// members write nothing used outside them.
std::unique_ptr<Graph> probe_fused(const Graph& g, const FusionState& s, const Group& grp);

// Returns how many fused nodes were made; counts kinds in `stats`.
int outline_groups(Graph& g, const FusionState& s, PassStats& stats);

}  // namespace kiln::fusion
