// Writes docs/ops.md from the op registry, the ONNX adapter table and a
// conformance result file, so the list of supported ops never drifts from
// the code: `kiln gen-op-docs docs/ops.md --conformance build/conformance_ref.json`.
#pragma once
#include <string>

namespace kiln {
void write_op_docs(const std::string& path, const std::string& conformance_json);
}
