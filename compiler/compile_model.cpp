#include "compiler/compile_model.h"

#include <chrono>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "compiler/dump_index.h"
#include "compiler/gpu_bounded_sizes.h"
#include "compiler/import_checked.h"
#include "compiler/plan_writer.h"
#include "compiler/targets.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/printer.h"
#include "ir/symbolic_dim.h"
#include "ops/registry.h"
#include "ir/specialize.h"
#include "ir/string_values.h"

namespace kiln {

namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

void say(const CompileModelOptions& o, const std::string& text) {
  if (o.log) o.log(text);
}

// Profile `k` of the plan: each input with a symbolic dim from the flags of
// that profile (opt defaults to max). Errors name the model, the profile (the
// k-th use of the flags), the input and the dim: an input the profile leaves
// out, another rank, a dim the graph fixes, min > opt > max, and inputs that
// give one symbol two ranges.
plan::Profile profile_of(const Graph& g, const ShapeRanges& r, size_t k, const std::string& model,
                         const ShapeOptionNames& names) {
  plan::Profile p;
  std::map<std::string, std::pair<int64_t, int64_t>> sym_range;  // within this profile
  std::map<std::string, std::string> sym_input;
  const std::string which = fmt::format("{}: shape profile {}", model, k);
  for (const Value* v : g.inputs()) {
    if (!has_symbolic_dims(v->shape())) continue;
    auto get = [&](const std::map<std::string, Shape>& m, const std::string& flag) -> const Shape* {
      auto it = m.find(v->name());
      if (it == m.end()) return nullptr;
      if (it->second.size() != v->shape().size())
        fail("{}: {} gives input \"{}\" rank {}, the model's is {} ({})", which, flag, v->name(), it->second.size(),
             v->shape().size(), v->type().str());
      return &it->second;
    };
    const Shape *lo = get(r.min, names.min), *hi = get(r.max, names.max), *opt = get(r.opt, names.opt);
    if (!lo || !hi)
      fail("{}: {} does not give input \"{}\" ({}): every profile gives each dynamic input", which,
           lo ? names.max : names.min, v->name(), v->type().str());
    plan::InputProfile ip{v->name(), *lo, opt ? *opt : *hi, *hi};
    for (size_t d = 0; d < v->shape().size(); ++d) {
      int64_t decl = v->shape()[d];
      if (ip.min[d] > ip.opt[d] || ip.opt[d] > ip.max[d])
        fail("{}: input \"{}\" dim {}: min {}, opt {}, max {} are out of order", which, v->name(), d, ip.min[d],
             ip.opt[d], ip.max[d]);
      if (!is_symbolic_dim(decl)) {
        if (ip.min[d] != decl || ip.max[d] != decl)
          fail("{}: input \"{}\" dim {} is fixed at {}, the profile gives [{}, {}]", which, v->name(), d, decl,
               ip.min[d], ip.max[d]);
        continue;
      }
      std::vector<std::string> syms = dim_symbols(decl);
      if (syms.size() != 1 || dim_str(decl) != syms[0]) continue;  // an expression: checked when bound
      auto [it, fresh] = sym_range.emplace(syms[0], std::make_pair(ip.min[d], ip.max[d]));
      if (fresh) sym_input[syms[0]] = v->name();
      else if (it->second != std::make_pair(ip.min[d], ip.max[d]))
        fail("{}: input \"{}\" dim {} ({}) has the range [{}, {}] but input \"{}\" gives it [{}, {}]", which, v->name(),
             d, syms[0], ip.min[d], ip.max[d], sym_input[syms[0]], it->second.first, it->second.second);
    }
    p.inputs.push_back(std::move(ip));
  }
  return p;
}

}  // namespace

void span_shape_profiles(const std::vector<ShapeRanges>& all, ImportOptions& io, const std::string& model) {
  auto names = [](const std::map<std::string, Shape>& m) {
    std::vector<std::string> r;
    for (const auto& [name, s] : m) r.push_back(name);
    return r;
  };
  for (size_t k = 1; k < all.size(); ++k)
    if (names(all[k].min) != names(all[0].min) || names(all[k].max) != names(all[0].max))
      fail(
          "{}: shape profile {} gives the inputs [{}] / [{}] ({} / {}), profile 0 gives [{}] / [{}]: every profile "
          "gives the same inputs",
          model, k, fmt::join(names(all[k].min), ","), fmt::join(names(all[k].max), ","), io.names.min, io.names.max,
          fmt::join(names(all[0].min), ","), fmt::join(names(all[0].max), ","));
  io.min_shapes = all[0].min;
  io.opt_shapes = all[0].opt;
  io.max_shapes = all[0].max;
  for (size_t k = 1; k < all.size(); ++k) {
    for (auto& [name, lo] : io.min_shapes)
      if (auto it = all[k].min.find(name); it != all[k].min.end() && it->second.size() == lo.size())
        for (size_t d = 0; d < lo.size(); ++d) lo[d] = std::min(lo[d], it->second[d]);
    for (auto& [name, hi] : io.max_shapes)
      if (auto it = all[k].max.find(name); it != all[k].max.end() && it->second.size() == hi.size())
        for (size_t d = 0; d < hi.size(); ++d) hi[d] = std::max(hi[d], it->second[d]);
  }
}

