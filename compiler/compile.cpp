#include "compiler/compile.h"
#include "compiler/targets.h"

#include <sstream>
#include <utility>

#ifdef KILN_HAVE_CODEGEN
#include "codegen/emitter_table.h"
#endif
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace kiln {

void refuse_data_dependent_sizes(const Graph& g, const std::string& source) {
  if (!has_data_dependent_sizes(g)) return;
  std::vector<std::string> nodes;
  for (const auto& [sym, n] : data_dependent_symbols(g)) nodes.push_back(fmt::format("{} ({})", n->describe(), sym));
  unsupported(
      "{}the graph has result sizes decided at run time: {}. kiln run and kiln conformance run such graphs on "
      "the ref and sim backends, stage by stage, and a plan for --target cpu holds them (the runtime's CPU path runs "
      "it stage by stage); a GPU plan holds them only computed at their upper bounds (kiln compile for a GPU "
      "target, compiler/gpu_bounded_sizes.h), not as size symbols",
      source.empty() ? "" : source + ": ", fmt::join(nodes, ", "));
}

CompileReport compile_graph(Graph& g, const CompileOptions& o) {
  CompileReport r;
  r.nodes_in = g.num_nodes();
  if (o.optimize) {
    // Passes, memory planning and codegen size everything: a graph with
    // symbolic dims compiles either specialised to its inputs' shapes
    // (ir/specialize.h) or, asked for with a profile, into a plan with shape
    // profiles (docs/dynamic_shapes.md). Sizes decided by data (NonZero, NMS)
    // run stage by stage on ref and sim only.
    refuse_data_dependent_sizes(g, o.pipeline.source);
    if (!g.symbols().empty() && !o.symbolic) {
      std::vector<std::string> syms;
      for (const SymbolDecl& d : g.symbols()) syms.push_back(fmt::format("{} in [{}, {}]", d.name, d.min, d.max));
      unsupported(
          "{}the graph has symbolic dims ({}): compiling it needs static shapes (--shapes, or kiln run with the "
          "inputs' shapes) or a shape profile (--min-shapes/--opt-shapes/--max-shapes)",
          o.pipeline.source.empty() ? "" : o.pipeline.source + ": ", fmt::join(syms, ", "));
    }
    PassManager pm;
    PassOptions popts = o.pass;
    // Passes need a concrete target (layout runs for GPU ones); compile_model
    // resolves "auto" before it gets here, other callers (dump-ir, opt, run)
    // the same way.
    if (popts.target == kTargetAuto) popts.target = resolve_target(popts.target).target;
    std::vector<std::string> names = o.passes.empty() ? default_pipeline(popts) : o.passes;
    // Sizes of symbolic dims are polynomials: the plan builder lays memory
    // out at the largest shapes of the profiles instead.
    if (!g.symbols().empty()) std::erase(names, std::string("plan-memory"));
    for (const std::string& n : names) pm.add(n);
    if (!o.pipeline.stop_after.empty() && std::find(names.begin(), names.end(), o.pipeline.stop_after) == names.end())
      fail("--stop-after: pass '{}' is not in the pipeline ({})", o.pipeline.stop_after, fmt::join(names, ","));
    // A pass name with a typo would print nothing, silently.
    for (const auto& [flag, wanted] : {std::pair{"--print-ir-before", &o.pipeline.print_before},
                                       std::pair{"--print-ir-after", &o.pipeline.print_after}})
      for (const std::string& p : *wanted)
        if (std::find(names.begin(), names.end(), p) == names.end())
          fail("{}: pass '{}' is not in the pipeline ({})", flag, p, fmt::join(names, ","));
#ifdef KILN_HAVE_CODEGEN
    // The fuser forms only groups codegen can emit, whatever the target (passes/fusion_capabilities.h).
    if (!popts.why_no_kernel) popts.why_no_kernel = codegen::why_no_kernel;
    // A GPU plan with shape profiles: a group is formed only where its kernel
    // is shape-generic too (a fused softmax with a pointwise epilogue is not
    // yet; the softmax and the pointwise group each are).
    if (!g.symbols().empty() && is_gpu_target(popts.target))
      popts.why_not_shape_generic = codegen::why_not_shape_generic;
#endif
    r.passes = pm.run(g, popts, o.pipeline);
  } else if (o.pipeline.verify_each) {
    verify_graph(g, op_registry());
  }
  r.nodes_out = g.num_nodes();
  return r;
}

int count_kernels(const Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes())
    if (node->op() != "reshape" && node->op() != "identity") ++n;
  return n;
}

int64_t weight_bytes(const Graph& g) {
  int64_t b = 0;
  for (const Value* c : g.constants()) b += static_cast<int64_t>(c->type().nbytes());
  return b;
}

nlohmann::json compile_report_json(const Graph& g, const CompileReport& r) {
  nlohmann::json passes = nlohmann::json::array();
  nlohmann::json j = {{"nodes_in", r.nodes_in},
                      {"nodes_out", r.nodes_out},
                      {"kernels", count_kernels(g)},
                      {"weight_bytes", weight_bytes(g)}};
  for (const PassRecord& p : r.passes) {
    nlohmann::json pj = {{"name", p.name},
                         {"changed", p.changed},
                         {"ms", p.ms},
                         {"verified", p.verified},
                         {"verify_ms", p.verify_ms},
                         {"cpu_ms", p.cpu_ms},
                         {"verify_cpu_ms", p.verify_cpu_ms}};
    for (const auto& [k, v] : p.stats.counters) {
      pj["stats"][k] = v;
      // The memory planner reports the arena figures the JSON promises.
      if (k == "activation_bytes_naive" || k == "activation_bytes_planned") j[k] = v;
    }
    passes.push_back(pj);
  }
  j["passes"] = passes;
  return j;
}

std::string format_stats(const CompileReport& r) {
  std::ostringstream s;
  s << fmt::format("{:<22} {:>7} {:>9} {:>7} {:>7}  {}\n", "pass", "changed", "ms", "nodes", "after", "statistics");
  double total = 0;
  for (const PassRecord& p : r.passes) {
    std::string st;
    for (const auto& [k, v] : p.stats.counters) st += fmt::format("{}{}={}", st.empty() ? "" : " ", k, v);
    s << fmt::format("{:<22} {:>7} {:>9.2f} {:>7} {:>7}  {}\n", p.name, p.changed ? "yes" : "no", p.ms, p.nodes_before,
                     p.nodes_after, st);
    for (const std::string& note : p.stats.notes) s << "    " << note << "\n";
    total += p.ms;
  }
  double verify = 0;
  for (const PassRecord& p : r.passes) verify += p.verify_ms;
  if (verify > 0) s << fmt::format("{:<22} {:>7} {:>9.2f}\n", "(verifier, all runs)", "", verify);
  s << fmt::format("{:<22} {:>7} {:>9.2f} {:>7} {:>7}\n", "total", "", total + verify, r.nodes_in, r.nodes_out);
  return s.str();
}

}  // namespace kiln
