// The rewrite behind a GPU plan computed at the bounds of its data-dependent
// sizes (compiler/gpu_bounded_sizes.h checks what it may be given): the graph
// with every size symbol replaced by its bound, made exact.
//
// Each size gets a count on the device, an i64[] value of the graph: the
// count result of a bounded nonzero or non_max_suppression, a topk's k
// operand, and, computed from the counts before them by small integer
// kernels, a clamped slice's min(end, n) - start and an if's count (the taken
// branch's). Everything that reads a size is then rewritten so that the real
// result is always the first entries of the bound one (the sub-box of the
// bound layout), with no host read in between (one CUDA Graph per run):
//
// - a constant holding a size (Shape of a data-dependent value, folded at
//   import) becomes the value its counts give;
// - a concat along a data-dependent dim packs its operands' real entries
//   (a gather whose indices the counts give), the rest zero;
// - a reduce_sum/max/min/prod along one, and a topk along one, see the
//   padding as the reduction's identity (or -inf / +inf for topk);
// - a non_max_suppression over boxes whose count is data-dependent takes that
//   count as a third operand, so padding boxes are never candidates;
// - a gather along a data-dependent dim wraps negative indices by the count,
//   not by the bound;
// - a slice clamping a data-dependent dim (start and step fixed, >= 0 and
//   >= 1) is the same slice at the bound, its count computed;
// - a top-level if deciding sizes runs both branches, inlined, at their
//   bounds; the condition is read on the device by `where`, which selects the
//   taken branch's results (each padded with zeros to the if's bound) and its
//   count. The cost: the branch not taken runs too.
#pragma once
#include <map>
#include <string>

#include "ir/graph.h"
#include "runtime/plan_bounded_sizes.h"

namespace kiln {

// Rewrites `g` (a clone of the imported graph, checked by graph_at_bounds) in
// place to the static graph at `bounds`, its counts appended to its outputs;
// `sizes` gets the counts and the user outputs' real shapes. `deciders`: each
// size symbol's node in the imported graph (for messages); `where`: the model
// and ": ", or "".
void lower_at_bounds(Graph& g, const SymbolBindings& bounds,
                     const std::map<std::string, const Node*, std::less<>>& deciders, const std::string& where,
                     plan::BoundedSizes& sizes);

}  // namespace kiln
