// What the compiler reads: an ONNX file, or a model's bytes with the name
// its messages use (the builder API's kiln_compile_memory, Python).
#pragma once
#include <string>
#include <utility>

namespace kiln {

struct ModelSource {
  std::string path;          // the .onnx file; empty for bytes
  std::string bytes;         // the model itself when path is empty
  std::string display_name;  // the name in messages (path, for a file)
  std::string base_dir;      // where external data files live, for bytes

  static ModelSource file(const std::string& path) { return {path, {}, path, {}}; }
  static ModelSource memory(std::string bytes, const std::string& name, const std::string& base_dir = "") {
    return {{}, std::move(bytes), name, base_dir};
  }
};

}  // namespace kiln
