// Resolving an external-data location safely, as ONNX's own checker does:
// no absolute paths, no ".." after normalisation, no symlinks anywhere on the
// path, and a regular file inside the model's folder.
#pragma once
#include <string>

namespace kiln {

// Returns the path to open; throws kiln::Error naming `context` otherwise.
std::string resolve_external_data_path(const std::string& base_dir, const std::string& location,
                                       const std::string& context);

}  // namespace kiln
