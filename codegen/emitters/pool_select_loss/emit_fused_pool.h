// Fused nodes of kind "reduction" whose anchor is a pool (max/average/lp and
// the global pools) or argmax/argmin/hardmax: the anchor's emitter
// (emit_pool_op / emit_select_op) with its seams replaced by the fused node's
// anchor hook (fused_anchor_io, codegen/emitters/reduction/emit_fused_reduction.h): operand 0
// computed by the prologue as it is read, the epilogue applied at each store,
// prologue results recorded on the kernel's read-once pass.
// Window pools read overlapping windows and have no read-once pass: a node
// whose prologue values are also results is kiln::Unsupported there.
#pragma once
#include <vector>

#include "codegen/core/kernel_shell.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace kiln::codegen {

// Whether `n` is a fused reduction node with exactly one reduction-category
// node, a pool or argmax/argmin/hardmax, whose other body nodes the body
// evaluator handles.
bool is_pool_select_fused(const Node& n, const OpRegistry& ops);

// The kernel; `constants` receives the body's constants (buffers after the
// node's operands).
std::vector<OpKernel> emit_pool_select_fused(const Node& n, const OpRegistry& ops, std::vector<Tensor>* constants);

}  // namespace kiln::codegen
