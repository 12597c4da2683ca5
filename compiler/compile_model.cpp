#include "compiler/compile_model.h"

#include <chrono>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "compiler/dump_index.h"
#include "compiler/import_checked.h"
#include "compiler/plan_writer.h"
#include "compiler/targets.h"
#include "ir/printer.h"

namespace kiln {

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

void say(const CompileModelOptions& o, const std::string& text) {
  if (o.log) o.log(text);
}

}  // namespace

CompileResult compile_model(const ModelSource& source, const CompileModelOptions& o) {
  CompileResult res;
  const std::string& model = source.display_name;
  check_target(o.build.pass.target);
  check_precision(o.build.pass.precision);
  CompileOptions build = o.build;
  build.pipeline.source = model;  // passes' errors name the model, as the importer's do
  if (o.progress) build.pipeline.progress = [&o](int done, int total) { o.progress("passes run", done, total); };

  // 1. Import, failing fast with every node kiln cannot compile.
  const auto t0 = std::chrono::steady_clock::now();
  ImportOptions io;
  io.input_shapes = o.input_shapes;
  io.batch = o.batch;
  if (o.progress) io.progress = [&o](int done, int total) { o.progress("nodes imported", done, total); };
  ImportResult imported = import_checked(source, io);
  Graph& g = *imported.graph;
  res.import_ms = ms_since(t0);

  // 2. Passes.
  auto t = std::chrono::steady_clock::now();
  res.passes = compile_graph(g, build);
  res.passes_ms = ms_since(t);
  if (build.stats) say(o, format_stats(res.passes));
  if (o.print_final_ir) *(o.ir_out ? o.ir_out : &std::cout) << print_graph(g);

  // 3. Tuning: the GEMM tile chooser lives until every kernel is emitted.
  t = std::chrono::steady_clock::now();
  std::unique_ptr<TuningSession> tuning;
  if (o.tuning.active())
    tuning = std::make_unique<TuningSession>(g, o.tuning, build.pass.target, build.cache_dir, build.kernel_cache);

  // 4. Codegen: every kernel emitted and compiled with NVRTC for the target,
  // once; the plan below takes these kernels.
  std::function<void(int, int)> kernel_progress;
  if (o.progress) kernel_progress = [&o](int done, int total) { o.progress("kernels compiled", done, total); };
  res.kernels = build_kernels(g, build, kernel_progress);
  res.kernels_ms = ms_since(t);
  if (!build.pipeline.dump_dir.empty()) write_dump_index(g, build, model);
  if (build.stats) say(o, format_kernel_stats(res.kernels));
  else if (res.kernels.built) say(o, kernels_summary(res.kernels) + "\n");

  nlohmann::json j = compile_report_json(g, res.passes);
  const nlohmann::json kj = kernels_json(res.kernels);
  for (auto& [k, v] : kj.items()) j[k == "built" ? "kernels_built" : k] = v;
  j["model"] = model;
  j["import_ms"] = res.import_ms;
  j["precision"] = build.pass.precision;
  j["target"] = build.pass.target;
  if (tuning) {
    j["tuning"] = tuning->json();
    say(o, tuning->summary() + "\n");
  }

  // 5. The plan, from the kernels compiled above.
  if (o.write_plan) {
    t = std::chrono::steady_clock::now();
    PlanBuildOptions po{build.pass.target, build.pass.precision, build.cache_dir, build.kernel_cache};
    po.kernels = graph_kernels(res.kernels);
    po.source_name = model;  // launch-limit errors name the model file
    plan::Plan p = build_plan(g, po);
    res.plan = plan::serialize(p);
    res.plan_gpu_kernels = p.meta.gpu_kernels ? static_cast<int>(p.kernels.size()) : 0;
    res.plan_target = p.meta.target;
    res.no_gpu_reason = p.meta.no_gpu_reason;
    res.plan_ms = ms_since(t);
  }
  // Each step's time apart: NVRTC's share (kernels) is never counted as pass
  // time, so a slow compile says which part is slow.
  j["passes_ms"] = res.passes_ms;
  j["kernels_ms"] = res.kernels_ms;
  if (o.write_plan) j["plan_ms"] = res.plan_ms;
  say(o, fmt::format("{}: {} nodes in, {} out, {} kernels; import {:.1f} ms, passes {:.1f} ms, kernels {}{}\n", model,
                     res.passes.nodes_in, res.passes.nodes_out, count_kernels(g), res.import_ms, res.passes_ms,
                     res.kernels.built ? fmt::format("{:.1f} ms (emitted and NVRTC-compiled)", res.kernels_ms)
                                       : "not built (" + res.kernels.why_not + ")",
                     o.write_plan ? fmt::format(", plan {:.1f} ms", res.plan_ms) : ""));
  res.report = std::move(j);
  return res;
}

}  // namespace kiln
