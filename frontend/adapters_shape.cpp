// ONNX adapters for the shape family (see import_context.h). Ops without an
// entry here import 1:1 under their default kiln name.
#include "frontend/import_context.h"

namespace kiln::adapters {

void register_shape(AdapterTable& t) {}

}  // namespace kiln::adapters
