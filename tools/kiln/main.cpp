// kiln: the command-line driver. Subcommands:
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

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/limits.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "runtime/plan_graph.h"
#include "tools/kiln/backends.h"
#include "tools/kiln/bench.h"
#include "tools/kiln/cli_checks.h"
#include "tools/kiln/cli_style.h"
#include "compiler/compile.h"
#include "tools/kiln/conformance.h"
#include "tools/kiln/docs_gen.h"
#include "tools/kiln/doctor.h"
#include "compiler/dump_index.h"
#include "tools/kiln/inspect.h"
#include "compiler/ir_picture.h"
#include "compiler/kernels_report.h"
#include "tools/kiln/output_paths.h"
#include "tools/kiln/output_report.h"
#include "compiler/plan_sniff.h"
#include "compiler/plan_writer.h"
#include "compiler/progress.h"
#include "tools/kiln/run_inputs.h"
#include "tools/kiln/run_plan.h"
#include "tools/kiln/tensor_io.h"
#include "compiler/tuning.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) kiln::fail("{}: cannot open file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

kiln::ImportResult import_model(const std::string& model, const std::string& shapes) {
  kiln::ImportOptions io;
  io.input_shapes = kiln::parse_shapes_flag(shapes);
  kiln::ImportResult r = kiln::import_onnx_file(model, io);
  std::vector<std::string> inputs;
  for (const kiln::Value* v : r.graph->inputs()) inputs.push_back(v->name());
  kiln::check_shapes_names(io.input_shapes, inputs, model);
  return r;
}

void print_stats(const kiln::CompileOptions& o, const kiln::CompileReport& r) {
  if (o.stats) std::cerr << kiln::format_stats(r);
}

