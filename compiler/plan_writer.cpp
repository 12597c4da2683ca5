#include "compiler/plan_writer.h"

#include "compiler/compile.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include "compiler/plan_writer_kernels.h"
#include "compiler/plan_writer_profiles.h"
#include "compiler/targets.h"
#include "ir/control_flow.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/short_name.h"
#include "ir/specialize.h"
#include "ir/string_values.h"
#include "ir/symbolic_dim.h"
#include "ops/registry.h"
#include "passes/memory_plan.h"
#include "runtime/plan_graph.h"
#include "runtime/version.h"
#ifdef KILN_HAVE_CODEGEN
#include "codegen/emitter_table.h"
#include "codegen/kernel_build.h"
#include "compiler/plan_frames.h"
#include "compiler/plan_launch_check.h"
#include "compiler/plan_writer_variants.h"
#endif

namespace kiln {

namespace planbuild {

uint32_t add_weight(plan::Plan& p, const Tensor& t) {
  uint64_t at = (p.weight_data.size() + plan::kAlignment - 1) / plan::kAlignment * plan::kAlignment;
  p.weight_data.resize(at + t.nbytes(), 0);
  if (t.nbytes()) std::memcpy(p.weight_data.data() + at, t.raw(), t.nbytes());
  p.weights.push_back({t.type(), at, t.nbytes()});
  return static_cast<uint32_t>(p.weights.size() - 1);
}

}  // namespace planbuild

namespace {

using planbuild::add_weight;
using planbuild::data_dependent_plan;
using planbuild::for_each_kernel_node;
using planbuild::graph_at_largest_shapes;
using planbuild::holds_symbolic_values;
using planbuild::record_profiles;
using planbuild::ThreadCaps;
#ifdef KILN_HAVE_CODEGEN
using planbuild::add_kernels;
using planbuild::add_tile_counters_region;
using planbuild::kernels_at_largest_shapes;
using planbuild::LaunchMisfit;
using planbuild::node_kernels;
using planbuild::NodeKernels;
#endif

// Nodes that need a kernel and have no emitter ("" when all do): how many of
// each kind, then the first few by name.
std::string nodes_without_emitter(const Graph& g) {
#ifdef KILN_HAVE_CODEGEN
  std::map<std::string, int> kinds;
  std::vector<std::string> names;
  for_each_kernel_node(g, [&](const Node& n) {
    if (codegen::is_view_node(n) || codegen::emitter_for(n)) return;
    std::string kind = n.op() == "fused" ? fmt::format("fused/{}", n.attrs().get_string("kind", "?")) : n.op();
    ++kinds[kind];
    names.push_back(n.describe());
  });
  if (names.empty()) return "";
  std::vector<std::string> counts;
  for (const auto& [kind, k] : kinds) counts.push_back(fmt::format("{} x{}", kind, k));
  size_t shown = std::min<size_t>(names.size(), 3);
  std::string s = fmt::format("{} node(s) have no kernel emitter yet ({}): {}", names.size(), fmt::join(counts, ", "),
                              fmt::join(names.begin(), names.begin() + shown, ", "));
  if (names.size() > shown) s += fmt::format(", ... ({} more)", names.size() - shown);
  return s;
#else
  return "kiln was built without NVRTC (codegen), so plans carry no GPU kernels";
#endif
}

}  // namespace

std::vector<std::string> nodes_without_kernel_emitter(const Graph& g) {
  std::vector<std::string> names;
  for_each_kernel_node(g, [&](const Node& n) {
#ifdef KILN_HAVE_CODEGEN
    if (codegen::is_view_node(n) || codegen::emitter_for(n)) return;
#endif
    names.push_back(n.describe());
  });
  return names;
}

bool kiln_has_codegen() {
#ifdef KILN_HAVE_CODEGEN
  return true;
#else
  return false;
#endif
}

namespace {

plan::Plan build_plan_capped(const Graph& g, const PlanBuildOptions& o, const ThreadCaps& caps) {
  plan::Plan p;
  p.meta.kiln_version = kKilnVersion;
  p.meta.target = o.target;
  p.meta.precision = o.precision;
  if (has_data_dependent_sizes(g)) return data_dependent_plan(g, o, std::move(p));
  // Symbolic dims: memory is laid out at the profiles' largest shapes, on the
  // graph specialised to them (the same nodes in the same order).
  std::unique_ptr<Graph> at_max = graph_at_largest_shapes(g, o);
  p.graph_text = print_graph(g);
  std::vector<Value*> cs = plan::walk_constants(g);
  // Room for every constant at once: growing the vector by doubling touched
  // each weight's pages two to three times over (GPT-2: 5 GB of page faults
  // for 0.5 GB of weights).
  uint64_t weight_bytes = 0;
  for (const Value* c : cs)
    weight_bytes = (weight_bytes + plan::kAlignment - 1) / plan::kAlignment * plan::kAlignment + c->type().nbytes();
  p.weight_data.reserve(weight_bytes);
  // A symbolic constant's value is in the text; its bytes here would be
  // process-local handles (zeros keep the file the same from run to run).
  for (const Value* c : cs) add_weight(p, holds_symbolic_values(*c) ? Tensor(c->type()) : c->data());
  p.meta.graph_constants = cs.size();

  // GPU kernels, when the plan will carry them: emitted before the memory
  // plan, which places their scratch (split-K partial sums) in the arena.
  const bool gpu_target = is_gpu_target(o.target);  // sm_XX or portable
  // Control flow left after folding (if/loop/scan) gets its regions' kernels
  // too: the runtime runs it host-driven (plan::ControlFlow).
  std::string no_gpu_reason = gpu_target ? nodes_without_emitter(g) : std::string();
  if (gpu_target && no_gpu_reason.empty()) refuse_non_generic_nodes(g, o.source_name, o.target);
  MemoryPlanOptions mo;
#ifdef KILN_HAVE_CODEGEN
  NodeKernels nks;
  std::vector<planbuild::OptShapeVariants> variants;
  planbuild::RowBuckets buckets;
  if (gpu_target && no_gpu_reason.empty()) {
    nks = node_kernels(g, o, caps);
    // A plan with shape profiles: the kernels come from the symbolic graph
    // (shape-generic where its sizes are symbolic), the launch list and
    // memory plan from the same graph at its largest shapes (the same
    // nodes in the same order).
    if (at_max) nks = kernels_at_largest_shapes(g, *at_max, std::move(nks), o);
    // And the launches specialised for each profile's opt shape, where the
    // performance model finds that they pay (plan_writer_variants.h).
    if (at_max) variants = planbuild::opt_shape_variants(g, *at_max, nks, o);
    if (at_max) buckets = planbuild::gemm_row_buckets(g, *at_max, nks, o);  // and GEMM size buckets
    mo.workspace_bytes = [&nks, &variants](const Node& n) {
      auto at = nks.of.find(&n);
      const int64_t generic = at == nks.of.end() ? int64_t{0} : codegen::node_workspace_bytes(*at->second);
      return std::max(generic, planbuild::variant_workspace_bytes(variants, n));
    };
  }
#endif
  const Graph& sized = at_max ? *at_max : g;
  MemoryPlan mem = plan_memory(sized, mo);
  mem.validate();
  p.memory.arena_bytes = static_cast<uint64_t>(mem.arena_bytes);
  p.memory.alignment = static_cast<uint64_t>(mem.options.alignment);
  p.memory.live_peak_bytes = mem.live_peak_bytes;
  std::unordered_map<const Node*, uint32_t> node_pos;
  for (const auto& n : sized.nodes()) node_pos.emplace(n.get(), uint32_t(node_pos.size()));
  for (const ValuePlan& vp : mem.values)
    p.memory.values.push_back({node_pos.at(vp.value->producer()), uint32_t(vp.value->producer_output()),
                               static_cast<uint8_t>(vp.storage), vp.offset, vp.size});
  if (at_max) record_profiles(g, o, p);

  if (!gpu_target) {
    p.meta.no_gpu_reason =
        fmt::format("compiled for target {} (use --target auto, portable or sm_XX for GPU kernels)", o.target);
    return p;
  }
  p.meta.no_gpu_reason = no_gpu_reason;
  if (!p.meta.no_gpu_reason.empty()) return p;
#ifdef KILN_HAVE_CODEGEN
  add_tile_counters_region(nks, planbuild::variant_tile_counters(variants), p);
  SymbolBindings largest;
  for (const SymbolDecl& d : g.symbols()) largest[d.name] = d.max;
  add_kernels(at_max ? *at_max : g, mem, mo, nks, largest, variants, buckets, o, p);
  p.meta.gpu_kernels = true;
  p.meta.archs = target_archs(o.target);
#endif
  return p;
}

}  // namespace

void refuse_duplicate_output_names(const Graph& g, const std::string& model) {
  std::unordered_map<std::string, size_t> first;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const std::string& name = g.outputs()[i]->name();
    auto [it, fresh] = first.emplace(name, i);
    if (!fresh)
      fail(
          "{}graph output \"{}\" is listed twice (outputs {} and {}): a plan's outputs are bound by name, so one name "
          "cannot be two outputs; list it once (both hold the same values) or give the second its own name through "
          "an Identity node (kiln run --backend ref or sim on the .onnx returns both, as ONNX Runtime does)",
          model.empty() ? "" : model + ": ", short_name(name), it->second, i);
  }
}

