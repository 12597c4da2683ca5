#include "tools/kiln/onnx_to_plan.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "compiler/targets.h"
#include "ir/file_io.h"
#include "ir/error.h"
#include "tools/kiln/compile_messages.h"

namespace kiln {

std::string refuse_ort_level(const std::string& v) {
  for (const char* level : {"0", "1", "2", "99"})
    if (v == level)
      return fmt::format(
          "'{}' is not a plan file name: -o writes the plan (as kiln compile -o); onnxruntime_perf_test's -o LEVEL "
          "is --no-opt (0) or the default pipeline here",
          v);
  return "";
}

void add_save_engine_flag(CLI::App* cmd, std::string& path) {
  cmd->add_option("-o,--save-engine,--saveEngine", path,
                  "Write the plan this command builds (as kiln compile -o; then kiln run|bench FILE runs it)")
      ->check(refuse_ort_level, "FILE")
      ->group("Model");
}

bool runs_through_plan(const std::string& target, const std::string& save_engine) {
  return is_gpu_target(target) || !save_engine.empty();
}

void save_plan(const std::string& path, const CompileResult& r) {
  if (!r.plan.empty()) write_file(path, r.plan.data(), r.plan.size());  // else compile_model wrote it there
  std::cerr << fmt::format("{}: plan written; GPU kernels: {}\n", path,
                           r.plan_gpu_kernels ? fmt::format("{} for {}", r.plan_gpu_kernels, r.plan_target)
                                              : "none (" + r.no_gpu_reason + ")");
}

CompileResult compile_to_plan(const ModelSource& model, CompileModelOptions o, const std::string& save_path) {
  StderrCompileMessages messages(o.build.show_progress);
  messages.attach(o);
  o.write_plan = true;
  CompileResult r = compile_model(model, o);
  if (!save_path.empty()) save_plan(save_path, r);
  return r;
}

std::string build_times(const CompileResult& r) {
  return fmt::format(
      "{:.1f} ms: import {:.1f} ms, passes {:.1f} ms, kernels {:.1f} ms (emitted and NVRTC-compiled), plan {:.1f} ms",
      r.import_ms + r.passes_ms + r.kernels_ms + r.plan_ms, r.import_ms, r.passes_ms, r.kernels_ms, r.plan_ms);
}

nlohmann::json build_times_json(const CompileResult& r) {
  return {{"import", r.import_ms}, {"passes", r.passes_ms}, {"kernels", r.kernels_ms}, {"plan", r.plan_ms}};
}

}  // namespace kiln
