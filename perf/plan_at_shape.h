// A plan with shape profiles as it runs at one shape, for the performance
// model (perf/plan_estimate.h): the launch list the runtime issues there
// (each node's launch variant for the shape, runtime/plan_launch_variants.h),
// the shape-generic launches' grids evaluated, every binding sized as at the
// shape (a result's bytes from its size polynomial, section `profiles`), and
// the graph specialised to it. `kiln inspect --perf` models a plan with
// profiles at its first profile's opt shape this way.
#pragma once
#include <memory>

#include "ir/graph.h"
#include "ir/symbolic_dim.h"
#include "runtime/plan_format.h"

namespace kiln::perf {

struct PlanAtShape {
  SymbolBindings at;
  plan::Plan plan;               // meta, kernels, weight table (no weight data) and the launch list at `at`
  std::unique_ptr<Graph> graph;  // the plan's graph specialised to `at`
  size_t variant_launches = 0;   // launches that come from launch variants
};

PlanAtShape plan_at_shape(const plan::Plan& p, const Graph& g, const SymbolBindings& at);

}  // namespace kiln::perf
