// The shape-generic predicates of the emitter table (KernelEmitter::shape_generic,
// codegen/emitter_table.h): for a plan with shape profiles, whether a
// family's kernels for node `n` take its symbolic sizes (docs/dynamic_shapes.md,
// "Shape-generic GPU kernels"; docs/codegen.md). Internal to codegen.
#pragma once
#include "ir/graph.h"

namespace kiln::codegen::generic {

bool any_node(const Node& n);
bool generic_reduction(const Node& n);
bool generic_fused_reduction(const Node& n);
bool generic_normalization(const Node& n);
bool generic_gemm(const Node& n);
bool generic_attention(const Node& n);
bool generic_conv(const Node& n);
bool generic_pool(const Node& n);
bool generic_pool_or_scan(const Node& n);
bool generic_fused_pool(const Node& n);
bool generic_fused_on_demand(const Node& n);
bool generic_resize(const Node& n);
bool generic_range(const Node& n);
// Whether the kernel of `n` computes every constant holding symbolic shape
// values that it reads from `ks` (a scalar of a pointwise or fused pointwise
// kernel, range's start and delta), rather than reading its buffer.
bool reads_symbolic_constants(const Node& n);

}  // namespace kiln::codegen::generic
