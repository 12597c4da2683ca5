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

#include "compiler/plan_writer_profiles.h"
#include "compiler/targets.h"
#include "ir/control_flow.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/specialize.h"
#include "ir/string_values.h"
#include "ir/symbolic_dim.h"
#include "ops/registry.h"
#include "passes/memory_plan.h"
#include "runtime/plan_graph.h"
#include "runtime/version.h"
#ifdef KILN_HAVE_CODEGEN
#include "codegen/kernel_build.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "codegen/emitter_table.h"
#include "codegen/emitters/gemm_conv/gemm_tiles_wgmma.h"
#include "codegen/launch_fit.h"
#include "codegen/param_table.h"
#include "codegen/nvrtc/nvrtc_library.h"
#include "compiler/plan_frames.h"
#include "compiler/plan_in_place.h"
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
using planbuild::graph_at_largest_shapes;
using planbuild::holds_symbolic_values;
using planbuild::record_profiles;

// Every node of `g` and of its control-flow regions (depth first) but the
// control-flow nodes themselves, which run host-driven (plan::ControlFlow).
template <typename F>
void for_each_kernel_node(const Graph& g, const F& f) {
  for (const auto& n : g.nodes()) {
    if (is_control_flow(*n)) {
      for (const auto& r : n->regions()) for_each_kernel_node(*r, f);
      continue;
    }
    f(*n);
  }
}

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

// Threads per block the emitters of a node may use (codegen::ThreadCap), per
// node whose launch did not fit with more (build_plan).
using ThreadCaps = std::map<const Node*, unsigned>;

#ifdef KILN_HAVE_CODEGEN
using planbuild::Builder;
using planbuild::check_launch_fits;
using planbuild::LaunchMisfit;
using planbuild::Locator;
using planbuild::NodeKernels;

// Emitted before the memory plan, which places the scratch they ask for
// (NodeKernel::workspace_f32).
NodeKernels node_kernels(const Graph& g, const PlanBuildOptions& o, const ThreadCaps& caps) {
  NodeKernels nk;
  if (o.kernels) {
    for (const codegen::NodeLaunches& nl : o.kernels->launches) nk.of.emplace(nl.node, &nl.kernels);
    return nk;
  }
  // Kernels emitted here get their __launch_bounds__ here; prebuilt ones
  // (codegen::build_graph_kernels) already carry them.
  codegen::LaunchBounder bounder;
  const codegen::ScopedSm90Wgmma wgmma(o.target == "sm_90a");  // the target's opt-in to wgmma GEMM tiles
  for_each_kernel_node(g, [&](const Node& n) {
    if (codegen::is_view_node(n)) return;
    auto cap = caps.find(&n);  // a node whose launch did not fit: its emitter's blocks are capped
    std::optional<codegen::ThreadCap> capped;
    if (cap != caps.end()) capped.emplace(cap->second);
    auto ks = std::make_unique<std::vector<codegen::NodeKernel>>(codegen::emitter_for(n)->emit(n));
    capped.reset();
    for (codegen::NodeKernel& k : *ks) {
      bounder.apply(k);
      try {
        codegen::use_param_table_if_needed(k);  // more buffers than the parameter space holds
      } catch (const Error& e) {
        fail("{}{}: {}", o.source_name.empty() ? "" : o.source_name + ": ", n.describe(), e.what());
      }
    }
    nk.of.emplace(&n, ks.get());
    nk.emitted.push_back(std::move(ks));
  });
  return nk;
}

