// The subcommands of the kiln CLI that main.cpp registers and dispatches, one
// file each (cmd_<name>.cpp): each fills a plain options struct from its
// flags (register_*) and runs it (run_*), returning the exit code. The work
// itself lives in compiler/ (compile_model), backends/ and runtime/.
#pragma once
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/tuning.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace kiln {

struct ConformanceOptions;

// kiln compile MODEL.onnx [-o MODEL.plan]
struct CompileCommand {
  std::string model, shapes, json_out, plan_out;
  // Sequence and optional inputs' structure (frontend/onnx_import.h CompositeInput).
  std::string sequence_shapes;
  std::vector<std::string> empty_optionals;
  // Shape profiles (docs/dynamic_shapes.md): the k-th use of each flag is profile k.
  std::vector<std::string> min_shapes, opt_shapes, max_shapes;
  int batch = 0;  // --batch N (0: the model's own)
  bool print_final = false;
  std::string opt_variants = "auto";  // --opt-variants (docs/dynamic_shapes.md "Specialised launches")
  CompileOptions copts;
  TuningOptions tuning;
};
CLI::App* register_compile(CLI::App& app, CompileCommand& c);
int run_compile(CompileCommand& c);

// kiln run MODEL.onnx|MODEL.plan
struct RunCommand {
  std::string model, shapes, backend, inputs, outputs_dir;
  // Dynamic shapes (docs/dynamic_shapes.md): the k-th use of each flag is profile k.
  std::vector<std::string> min_shapes, opt_shapes, max_shapes;
  std::string compare;      // --compare ort
  std::string save_engine;  // --save-engine / -o: write the plan built from an .onnx model
  std::vector<std::string> input_ranges;
  int iterations = 1;
  int batch = 0;  // --batch N (0: the model's own)
  CompileOptions copts;
  const CLI::Option* target_flag = nullptr;  // --target, to tell "not given" from its default
};
CLI::App* register_run(CLI::App& app, RunCommand& c);
int run_run(RunCommand& c);

// kiln dump-ir MODEL.onnx|MODEL.plan
struct DumpIrCommand {
  std::string model, shapes, format = "text";
  bool optimize = false;
  bool fused_bodies = false, no_wrap = false;  // dot/svg: ir/dot_printer.h's DotOptions
  CompileOptions copts;
};
CLI::App* register_dump_ir(CLI::App& app, DumpIrCommand& c);
int run_dump_ir(DumpIrCommand& c);

// kiln opt FILE.kir
struct OptCommand {
  std::string kir;
  bool split = false;
  CompileOptions copts;
};
CLI::App* register_opt(CLI::App& app, OptCommand& c);
int run_opt(OptCommand& c);

// kiln conformance [PATH...] (the runner: conformance/conformance.h)
CLI::App* register_conformance(CLI::App& app, ConformanceOptions& o);

// kiln gen-op-docs FILE
struct GenOpDocsCommand {
  std::string out, conformance_json;
};
CLI::App* register_gen_op_docs(CLI::App& app, GenOpDocsCommand& c);
int run_gen_op_docs(const GenOpDocsCommand& c);

// --max-tensor-bytes / --max-total-bytes (ir/limits.h, docs/security.md) on
// every subcommand that reads models; apply_limit_flags sets ir/limits.h's.
struct LimitFlags {
  std::string max_tensor_bytes, max_total_bytes;
};
void add_limit_flags(const std::vector<CLI::App*>& cmds, LimitFlags& f);
void apply_limit_flags(const LimitFlags& f);

}  // namespace kiln
