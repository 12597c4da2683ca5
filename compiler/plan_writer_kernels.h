// Internal to the plan builder (compiler/plan_writer.cpp): a GPU plan's
// kernels. build_plan emits every node's kernels (node_kernels) before the
// memory plan, which places the scratch they ask for; add_kernels then writes
// the launch list, has NVRTC compile the kernels for the target's archs and
// puts them into the plan, each launch checked against what ptxas allocated.
#pragma once
#include <map>

#include "compiler/plan_writer.h"
#include "ir/control_flow.h"
#include "ir/graph.h"

namespace kiln::planbuild {

// Every node of `g` and of its control-flow regions (depth first) but the
// control-flow nodes themselves, which run host-driven (plan::ControlFlow).
template <typename F>
void for_each_kernel_node(const Graph& g, const F& f) {
  for (const auto& n : g.nodes()) {
    if (is_control_flow(*n)) {
      for (const auto& r : n->regions()) for_each_kernel_node(*r, f);
      continue;
    }
    f(*n);
  }
}

// Threads per block the emitters of a node may use (codegen::ThreadCap), per
// node whose launch did not fit with more (build_plan).
using ThreadCaps = std::map<const Node*, unsigned>;

}  // namespace kiln::planbuild

#ifdef KILN_HAVE_CODEGEN
#include <cstdint>
#include <vector>

#include "compiler/plan_frames.h"
#include "compiler/plan_writer_variants.h"
#include "ir/symbolic_dim.h"
#include "passes/memory_plan.h"

namespace kiln::planbuild {

// The kernels of every node of `g` that needs one (o.kernels' when given),
// node by node; a node in `caps` is emitted with at most that many threads
// per block.
NodeKernels node_kernels(const Graph& g, const PlanBuildOptions& o, const ThreadCaps& caps);

// `nks`, the kernels of symbolic graph `g`, keyed by the nodes of `at_max`
// (its specialisation to the profiles' largest shapes).
NodeKernels kernels_at_largest_shapes(const Graph& g, const Graph& at_max, NodeKernels nks, const PlanBuildOptions& o);

// Places the split-K tile counters' zeroed region past the arena.
void add_tile_counters_region(const NodeKernels& nks, int64_t variant_counters, plan::Plan& p);

// The launch list, launch variants and in-place appends of `g`, and the
// kernels they launch, compiled for every arch of o.target.
void add_kernels(const Graph& g, const MemoryPlan& mem, const MemoryPlanOptions& mo, const NodeKernels& nks,
                 const SymbolBindings& largest, const std::vector<OptShapeVariants>& variants,
                 const RowBuckets& buckets, const PlanBuildOptions& o, plan::Plan& p);

}  // namespace kiln::planbuild
#endif
