// Fused nodes (passes/fuse.cpp, docs/fusion.md) as one generated kernel.
//
// Now: a `fused` node of kind "pointwise" whose body holds only pointwise ops
// (OpCategory::Pointwise). The kernel iterates over the results' shape (all
// results of such a group have one shape); every body node is one
// emit_expr() in the body's (topological) order, reading the body's inputs
// broadcast to that shape or earlier nodes' results; each body output is
// stored. A body value of a smaller shape is computed at the output's
// coordinates, which gives the same element (broadcasting composes).
#pragma once
#include <vector>

#include "codegen/emitters/elementwise/emit_pointwise.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace kiln::codegen {

struct FusedPointwiseKernel {
  PointwiseKernel kernel;         // buffers: the node's results, its operands, then `constants`
  std::vector<Tensor> constants;  // constants the body reads (small ones live in bodies)
};

// `ops`: the op definitions (ops/registry.h's op_registry()).
// Whether `n` is a fused node that emit_fused_pointwise() handles.
bool is_pointwise_fused(const Node& n, const OpRegistry& ops);

// Throws kiln::Unsupported when !is_pointwise_fused(n), kiln::Error when the
// body is inconsistent.
FusedPointwiseKernel emit_fused_pointwise(const Node& n, const OpRegistry& ops);

// Every check emit_fused_pointwise makes, without writing text: throws what it
// would throw (the two share one function, so they cannot disagree).
void check_fused_pointwise(const Node& n, const OpRegistry& ops);

// Whether `n` is a fused node of kind "pointwise" or "injective" whose body
// holds pointwise and injective ops (with index maps) that
// emit_fused_on_demand() handles.
bool is_on_demand_fused(const Node& n, const OpRegistry& ops);

// One kernel for such a body: a grid-stride loop over the results' shape
// (all results of the group have one shape); each result's element computed
// by the body evaluator (codegen/core/emit_body_eval.h). Buffers as
// emit_fused_pointwise's: the results, the node's operands, `constants`.
FusedPointwiseKernel emit_fused_on_demand(const Node& n, const OpRegistry& ops);

}  // namespace kiln::codegen
