// The kiln source tree the unit tests were built from (for files they read,
// such as examples/models/tiny_cnn.onnx).
#pragma once
#include <string>

namespace kiln {

std::string test_source_dir();

}  // namespace kiln
