#include "compiler/plan_writer_kernels.h"

#ifdef KILN_HAVE_CODEGEN
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "codegen/emitter_table.h"
#include "codegen/emitters/gemm_conv/gemm_tiles_wgmma.h"
#include "codegen/kernel_build.h"
#include "codegen/launch_fit.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "codegen/nvrtc/nvrtc_library.h"
#include "codegen/param_table.h"
#include "compiler/plan_in_place.h"
#include "compiler/plan_launch_check.h"
#include "compiler/targets.h"
#include "ir/error.h"
#include "runtime/plan_graph.h"

namespace kiln::planbuild {

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

}  // namespace kiln::planbuild
#endif
