// (to be written) see families.h for what this family holds.
#include "ops/families.h"
#include "ops/op_helpers.h"

namespace kiln::ops {

void register_normalization_ops(OpRegistry& r) {}

}  // namespace kiln::ops