int run_opt(const std::string& kir, bool split, kiln::CompileOptions copts) {
  std::string text = kir == "-" ? std::string(std::istreambuf_iterator<char>(std::cin), {}) : read_file(kir);
  // With --split-input-file each piece is parsed, run, verified and printed on
  // its own; an error in one is reported and the others still run (as
  // mlir-opt does), so one FileCheck file can hold many error cases.
  std::vector<kiln::InputChunk> chunks;
  if (split) chunks = kiln::split_input_file(text);
  else chunks.push_back({text, 1});
  copts.optimize = !copts.passes.empty();
  bool failed = false;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (i) std::cout << "// -----\n";
    try {
      auto g = kiln::parse_graph(chunks[i].text, kir, chunks[i].first_line);
      try {
        kiln::verify_graph(*g, kiln::op_registry());
      } catch (const kiln::Error& e) {
        kiln::fail("{}: graph @{}: {}", kir, g->name(), e.what());
      }
      copts.pipeline.print_to = &std::cout;
      print_stats(copts, kiln::compile_graph(*g, copts));
      std::cout << kiln::print_graph(*g);
    } catch (const kiln::Error& e) {
      if (!split) throw;
      std::cout.flush();
      std::cerr << "error: " << e.what() << "\n";
      failed = true;
    }
  }
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: an ONNX graph compiler and runtime"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");
  kiln::add_verbosity_flag(app);

  std::string model, shapes_flag, json_out;
  kiln::CompileOptions copts;

  auto* compile = app.add_subcommand("compile", "Import an ONNX model and optimise it");
  compile->add_option("model", model, "Model file (.onnx)")->required()->group("Model");
  compile->add_option("--shapes", shapes_flag, "Fix input shapes: name:1x3x224x224,...")->group("Model");
  compile->add_option("--json", json_out, "Write the compile report as JSON")->group("Reporting");
  std::string plan_out;
  compile->add_option("-o,--output", plan_out, "Write a plan file for the runtime (MODEL.plan)")->group("Model");
  bool print_final = false;
  compile->add_flag("--print-ir", print_final, "Print the final IR to stdout")->group("Reporting");
  add_compile_flags(compile, copts);
  kiln::TuningOptions tuning_opts;
  kiln::add_tuning_flags(compile, tuning_opts);

  std::string backend;
  int iterations = 1;
  std::string inputs_flag, outputs_dir;
  std::vector<std::string> input_ranges;
  auto* run = app.add_subcommand("run", "Compile a model (or load a plan) and run it on a backend");
  run->add_option("model", model, "Model file (.onnx) or plan (.plan)")->required()->group("Model");
  run->add_option("--shapes", shapes_flag, "Fix input shapes: name:1x3x224x224,...")->group("Model");
  run->add_option("--backend", backend,
                  "Backend: ref, sim (generated kernels on the CPU simulator); plans also auto (default: the GPU "
                  "when usable, else ref) and gpu")
      ->group("Runtime");
  kiln::add_input_flags(run, inputs_flag, input_ranges);
  run->add_option("--outputs", outputs_dir,
                  "Write each output as DIR/<name>.npy (bytes outside [A-Za-z0-9._-] become _; docs/cli.md)")
      ->group("Runtime");
  run->add_option("--iterations", iterations, "Runs to time")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()))->group("Runtime");
  add_compile_flags(run, copts);

  auto* dump = app.add_subcommand("dump-ir", "Print the IR of an ONNX model (after passes with -O or --passes)");
  dump->add_option("model", model, "Model file (.onnx), or a plan (prints the plan's graph)")->required()->group("Model");
  dump->add_option("--shapes", shapes_flag, "Fix input shapes: name:1x3x224x224,...")->group("Model");
  bool dump_opt = false;
  dump->add_flag("-O,--optimize", dump_opt, "Run the default pipeline first")->group("Build");
  std::string dump_format = "text";
  dump->add_option("--format", dump_format, "text (kiln IR), dot (Graphviz), svg (rendered by Graphviz dot)")
      ->check(CLI::IsMember({"text", "dot", "svg"}))
      ->group("Reporting");
  add_compile_flags(dump, copts);

  std::string kir;
  bool split = false;
  auto* opt = app.add_subcommand("opt", "Read IR text, run passes (--passes), verify and print it");
  opt->add_option("file", kir, "IR text file (.kir), - for stdin")->required();
  opt->add_flag("--split-input-file", split, "Treat '// -----' lines as separators between graphs");
  add_compile_flags(opt, copts);

  kiln::ConformanceOptions conf_opts;
  auto* conf = app.add_subcommand("conformance", "Run ONNX backend tests (model.onnx + test_data_set_N)");
  conf->add_option("paths", conf_opts.paths, "Test folders or folders of them (default: Debian's libonnx-testdata)");
  conf->add_option("--backend", conf_opts.backend, "Backend: ref, sim (generated kernels on the CPU simulator)");
  conf->add_option("--json", conf_opts.json_path, "Write results as JSON");
  conf->add_option("--filter", conf_opts.filter, "Only tests whose name contains this");
  conf->add_option("-j,--jobs", conf_opts.jobs, "Tests run at once (default: CPUs)");
  conf->add_option("--timeout", conf_opts.timeout_s, "Seconds per test before it counts as a crash");
  conf->add_flag("-v,--verbose", conf_opts.verbose, "Print every test that does not pass");
  conf->add_flag("--show-errors", conf_opts.show_errors, "Print max abs/rel errors of passing tests too");
  conf->add_option("--require-pass", conf_opts.require_pass,
                   "Gate: SUITE[+SUITE...]:PERCENT must pass (exit code then reflects the gates)");
  conf->add_option("--baseline", conf_opts.baseline_json,
                   "Fail if a test that passed in this earlier JSON result does not pass now");
  conf->add_option("--tolerance", conf_opts.tolerance,
                   "ATOL,RTOL for floating outputs instead of the per-dtype defaults (loosened to --precision's; "
                   "whole models)");
  conf->add_option("--nvrtc-check", conf_opts.nvrtc_archs,
                   "Also compile every test's kernels with NVRTC for these archs (sm_80,sm_90) and report "
                   "kernel count, registers, spills")
      ->delimiter(',');
  add_compile_flags(conf, conf_opts.compile);

  kiln::InspectOptions inspect_opts;
  auto* inspect = kiln::register_inspect(app, inspect_opts);
  kiln::BenchOptions bench_opts;
  auto* bench = kiln::register_bench(app, bench_opts);
  kiln::DoctorOptions doctor_opts;
  auto* doctor = kiln::register_doctor(app, doctor_opts);

  std::string docs_out, docs_json;
  auto* docs = app.add_subcommand("gen-op-docs", "Write docs/ops.md from the op registry and a conformance run");
  docs->add_option("out", docs_out, "Output Markdown file")->required();
  docs->add_option("--conformance", docs_json, "JSON from `kiln conformance --json` for the status columns");

  // Resource limits (ir/limits.h, docs/security.md) on every subcommand that reads models.
  std::string max_tensor_bytes, max_total_bytes;
  for (CLI::App* cmd : {compile, run, dump, conf}) {
    cmd->add_option("--max-tensor-bytes", max_tensor_bytes,
                    "Largest tensor a model may make kiln allocate (bytes; k/M/G/T suffixes; env "
                    "KILN_MAX_TENSOR_BYTES)")
        ->group("Limits");
    cmd->add_option("--max-total-bytes", max_total_bytes,
                    "Largest total size of a model's weights (bytes; k/M/G/T suffixes; env KILN_MAX_TOTAL_BYTES)")
        ->group("Limits");
  }

  kiln::apply_cli_style(app);
  if (std::string e = kiln::unknown_subcommand_error(app, argc, argv); !e.empty()) {
    std::cerr << "error: " << e << "\n";
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  kiln::apply_verbosity({&copts, &bench_opts.compile, &conf_opts.compile});
  if (kiln::verbosity() >= 1) conf_opts.verbose = true;

  copts.pipeline.source = model;  // passes' errors name the model, as the importer's do
  try {
    if (!max_tensor_bytes.empty())
      kiln::limits().max_tensor_bytes = kiln::parse_byte_size(max_tensor_bytes, "--max-tensor-bytes");
    if (!max_total_bytes.empty())
      kiln::limits().max_total_bytes = kiln::parse_byte_size(max_total_bytes, "--max-total-bytes");
    // A plan is compiled already: flags that only compiling reads are
    // mistakes (the model may be a renamed plan: its bytes decide).
    if (*run && kiln::is_plan_file(model)) kiln::reject_compile_flags_for_plan(*run, model);
    if (*dump && kiln::is_plan_file(model)) kiln::reject_compile_flags_for_plan(*dump, model);
    if (*bench && kiln::is_plan_file(bench_opts.model)) kiln::reject_compile_flags_for_plan(*bench, bench_opts.model);
    // Every file and folder kiln will write, before any compile or run.
    for (const CLI::App* sub : app.get_subcommands()) kiln::check_output_flags(*sub);
    if (*compile) {
      auto t0 = std::chrono::steady_clock::now();
      auto r = kiln::import_checked(model, shapes_flag);  // fails fast listing every unsupported node
      double import_ms = ms_since(t0);
      kiln::CompileReport rep = kiln::compile_graph(*r.graph, copts);
      print_stats(copts, rep);
      if (print_final) std::cout << kiln::print_graph(*r.graph);
      // Tuned GEMM tiles (docs/tuning.md): the chooser lives until the plan is written.
      std::unique_ptr<kiln::TuningSession> tuning;
      if (tuning_opts.active())
        tuning = std::make_unique<kiln::TuningSession>(*r.graph, tuning_opts, copts.pass.target, copts.cache_dir,
                                                       copts.kernel_cache);
      // Codegen: every kernel emitted and compiled with NVRTC for the target.
      kiln::KernelsOutcome kernels = kiln::build_kernels(*r.graph, copts, true);
      if (!copts.pipeline.dump_dir.empty()) kiln::write_dump_index(*r.graph, copts, model);
      if (copts.stats) std::cerr << kiln::format_kernel_stats(kernels);
      else if (kernels.built) std::cerr << kiln::kernels_summary(kernels) << "\n";
      nlohmann::json j = kiln::compile_report_json(*r.graph, rep);
      const nlohmann::json kj = kiln::kernels_json(kernels);
      for (auto& [k, v] : kj.items()) j[k == "built" ? "kernels_built" : k] = v;
      j["model"] = model;
      j["import_ms"] = import_ms;
      j["precision"] = copts.pass.precision;
      j["target"] = copts.pass.target;
      if (tuning) {
        j["tuning"] = tuning->json();
        std::cerr << tuning->summary() << "\n";
      }
      if (!json_out.empty()) {
        kiln::write_text_file(json_out, j.dump(2) + "\n");
      }
      std::cerr << fmt::format("{}: {} nodes in, {} out, {} kernels, {:.1f} ms import + {:.1f} ms passes\n", model,
                               rep.nodes_in, rep.nodes_out, kiln::count_kernels(*r.graph), import_ms,
                               ms_since(t0) - import_ms);
      if (!plan_out.empty()) {
        // The kernels were just compiled: cache hits, unless --no-kernel-cache
        // (then NVRTC again, with progress once it takes a second).
        kiln::Progress plan_progress("plan kernels compiled", 1.0);
        kiln::plan::Plan p = kiln::build_plan(*r.graph, {copts.pass.target, copts.pass.precision, copts.cache_dir,
                                                         copts.kernel_cache, plan_progress.callback()});
        kiln::plan::write_plan_file(plan_out, p);
        std::cerr << fmt::format("{}: plan written; GPU kernels: {}\n", plan_out,
                                 p.meta.gpu_kernels ? fmt::format("{} for {}", p.kernels.size(), p.meta.target)
                                                    : "none (" + p.meta.no_gpu_reason + ")");
      }
    } else if (*dump && kiln::is_plan_file(model)) {
      // The plan's optimized graph, as the runtime reads it back.
      kiln::plan::Plan p = kiln::plan::read_plan_file(model);
      std::cout << kiln::render_graph(*kiln::plan::load_graph(p, model), dump_format);
    } else if (*dump) {
      auto r = import_model(model, shapes_flag);
      copts.optimize = dump_opt || !copts.passes.empty();
      print_stats(copts, kiln::compile_graph(*r.graph, copts));
      std::cout << kiln::render_graph(*r.graph, dump_format);
    } else if (*opt) {
      return run_opt(kir, split, copts);
    } else if (*run && kiln::is_plan_file(model)) {
      kiln::RunPlanOptions ro;
      ro.backend = backend.empty() ? "auto" : backend;
      ro.inputs = inputs_flag;
      ro.input_ranges = input_ranges;
      ro.outputs_dir = outputs_dir;
      ro.iterations = iterations;
      return kiln::run_plan_command(model, ro);
    } else if (*run) {
      if (backend.empty() || backend == "auto") backend = "ref";
      if (backend == "gpu") kiln::fail("--backend gpu runs plans: kiln compile {} --target sm_XX -o MODEL.plan", model);
      auto t0 = std::chrono::steady_clock::now();
      auto r = import_model(model, shapes_flag);
      // Inputs before the passes: a misnamed --inputs fails in milliseconds,
      // and a Gather fused away still bounds the ids it reads.
      std::vector<std::pair<std::string, kiln::TensorType>> decl;
      for (kiln::Value* in : r.graph->inputs()) decl.emplace_back(in->name(), in->type());
      std::vector<std::string> described;
      std::map<std::string, kiln::Tensor> feed =
          kiln::make_run_inputs(decl, {inputs_flag, input_ranges, kiln::index_bounds(*r.graph)}, &described);
      kiln::CompileReport rep = kiln::compile_graph(*r.graph, copts);
      double compile_ms = ms_since(t0);
      print_stats(copts, rep);
      for (const std::string& d : described) std::cout << d << "\n";
      std::vector<kiln::Tensor> outs;
      double best = 1e30;
      for (int i = 0; i < std::max(1, iterations); ++i) {
        auto a = std::chrono::steady_clock::now();
        try {
          outs = kiln::run_on_backend(backend, *r.graph, feed, copts.cache_dir);
        } catch (const kiln::Error& e) {
          // Name the model, as compile errors do.
          if (dynamic_cast<const kiln::Unsupported*>(&e)) kiln::unsupported("{}: {}", model, e.what());
          kiln::fail("{}: {}", model, e.what());
        }
        best = std::min(best, ms_since(a));
      }
      std::cout << fmt::format("backend: {} ({})\n", backend,
                               backend == "sim" ? "generated kernels on the CPU simulator"
                                                : "CPU reference; for the GPU, run a plan: kiln compile --target sm_XX -o");
      std::cout << fmt::format("compile: {:.1f} ms, {} nodes -> {} nodes, {} kernels\n", compile_ms, rep.nodes_in,
                               rep.nodes_out, kiln::count_kernels(*r.graph));
      std::vector<std::pair<std::string, kiln::Tensor>> named;
      for (size_t i = 0; i < outs.size(); ++i) named.emplace_back(r.graph->outputs()[i]->name(), outs[i]);
      kiln::report_outputs(named, outputs_dir, copts.pass.precision);
      std::cout << fmt::format("run: {:.2f} ms (best of {})\n", best, std::max(1, iterations));
    } else if (*inspect) {
      return kiln::run_inspect(inspect_opts);
    } else if (*bench) {
      return kiln::run_bench(bench_opts);
    } else if (*conf) {
      return kiln::run_conformance(conf_opts);
    } else if (*doctor) {
      return kiln::run_doctor(doctor_opts);
    } else if (*docs) {
      kiln::write_op_docs(docs_out, docs_json);
    }
  } catch (const kiln::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    // Every size is checked against the limits before allocating; running out
    // anyway means the limits are above what this machine can give.
    std::cerr << fmt::format("error: {}out of host memory (limits: {} bytes per tensor, {} bytes of weights; lower "
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
