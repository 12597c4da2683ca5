// Helpers of the layout pass (passes/layout.cpp): which nodes can work on
// channels-last values, how their attributes change, and permutations of
// dims and constant data. See docs/ir.md "Layouts" for the representation.
#pragma once
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace kiln::layout {

using Perm = std::vector<int64_t>;

// How a node takes part in a channels-last region.
struct Rule {
  int rank = 0;                  // rank of its channels-last values (>= 3)
  std::vector<int> images;       // operands that must be channels-last (constants get permuted data)
  std::vector<bool> out_images;  // per result: channels-last (a reduce that drops dims may end a region)
  bool anchor = false;           // conv: a region goes channels-last only if it holds one
};

// A constant whose data is loaded (one parsed by reference has none).
bool has_data(const Value* v);

// The rule for `n`, or nullopt when `n` stays channels-first (its operands
// are then given to it channels-first, with transposes where needed).
// Anchors: conv. Layout-sensitive ops that take layout="nhwc": max/average/lp
// pool, the global pools, batch/instance/group norm. Ops whose dim attributes
// are remapped: resize, concat, split, slice, pad, reduce_*. Pointwise ops
// whose operands are images of the result's rank, constants (any rank: they
// are unsqueezed and permuted) or single elements.
std::optional<Rule> rule_for(const Node& n);

// Rewrites n's attributes for channels-last operands: layout="nhwc", or the
// dim attributes permuted (axis, axes, starts/ends/steps, pads, sizes, scales, roi).
void set_nhwc_attrs(Node& n, const Rule& r);

// result[i] = dim perm[i] of the operand of `first` (a transpose by `first`
// then by `second` is one by compose(first, second)).
Perm compose(const Perm& first, const Perm& second);
bool is_identity(const Perm& p);

// t's elements transposed by perm (result dim i = t's dim perm[i]), typed
// with `layout`.
Tensor transpose_tensor(const Tensor& t, const Perm& perm, Layout layout);
// A constant operand of a channels-last op of rank `rank`: 1s prepended up to
// `rank`, then permuted to channels-last and tagged {nhwc}.
Tensor to_channels_last(const Tensor& t, int rank);

// Whether a channels-last shape [N, S..., C] holds its elements in the same
// order as its channels-first form (C == 1 or every spatial dim 1), so a
// reshape can stand for the transpose between them.
bool same_order_both_layouts(const Shape& channels_last);

}  // namespace kiln::layout
