// The compile-time integer operands of the shape-family adapters
// (frontend/adapters_shape.cpp, adapters_slice_pad.cpp,
// adapters_constants.cpp): shapes, axes, starts/ends, pads, repeats.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "frontend/import_context.h"

namespace kiln::adapters {

// A compile-time integer list operand (shape, axes, starts, pads...), 1-D
// (or a scalar where `allow_scalar`).
inline std::vector<int64_t> int_list(ImportContext& c, int i, const std::string& what, bool allow_scalar = false,
                                     bool allow_symbolic = false) {
  const Tensor& t = allow_symbolic ? c.require_shape_value(i, what) : c.require_value(i, what);
  if (!is_int(t.dtype())) c.fail("{} must be an integer tensor, got {}", what, t.type().str());
  if (t.rank() != 1 && !(allow_scalar && t.rank() == 0))
    c.fail("{} must be a 1-D tensor, got {}", what, t.type().str());
  return t.to_int_vector();
}

// Normalises axes against `rank`, rejecting out-of-range and repeated ones.
inline std::vector<int64_t> norm_axes(ImportContext& c, const std::vector<int64_t>& axes, int rank, const char* what) {
  std::vector<int64_t> r;
  std::set<int64_t> seen;
  for (int64_t a : axes) {
    int64_t n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank) c.fail("{} {} is out of range for rank {}", what, a, rank);
    if (!seen.insert(n).second) c.fail("{} {} is repeated", what, a);
    r.push_back(n);
  }
  return r;
}

}  // namespace kiln::adapters
