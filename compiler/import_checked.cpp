#include "compiler/import_checked.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "compiler/plan_sniff.h"
#include "ir/error.h"
#include "runtime/plan_format.h"

namespace kiln {

namespace {

// compile, bench's compile path and the coverage check read ONNX; a plan is
// already compiled.
void reject_plan(const ModelSource& s) {
  const bool plan = s.path.empty() ? s.bytes.size() >= sizeof(plan::kMagic) &&
                                         std::memcmp(s.bytes.data(), plan::kMagic, sizeof(plan::kMagic)) == 0
                                   : is_plan_file(s.path);
  if (plan)
    fail("{}: this is a compiled plan; this command reads .onnx models (plans: kiln inspect, run, bench)",
         s.display_name);
}

}  // namespace

CollectedImport import_collecting(const ModelSource& source, ImportOptions io) {
  CollectedImport c;
  io.problems = &c.problems;
  try {
    c.result = source.path.empty() ? import_onnx_bytes(source.bytes, source.base_dir, source.display_name, io)
                                   : import_onnx_file(source.path, io);
  } catch (const Error& e) {
    c.model_error = e.what();
    c.model_error_unsupported = dynamic_cast<const Unsupported*>(&e) != nullptr;
  }
  return c;
}

ImportResult import_checked(const ModelSource& source, const ImportOptions& io) {
  reject_plan(source);
  CollectedImport c = import_collecting(source, io);
  if (!c.model_error.empty()) {
    if (c.model_error_unsupported) throw Unsupported(c.model_error);
    throw Error(c.model_error);
  }
  if (c.problems.empty()) {
    std::vector<std::string> inputs;
    for (const Value* v : c.result.graph->inputs()) inputs.push_back(v->name());
    check_shapes_names(io.input_shapes, inputs, source.display_name, io.names.shapes);
    check_shapes_names(io.min_shapes, inputs, source.display_name, io.names.min);
    check_shapes_names(io.opt_shapes, inputs, source.display_name, io.names.opt);
    check_shapes_names(io.max_shapes, inputs, source.display_name, io.names.max);
    return std::move(c.result);
  }
  std::string list;
  for (const ImportProblem& p : c.problems)
    list +=
        fmt::format("\n  node \"{}\" ({}){}: {}", p.node, p.op, p.unsupported ? "" : " [invalid]", problem_detail(p));
  std::string msg = fmt::format("{}: {} node(s) cannot be compiled:{}", source.display_name, c.problems.size(), list);
  if (std::all_of(c.problems.begin(), c.problems.end(), [](auto& p) { return p.unsupported; })) throw Unsupported(msg);
  throw Error(msg);
}

std::string problem_detail(const ImportProblem& p) {
  std::string key = fmt::format("node \"{}\" ({}): ", p.node, p.op);
  auto at = p.message.find(key);
  return at == std::string::npos ? p.message : p.message.substr(at + key.size());
}

void check_shapes_names(const std::map<std::string, Shape>& shapes, const std::vector<std::string>& inputs,
                        const std::string& model, const std::string& flag) {
  for (const auto& [name, dims] : shapes) {
    if (std::find(inputs.begin(), inputs.end(), name) != inputs.end()) continue;
    std::vector<std::string> quoted;
    for (const std::string& i : inputs) quoted.push_back("\"" + i + "\"");
    fail("{}: {} names \"{}\", which is not an input of the model (its inputs: {})", model, flag, name,
         quoted.empty() ? "none" : fmt::format("{}", fmt::join(quoted, ", ")));
  }
}

}  // namespace kiln
