// `kiln compile MODEL.onnx`: import and optimise (--stats, --json,
// --dump-dir, --print-ir-*); -o MODEL.plan writes a plan file. The pipeline
// is compiler/compile_model.h's; this file only maps flags and output.
#include <CLI/CLI.hpp>

#include <iostream>

#include "compiler/compile_model.h"
#include "compiler/targets.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/compile_flags.h"
#include "tools/kiln/compile_messages.h"
#include "tools/kiln/model_stdin.h"
#include "tools/kiln/onnx_to_plan.h"
#include "tools/kiln/output_paths.h"

namespace kiln {

CLI::App* register_compile(CLI::App& app, CompileCommand& c) {
  auto* cmd = app.add_subcommand("compile", "Import an ONNX model and optimise it");
  cmd->add_option("model,--onnx", c.model, "Model file (.onnx; trtexec's --onnx=FILE names it too)")
      ->required()
      ->group("Model");
  cmd->add_option("--shapes", c.shapes, "Fix input shapes: name:1x3x224x224,...; repeatable")
      ->join(',')
      ->group("Model");
  add_shape_profile_flags(cmd, c.min_shapes, c.opt_shapes, c.max_shapes);
  add_batch_flag(cmd, c.batch);
  cmd->add_option("--sequence-shapes", c.sequence_shapes,
                  "Sequence inputs (kiln unrolls sequences, so their length is fixed when compiling): each one's "
                  "element shapes, name:2x3+4x3,... (name: for an empty sequence); element k is the input name[k]")
      ->group("Model");
  cmd->add_option("--empty-optionals", c.empty_optionals, "Optional inputs given no value: name,...")
      ->delimiter(',')
      ->group("Model");
  cmd->add_option("--opt-variants", c.opt_variants,
                  "Shape profiles on a GPU target: launches specialised for each --opt-shapes shape where the "
                  "performance model finds them faster (auto), for every shape-generic node (all), or none "
                  "(docs/dynamic_shapes.md)")
      ->check(CLI::IsMember({"auto", "all", "none"}))
      ->group("Model");
  cmd->add_option("--json", c.json_out, "Write the compile report as JSON")->group("Reporting");
  cmd->add_option("-o,--output", c.plan_out, "Write a plan file for the runtime (MODEL.plan)")
      ->check(refuse_ort_level, "FILE")
      ->group("Model");
  cmd->add_flag("--print-ir", c.print_final, "Print the final IR to stdout")->group("Reporting");
  // No silent CPU: without --target, a GPU plan for this machine's GPU or a
  // portable one (compiler/targets.h resolves "auto").
  c.copts.pass.target = kTargetAuto;
  add_compile_flags(cmd, c.copts);
  add_tuning_flags(cmd, c.tuning);
  return cmd;
}

int run_compile(CompileCommand& c) {
  const ModelSource source = model_source_of(c.model);  // "-": standard input (tools/kiln/model_stdin.h)
  c.model = source.display_name;                        // for the messages below
  CompileModelOptions o;
  o.build = c.copts;
  o.input_shapes = parse_shapes_flag(c.shapes);
  o.sequence_shapes = parse_sequence_shapes_flag(c.sequence_shapes);
  o.empty_optionals = c.empty_optionals;
  // Profile k: the k-th --min-shapes and --max-shapes (and --opt-shapes, if
  // given for every profile; else opt is each profile's max).
  set_shape_profiles(o, parse_shape_profiles(c.model, c.min_shapes, c.opt_shapes, c.max_shapes));
  o.tuning = c.tuning;
  o.print_final_ir = c.print_final;
  o.write_plan = !c.plan_out.empty();
  o.plan_path = c.plan_out;  // streamed into the file, not returned as bytes
  o.batch = c.batch;
  if (c.opt_variants != "auto" && c.min_shapes.empty())
    fail("{}: --opt-variants {} applies to shape profiles (--min-shapes/--max-shapes), and none is given", c.model,
         c.opt_variants);
  o.opt_variants = c.opt_variants;
  StderrCompileMessages messages(c.copts.show_progress);  // log lines and progress on stderr
  messages.attach(o);
  CompileResult r = compile_model(source, o);
  if (!c.json_out.empty()) write_text_file(c.json_out, r.report.dump(2) + "\n");
  if (!c.plan_out.empty()) save_plan(c.plan_out, r);
  return 0;
}

}  // namespace kiln
