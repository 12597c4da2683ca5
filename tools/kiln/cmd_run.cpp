// `kiln run MODEL.onnx|MODEL.plan`: compile (or load the plan) and run on a
// backend, timing it; inputs from --inputs name:file.npy or seeded random.
#include <CLI/CLI.hpp>

#include <chrono>
#include <iostream>
#include <limits>

#include "backends/data_dependent_run.h"
#include "backends/run_on_backend.h"
#include "compiler/import_checked.h"
#include "compiler/targets.h"
#include "compiler/plan_sniff.h"
#include "frontend/onnx_import.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "tools/kiln/cli_checks.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/compare_ort.h"
#include "tools/kiln/compile_flags.h"
#include "tools/kiln/compile_messages.h"
#include "tools/kiln/model_stdin.h"
#include "tools/kiln/onnx_to_plan.h"
#include "tools/kiln/output_report.h"
#include "tools/kiln/run_inputs.h"
#include "tools/kiln/run_plan.h"

namespace kiln {

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// `kiln run MODEL.onnx` with a GPU target or --save-engine: the model becomes
// a plan in memory (saved when asked) and runs through the runtime, as
// `kiln run MODEL.plan` runs it, on --backend auto (default: the GPU when
// usable, else the runtime's CPU path, said on the backend line), gpu, ref or
// sim (the plan's own kernels on the CPU simulator).
// --backend gpu (or sim through a plan) with a target that builds no GPU
// kernels. The message says what the user gave: their --target, or none
// (then the default of a machine without a GPU is the CPU, and blaming a
// "--target cpu" they never typed would send them looking for it).
[[noreturn]] void refuse_backend_without_kernels(const RunCommand& c, const std::string& backend) {
  if (c.target_flag && c.target_flag->count() > 0)
    fail("{}: --backend {} runs GPU kernels and --target {} builds none: add --target auto, portable or sm_XX ({})",
         c.model, backend, c.copts.pass.target,
         backend == "gpu" ? "kiln doctor names this GPU's arch" : "the simulator runs any GPU arch's kernels");
  // No --target and a GPU present would have chosen it (choose_default_target).
  if (backend == "gpu")
    fail(
        "{}: --backend gpu runs GPU kernels, and no --target was given: with no GPU here ({}) kiln run's default "
        "target is the CPU, which builds none. Run it where a GPU is (there the default target is that GPU; kiln "
        "doctor checks), build a plan for one here with `kiln compile {} --target sm_XX -o model.plan`, or run on "
        "the CPU with --backend ref",
        c.model, detect_local_gpu().why, c.model);
  fail(
      "{}: --backend {} runs a plan's GPU kernels, and no --target was given: kiln run's default target here is the "
      "CPU, which builds none; add --target portable or sm_XX (the simulator runs any GPU arch's kernels)",
      c.model, backend);
}

int run_onnx_through_plan(RunCommand& c, const ModelSource& source) {
  const std::string backend = c.backend.empty() ? "auto" : c.backend;
  if (!is_gpu_target(c.copts.pass.target) && (backend == "gpu" || backend == "sim"))
    refuse_backend_without_kernels(c, backend);
  std::string ort_exe = c.compare.empty() ? "" : ort_python();  // a missing ORT fails before the compile
  CompileModelOptions o;
  o.build = c.copts;
  o.input_shapes = parse_shapes_flag(c.shapes);
  set_shape_profiles(o, parse_shape_profiles(c.model, c.min_shapes, c.opt_shapes, c.max_shapes));
  o.batch = c.batch;
  CompileResult built = compile_to_plan(source, o, c.save_engine);
  std::cout << fmt::format("compile: {}; {} nodes -> {} nodes, GPU kernels: {}\n", build_times(built),
                           built.passes.nodes_in, built.passes.nodes_out,
                           built.plan_gpu_kernels ? fmt::format("{} for {}", built.plan_gpu_kernels, built.plan_target)
                                                  : "none (" + built.no_gpu_reason + ")");
  RunPlanOptions ro;
  ro.backend = backend;
  ro.inputs = c.inputs;
  ro.input_ranges = c.input_ranges;
  ro.outputs_dir = c.outputs_dir;
  ro.iterations = c.iterations;
  PlanRunResult ran;
  int rc = run_plan_command(PlanSource{c.model, &built.plan}, ro, &ran);
  if (rc == 0 && !c.compare.empty() &&
      !compare_with_ort(ort_exe, c.model, ran.feed, ran.outputs, c.copts.pass.precision))
    return 1;
  return rc;
}

// No --target: as `kiln compile`'s default (auto), the local GPU when there
// is one; without one the model runs on the CPU reference backend (a saved
// plan is a CPU plan) and a warning says so and how to get GPU kernels --
// never a silent CPU run (issue 14). --backend ref or sim asks for a CPU
// backend, and --backend gpu without a GPU target is an error of its own:
// nothing to warn about.
void choose_default_target(RunCommand& c) {
  if (c.target_flag && c.target_flag->count() > 0) return;
  if (c.backend == "ref" || c.backend == "sim") return;
  LocalGpu gpu = detect_local_gpu();
  if (gpu.present) {
    c.copts.pass.target = kTargetAuto;  // resolved (and said on stderr) when the plan is built
    return;
  }
  if (c.backend == "gpu") return;
  std::cerr << fmt::format(
      "warning: {}: no GPU here ({}): running on the CPU reference backend, not on GPU kernels. For GPU kernels, "
      "run it where a GPU is (kiln doctor checks), or build a plan here with `kiln compile {} -o model.plan` (a "
      "portable GPU plan) and run that on a GPU machine; --backend ref asks for the CPU without this warning\n",
      c.model, gpu.why, c.model == kStdinName ? "-" : c.model);
}

}  // namespace

