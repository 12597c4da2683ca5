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

}  // namespace kiln
