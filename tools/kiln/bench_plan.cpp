#include "tools/kiln/bench_plan.h"

#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "ir/error.h"
#include "ir/name_cut.h"
#include "kiln/kiln.hpp"
#include "runtime/plan_format.h"
#include "runtime/plan_graph.h"
#include "tools/kiln/bench.h"
#include "tools/kiln/doctor.h"
#include "tools/kiln/output_paths.h"
#include "tools/kiln/onnx_to_plan.h"
#include "tools/kiln/run_inputs.h"

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

struct ProfileRow {
  std::string name, op;
  int64_t calls = 0;
  double total_ms = 0;
};

// Accumulates times by name, keeping first-seen order for ties.
struct Profile {
  std::map<std::string, ProfileRow> rows;
  std::vector<std::string> order;
  void add(const std::string& name, const std::string& op, double ms) {
    auto [it, fresh] = rows.try_emplace(name);
    if (fresh) {
      it->second.name = name;
      it->second.op = op;
      order.push_back(name);
    }
    ++it->second.calls;
    it->second.total_ms += ms;
  }
};

}  // namespace

int run_bench_plan(const BenchOptions& o, const PlanSource& source, const CompileResult* built) {
  const std::string backend = o.backend.empty() ? "auto" : o.backend;
  auto t0 = Clock::now();
  // The plan's graph, through the runtime's reader: node names for the
  // profile, the launch list for sim.
  plan::Plan p = source.read();
  std::unique_ptr<Graph> g = plan::load_graph(p, o.model);
  std::vector<const Node*> nodes;
  for (const auto& n : g->nodes()) nodes.push_back(n.get());

  std::vector<std::pair<std::string, TensorType>> decl;
  for (const Value* v : g->inputs()) decl.emplace_back(v->name(), v->type());
  // --inputs, else seeded random in the range of the tables they index
  // (a plan with shape profiles: generated inputs at profile 0's opt shapes).
  RunInputOptions in{o.inputs, o.input_ranges, index_bounds(*g), size_inputs(*g), {}};
  if (!p.shapes.empty())
    for (const plan::InputProfile& ip : p.shapes.profiles.front().inputs) in.generate_shapes[ip.input] = ip.opt;
  std::map<std::string, Tensor> feed = make_run_inputs(decl, in);

  std::string ran, info;  // the backend that ran, and what the runtime says about it
  bool on_gpu = false;
  std::function<void()> run_once;
  std::function<double()> gpu_compute_ms;  // the last run's GPU-only time
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Context> ctx;
  std::vector<Tensor> outs;
  std::function<void()> profiled_run;  // one run that feeds `prof`
  Profile prof;
  std::string profile_unit, profile_note;

  if (backend == "sim") {
    if (!plan_sim_available()) fail("backend 'sim' is not built into this kiln (no NVRTC/codegen)");
    ran = "sim";
    info = "the plan's kernels and launch list on the CPU simulator: a CPU backend, timings are not GPU timings";
    run_once = [&] { outs = run_plan_on_sim(p, *g, feed); };
    profiled_run = [&] {
      outs = run_plan_on_sim(p, *g, feed, [&](size_t i, double ms) {
        const plan::Step& s = p.steps[i];
        std::string op = s.node < nodes.size() ? nodes[s.node]->op() : "copy";
        prof.add(s.kind == plan::StepKind::Copy      ? fmt::format("copy (step {})", i)
                 : s.kind == plan::StepKind::Control ? fmt::format("control flow (step {})", i)
                                                     : p.kernels[s.kernel].name,
                 op, ms);
      });
    };
    profile_unit = "kernels";
  } else {
    kiln_backend b = backend == "auto"  ? KILN_BACKEND_AUTO
                     : backend == "gpu" ? KILN_BACKEND_GPU
                     : backend == "ref"
                         ? KILN_BACKEND_CPU
                         : (fail("unknown backend '{}' for a plan (auto, gpu, ref, sim)", backend), KILN_BACKEND_AUTO);
    try {
      engine = std::make_unique<Engine>(source.load(b));
      on_gpu = engine->backend() == KILN_BACKEND_GPU;
      ran = on_gpu ? "gpu" : "ref";
      info = engine->info();
      // Auto on the CPU although a GPU is present: say why (issue 14).
      if (b == KILN_BACKEND_AUTO && !on_gpu)
        if (std::string w = auto_cpu_warning(info, nullptr); !w.empty()) std::cerr << w << "\n";
      ctx = std::make_unique<Context>(*engine);
      for (const TensorInfo& t : engine->inputs())
        ctx->bind_input(t.name, feed.at(t.name).raw(), t.dtype, feed.at(t.name).shape());
      for (const TensorInfo& t : engine->outputs()) {
        std::vector<int64_t> shape = t.dynamic() ? ctx->output_shape(t.name) : t.shape;
        outs.emplace_back(DType(t.dtype), shape);
        ctx->bind_output(t.name, outs.back().raw(), t.dtype, shape);
      }
    } catch (const runtime_error& e) {
      fail("{}", e.what());  // a bad plan or no usable GPU: the user's (exit 1)
    }
    run_once = [&] {
      try {
        ctx->run();
      } catch (const runtime_error& e) {
        fail("{}: {}", o.model, e.what());
      }
    };
    // The runtime's profiling runs (kiln_context_profile): on the GPU the
    // launch list un-captured with CUDA events around each kernel, on the
    // CPU each node of the reference executor.
    profiled_run = [&] {
      try {
        for (const ProfileEntry& e : ctx->profile()) prof.add(e.name, e.op, e.ms);
      } catch (const runtime_error& e) {
        fail("{}: {}", o.model, e.what());
      }
    };
    if (on_gpu) {
      gpu_compute_ms = [&] { return double(ctx->last_timing().compute_ms); };
      profile_unit = "kernels";
      profile_note =
          "per kernel from CUDA events in separate un-captured runs after the timed ones (launch gaps "
          "included: the sum exceeds the graph replay's GPU compute time)";
    } else {
      profile_unit = "nodes";
      profile_note =
          "per node of the plan's graph through the reference executor (the runtime's CPU path), from "
          "separate profiled runs after the timed ones";
    }
  }
  double load_ms = ms_between(t0, Clock::now());

  std::vector<double> gpu;
  TimedRuns t = time_runs(
      [&](bool timed) {
        run_once();
        if (timed && gpu_compute_ms) gpu.push_back(gpu_compute_ms());
      },
      o.iterations, o.warmup_ms);
  if (o.profile && profiled_run)
    for (int i = 0; i < o.iterations; ++i) profiled_run();

  int64_t batch = 1;
  if (!g->inputs().empty() && g->inputs()[0]->type().rank() > 0) batch = feed.at(g->inputs()[0]->name()).shape()[0];
  LatencyStats L = latency_stats(t.latency_ms), H = latency_stats(t.host_cpu_ms), G = latency_stats(gpu);
  double qps = double(o.iterations) / (t.wall_ms / 1e3);

  std::cout << "=== Model ===\n";
  std::cout << fmt::format("Plan: {}{} (kiln {}, target {}, precision {}, {} GPU kernels)\n",
                           built ? "built in memory from " : "", o.model, p.meta.kiln_version, p.meta.target,
                           p.meta.precision, p.meta.gpu_kernels ? std::to_string(p.kernels.size()) : "no");
  if (built) std::cout << "Build: " << build_times(*built) << "\n";
  std::cout << "Inputs: ";
  for (size_t i = 0; i < g->inputs().size(); ++i)
    std::cout << (i ? ", " : "") << g->inputs()[i]->name() << " " << g->inputs()[i]->type().str();
  std::cout << "\n";
  std::cout << fmt::format("Backend: {} ({})\n", ran, info);
  std::cout << fmt::format("Load: {:.1f} ms (plan read, checked and loaded by the runtime)\n", load_ms);
  std::cout << fmt::format("Warm-up: {} runs, {:.1f} ms\n", t.warmup_runs, t.warmup_ms);
  std::cout << "=== Performance summary ===\n";
  std::cout << fmt::format("Throughput: {:.3f} qps ({:.3f} samples/s at batch {})\n", qps, qps * double(batch), batch);
  std::cout << stats_line("Latency", L);
  // Runs are synchronous (kiln_context_run returns when the outputs are
  // written), so the host's enqueue time is the whole run's.
  std::cout << stats_line("Host CPU Time", H);
  if (on_gpu) std::cout << stats_line("GPU Compute Time", G);
  else std::cout << "GPU Compute Time: none (CPU backend; no GPU ran)\n";
  std::cout << fmt::format("Total Host Walltime: {:.3f} s for {} iterations\n", t.wall_ms / 1e3, o.iterations);

  std::vector<ProfileRow> rows;
  double prof_total = 0;
  for (const std::string& n : prof.order) {
    rows.push_back(prof.rows.at(n));
    prof_total += rows.back().total_ms;
  }
  std::stable_sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.total_ms > b.total_ms; });
  if (o.profile) {
    if (!profiled_run) {
      std::cout << "=== Profile ===\n"
                << "not available: " << profile_note << "\n";
    } else {
      std::cout << fmt::format("=== Profile ({} {}, {} iterations) ===\n", rows.size(), profile_unit, o.iterations);
      if (!profile_note.empty()) std::cout << "(" << profile_note << ")\n";
      std::cout << fmt::format("{:<48} {:<18} {:>7} {:>12} {:>10} {:>7}\n",
                               profile_unit == "kernels" ? "Kernel" : "Node", "Op", "Calls", "Total (ms)", "Avg (ms)",
                               "%");
      // The first member's distinguishing parts (ir/name_cut.h); the JSON has the whole name.
      auto shorten = [](const std::string& s) { return short_joined_names(s, 0, 48); };
      for (const ProfileRow& r : rows)
        std::cout << fmt::format("{:<48} {:<18} {:>7} {:>12.3f} {:>10.4f} {:>6.1f}%\n", shorten(r.name), r.op, r.calls,
                                 r.total_ms, r.total_ms / double(r.calls),
                                 prof_total > 0 ? 100.0 * r.total_ms / prof_total : 0.0);
      std::cout << fmt::format("{:<48} {:<18} {:>7} {:>12.3f}\n", "Total", "", "", prof_total);
    }
  }

  if (!o.json_path.empty()) {
    nlohmann::json j = {{"model", o.model},
                        {"plan", true},
                        {"compiled_in_memory", built != nullptr},
                        {"backend", ran},
                        {"backend_kind", on_gpu ? "gpu" : "cpu"},
                        {"backend_info", info},
                        {"target", p.meta.target},
                        {"precision", p.meta.precision},
                        {"batch", batch},
                        {"iterations", o.iterations},
                        {"warmup_runs", t.warmup_runs},
                        {"load_ms", load_ms},
                        {"throughput_qps", qps},
                        {"latency_ms", stats_json(L)},
                        {"host_cpu_ms", stats_json(H)},
                        {"latency_samples_ms", t.latency_ms},
                        {"total_walltime_ms", t.wall_ms}};
    if (built) j["build_ms"] = build_times_json(*built);
    j["gpu_compute_ms"] = on_gpu ? stats_json(G) : nlohmann::json(nullptr);
    if (on_gpu) j["gpu_compute_samples_ms"] = gpu;
    if (o.profile) {
      j["profile"] = nlohmann::json::array();
      for (const ProfileRow& r : rows)
        j["profile"].push_back({{"name", r.name},
                                {"op", r.op},
                                {"calls", r.calls},
                                {"total_ms", r.total_ms},
                                {"avg_ms", r.total_ms / double(r.calls)},
                                {"percent", prof_total > 0 ? 100.0 * r.total_ms / prof_total : 0.0}});
      if (!profile_note.empty()) j["profile_note"] = profile_note;
    }
    write_text_file(o.json_path, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace kiln
