// A GPU plan for a graph with data-dependent result sizes (NonZero,
// NonMaxSuppression, TopK with a run-time k; docs/dynamic_shapes.md
// "Data-dependent sizes in GPU plans"), computed at the upper bounds.
//
// Each data-dependent node is lowered to its bounded form (its result at the
// bound, entries past the count zero, the count a second result its kernel
// writes on the device; topk runs with k = the axis size, sorted, and its
// count is the k operand) and every size symbol is replaced by its bound, so the
// graph is static: every pass (folding, fusion, layout, precision, memory
// planning) and every kernel family runs on it as on any other, the arena is
// planned at the bounds, and the run is one CUDA Graph with no host read in
// between. The counts become extra graph outputs; the runtime reads them
// after the run and trims each output (runtime/plan_bounded_sizes.h).
//
// That is exact only when the real result is the first `count` entries of the
// bound one, so the consumers of a data-dependent dim must keep each entry
// along it to itself: pointwise ops, transpose, gather_nd by such indices,
// reshape where the dim stays the outermost one, expand, split, and
// concat/slice/reductions/softmax along other dims; or be rewritten so they
// do (compiler/gpu_bounded_lowering.h: concat and gather along such a dim,
// masked sum/max/min/prod reductions and topk, NMS over a counted box list,
// constants holding sizes, clamped slices, top-level ifs deciding sizes,
// inlined). Anything else (a mean, softmax or sort along the dim, a matmul
// contracting it, a nonzero reading it, loops or nested regions deciding
// sizes, graphs that also have shape profiles) is refused by name.
#pragma once
#include <memory>
#include <string>

#include "ir/graph.h"
#include "runtime/plan_bounded_sizes.h"

namespace kiln {

// The static graph to compile for a GPU target, and in `sizes` what the plan
// records. `model` names the model in errors (kiln::Unsupported naming the
// node, its op and the size symbol).
std::unique_ptr<Graph> graph_at_bounds(const Graph& g, const std::string& model, plan::BoundedSizes& sizes);

}  // namespace kiln
