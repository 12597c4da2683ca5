// ONNX adapters for the index family (see import_context.h). Ops without an
// entry here import 1:1 under their default kiln name.
#include "frontend/import_context.h"

namespace kiln::adapters {

void register_index(AdapterTable& t) {}

}  // namespace kiln::adapters
