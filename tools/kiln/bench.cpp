#include "tools/kiln/bench.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "backends/reference/executor.h"
#include "compiler/import_checked.h"
#include "compiler/targets.h"
#include "ir/error.h"
#include "ir/name_cut.h"
#include "tools/kiln/bench_plan.h"
#include "tools/kiln/compile_flags.h"
#include "tools/kiln/compile_messages.h"
#include "tools/kiln/inspect.h"
#include "tools/kiln/inspect_plan.h"
#include "tools/kiln/model_stdin.h"
#include "tools/kiln/onnx_to_plan.h"
#include "tools/kiln/output_paths.h"
#include "compiler/plan_sniff.h"
#include "compiler/progress.h"
#include "tools/kiln/run_inputs.h"
#ifdef KILN_HAVE_SIM_BACKEND
#include "backends/sim/sim_executor.h"
#endif

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

// CPU time of the whole process (all threads): the host's cost of a run.
double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

struct ProfileRow {
  std::string name, op;
  int64_t calls = 0;
  double total_ms = 0;
};

std::string backend_description(const std::string& b) {
  if (b == "sim") return "generated kernels on the CPU simulator: a CPU backend, timings are not GPU timings";
  return "CPU reference executor: a CPU backend, no GPU backend exists on this machine";
}

}  // namespace

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

TimedRuns time_runs(const std::function<void(bool timed)>& run, int iterations, double warmup_ms) {
  TimedRuns t;
  auto w0 = Clock::now();
  while (warmup_ms > 0 && (t.warmup_runs == 0 || ms_between(w0, Clock::now()) < warmup_ms)) {
    run(false);
    ++t.warmup_runs;
  }
  t.warmup_ms = ms_between(w0, Clock::now());
  Progress shown("bench iterations", 2.0);  // full models on the CPU take seconds a run
  auto b0 = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    double c = process_cpu_ms();
    auto a = Clock::now();
    run(true);
    t.latency_ms.push_back(ms_between(a, Clock::now()));
    t.host_cpu_ms.push_back(process_cpu_ms() - c);
    shown.update(i + 1, iterations);
  }
  t.wall_ms = ms_between(b0, Clock::now());
  return t;
}

CLI::App* register_bench(CLI::App& app, BenchOptions& o) {
  auto* cmd =
      app.add_subcommand("bench", "Compile a model (or load a plan) and time it on a backend (trtexec-style summary)");
  cmd->add_option(
         "model,--onnx,--loadEngine", o.model,
         "Model file (.onnx) or compiled plan (.plan, run through the runtime); trtexec's --onnx=FILE / --loadEngine=FILE name it too")
      ->required()
      ->group("Model");
  cmd->add_option("--shapes", o.shapes, "Fix input shapes: name:1x3x224x224,...; repeatable")
      ->join(',')
      ->group("Model");
  add_batch_flag(cmd, o.batch);
  add_save_engine_flag(cmd, o.save_engine);
  cmd->add_option("--backend", o.backend,
                  "Backend: ref (CPU reference), sim (generated kernels on the CPU simulator); plans and GPU targets "
                  "also auto (their default: the GPU when usable, else ref) and gpu")
      ->check(CLI::IsMember({"auto", "ref", "sim", "gpu"}))
      ->group("Runtime");
  add_input_flags(cmd, o.inputs, o.input_ranges);
  cmd->add_option("--iterations", o.iterations, "Timed runs (default 10)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()))
      ->group("Runtime");
  cmd->add_option("--warmup-ms", o.warmup_ms, "Untimed runs for at least this long first (default 200; 0: none)")
      // Not CLI::NonNegativeNumber: its message prints the range up to DBL_MAX in full.
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              size_t used = 0;
              double ms = std::stod(v, &used);
              if (used == v.size() && ms >= 0 && std::isfinite(ms)) return "";
            } catch (const std::exception&) {
            }
            return "'" + v + "' is not a number of milliseconds >= 0";
          },
          "MS"))
      ->group("Runtime");
  cmd->add_flag("--profile", o.profile, "Per-node (ref) or per-kernel (sim) time table")->group("Reporting");
  cmd->add_option("--export-json", o.json_path, "Write the summary (and profile) as JSON")->group("Reporting");
  add_compile_flags(cmd, o.compile);
  return cmd;
}

