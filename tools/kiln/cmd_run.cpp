// `kiln run MODEL.onnx|MODEL.plan`: compile (or load the plan) and run on a
// backend, timing it; inputs from --inputs name:file.npy or seeded random.
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <limits>

#include "backends/run_on_backend.h"
#include "compiler/import_checked.h"
#include "compiler/plan_sniff.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/compare_ort.h"
#include "tools/kiln/compile_flags.h"
#include "tools/kiln/output_report.h"
#include "tools/kiln/run_inputs.h"
#include "tools/kiln/run_plan.h"

namespace kiln {

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

CLI::App* register_run(CLI::App& app, RunCommand& c) {
  auto* run = app.add_subcommand("run", "Compile a model (or load a plan) and run it on a backend");
  run->add_option("model", c.model, "Model file (.onnx) or plan (.plan)")->required()->group("Model");
  run->add_option("--shapes", c.shapes, "Fix input shapes: name:1x3x224x224,...")->group("Model");
  run->add_option("--backend", c.backend,
                  "Backend: ref, sim (generated kernels on the CPU simulator); plans also auto (default: the GPU "
                  "when usable, else ref) and gpu")
      ->group("Runtime");
  add_input_flags(run, c.inputs, c.input_ranges);
  run->add_option("--outputs", c.outputs_dir,
                  "Write each output as DIR/<name>.npy (bytes outside [A-Za-z0-9._-] become _; docs/cli.md)")
      ->group("Runtime");
  run->add_option("--iterations", c.iterations, "Runs to time")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()))
      ->group("Runtime");
  add_compile_flags(run, c.copts);
  add_compare_flag(run, c.compare);
  return run;
}

int run_run(RunCommand& c) {
  if (is_plan_file(c.model)) {
    if (!c.compare.empty())
      fail("{}: --compare ort needs the ONNX model (ONNX Runtime cannot run a plan): kiln run MODEL.onnx --compare ort",
           c.model);
    RunPlanOptions ro;
    ro.backend = c.backend.empty() ? "auto" : c.backend;
    ro.inputs = c.inputs;
    ro.input_ranges = c.input_ranges;
    ro.outputs_dir = c.outputs_dir;
    ro.iterations = c.iterations;
    return run_plan_command(c.model, ro);
  }
  std::string backend = c.backend;
  if (backend.empty() || backend == "auto") backend = "ref";
  if (backend == "gpu") fail("--backend gpu runs plans: kiln compile {} --target sm_XX -o MODEL.plan", c.model);
  c.copts.pipeline.source = c.model;  // passes' errors name the model, as the importer's do
  auto t0 = std::chrono::steady_clock::now();
  std::string ort_exe = c.compare.empty() ? "" : ort_python();  // a missing ORT fails before the compile
  ImportOptions io;
  io.input_shapes = parse_shapes_flag(c.shapes);
  ImportResult r = import_onnx_file(c.model, io);
  std::vector<std::string> names;
  for (const Value* v : r.graph->inputs()) names.push_back(v->name());
  check_shapes_names(io.input_shapes, names, c.model);
  // Inputs before the passes: a misnamed --inputs fails in milliseconds,
  // and a Gather fused away still bounds the ids it reads.
  std::vector<std::pair<std::string, TensorType>> decl;
  for (Value* in : r.graph->inputs()) decl.emplace_back(in->name(), in->type());
  std::vector<std::string> described;
  std::map<std::string, Tensor> feed =
      make_run_inputs(decl, {c.inputs, c.input_ranges, index_bounds(*r.graph)}, &described);
  CompileReport rep = compile_graph(*r.graph, c.copts);
  double compile_ms = ms_since(t0);
  if (c.copts.stats) std::cerr << format_stats(rep);
  for (const std::string& d : described) std::cout << d << "\n";
  std::vector<Tensor> outs;
  double best = 1e30;
  for (int i = 0; i < std::max(1, c.iterations); ++i) {
    auto a = std::chrono::steady_clock::now();
    try {
      outs = run_on_backend(backend, *r.graph, feed, c.copts.cache_dir);
    } catch (const Error& e) {
      // Name the model, as compile errors do.
      if (dynamic_cast<const Unsupported*>(&e)) unsupported("{}: {}", c.model, e.what());
      fail("{}: {}", c.model, e.what());
    }
    best = std::min(best, ms_since(a));
  }
  std::cout << fmt::format("backend: {} ({})\n", backend,
                           backend == "sim" ? "generated kernels on the CPU simulator"
                                            : "CPU reference; for the GPU, run a plan: kiln compile --target sm_XX -o");
  std::cout << fmt::format("compile: {:.1f} ms, {} nodes -> {} nodes, {} kernels\n", compile_ms, rep.nodes_in,
                           rep.nodes_out, count_kernels(*r.graph));
  std::vector<std::pair<std::string, Tensor>> named;
  for (size_t i = 0; i < outs.size(); ++i) named.emplace_back(r.graph->outputs()[i]->name(), outs[i]);
  report_outputs(named, c.outputs_dir, c.copts.pass.precision);
  std::cout << fmt::format("run: {:.2f} ms (best of {})\n", best, std::max(1, c.iterations));
  if (!c.compare.empty() && !compare_with_ort(ort_exe, c.model, feed, named, c.copts.pass.precision)) return 1;
  return 0;
}

}  // namespace kiln