// The kernels of symbolic graph `g` keyed by the nodes of `at_max` (its
// specialisation, node for node). Control flow in such a plan is refused:
// its regions' launch lists have no shape-generic launches yet.
NodeKernels kernels_at_largest_shapes(const Graph& g, const Graph& at_max, NodeKernels nks, const PlanBuildOptions& o) {
  KILN_CHECK(g.nodes().size() == at_max.nodes().size(), "the graph at its largest shapes has {} nodes, not {}",
             at_max.nodes().size(), g.nodes().size());
  NodeKernels out;
  out.emitted = std::move(nks.emitted);
  auto big = at_max.nodes().begin();
  for (auto it = g.nodes().begin(); it != g.nodes().end(); ++it, ++big) {
    const Node& n = **it;
    if (is_control_flow(n))
      unsupported("{}{}: a GPU plan with shape profiles cannot hold control flow yet",
                  o.source_name.empty() ? "" : o.source_name + ": ", n.describe());
    auto at = nks.of.find(&n);
    if (at != nks.of.end()) out.of.emplace(big->get(), at->second);
    out.origin.emplace(big->get(), &n);
  }
  return out;
}

}  // namespace

namespace {

// The tile counters of folded split-K kernels (codegen::NodeKernel::tile_counters):
// one region after everything the memory plan placed, so no value or
// workspace ever shares its bytes; the runtime zeroes it once per context
// (plan::Memory::zeroed_offset) and the kernels leave it zero, so every such
// kernel of the plan can use it in turn. Control-flow regions' frames
// (plan_frames.h) start after it, and their kernels share it too.
void add_tile_counters_region(const NodeKernels& nks, int64_t variant_counters, plan::Plan& p) {
  int64_t counters = variant_counters;  // launch variants' kernels use the same region
  for (const auto& [node, kernels] : nks.of) counters = std::max(counters, codegen::node_tile_counters(*kernels));
  if (counters == 0) return;
  const uint64_t align = std::max<uint64_t>(p.memory.alignment, 4);
  const uint64_t bytes = static_cast<uint64_t>(counters) * 4;
  p.memory.zeroed_offset = (p.memory.arena_bytes + align - 1) / align * align;
  p.memory.zeroed_bytes = bytes;
  p.memory.arena_bytes = p.memory.zeroed_offset + (bytes + align - 1) / align * align;
}

void add_kernels(const Graph& g, const MemoryPlan& mem, const MemoryPlanOptions& mo, const NodeKernels& nks,
                 const SymbolBindings& largest, const std::vector<planbuild::OptShapeVariants>& variants,
                 const planbuild::RowBuckets& buckets, const PlanBuildOptions& o, plan::Plan& p) {
  Builder b{p, o, nks, mo};
  b.top = &g;
  b.largest = largest;
  std::vector<Value*> cs = plan::walk_constants(g);
  for (size_t i = 0; i < cs.size(); ++i) b.constant_index.emplace(cs[i], uint32_t(i));
  b.arena_end = p.memory.arena_bytes;
  Locator loc(g, mem, b.constant_index);
  p.steps = planbuild::launch_list(g, loc, b, planbuild::align_up(p.memory.arena_bytes));
  p.generic_launches = std::move(b.generic);
  p.launch_variants = planbuild::launch_variants(variants, buckets, g, loc, b, p.steps);
  // Control-flow regions' frames lie past the model's own arena.
  if (!p.control.empty()) p.memory.arena_bytes = std::max<uint64_t>(p.memory.arena_bytes, b.arena_end);
  const std::vector<codegen::KernelSource>& sources = b.sources;
  // Per arch (the target's, first one also gives the PTX), the compiled
  // kernels in the plan's order.
  const std::vector<std::string> archs = target_archs(o.target);
  std::vector<std::vector<codegen::CompiledKernel>> compiled(archs.size());
  if (o.kernels) {
    // Compiled once already (they may include kernels of empty launches,
    // which the plan leaves out): picked by name, in the plan's order.
    KILN_CHECK(o.kernels->more_compiled.size() + 1 == archs.size(), "kernels were compiled for {} archs, {} needs {}",
               o.kernels->more_compiled.size() + 1, o.target, archs.size());
    // Launch variants' kernels (a plan with shape profiles) were emitted
    // here, not before: compiled now.
    std::set<std::string> prebuilt;
    for (const codegen::CompiledKernel& ck : o.kernels->compiled) prebuilt.insert(ck.name);
    std::vector<codegen::KernelSource> fresh;
    for (const codegen::KernelSource& src : sources)
      if (!prebuilt.count(src.name)) fresh.push_back(src);
    std::vector<std::vector<codegen::CompiledKernel>> more(archs.size());
    if (!fresh.empty()) {
      codegen::KernelCache cache(o.kernel_cache_dir);
      for (size_t a = 0; a < archs.size(); ++a) {
        codegen::KernelCompiler compiler(archs[a], o.use_cache ? &cache : nullptr);
        more[a] = compiler.compile(fresh);
      }
    }
    for (size_t a = 0; a < archs.size(); ++a) {
      const std::vector<codegen::CompiledKernel>& have = a ? o.kernels->more_compiled[a - 1] : o.kernels->compiled;
      std::map<std::string, const codegen::CompiledKernel*> by_name;
      for (const codegen::CompiledKernel& ck : have) by_name.emplace(ck.name, &ck);
      for (const codegen::CompiledKernel& ck : more[a]) by_name.emplace(ck.name, &ck);
      for (const codegen::KernelSource& src : sources) {
        auto at = by_name.find(src.name);
        KILN_CHECK(at != by_name.end() && at->second->arch == archs[a], "kernel {} was not compiled for {}", src.name,
                   archs[a]);
        compiled[a].push_back(*at->second);
      }
    }
  } else {
    codegen::KernelCache cache(o.kernel_cache_dir);
    for (size_t a = 0; a < archs.size(); ++a) {
      codegen::KernelCompiler compiler(archs[a], o.use_cache ? &cache : nullptr);
      if (o.progress) compiler.set_progress(o.progress);
      compiled[a] = compiler.compile(sources);
    }
  }
  planbuild::add_in_place_appends(g, b, archs, compiled);  // KV caches bound in place: kernels of no node
  for (size_t i = 0; i < sources.size(); ++i) {
    codegen::CompiledKernel& ck = compiled[0][i];
    plan::Kernel k;
    k.name = ck.name;
    k.source = sources[i].source;
    k.arch = ck.arch;
    k.cubin = std::move(ck.cubin);
    k.ptx = std::move(ck.ptx);
    k.registers = ck.registers;
    k.static_shared_bytes = ck.shared_bytes;
    k.spill_bytes = ck.spill_bytes;
    for (size_t a = 1; a < archs.size(); ++a) {
      codegen::CompiledKernel& more = compiled[a][i];
      k.more_cubins.push_back({more.arch, std::move(more.cubin), more.registers, more.shared_bytes, more.spill_bytes});
    }
    p.kernels.push_back(std::move(k));
  }
  // After NVRTC: registers and static shared memory as ptxas allocated them,
  // for every CUBIN and every launch (control-flow regions' too).
  for (const auto& [s, node] : b.launched) {
    const plan::Kernel& k = p.kernels[s.kernel];
    check_launch_fits(s, *node, k.source, k.name, k.registers, k.static_shared_bytes, archs.size() > 1 ? k.arch : "",
                      o);
    for (const plan::ArchCubin& c : k.more_cubins)
      check_launch_fits(s, *node, k.source, k.name, c.registers, c.static_shared_bytes, c.arch, o);
  }
  // The oldest driver that loads this code: NVRTC's CUDA major release for
  // the CUBINs (CUDA minor version compatibility covers CUBINs only), the
  // release of the PTX's ISA for the PTX (the JIT needs a driver that knows it).
  p.meta.cubin_driver_version = codegen::nvrtc_library().major * 1000;
  for (const plan::Kernel& k : p.kernels)
    p.meta.ptx_driver_version = std::max(p.meta.ptx_driver_version, plan::ptx_driver_version(k.ptx));
}
#endif

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

// The one thread cap: see plan_writer.h.
plan::Plan build_plan(const Graph& g, const PlanBuildOptions& o) {
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