CLI::App* register_run(CLI::App& app, RunCommand& c) {
  auto* run = app.add_subcommand("run", "Compile a model (or load a plan) and run it on a backend");
  run->add_option("model,--onnx,--loadEngine", c.model,
                  "Model file (.onnx) or plan (.plan); trtexec's --onnx=FILE / --loadEngine=FILE name it too")
      ->required()
      ->group("Model");
  run->add_option("--shapes", c.shapes, "Fix input shapes: name:1x3x224x224,...; repeatable")
      ->join(',')
      ->group("Model");
  add_shape_profile_flags(run, c.min_shapes, c.opt_shapes, c.max_shapes);
  add_batch_flag(run, c.batch);
  add_save_engine_flag(run, c.save_engine);
  run->add_option("--backend", c.backend,
                  "Backend: ref, sim (generated kernels on the CPU simulator); plans and GPU targets also auto "
                  "(their default: the GPU when usable, else ref) and gpu")
      ->check(check_backend_name, "BACKEND")
      ->group("Runtime");
  add_input_flags(run, c.inputs, c.input_ranges);
  run->add_option("--outputs", c.outputs_dir,
                  "Write each output as DIR/<name>.npy (bytes outside [A-Za-z0-9._-] become _; docs/cli.md)")
      ->group("Runtime");
  run->add_option("--iterations", c.iterations, "Runs to time")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()))
      ->group("Runtime");
  add_compile_flags(run, c.copts);
  c.target_flag = run->get_option("--target");
  add_compare_flag(run, c.compare);
  return run;
}

