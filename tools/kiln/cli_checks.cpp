#include "tools/kiln/cli_checks.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>

#include "ir/error.h"

namespace kiln {

std::string unknown_subcommand_error(const CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  // The top-level options (-v, --version, --help) take no value, so the first
  // argument that is not an option is where the subcommand must be.
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.starts_with("-")) continue;
    if (std::find(names.begin(), names.end(), a) != names.end()) return "";
    return fmt::format("unknown subcommand '{}' (subcommands: {}; kiln --help describes them)", a,
                       fmt::join(names, ", "));
  }
  return "";
}

std::string repeated_flag_error(const std::string& what) {
  static const std::string kAtMost = ": At Most 1 required but received ";
  size_t at = what.find(kAtMost);
  if (at == std::string::npos) return "";
  std::string flag = what.substr(0, at);
  if (flag == "--onnx" || flag == "--loadEngine")  // CLI11 names the positional model by its long alias
    return fmt::format("the model is given {} times (MODEL, --onnx, --loadEngine name the same file); give it once",
                       what.substr(at + kAtMost.size()));
  return fmt::format("{} is given {} times; give it once", what.substr(0, at), what.substr(at + kAtMost.size()));
}

void reject_compile_flags_for_plan(const CLI::App& cmd, const std::string& plan_path) {
  // Every flag that shapes or reports the compilation; none of them reaches
  // the runtime that runs a plan.
  static const char* const kCompileOnly[] = {"--shapes",
                                             "--batch",
                                             "--precision",
                                             "--fp16",
                                             "--bf16",
                                             "--tf32",
                                             "--int8",
                                             "--target",
                                             "--passes",
                                             "--no-opt",
                                             "--optimize",
                                             "--print-ir-before",
                                             "--print-ir-after",
                                             "--print-ir-after-all",
                                             "--print-ir-after-change",
                                             "--stop-after",
                                             "--dump-dir",
                                             "--no-verify-each",
                                             "--no-kernel-cache",
                                             "--cache-dir",
                                             "--stats",
                                             "--save-engine"};
  std::vector<std::string> given;
  for (const char* name : kCompileOnly) {
    const CLI::Option* o = cmd.get_option_no_throw(name);
    if (o && o->count() > 0) given.push_back(name);
  }
  if (given.empty()) return;
  if (given.size() == 1 && given[0] == "--save-engine")
    fail(
        "{}: a plan is already compiled; --save-engine (-o) only applies when compiling an .onnx model (to keep "
        "this plan under another name, copy the file)",
        plan_path);
  bool shapes = std::find(given.begin(), given.end(), "--shapes") != given.end() ||
                std::find(given.begin(), given.end(), "--batch") != given.end();
  fail(
      "{}: a plan is already compiled; {} only {} when compiling an .onnx model{}; to change them, recompile: "
      "kiln compile MODEL.onnx {} ... -o {}",
      plan_path, fmt::join(given, ", "), given.size() == 1 ? "applies" : "apply",
      shapes ? " (a plan's shapes are fixed when it is compiled)" : "", given.front(), plan_path);
}

std::string check_backend_name(const std::string& name) {
  static const std::vector<std::string> kBackends = {"auto", "gpu", "ref", "sim"};
  if (std::find(kBackends.begin(), kBackends.end(), name) != kBackends.end()) return "";
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const bool case_only = std::find(kBackends.begin(), kBackends.end(), lower) != kBackends.end();
  return fmt::format("'{}' is not a backend (the backends: {}{})", name, fmt::join(kBackends, ", "),
                     case_only ? fmt::format("; names are lower case: --backend {}", lower) : "");
}

}  // namespace kiln
