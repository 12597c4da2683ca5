// The fuser's rules: whether two groups may become one kernel. The groups
// and what each op is to fusion are in passes/fusion_state.h;
// passes/fuse.cpp drives the rules; passes/fuse_outline.cpp turns the final
// groups into `fused` nodes.
//
// A group is one future GPU kernel. It has at most one anchor:
//  - none (Plain): pointwise and injective ops evaluated on demand over one
//    iteration space, so every value it writes has one shape;
//  - Compute: conv / conv_transpose / gemm / matmul / attention, plus an
//    epilogue applied to each output element as it is stored;
//  - Reduction: softmax, layer_normalization, reduce_*, pooling... plus a
//    prologue (a Plain group computing its data operand while it is read)
//    and an epilogue;
//  - Attention: matmul -> pointwise -> softmax(last axis) -> pointwise ->
//    matmul, softmax(QK^T)V as one flash-attention kernel, plus an epilogue.
// Epilogue values carry a "map id": values with the same id hold the same
// elements of the anchor's output in the same order (pointwise ops and
// reshapes keep the id, transpose and split start new ones). An epilogue op
// may combine only in-group values of one id and one shape, so each output
// element is produced from one accumulator element: no broadcast of
// in-group values, no mixing of different elements.
#pragma once
#include <string>

#include "passes/fusion_state.h"

namespace kiln::fusion {

// The kind attribute of the fused node made from a group.
std::string group_kind_name(const Group& g);

// Each check returns "" when the merge is legal, else why not (for --stats).
// Anchored group `g` takes `c` into its epilogue (c is a singleton).
std::string check_epilogue(const FusionState& s, int g, const Node& c);
// Two groups without anchors become one (c's group and a producer's group).
std::string check_plain(const FusionState& s, int a, int b);
// Plain group `p` becomes the prologue of reduction `r` (a singleton).
std::string check_prologue(const FusionState& s, int p, const Node& r);
// Layer norm `r` (a singleton) joins the epilogue of GEMM group `g`, to run
// in its split-K reduction kernel (docs/fusion.md, "A layer norm after a
// matmul"; codegen decides whether the split pays): it normalizes the last
// axis of an epilogue value holding the GEMM's elements in their order, and
// reads nothing else of the group. `x_map` is the map id of its data operand
// (given: when that operand's op is still to join, it has none yet). The
// cycle check is the caller's, over the whole union.
std::string check_row_norm(const FusionState& s, int g, const Node& r, int x_map);
// matmul `m2` closes an attention kernel: its operand 0 comes from a softmax
// group whose input comes from a matmul group. Sets `scores` and `probs`.
std::string check_attention(const FusionState& s, const Node& m2, int& scores, int& probs);

// "%name" of a value for messages, "(unnamed)" when it has no name.
std::string value_label(const Value* v);

}  // namespace kiln::fusion
