// Shape helpers shared by op inference and kernels.
#pragma once
#include <string_view>
#include <vector>

#include "ir/tensor.h"

namespace kiln {

// Numpy-style multidirectional broadcasting; throws kiln::Error on mismatch.
Shape broadcast_shapes(const Shape& a, const Shape& b);
Shape broadcast_all(const std::vector<Shape>& shapes);
// Maps a possibly negative axis into [0, rank); throws naming `what`.
int normalize_axis(int64_t axis, int rank, std::string_view what = "axis");
// Row-major strides in elements.
std::vector<int64_t> strides_of(const Shape& s);
// Strides of `in` when read as broadcast to `out` (0 on broadcast dims).
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

// Layouts (docs/ir.md, "Layouts"): a channels-last ({nhwc}) value holds the
// dims of a channels-first tensor [N, C, S1..Sk] in the physical order
// [N, S1..Sk, C]. channels_last_perm(r) = [0, 2, .., r-1, 1] is the transpose
// perm from channels-first to channels-last, channels_first_perm(r) =
// [0, r-1, 1, .., r-2] the one back. Both need rank >= 2.
std::vector<int64_t> channels_last_perm(int rank);
std::vector<int64_t> channels_first_perm(int rank);
// result[i] = s[perm[i]] (perm must be a permutation of s's dims).
Shape permute_dims(const Shape& s, const std::vector<int64_t>& perm);

}  // namespace kiln
