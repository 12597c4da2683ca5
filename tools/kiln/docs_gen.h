// Writes docs/ops.md from the op registry and the ONNX adapter table, so the
// list of supported ops can never drift from the code.
#pragma once
#include <string>

namespace kiln {
void write_op_docs(const std::string& path);
}
