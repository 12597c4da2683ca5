// Helpers shared by the plan and runtime tests: compile a model or IR text
// into plan bytes the way `kiln compile -o` does.
#pragma once
#include <string>
#include <vector>

#include "frontend/onnx_import.h"
#include "runtime/plan_format.h"
#include "tests/unit/pass_test_util.h"
#include "tests/unit/test_source_dir.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"

namespace kiln::testing {

inline std::string tiny_cnn_path() { return test_source_dir() + "/examples/models/tiny_cnn.onnx"; }

// Imports, runs the default pipeline for `target`, returns the compiled graph.
inline std::unique_ptr<Graph> compile_onnx(const std::string& path, const std::string& target = "cpu") {
  auto r = import_onnx_file(path);
  CompileOptions o;
  o.pass.target = target;
  compile_graph(*r.graph, o);
  return std::move(r.graph);
}

inline std::unique_ptr<Graph> compile_text(const std::string& text, const std::string& target = "cpu") {
  auto g = parse(text);
  CompileOptions o;
  o.pass.target = target;
  compile_graph(*g, o);
  return g;
}

inline std::vector<uint8_t> plan_bytes(const Graph& g, const std::string& target = "cpu") {
  return plan::serialize(build_plan(g, {target, "fp32", {}}));
}

}  // namespace kiln::testing
