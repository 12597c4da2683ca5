// `kiln compile MODEL.onnx`: import and optimise (--stats, --json,
// --dump-dir, --print-ir-*); -o MODEL.plan writes a plan file. The pipeline
// is compiler/compile_model.h's; this file only maps flags and output.
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>

#include "compiler/compile_model.h"
#include "compiler/progress.h"
#include "compiler/targets.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/compile_flags.h"
#include "tools/kiln/output_paths.h"

namespace kiln {

namespace {

void write_plan_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("{}: cannot write plan file", path);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("{}: write failed", path);
}

}  // namespace

CLI::App* register_compile(CLI::App& app, CompileCommand& c) {
  auto* cmd = app.add_subcommand("compile", "Import an ONNX model and optimise it");
  cmd->add_option("model", c.model, "Model file (.onnx)")->required()->group("Model");
  cmd->add_option("--shapes", c.shapes, "Fix input shapes: name:1x3x224x224,...")->group("Model");
  cmd->add_option("--json", c.json_out, "Write the compile report as JSON")->group("Reporting");
  cmd->add_option("-o,--output", c.plan_out, "Write a plan file for the runtime (MODEL.plan)")->group("Model");
  cmd->add_flag("--print-ir", c.print_final, "Print the final IR to stdout")->group("Reporting");
  // No silent CPU: without --target, a GPU plan for this machine's GPU or a
  // portable one (compiler/targets.h resolves "auto").
  c.copts.pass.target = kTargetAuto;
  add_compile_flags(cmd, c.copts);
  add_tuning_flags(cmd, c.tuning);
  return cmd;
}

int run_compile(CompileCommand& c) {
  CompileModelOptions o;
  o.build = c.copts;
  o.input_shapes = parse_shapes_flag(c.shapes);
  o.tuning = c.tuning;
  o.print_final_ir = c.print_final;
  o.write_plan = !c.plan_out.empty();
  o.log = [](const std::string& text) { std::cerr << text; };
  // One stderr progress line per step, shown as kiln's other long steps are.
  std::map<std::string, std::unique_ptr<Progress>> shown;
  std::mutex shown_mu;
  o.progress = [&](const std::string& step, int done, int total) {
    Progress* p;
    {
      std::lock_guard<std::mutex> lock(shown_mu);
      auto& slot = shown[step];
      if (!slot) slot = std::make_unique<Progress>(step);
      p = slot.get();
    }
    p->update(done, total);
  };
  CompileResult r = compile_model(ModelSource::file(c.model), o);
  if (!c.json_out.empty()) write_text_file(c.json_out, r.report.dump(2) + "\n");
  if (!c.plan_out.empty()) {
    write_plan_bytes(c.plan_out, r.plan);
    std::cerr << fmt::format("{}: plan written; GPU kernels: {}\n", c.plan_out,
                             r.plan_gpu_kernels ? fmt::format("{} for {}", r.plan_gpu_kernels, r.plan_target)
                                                : "none (" + r.no_gpu_reason + ")");
  }
  return 0;
}

}  // namespace kiln