int run_bench(BenchOptions& o) {
  // (--batch and --shapes with a plan are refused in main, with the other compile flags.)
  if (!is_stdin_arg(o.model) && is_plan_file(o.model)) return run_bench_plan(o, PlanSource{o.model});
  const ModelSource source = model_source_of(o.model);  // "-": standard input (tools/kiln/model_stdin.h)
  o.model = source.display_name;
  if (runs_through_plan(o.compile.pass.target, o.save_engine)) {
    // As trtexec --onnx: build the plan (saved when asked) and time it
    // through the runtime, as `kiln bench MODEL.plan` would.
    if (o.backend.empty()) o.backend = "auto";
    if (!is_gpu_target(o.compile.pass.target) && (o.backend == "gpu" || o.backend == "sim"))
      fail(
          "{}: --backend {} runs a plan's GPU kernels and --target {} builds none: add --target auto, portable or sm_XX",
          o.model, o.backend, o.compile.pass.target);
    CompileModelOptions co;
    co.build = o.compile;
    co.input_shapes = parse_shapes_flag(o.shapes);
    co.batch = o.batch;
    CompileResult built = compile_to_plan(source, co, o.save_engine);
    return run_bench_plan(o, PlanSource{o.model, &built.plan}, &built);
  }
  if (o.backend.empty() || o.backend == "auto") o.backend = "ref";
  if (o.backend == "gpu")
    fail(
        "{}: --backend gpu runs GPU kernels and --target {} builds none: add --target auto, portable or sm_XX (kiln doctor names "
        "this GPU's arch)",
        o.model, o.compile.pass.target);
  auto t0 = Clock::now();
  ImportOptions io;
  io.input_shapes = parse_shapes_flag(o.shapes);
  io.batch = o.batch;
  StderrCompileMessages messages(o.compile.show_progress);
  messages.attach(io, o.compile);
  ImportResult r = import_checked(source, io);
  // Before the passes: a Gather fused away still bounds the ids it reads.
  std::map<std::string, int64_t> bounds = index_bounds(*r.graph);
  std::map<std::string, SizeInput> sizes = size_inputs(*r.graph);
  auto t_imported = Clock::now();
  CompileReport rep = compile_graph(*r.graph, o.compile);
  const Graph& g = *r.graph;
  auto t_compiled = Clock::now();

  std::map<std::string, ProfileRow> profile;
  std::vector<std::string> order;  // first-seen order, for ties
  auto record = [&](const std::string& name, const std::string& op, double ms) {
    auto [it, fresh] = profile.try_emplace(name);
    if (fresh) {
      it->second.name = name;
      it->second.op = op;
      order.push_back(name);
    }
    ++it->second.calls;
    it->second.total_ms += ms;
  };
  bool profiling = false;  // timers record only during the timed runs
  auto node_label = [](const Node& n) { return n.name().empty() ? n.describe() : n.name(); };

  std::function<std::vector<Tensor>(const std::map<std::string, Tensor>&)> run_once;
  std::unique_ptr<ReferenceExecutor> ref;
  if (o.backend == "ref") {
    ref = std::make_unique<ReferenceExecutor>(g);
    NodeTimer timer = [&](const Node& n, double ms) {
      if (profiling) record(node_label(n), n.op(), ms);
    };
    run_once = [&, timer](const std::map<std::string, Tensor>& feed) {
      return o.profile ? ref->run(feed, timer) : ref->run(feed);
    };
  }
#ifdef KILN_HAVE_SIM_BACKEND
  std::unique_ptr<codegen::SimExecutor> sim;
  if (o.backend == "sim") {
    sim = std::make_unique<codegen::SimExecutor>(g, o.compile.cache_dir);
    codegen::KernelTimer timer = [&](const Node& n, const codegen::NodeKernel& k, double ms) {
      if (profiling) record(k.name, n.op(), ms);
    };
    run_once = [&, timer](const std::map<std::string, Tensor>& feed) {
      return o.profile ? sim->run(feed, timer) : sim->run(feed);
    };
  }
#endif
  if (!run_once) fail("backend '{}' is not built into this kiln", o.backend);
  double build_ms = ms_between(t_compiled, Clock::now());

  // Seeded pseudo-random values for inputs --inputs does not name (as kiln run).
  std::vector<std::pair<std::string, TensorType>> decl;
  for (const Value* in : g.inputs()) decl.emplace_back(in->name(), in->type());
  std::map<std::string, Tensor> feed = make_run_inputs(decl, {o.inputs, o.input_ranges, bounds, sizes, {}});

  TimedRuns t = time_runs(
      [&](bool timed) {
        profiling = timed;  // the profile counts only the timed runs
        run_once(feed);
      },
      o.iterations, o.warmup_ms);
  profiling = false;

  int64_t batch = 1;
  if (!g.inputs().empty() && g.inputs()[0]->type().rank() > 0) batch = g.inputs()[0]->shape()[0];
  LatencyStats L = latency_stats(t.latency_ms), H = latency_stats(t.host_cpu_ms);
  double qps = double(o.iterations) / (t.wall_ms / 1e3);
  std::cout << "=== Model ===\n";
  std::cout << fmt::format("Model: {} ({} nodes -> {} after passes, precision {}, target {})\n", o.model, rep.nodes_in,
                           rep.nodes_out, o.compile.pass.precision, o.compile.pass.target);
  std::cout << fmt::format("Inputs: ");
  for (size_t i = 0; i < g.inputs().size(); ++i)
    std::cout << (i ? ", " : "") << g.inputs()[i]->name() << " " << g.inputs()[i]->type().str();
  std::cout << "\n";
  std::cout << fmt::format("Backend: {} ({})\n", o.backend, backend_description(o.backend));
  std::cout << fmt::format("Build: import {:.1f} ms, passes {:.1f} ms, backend setup {:.1f} ms{}\n",
                           ms_between(t0, t_imported), ms_between(t_imported, t_compiled), build_ms,
                           o.backend == "sim" ? " (kernels built for the simulator by the host compiler)" : "");
  std::cout << fmt::format("Warm-up: {} runs, {:.1f} ms\n", t.warmup_runs, t.warmup_ms);
  std::cout << "=== Performance summary ===\n";
  std::cout << fmt::format("Throughput: {:.3f} qps ({:.3f} samples/s at batch {})\n", qps, qps * double(batch), batch);
  std::cout << stats_line("Latency", L);
  std::cout << stats_line("Host CPU Time", H);
  std::cout << "GPU Compute Time: none (CPU backend; no GPU ran)\n";
  std::cout << fmt::format("Total Host Walltime: {:.3f} s for {} iterations\n", t.wall_ms / 1e3, o.iterations);

  std::vector<ProfileRow> rows;
  double prof_total = 0;
  for (const std::string& n : order) {
    rows.push_back(profile.at(n));
    prof_total += rows.back().total_ms;
  }
  std::stable_sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.total_ms > b.total_ms; });
  if (o.profile) {
    std::cout << fmt::format("=== Profile ({} {}, {} iterations) ===\n", rows.size(),
                             o.backend == "sim" ? "kernels" : "nodes", o.iterations);
    std::cout << fmt::format("{:<48} {:<18} {:>7} {:>12} {:>10} {:>7}\n", o.backend == "sim" ? "Kernel" : "Node", "Op",
                             "Calls", "Total (ms)", "Avg (ms)", "%");
    // Fused nodes are named after all their members and ONNX names are long
    // paths: the table keeps the first member's distinguishing parts
    // (ir/name_cut.h), the JSON the whole name.
    auto shorten = [](const std::string& s) { return short_joined_names(s, 0, 48); };
    for (const ProfileRow& p : rows)
      std::cout << fmt::format("{:<48} {:<18} {:>7} {:>12.3f} {:>10.4f} {:>6.1f}%\n", shorten(p.name), p.op, p.calls,
                               p.total_ms, p.total_ms / double(p.calls),
                               prof_total > 0 ? 100.0 * p.total_ms / prof_total : 0.0);
    std::cout << fmt::format("{:<48} {:<18} {:>7} {:>12.3f}\n", "Total", "", "", prof_total);
  }

  if (!o.json_path.empty()) {
    nlohmann::json j = {{"model", o.model},
                        {"backend", o.backend},
                        {"backend_kind", "cpu"},
                        {"batch", batch},
                        {"iterations", o.iterations},
                        {"warmup_runs", t.warmup_runs},
                        {"throughput_qps", qps},
                        {"latency_ms", stats_json(L)},
                        {"host_cpu_ms", stats_json(H)},
                        {"latency_samples_ms", t.latency_ms},
                        {"total_walltime_ms", t.wall_ms},
                        {"nodes_in", rep.nodes_in},
                        {"nodes_out", rep.nodes_out}};
    if (o.profile) {
      j["profile"] = nlohmann::json::array();
      for (const ProfileRow& p : rows)
        j["profile"].push_back({{"name", p.name},
                                {"op", p.op},
                                {"calls", p.calls},
                                {"total_ms", p.total_ms},
                                {"avg_ms", p.total_ms / double(p.calls)},
                                {"percent", prof_total > 0 ? 100.0 * p.total_ms / prof_total : 0.0}});
    }
    write_text_file(o.json_path, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace kiln