namespace {

// kiln run on a graph with data-dependent result sizes: the passes run per
// stage inside the run, so they are timed with it; the size symbols the run
// bound are printed with the outputs.
int run_data_dependent(RunCommand& c, const Graph& g, const std::map<std::string, Tensor>& feed,
                       const std::vector<std::string>& described, const std::string& backend,
                       const std::string& ort_exe) {
  for (const std::string& d : described) std::cout << d << "\n";
  DataDependentRunHooks hooks;
  hooks.prepare = [&](Graph& stage) { compile_graph(stage, c.copts); };
  DataDependentRunResult res;
  double best = 1e30;
  for (int i = 0; i < std::max(1, c.iterations); ++i) {
    auto a = std::chrono::steady_clock::now();
    try {
      res = run_with_data_dependent_sizes(backend, g, feed, hooks, c.copts.cache_dir);
    } catch (const Error& e) {
      if (dynamic_cast<const Unsupported*>(&e)) unsupported("{}: {}", c.model, e.what());
      fail("{}: {}", c.model, e.what());
    }
    best = std::min(best, ms_since(a));
  }
  std::vector<std::string> sizes;
  for (const auto& [sym, node] : data_dependent_symbols(g)) {
    // A node in the branch of an if that was not taken decided nothing.
    auto it = res.symbols.find(sym);
    sizes.push_back(it == res.symbols.end() ? fmt::format("{} not run ({})", sym, node->describe())
                                            : fmt::format("{}={} ({})", sym, it->second, node->describe()));
  }
  std::cout << fmt::format("backend: {} ({})\n", backend,
                           backend == "sim" ? "generated kernels on the CPU simulator" : "CPU reference");
  std::cout << fmt::format("data-dependent sizes: {}; {} static stages, each through the passes when it ran\n",
                           fmt::join(sizes, ", "), res.stages);
  std::vector<std::pair<std::string, Tensor>> named;
  for (size_t i = 0; i < res.outputs.size(); ++i) named.emplace_back(g.outputs()[i]->name(), res.outputs[i]);
  report_outputs(named, c.outputs_dir, c.copts.pass.precision);
  std::cout << fmt::format("run: {:.2f} ms (best of {}, passes included)\n", best, std::max(1, c.iterations));
  if (!c.compare.empty() && !compare_with_ort(ort_exe, c.model, feed, named, c.copts.pass.precision)) return 1;
  return 0;
}

}  // namespace

