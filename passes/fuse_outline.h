// Turns the fuser's final groups into `fused` nodes: each group of two or more
// nodes (not only views) becomes one node whose body holds the group's nodes.
// Operands are the values the group reads from outside (small constants,
// at most 16 elements, are copied into the body instead); results are the
// group's values that outside nodes or the graph outputs use. The graph is
// then put back into a topological order (a group may take nodes from both
// sides of an outside node), keeping the original order where it can.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/symbolic_dim.h"
#include "passes/fusion_capabilities.h"
#include "passes/fusion_rules.h"
#include "passes/pass.h"

namespace kiln::fusion {

// Whether a final group becomes a fused node: two or more nodes, not only views.
bool becomes_fused_node(const Group& grp);

// What a group's fused node is made of: its body, the outside values it reads
// (operands) and its values used outside (results). Built once per final
// group: the fuser asks codegen about it and then outlines the same parts.
struct FusedParts {
  std::unique_ptr<Graph> body;  // null when the members write nothing used outside (dead code)
  std::vector<Value*> operands, results;
  std::string name;  // the members' names joined with '+'
};

// The parts of the fused node `grp` would become. `grp` need not be one of
// s's groups: the fuser builds the union it is about to make.
FusedParts fused_parts(const Graph& g, const FusionState& s, const Group& grp);

// The symbol values a graph with symbolic dims is asked about at: every
// symbol at the low end of its range, then every one at the high end (one
// set when they coincide); none for a static graph. Data-dependent symbols
// (ir/data_dependent.h) have no range to take and stay unbound.
std::vector<SymbolBindings> range_ends(const Graph& g);

// Why codegen cannot emit the fused node of `parts` (passes/fusion_capabilities.h),
// or "" (also for parts without a body). The node is built in a scratch graph
// whose inputs stand for the operands, around parts.body, which is handed back
// afterwards: the body asked about is the body outlined. A node with symbolic
// dims is asked about as it will be emitted, specialised (ir/specialize.h):
// at each set of `ends` (range_ends), the first refusal being the answer; so
// a decision that does not depend on the sizes is the static graph's. With
// `why_not_generic` set (a GPU plan with profiles, which emits the symbolic
// node itself once, for every shape), that node must also get a
// shape-generic kernel (PassOptions::why_not_shape_generic) and is asked
// about as it is: the kernel's decisions for the whole range.
std::string ask_codegen(const WhyNoKernel& why_no_kernel, FusedParts& parts, const Group& grp,
                        const std::vector<SymbolBindings>& ends = {}, const WhyNoKernel& why_not_generic = {});

// Turns the groups into fused nodes; returns how many were made and counts
// kinds in `stats`. `built`: parts already built for some groups (by group
// id), used instead of building them again.
int outline_groups(Graph& g, const FusionState& s, PassStats& stats, std::unordered_map<int, FusedParts> built = {});

}  // namespace kiln::fusion
