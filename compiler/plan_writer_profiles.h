// The parts of build_plan (compiler/plan_writer.h) for graphs whose shapes are
// not fixed: symbolic dims with shape profiles (docs/dynamic_shapes.md) and
// result sizes decided at run time (ir/data_dependent.h). Internal to the
// compiler library.
#pragma once
#include <memory>
#include <string>

#include "compiler/plan_writer.h"
#include "ir/graph.h"
#include "runtime/plan_format.h"

namespace kiln::planbuild {

// Appends `t` to the plan's weights (aligned); returns its index.
uint32_t add_weight(plan::Plan& p, const Tensor& t);

// Whether constant `c` is an i64 tensor holding a symbolic shape value.
bool holds_symbolic_values(const Value& c);

// Long constants holding symbolic shape values: their bytes would be
// process-local handles (ir/symbolic_dim.h).
void refuse_symbolic_constants(const Graph& g, const std::string& where);

// The graph at the largest shapes of its profiles (null for a static graph).
// Refuses what a plan with profiles cannot hold yet: long constants holding
// symbolic shape values (their bytes would be process-local handles,
// ir/symbolic_dim.h). A GPU target's nodes are checked by
// refuse_non_generic_nodes.
std::unique_ptr<Graph> graph_at_largest_shapes(const Graph& g, const PlanBuildOptions& o);

// Section `profiles`: the profiles, and per memory entry its bytes as a
// polynomial of the symbols. A size that shrinks as a symbol grows (a
// negative coefficient) would not be bounded by the layout at the largest
// shapes: refused.
void record_profiles(const Graph& g, const PlanBuildOptions& o, plan::Plan& p);

// A graph with result sizes decided at run time (ir/data_dependent.h): a CPU
// plan only, whose graph the runtime's CPU path runs stage by stage, each
// stage allocating its results at their real sizes. No arena is laid out
// (nothing runs from one), so the `profiles` section holds the input
// profiles without per-result sizes.
plan::Plan data_dependent_plan(const Graph& g, const PlanBuildOptions& o, plan::Plan p);

}  // namespace kiln::planbuild
