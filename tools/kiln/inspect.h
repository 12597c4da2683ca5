// `kiln inspect MODEL.onnx`: what a model is and whether kiln can compile it,
// without compiling: inputs/outputs, opsets, op histogram, weight bytes, and
// every node kiln cannot import (the frontend's collecting mode). The same
// collecting import `kiln compile` runs before any pass (compiler/import_checked.h).
#pragma once
#include <string>

#include "frontend/onnx_import.h"

namespace CLI {
class App;
}

namespace kiln {

struct InspectOptions {
  std::string model;
  std::string shapes;     // --shapes, as for compile
  std::string json_path;  // --json: the same report as JSON
  bool perf = false;      // --perf (plans): the performance model's report instead of the listing
  std::string gpu;        // --gpu for --perf: h100|h200|a100|l4 (empty: the plan's arch decides)
};

CLI::App* register_inspect(CLI::App& app, InspectOptions& o);
// Prints the report to stdout; 0 when every node is supported, 1 otherwise.
int run_inspect(const InspectOptions& o);

}  // namespace kiln