// The one thread cap: see plan_writer.h.
plan::Plan build_plan(const Graph& g, const PlanBuildOptions& o) {
  refuse_duplicate_output_names(g, o.source_name);
  refuse_string_tensors(g, o.source_name, fmt::format("in a plan for target {} (plans store no strings)", o.target));
#ifdef KILN_HAVE_CODEGEN
  ThreadCaps caps;
  PlanBuildOptions again = o;
  again.kernels = nullptr;  // capped nodes are emitted here, and so the rest with them (one LaunchBounder)
  for (;;) {
    try {
      return build_plan_capped(g, caps.empty() ? o : again, caps);
    } catch (const LaunchMisfit& m) {
      auto it = caps.find(m.node);
      const bool capped = it != caps.end();
      if (capped && m.threads > it->second)
        fail("{} (its emitter keeps {} threads per block: it has no variant with fewer)", m.what(), m.threads);
      // A misfit at one warp (where fewer_threads_may_fit is always false)
      // or one fewer threads cannot cure: a node already capped says that
      // its smaller blocks were tried too.
      if (!m.fewer_threads_may_fit || m.threads <= 32) {
        if (capped) fail("{} (also with {} threads per block: no variant fits)", m.what(), m.threads);
        throw;
      }
      caps[m.node] = static_cast<unsigned>(m.threads / 2);
    }
  }
#else
  return build_plan_capped(g, o, {});
#endif
}

}  // namespace kiln
