#include "tools/kiln/run_plan.h"

#include <algorithm>
#include <set>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>

#include "backends/data_dependent_run.h"
#include "conformance/engine_outputs.h"
#include "backends/run_on_backend.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "kiln/kiln.hpp"
#include "runtime/plan_graph.h"
#include "tools/kiln/doctor.h"
#include "tools/kiln/output_report.h"
#include "backends/plan_sim.h"
#include "runtime/plan_launch_variants.h"
#include "tools/kiln/run_inputs.h"

namespace kiln {

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

// Which launch variants (runtime/plan_launch_variants.h) ran: `chosen`, by
// index; as many launches as their steps.
void say_launch_variants(const plan::Plan& p, const std::set<int>& chosen) {
  size_t launches = 0;
  for (int v : chosen) launches += p.launch_variants.at(static_cast<size_t>(v)).steps.size();
  if (chosen.empty()) {
    std::cout << fmt::format("launch variants: none at this shape ({} in the plan): every launch shape-generic\n",
                             p.launch_variants.size());
    return;
  }
  std::set<std::string> why;
  for (int v : chosen) why.insert(plan::variant_text(p.launch_variants[v]));
  std::cout << fmt::format("launch variants: {} node(s) ran {} launch(es) specialised for {}\n", chosen.size(),
                           launches, fmt::join(why, "; "));
}

// The variants the simulator ran at this run's shape: the launch list
// plan-on-sim issued (plan::launches_at).
std::set<int> sim_launch_variants(const plan::Plan& p, const Graph& g, const std::map<std::string, Tensor>& feed) {
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const auto& [name, t] : feed) shapes.emplace_back(name, t.shape());
  std::set<int> chosen;
  for (const plan::ActiveStep& a : plan::launches_at(p, bind_symbols(g, shapes, "the run's inputs")))
    if (a.variant >= 0) chosen.insert(a.variant);
  return chosen;
}