int run_run(RunCommand& c) {
  if (!is_stdin_arg(c.model) && is_plan_file(c.model)) {
    if (!c.compare.empty())
      fail("{}: --compare ort needs the ONNX model (ONNX Runtime cannot run a plan): kiln run MODEL.onnx --compare ort",
           c.model);
    RunPlanOptions ro;
    ro.backend = c.backend.empty() ? "auto" : c.backend;
    ro.inputs = c.inputs;
    ro.input_ranges = c.input_ranges;
    ro.outputs_dir = c.outputs_dir;
    ro.iterations = c.iterations;
    return run_plan_command(PlanSource{c.model}, ro);
  }
  // "-": the model from standard input (tools/kiln/model_stdin.h), named
  // "<stdin>" in messages from here on.
  const ModelSource source = model_source_of(c.model);
  if (source.path.empty() && !c.compare.empty())
    fail(
        "{}: --compare ort runs ONNX Runtime on the model's file, and this model came from standard input: give "
        "its path",
        source.display_name);
  c.model = source.display_name;
  choose_default_target(c);
  // With --min/--opt/--max-shapes through a plan, the plan carries the
  // profile (compile_model refuses a GPU target: no shape-generic kernels yet).
  if (runs_through_plan(c.copts.pass.target, c.save_engine)) return run_onnx_through_plan(c, source);
  std::string backend = c.backend;
  if (backend.empty() || backend == "auto") backend = "ref";
  if (backend == "gpu") refuse_backend_without_kernels(c, backend);
  c.copts.pipeline.source = c.model;  // passes' errors name the model, as the importer's do
  auto t0 = std::chrono::steady_clock::now();
  std::string ort_exe = c.compare.empty() ? "" : ort_python();  // a missing ORT fails before the compile
  ImportOptions io;
  io.input_shapes = parse_shapes_flag(c.shapes);
  // Several profiles: the symbols' ranges span them all, and the inputs'
  // shapes must lie inside one of them (checked below, once they are known).
  const std::vector<ShapeRanges> profiles = parse_shape_profiles(c.model, c.min_shapes, c.opt_shapes, c.max_shapes);
  if (!profiles.empty()) span_shape_profiles(profiles, io, c.model);
  io.batch = c.batch;
  StderrCompileMessages messages(c.copts.show_progress);
  messages.attach(io, c.copts);
  ImportResult r = source.path.empty() ? import_onnx_bytes(source.bytes, source.base_dir, source.display_name, io)
                                       : import_onnx_file(source.path, io);
  std::vector<std::string> names;
  for (const Value* v : r.graph->inputs()) names.push_back(v->name());
  check_shapes_names(io.input_shapes, names, c.model);
  for (const ShapeRanges& p : profiles) {
    check_shapes_names(p.min, names, c.model, "--min-shapes");
    check_shapes_names(p.opt, names, c.model, "--opt-shapes");
    check_shapes_names(p.max, names, c.model, "--max-shapes");
  }
  // Inputs before the passes: a misnamed --inputs fails in milliseconds,
  // and a Gather fused away still bounds the ids it reads. A symbolic input
  // not read from a file is generated at its --opt-shapes shape.
  std::vector<std::pair<std::string, TensorType>> decl;
  for (Value* in : r.graph->inputs()) {
    TensorType t = in->type();
    if (auto it = io.opt_shapes.find(in->name()); it != io.opt_shapes.end() && has_symbolic_dims(t.shape))
      t.shape = it->second;
    decl.emplace_back(in->name(), t);
  }
  std::vector<std::string> described;
  std::map<std::string, Tensor> feed =
      make_run_inputs(decl, {c.inputs, c.input_ranges, index_bounds(*r.graph), size_inputs(*r.graph), {}}, &described);
  if (profiles.size() > 1) {
    std::map<std::string, Shape> shapes;
    for (const auto& [name, t] : feed) shapes[name] = t.shape();
    std::string why;
    const int k = matching_shape_profile(profiles, shapes, &why);
    if (k < 0) {
      std::vector<std::string> given;
      for (const auto& [name, s] : shapes) given.push_back(fmt::format("{} {}", name, shape_str(s)));
      fail("{}: the inputs ({}) lie outside every shape profile: {}", c.model, fmt::join(given, ", "), why);
    }
    described.push_back(
        fmt::format("shape profile: {} of {} ({})", k, profiles.size(), shape_profile_str(profiles[k])));
  }
  if (!r.graph->symbols().empty()) {
    // Dynamic shapes: the inputs give the symbols their values, and the graph
    // specialised to them runs as a static one (ir/specialize.h).
    std::vector<std::pair<std::string, Shape>> shapes;
    for (const auto& [name, t] : feed) shapes.emplace_back(name, t.shape());
    SymbolBindings b = bind_symbols(*r.graph, shapes, c.model);
    std::vector<std::string> said;
    for (const SymbolDecl& d : r.graph->symbols())
      if (b.count(d.name)) said.push_back(fmt::format("{}={} (range [{}, {}])", d.name, b.at(d.name), d.min, d.max));
    if (!said.empty()) described.push_back(fmt::format("symbols: {}", fmt::join(said, ", ")));
    r.graph = specialize_graph(*r.graph, b, op_registry());
  }
  const double import_ms = ms_since(t0);
  // Result sizes the data decides (ir/data_dependent.h): the graph runs stage
  // by stage, each stage through the passes when it runs
  // (backends/data_dependent_run.h).
  if (has_data_dependent_sizes(*r.graph)) return run_data_dependent(c, *r.graph, feed, described, backend, ort_exe);
  auto t_passes = std::chrono::steady_clock::now();
  CompileReport rep = compile_graph(*r.graph, c.copts);
  const double passes_ms = ms_since(t_passes);
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
                                            : "CPU reference; for the GPU: --target auto or sm_XX");
  // No NVRTC here: the CPU backends run the graph (sim builds its kernels
  // with the host compiler on the first run, which the run time includes).
  std::cout << fmt::format("compile: import {:.1f} ms, passes {:.1f} ms; {} nodes -> {} nodes, {} kernels\n", import_ms,
                           passes_ms, rep.nodes_in, rep.nodes_out, count_kernels(*r.graph));
  std::vector<std::pair<std::string, Tensor>> named;
  for (size_t i = 0; i < outs.size(); ++i) named.emplace_back(r.graph->outputs()[i]->name(), outs[i]);
  report_outputs(named, c.outputs_dir, c.copts.pass.precision);
  std::cout << fmt::format("run: {:.2f} ms (best of {})\n", best, std::max(1, c.iterations));
  if (!c.compare.empty() && !compare_with_ort(ort_exe, c.model, feed, named, c.copts.pass.precision)) return 1;
  return 0;
}

}  // namespace kiln
