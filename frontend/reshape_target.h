// ONNX Reshape's shape spec (0 = copy the input dim unless allowzero,
// -1 = inferred) resolved against the input shape; with symbolic dims
// (docs/dynamic_shapes.md) dims multiply as polynomials and -1 is the exact
// polynomial quotient of the element counts. Errors name the node.
#pragma once
#include <cstdint>
#include <vector>

#include "frontend/import_context.h"

namespace kiln::adapters {

Shape resolve_reshape(ImportContext& c, const Shape& in, const std::vector<int64_t>& spec, bool allowzero);

}  // namespace kiln::adapters