std::string shape_profile_str(const ShapeRanges& r) {
  std::vector<std::string> parts;
  for (const auto& [name, lo] : r.min) {
    auto hi = r.max.find(name);
    parts.push_back(fmt::format("{} in [{} .. {}]", name, shape_str(lo),
                                hi == r.max.end() ? std::string("?") : shape_str(hi->second)));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

int matching_shape_profile(const std::vector<ShapeRanges>& all, const std::map<std::string, Shape>& shapes,
                           std::string* why) {
  std::vector<std::string> misses;
  for (size_t k = 0; k < all.size(); ++k) {
    std::string miss;
    for (const auto& [name, lo] : all[k].min) {
      auto hi = all[k].max.find(name);
      auto s = shapes.find(name);
      if (hi == all[k].max.end() || s == shapes.end()) continue;
      if (s->second.size() != lo.size() || hi->second.size() != lo.size()) {
        miss = fmt::format("input \"{}\" has rank {}, profile {} gives rank {}", name, s->second.size(), k, lo.size());
        break;
      }
      for (size_t d = 0; d < lo.size() && miss.empty(); ++d)
        if (s->second[d] < lo[d] || s->second[d] > hi->second[d])
          miss = fmt::format("input \"{}\": dim {} is {}, outside profile {}'s range [{}, {}]", name, d, s->second[d],
                             k, lo[d], hi->second[d]);
      if (!miss.empty()) break;
    }
    if (miss.empty()) return static_cast<int>(k);
    misses.push_back(miss);
  }
  if (why) *why = fmt::format("{}", fmt::join(misses, "; "));
  return -1;
}

namespace {

// Each profile's smallest shapes must run: a conv or pool window that does
// not fit there (a 2x2 pool over a height of 1) would be an error at run
// time on the CPU path and an empty result on the GPU path. The graph
// specialised to them runs every op's own inference, and its message.
void check_smallest_shapes(const Graph& g, const std::vector<plan::Profile>& profiles, const std::string& model) {
  for (size_t k = 0; k < profiles.size(); ++k) {
    std::vector<std::pair<std::string, Shape>> shapes;
    std::vector<std::string> said;
    for (const plan::InputProfile& ip : profiles[k].inputs) {
      shapes.emplace_back(ip.input, ip.min);
      said.push_back(fmt::format("{} {}", ip.input, dims_str(ip.min, "x")));
    }
    try {
      specialize_graph(g, bind_symbols(g, shapes, model), op_registry());
    } catch (const Error& e) {
      fail("{}: profile {}'s smallest shapes ({}) cannot run: {}; raise --min-shapes", model, k, fmt::join(said, ", "),
           e.what());
    }
  }
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
#ifdef KILN_HAVE_CODEGEN  // builds without codegen (the sanitizer builds) have no kernel cache
  if (is_gpu_target(build.pass.target) && build.kernel_cache) {
    codegen::KernelCache cache(build.cache_dir);
    if (std::string why = cache.unwritable_reason(); !why.empty())
      say(o, fmt::format("warning: {}: the kernel cache {} cannot be written ({}): every kernel is compiled by NVRTC "
                         "on every build (--cache-dir or KILN_CACHE_DIR names another folder; --no-kernel-cache "
                         "turns the cache off without this warning)\n",
                         model, cache.dir().string(), why));
  }
#endif

  // 1. Import, failing fast with every node kiln cannot compile.
  const auto t0 = std::chrono::steady_clock::now();
  ImportOptions io;
  io.names = o.shape_option_names;
  io.input_shapes = o.input_shapes;
  io.sequence_shapes = o.sequence_shapes;
  io.empty_optionals = o.empty_optionals;
  std::vector<ShapeRanges> ranges = {{o.min_shapes, o.opt_shapes, o.max_shapes}};
  ranges.insert(ranges.end(), o.more_profiles.begin(), o.more_profiles.end());
  span_shape_profiles(ranges, io, model);
  io.batch = o.batch;
  if (o.progress) io.progress = [&o](int done, int total) { o.progress("nodes imported", done, total); };
  ImportResult imported = import_checked(source, io);
  // Strings run on the reference backend only: no kernel takes them and the
  // plan format stores none, so no target writes a plan of such a model.
  refuse_string_tensors(
      *imported.graph, model,
      fmt::format("in a plan for target {} (run the model with kiln run --backend ref)", build.pass.target));
  // Before the passes and kernels: a plan could not bind it (plan_writer.h).
  if (o.write_plan) refuse_duplicate_output_names(*imported.graph, model);
  // Sizes decided by the data on a GPU target: the graph at the bounds, a
  // static graph whose counts are extra outputs (compiler/gpu_bounded_sizes.h);
  // the passes and kernels see nothing new.
  plan::BoundedSizes bounded;
  if (o.build.optimize && is_gpu_target(build.pass.target) && has_data_dependent_sizes(*imported.graph)) {
    imported.graph = graph_at_bounds(*imported.graph, model, bounded);
    std::vector<std::string> counts;
    for (const plan::SizeCount& c : bounded.counts)
      counts.push_back(fmt::format("{} ({} in [0, {}])", c.node, c.symbol, c.bound));
    say(o, fmt::format("{}: result sizes decided at run time ({}): the GPU plan computes at the upper bounds, its "
                       "kernels write each count on the device, and the runtime trims the outputs to the counts\n",
                       model, fmt::join(counts, ", ")));
  }
  Graph& g = *imported.graph;
  res.import_ms = ms_since(t0);
  // Symbolic dims left open by the model and given ranges: a plan with a
  // shape profile. On a GPU target its kernels must be shape-generic, which
  // is checked after the passes (refuse_non_generic_nodes).
  std::vector<plan::Profile> profiles;
  if (g.symbols().empty() && ranges.size() > 1)
    fail("{}: {} shape profiles are given but no input dim is left open by them", model, ranges.size());
  // Sizes decided by the data (NonZero, NMS, TopK with a run-time k): a CPU
  // plan keeps the imported graph, which the runtime's CPU path runs stage
  // by stage (backends/reference/data_dependent_stages.h); the passes do not
  // run on such a graph yet. A GPU plan would need shape-generic consumers:
  // refused, naming the nodes. This is the one place a compile refuses them:
  // before the profiles, passes and kernels, with --no-opt too (which
  // otherwise reached the shape-generic kernel check with a message about
  // kernels instead); the passes below never see such a graph, so
  // compile_graph's own check (for kiln dump-ir, opt and run, which do not
  // come through here) has nothing to find.
  const bool data_dependent = has_data_dependent_sizes(g);
  if (data_dependent && is_gpu_target(build.pass.target)) refuse_data_dependent_sizes(g, model);
  if (data_dependent && build.optimize) {
    std::vector<std::string> nodes;
    for (const auto& [sym, n] : data_dependent_symbols(g)) nodes.push_back(fmt::format("{} ({})", n->describe(), sym));
    say(o, fmt::format("{}: result sizes decided at run time ({}): the plan keeps the graph as imported, without "
                       "passes; the runtime's CPU path runs it stage by stage and trims each result to its count\n",
                       model, fmt::join(nodes, ", ")));
    build.optimize = false;
  }
  if (!g.symbols().empty()) {
    for (size_t k = 0; k < ranges.size(); ++k) profiles.push_back(profile_of(g, ranges[k], k, model, io.names));
    build.symbolic = true;
    if (!data_dependent) check_smallest_shapes(g, profiles, model);
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
    if (!g.symbols().empty()) refuse_non_generic_nodes(g, model, build.pass.target);  // before any kernel is emitted
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
  // The kernels line (and --stats table) comes after the plan when one is
  // written: the plan builder may emit nodes again under a thread cap.
  auto say_kernels = [&] {
    if (build.stats) say(o, format_kernel_stats(res.kernels));
    else if (res.kernels.built) say(o, kernels_summary(res.kernels) + "\n");
  };
  if (!o.write_plan) say_kernels();

  nlohmann::json j = compile_report_json(g, res.passes);
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
    po.opt_variants = o.opt_variants;
    plan::Plan p = build_plan(g, po);
    p.bounded_sizes = bounded;
    if (o.plan_path.empty()) res.plan = plan::serialize(p);
    else write_file_pieces(o.plan_path, [&p](const FilePieceWriter& w) { plan::write_plan(p, w); });
    res.plan_gpu_kernels = p.meta.gpu_kernels ? static_cast<int>(p.kernels.size()) : 0;
    res.plan_target = p.meta.target;
    res.no_gpu_reason = p.meta.no_gpu_reason;
    res.plan_ms = ms_since(t);
    adopt_plan_kernels(res.kernels, p);
    say_kernels();
  }
  const nlohmann::json kj = kernels_json(res.kernels);
  for (auto& [k, v] : kj.items()) j[k == "built" ? "kernels_built" : k] = v;
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
