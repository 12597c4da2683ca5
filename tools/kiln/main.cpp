// kiln: the command-line driver, a shell over compiler/ (compile_model),
// backends/ and runtime/. Subcommands, one file each (tools/kiln/cmd_*.cpp,
// inspect.cpp, bench.cpp, doctor.cpp):
//   compile MODEL.onnx        import and optimise; --stats, --json, --dump-dir, --print-ir-*;
//                             -o MODEL.plan writes a plan file (runtime/plan_format.h)
//   run MODEL.onnx|MODEL.plan compile (or load the plan) and run on a backend, timing it;
//                             inputs from --inputs name:file.npy or seeded random
//   inspect MODEL.onnx        I/O, opsets, ops, weights, and every node kiln cannot compile;
//   inspect MODEL.plan        a plan's archs, kernels, launches, memory plan, weights, I/O
//   bench MODEL.onnx|.plan    trtexec-style timing summary on a backend; --profile per node/kernel
//   dump-ir MODEL.onnx        print the imported IR (-O or --passes: after passes)
//   opt FILE.kir              parse IR text, run --passes, verify, print (what FileCheck tests drive)
//   conformance [PATH...]     run ONNX backend tests through the pipeline on a backend
//   gen-op-docs FILE          write docs/ops.md
//   doctor [PLAN]             the CUDA driver, GPUs, NVRTC; whether PLAN runs on a GPU here
// Exit codes: 0 ok, 1 user error (bad model, flag, unsupported op, a resource
// limit or host memory exhausted), 2 internal error.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

#include "compiler/plan_sniff.h"
#include "frontend/regex_re2.h"
#include "ir/error.h"
#include "ir/limits.h"
#include "tools/kiln/bench.h"
#include "tools/kiln/cli_checks.h"
#include "tools/kiln/cli_style.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/dump_dir_staging.h"
#include "conformance/conformance.h"
#include "tools/kiln/doctor.h"
#include "tools/kiln/inspect.h"
#include "tools/kiln/output_paths.h"

int main(int argc, char** argv) {
  // IR text (kiln opt, dump-ir of .kir) may hold regex_full_match without an ONNX import.
  kiln::frontend::install_re2_regex_engine();
  CLI::App app{"kiln: an ONNX graph compiler and runtime"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");
  kiln::add_verbosity_flag(app);

  kiln::CompileCommand compile_cmd;
  auto* compile = kiln::register_compile(app, compile_cmd);
  kiln::RunCommand run_cmd;
  auto* run = kiln::register_run(app, run_cmd);
  kiln::DumpIrCommand dump_cmd;
  auto* dump = kiln::register_dump_ir(app, dump_cmd);
  kiln::OptCommand opt_cmd;
  auto* opt = kiln::register_opt(app, opt_cmd);
  kiln::ConformanceOptions conf_opts;
  auto* conf = kiln::register_conformance(app, conf_opts);
  kiln::InspectOptions inspect_opts;
  auto* inspect = kiln::register_inspect(app, inspect_opts);
  kiln::BenchOptions bench_opts;
  auto* bench = kiln::register_bench(app, bench_opts);
  kiln::DoctorOptions doctor_opts;
  auto* doctor = kiln::register_doctor(app, doctor_opts);
  kiln::GenOpDocsCommand docs_cmd;
  auto* docs = kiln::register_gen_op_docs(app, docs_cmd);
  kiln::LimitFlags limit_flags;
  kiln::add_limit_flags({compile, run, dump, conf}, limit_flags);

  kiln::apply_cli_style(app);
  if (std::string e = kiln::unknown_subcommand_error(app, argc, argv); !e.empty()) {
    std::cerr << "error: " << e << "\n";
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (std::string m = kiln::repeated_flag_error(e.what()); !m.empty()) {
      std::cerr << "error: " << m << "\n";
      return 1;
    }
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // As every other error: "error: " first (CLI11 prints the bare text), so
    // a script or a reader finds it the same way.
    std::cerr << "error: " << e.what() << "\nRun with --help for more information.\n";
    return 1;
  }
  kiln::apply_verbosity(
      {&compile_cmd.copts, &run_cmd.copts, &dump_cmd.copts, &opt_cmd.copts, &bench_opts.compile, &conf_opts.compile});
  if (kiln::verbosity() >= 1) conf_opts.verbose = true;

  // The model named in an out-of-memory message.
  const std::string model = *compile ? compile_cmd.model : *run ? run_cmd.model : *dump ? dump_cmd.model : "";
  try {
    kiln::apply_limit_flags(limit_flags);
    // A plan is compiled already: flags that only compiling reads are
    // mistakes (the model may be a renamed plan: its bytes decide).
    if (*run && kiln::is_plan_file(run_cmd.model)) kiln::reject_compile_flags_for_plan(*run, run_cmd.model);
    if (*dump && kiln::is_plan_file(dump_cmd.model)) kiln::reject_compile_flags_for_plan(*dump, dump_cmd.model);
    if (*bench && kiln::is_plan_file(bench_opts.model)) kiln::reject_compile_flags_for_plan(*bench, bench_opts.model);
    // --dump-dir is written beside and moved into place when the command
    // ends; an interrupt leaves none of it (tools/kiln/dump_dir_staging.h).
    kiln::StagedDumpDir dump_dir(
        {&compile_cmd.copts, &run_cmd.copts, &dump_cmd.copts, &opt_cmd.copts, &bench_opts.compile, &conf_opts.compile});
    // Every file and folder kiln will write, before any compile or run.
    for (const CLI::App* sub : app.get_subcommands()) kiln::check_output_flags(*sub);
    dump_dir.begin();
    if (*compile) return kiln::run_compile(compile_cmd);
    if (*run) return kiln::run_run(run_cmd);
    if (*dump) return kiln::run_dump_ir(dump_cmd);
    if (*opt) return kiln::run_opt(opt_cmd);
    if (*inspect) return kiln::run_inspect(inspect_opts);
    if (*bench) return kiln::run_bench(bench_opts);
    if (*conf) return kiln::run_conformance(conf_opts);
    if (*doctor) return kiln::run_doctor(doctor_opts);
    if (*docs) return kiln::run_gen_op_docs(docs_cmd);
  } catch (const kiln::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    // Every size is checked against the limits before allocating; running out
    // anyway means the limits are above what this machine can give.
    std::cerr << fmt::format(
        "error: {}out of host memory (limits: {} bytes per tensor, {} bytes of weights; lower "
        "them with --max-tensor-bytes / --max-total-bytes)\n",
        model.empty() ? "" : model + ": ", kiln::limits().max_tensor_bytes, kiln::limits().max_total_bytes);
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // The user's disk, not a kiln bug (a folder vanished, a disk filled up
    // after the up-front checks): exit 1 with the operating system's reason.
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
