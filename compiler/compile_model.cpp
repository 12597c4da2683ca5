#include "compiler/compile_model.h"

#include <chrono>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "compiler/dump_index.h"
#include "compiler/import_checked.h"
#include "compiler/plan_writer.h"
#include "compiler/targets.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/symbolic_dim.h"

namespace kiln {

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

void say(const CompileModelOptions& o, const std::string& text) {
  if (o.log) o.log(text);
}

// The profile the import's symbol ranges give: each input with a symbolic
// dim from its symbols' smallest to their largest values; opt from
// --opt-shapes (checked inside the range by the importer), else the largest.
plan::Profile shape_profile(const Graph& g, const std::map<std::string, Shape>& opt_shapes) {
  SymbolBindings lo, hi;
  for (const SymbolDecl& d : g.symbols()) {
    lo[d.name] = d.min;
    hi[d.name] = d.max;
  }
  plan::Profile p;
  for (const Value* v : g.inputs()) {
    if (!has_symbolic_dims(v->shape())) continue;
    plan::InputProfile ip{v->name(), eval_shape(v->shape(), lo), {}, eval_shape(v->shape(), hi)};
    auto opt = opt_shapes.find(v->name());
    ip.opt = opt != opt_shapes.end() ? opt->second : ip.max;
    p.inputs.push_back(std::move(ip));
  }
  return p;
}

[[noreturn]] void refuse_gpu_profile(const Graph& g, const std::string& model, const std::string& target) {
  const Node* first = nullptr;
  for (const auto& n : g.nodes())
    if (n->op() != "reshape" && n->op() != "identity") {
      first = n.get();
      break;
    }
  std::vector<std::string> syms;
  for (const SymbolDecl& d : g.symbols()) syms.push_back(fmt::format("{} in [{}, {}]", d.name, d.min, d.max));
  unsupported(
      "{}: {}: target {} needs a shape-generic GPU kernel for every node of a plan with shape profiles ({}), and "
      "kiln has none yet for {}: compile the profile for --target cpu (the runtime's CPU path runs any shape in it), "
      "or fix the shapes with --shapes for a GPU plan (docs/dynamic_shapes.md)",
      model, first ? first->describe() : std::string("the graph"), target, fmt::join(syms, ", "),
      first ? first->op() : std::string("any op"));
}

}  // namespace

CompileResult compile_model(const ModelSource& source, const CompileModelOptions& o) {
  CompileResult res;
  const std::string& model = source.display_name;
  check_precision(o.build.pass.precision);
  CompileOptions build = o.build;
  build.pipeline.source = model;  // passes' errors name the model, as the importer's do
  if (o.progress) build.pipeline.progress = [&o](int done, int total) { o.progress("passes run", done, total); };
  // "auto" becomes the local GPU's arch or a portable GPU plan, never "cpu"
  // (which only an explicit --target cpu gives).
  ResolvedTarget target = resolve_target(o.build.pass.target);
  build.pass.target = target.target;
  res.target_reason = target.why;
  if (!target.why.empty()) say(o, model + ": " + target.why + "\n");

  // 1. Import, failing fast with every node kiln cannot compile.
  const auto t0 = std::chrono::steady_clock::now();
  ImportOptions io;
  io.input_shapes = o.input_shapes;
  io.min_shapes = o.min_shapes;
  io.opt_shapes = o.opt_shapes;
  io.max_shapes = o.max_shapes;
  io.batch = o.batch;
  if (o.progress) io.progress = [&o](int done, int total) { o.progress("nodes imported", done, total); };
  ImportResult imported = import_checked(source, io);
  Graph& g = *imported.graph;
  res.import_ms = ms_since(t0);
  // Symbolic dims left open by the model and given ranges: a plan with a
  // shape profile. Its kernels would have to be shape-generic, which no
  // kernel family is yet: a GPU target is refused naming the first node
  // that needs a kernel, never compiled at one fixed shape instead.
  std::vector<plan::Profile> profiles;
  if (!g.symbols().empty()) {
    if (is_gpu_target(build.pass.target)) refuse_gpu_profile(g, model, build.pass.target);
    profiles.push_back(shape_profile(g, o.opt_shapes));
    build.symbolic = true;
  }

  // 2. Passes.
  auto t = std::chrono::steady_clock::now();
  res.passes = compile_graph(g, build);
  res.passes_ms = ms_since(t);
  if (build.stats) say(o, format_stats(res.passes));
  if (o.print_final_ir) *(o.ir_out ? o.ir_out : &std::cout) << print_graph(g);
  // A GPU target runs every node on the GPU: a node without a kernel emitter
  // (or a kiln without codegen) is an error naming each, not a plan that
  // quietly runs on the CPU. The plan format has no per-node CPU fallback.
  if (is_gpu_target(build.pass.target)) {
    std::vector<std::string> missing = nodes_without_kernel_emitter(g);
    if (!missing.empty())
      fail(
          "{}: target {} needs a GPU kernel for every node, and {} node(s) have {}:\n  {}\n(kiln has no per-node "
          "CPU fallback in plans; compile with --target cpu for a plan that runs on the CPU)",
          model, build.pass.target, missing.size(),
          kiln_has_codegen() ? "no kernel emitter" : "none because kiln was built without codegen (NVRTC)",
          fmt::join(missing, "\n  "));
  }

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
  j["target_requested"] = o.build.pass.target;
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
    po.profiles = profiles;
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