int run_plan_command(const PlanSource& source, const RunPlanOptions& o, PlanRunResult* result) {
  const std::string& path = source.name;
  std::vector<std::pair<std::string, Tensor>> results;
  double best = 1e30;
  int iters = std::max(1, o.iterations);
  // The plan's graph, through the runtime's reader: its inputs, the Gather
  // tables they index (for random values in range) and its precision.
  plan::Plan p = source.read();
  auto g = plan::load_graph(p, path);
  std::vector<std::pair<std::string, TensorType>> decl;
  for (const Value* v : g->inputs()) decl.emplace_back(v->name(), v->type());
  std::vector<std::string> described;
  SymbolBindings counts;  // a GPU plan computed at the bounds: each count's value in the run
  RunInputOptions in{o.inputs, o.input_ranges, index_bounds(*g), size_inputs(*g), {}};
  // A plan with shape profiles: inputs from files take any shape the profile
  // holds (the runtime checks it); generated ones take profile 0's opt shape.
  if (!p.shapes.empty())
    for (const plan::InputProfile& ip : p.shapes.profiles.front().inputs) in.generate_shapes[ip.input] = ip.opt;
  auto feed = make_run_inputs(decl, in, &described);
  for (const std::string& d : described) std::cout << d << "\n";
  if (o.backend == "sim" && has_data_dependent_sizes(*g)) {
    // Result sizes decided by the data: the plan's graph stage by stage, each
    // stage's kernels generated for its shapes on the simulator (what `kiln
    // run MODEL.onnx --backend sim` runs; the plan holds no GPU kernels).
    std::vector<Tensor> outs;
    for (int i = 0; i < iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      outs = run_with_data_dependent_sizes("sim", *g, feed).outputs;
      best = std::min(best, ms_since(t0));
    }
    std::cout << "backend: sim (the plan's graph stage by stage, each stage's kernels generated for its shapes on the "
                 "CPU simulator: sizes decided at run time)\n";
    for (size_t i = 0; i < outs.size(); ++i) results.emplace_back(g->outputs()[i]->name(), outs[i]);
  } else if (o.backend == "sim" && !p.shapes.empty() && !p.meta.gpu_kernels) {
    // A CPU plan with profiles holds no kernels: the simulator runs the
    // plan's graph specialised to these shapes through the kernels codegen
    // emits for them (what `kiln run MODEL.onnx --backend sim` runs), after
    // the same profile check as the runtime's. A GPU plan's shape-generic
    // kernels run below, from the plan.
    std::vector<std::pair<std::string, Shape>> shapes;
    for (const auto& [name, t] : feed) shapes.emplace_back(name, t.shape());
    std::string why;
    if (plan::matching_profile(p.shapes, shapes, &why) < 0)
      fail("{}: the inputs lie outside every shape profile of the plan: {}", path, why);
    std::unique_ptr<Graph> at = specialize_graph(*g, bind_symbols(*g, shapes, path), op_registry());
    std::vector<Tensor> outs;
    for (int i = 0; i < iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      outs = run_on_backend("sim", *at, feed, "");
      best = std::min(best, ms_since(t0));
    }
    std::cout << "backend: sim (the plan's graph specialised to the input shapes, its kernels generated for them on "
                 "the CPU simulator: the plan holds no GPU kernels)\n";
    for (size_t i = 0; i < outs.size(); ++i) results.emplace_back(g->outputs()[i]->name(), outs[i]);
  } else if (o.backend == "sim") {
    std::vector<Tensor> outs;
    for (int i = 0; i < iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      outs = run_plan_on_sim(p, *g, feed);
      best = std::min(best, ms_since(t0));
    }
    std::cout << "backend: sim (the plan's kernels and launch list on the CPU simulator)\n";
    if (!p.launch_variants.empty()) say_launch_variants(p, sim_launch_variants(p, *g, feed));
    // Sizes decided by the data: the kernels wrote each count on the
    // "device"; the outputs are trimmed to them as the runtime does.
    if (!p.bounded_sizes.empty()) outs = plan::trim_outputs(p.bounded_sizes, std::move(outs), &counts);
    for (size_t i = 0; i < outs.size(); ++i) results.emplace_back(g->outputs()[i]->name(), outs[i]);
  } else {
    kiln_backend b = o.backend == "auto"  ? KILN_BACKEND_AUTO
                     : o.backend == "gpu" ? KILN_BACKEND_GPU
                     : o.backend == "ref" ? KILN_BACKEND_CPU
                                          : (fail("unknown backend '{}' for a plan (auto, gpu, ref, sim)", o.backend),
                                             KILN_BACKEND_AUTO);
    try {
      Engine engine = source.load(b);
      Context ctx(engine);
      for (const TensorInfo& t : engine.inputs())
        ctx.bind_input(t.name, feed.at(t.name).raw(), t.dtype, feed.at(t.name).shape());  // any shape in the profile
      // A plan with profiles: the outputs' shapes follow the inputs bound above.
      for (auto& out : bind_host_outputs(engine, ctx)) results.push_back(std::move(out));
      for (int i = 0; i < iters; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        ctx.run();
        best = std::min(best, ms_since(t0));
      }
      for (auto& [name, t] : results) trim_to_run_shape(ctx, name, t);  // sizes decided by the data
      // Auto on the CPU: a warning when a GPU was there to use (issue 14: no
      // silent CPU), else the engine line says there is no GPU at all.
      std::string no_gpu;
      if (b == KILN_BACKEND_AUTO && engine.backend() != KILN_BACKEND_GPU)
        if (std::string w = auto_cpu_warning(engine.info(), &no_gpu); !w.empty()) std::cerr << w << "\n";
      if (engine.info().find(no_gpu) != std::string::npos) no_gpu.clear();  // said already
      std::cout << "backend: " << (engine.backend() == KILN_BACKEND_GPU ? "gpu" : "ref") << " (" << engine.info() << ")"
                << (no_gpu.empty() ? "" : " (" + no_gpu + ")") << "\n";
      // The counts the run's nodes wrote, intermediate results' among them.
      for (const DataDependentSize& d : ctx.data_dependent_sizes()) counts[d.symbol] = d.value;
      if (engine.backend() == KILN_BACKEND_GPU && !p.launch_variants.empty()) {
        std::vector<int> ran = ctx.launch_variants();
        say_launch_variants(p, std::set<int>(ran.begin(), ran.end()));
      }
      if (engine.backend() == KILN_BACKEND_GPU) {
        // Host buffers went through pinned staging; CUDA events time each part.
        kiln_run_timing t = ctx.last_timing();
        std::cout << fmt::format(
            "gpu (last run, CUDA events): compute {:.3f} ms, upload {:.3f} ms, download {:.3f} ms\n", t.compute_ms,
            t.upload_ms, t.download_ms);
      }
    } catch (const runtime_error& e) {
      // Plan and runtime errors are the user's (a bad file, no GPU): exit 1.
      fail("{}", e.what());
    }
  }
  if (!p.shapes.empty()) {
    // The symbol values this run's shapes gave (checked by the run already).
    std::vector<std::pair<std::string, Shape>> shapes;
    for (const auto& [name, t] : feed) shapes.emplace_back(name, t.shape());
    SymbolBindings b = bind_symbols(*g, shapes, path);
    std::vector<std::string> said, sizes;
    for (const SymbolDecl& d : g->symbols())
      if (b.count(d.name)) said.push_back(fmt::format("{}={} (range [{}, {}])", d.name, b.at(d.name), d.min, d.max));
    // The sizes the data decided, read off the outputs whose dim is that symbol.
    for (const auto& [sym, node] : data_dependent_symbols(*g))
      for (size_t k = 0; k < results.size(); ++k) {
        const Shape& decl = g->outputs()[k]->shape();
        // (clang before 16 does not capture a structured binding.)
        auto at = std::find_if(decl.begin(), decl.end(), [&name = sym](int64_t d) { return dim_str(d) == name; });
        if (at == decl.end()) continue;
        sizes.push_back(fmt::format("{}={} (range [0, {}], {})", sym, results[k].second.shape()[at - decl.begin()],
                                    g->find_symbol(sym)->max, node->describe()));
        break;
      }
    if (!said.empty()) std::cout << fmt::format("symbols: {}\n", fmt::join(said, ", "));
    if (!sizes.empty()) std::cout << fmt::format("data-dependent sizes: {}\n", fmt::join(sizes, ", "));
  }
  if (!p.bounded_sizes.empty()) {
    // A GPU plan computed at the bounds: each count the run wrote (the
    // runtime's kiln_context_data_dependent_size, or plan-on-sim's), those
    // of intermediate results too.
    std::vector<std::string> sizes;
    for (const plan::SizeCount& c : p.bounded_sizes.counts) {
      auto value = counts.find(c.symbol);
      if (value == counts.end())
        fail("{}: the run gave no value for data-dependent size {} ({})", path, c.symbol, c.node);
      sizes.push_back(fmt::format("{}={} (range [0, {}], {})", c.symbol, value->second, c.bound, c.node));
    }
    std::cout << fmt::format("data-dependent sizes: {} (the plan computed at the bounds; outputs trimmed)\n",
                             fmt::join(sizes, ", "));
  }
  report_outputs(results, o.outputs_dir, p.meta.precision);
  std::cout << fmt::format("run: {:.2f} ms (best of {})\n", best, iters);
  if (result) {
    result->feed = std::move(feed);
    result->outputs = std::move(results);
  }
  return 0;
}

}  // namespace kiln
