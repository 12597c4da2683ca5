// Fused nodes of kind "reduction" (docs/fusion.md): one reduction-category
// anchor, a prologue computing its operands on demand as they are read, the
// prologue's values used outside written as extra results of the input's
// shape, and an epilogue applied as each anchor result element is stored.
//
// fused_anchor_io() turns the body into an AnchorIO (codegen/core/kernel_io.h)
// for the anchor's emitter:
//   buffers: the node's results out0.., its operands in0.., then the body's
//            constants (FusedAnchor::constants) -- sim_executor's order;
//   load(k, idx): the anchor's operand k through the body evaluator
//            (codegen/core/emit_body_eval.h); with record, also stores every result
//            that is a prologue value (a lambda kiln_rec);
//   store(r, idx, v): a lambda kiln_st<r>(idx, v) storing anchor result r
//            where it is a result, and computing the epilogue ops that
//            depend on it (pointwise ops, reshape/identity) at the same
//            element, their other operands read through the evaluator with
//            broadcasting; each epilogue value that is a result is stored.
// Unsupported (kiln::Unsupported naming the node): epilogue injective ops
// other than reshape/identity (transpose, slice, split... would need the
// inverse index map), an epilogue op mixing two anchor results, prologue
// results whose shape differs from operand 0's.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "codegen/emitters/reduction/emit_reduction.h"
#include "codegen/core/kernel_io.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace kiln::codegen {

struct FusedAnchor {
  const Node* anchor = nullptr;  // the body's reduction-category node
  AnchorIO io;
  std::vector<Tensor> constants;  // buffers after the node's operands
};

// Whether `n` is a fused node of kind "reduction" with exactly one
// reduction-category node whose other body nodes the evaluator handles.
bool is_reduction_fused(const Node& n, const OpRegistry& ops);
// The same test with the anchors another emitter takes (emit_fused_pool:
// pools, argmax...): `anchor_ok(op)` instead of this emitter's list.
bool is_reduction_fused_with(const Node& n, const OpRegistry& ops, bool (*anchor_ok)(const std::string& op));

// `computed`: body inputs that are no buffer but computed by a lambda of that
// name, which the caller defines ahead of io.setup (BodyEvaluator::computed_by;
// the buffers of the other inputs keep the inputs' order).
FusedAnchor fused_anchor_io(const Node& n, const OpRegistry& ops,
                            const std::map<const Value*, std::string>& computed = {});

// The kernel of a fused reduction node whose anchor is reduce_*, softmax,
// log_softmax or a normalization (emit_normalization); Unsupported for other
// anchors (pooling, argmax...: their emitters take an AnchorIO the same way).
ReductionKernel emit_fused_reduction(const Node& n, const OpRegistry& ops, std::vector<Tensor>* constants);

}  // namespace kiln::codegen
