#include "codegen/kernel_build.h"

#include <chrono>
#include <map>
#include <utility>

#include "codegen/emitters/gemm_conv/gemm_tiles_wgmma.h"
#include "codegen/launch_fit.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/param_table.h"
#include "ir/control_flow.h"
#include "ir/error.h"

namespace kiln::codegen {

bool is_view_node(const Node& n) { return !n.body() && (n.op() == "reshape" || n.op() == "identity"); }

namespace {

GraphKernels build(const Graph& g, const KernelBuildOptions& o, bool compile) {
  const auto t0 = std::chrono::steady_clock::now();
  GraphKernels r;
  std::vector<KernelSource> sources;
  std::map<std::string, bool> seen;
  LaunchBounder bounder;                            // the same __launch_bounds__ a plan's kernels get
  const ScopedSm90Wgmma wgmma(o.arch == "sm_90a");  // the target's opt-in to wgmma GEMM tiles
  // The nodes of control-flow regions get their kernels too (after the
  // graph's own): a GPU plan launches them from its regions' launch lists
  // (compiler/plan_control_flow.cpp), and the simulator runs them.
  std::vector<const Graph*> graphs{&g};
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    for (const auto& np : graphs[gi]->nodes()) {
      const Node& n = *np;
      if (is_view_node(n)) continue;
      if (is_control_flow(n)) {
        for (const auto& region : n.regions()) graphs.push_back(region.get());
        continue;
      }
      const KernelEmitter* e = emitter_for(n);
      if (!e) {
        r.missing.push_back(n.describe());
        continue;
      }
      NodeLaunches nl{&n, e->emit(n)};
      for (NodeKernel& k : nl.kernels) {
        bounder.apply(k);
        try {
          use_param_table_if_needed(k);  // more buffers than the parameter space holds
        } catch (const Error& err) {
          fail("{}: {}", n.describe(), err.what());
        }
      }
      for (const NodeKernel& k : nl.kernels)
        if (!std::exchange(seen[k.name], true)) sources.push_back({k.name, k.source});
      r.launches.push_back(std::move(nl));
    }
  }
  if (compile && !sources.empty()) {
    std::unique_ptr<KernelCache> cache;
    if (o.use_cache) cache = std::make_unique<KernelCache>(o.cache_dir);
    // Progress counts every (kernel, arch) compilation.
    const int per_arch = static_cast<int>(sources.size());
    const int total = per_arch * static_cast<int>(1 + o.more_archs.size());
    std::vector<std::string> archs{o.arch};
    archs.insert(archs.end(), o.more_archs.begin(), o.more_archs.end());
    for (size_t a = 0; a < archs.size(); ++a) {
      KernelCompiler kc(archs[a], cache.get());
      if (o.progress)
        kc.set_progress([&, done_before = int(a) * per_arch](int done, int) { o.progress(done_before + done, total); });
      std::vector<CompiledKernel> c = kc.compile(sources);
      if (a == 0) r.compiled = std::move(c);
      else r.more_compiled.push_back(std::move(c));
      r.nvrtc_compilations += kc.nvrtc_compilations();
      r.cache_hits += kc.cache_hits();
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

GraphKernels build_graph_kernels(const Graph& g, const KernelBuildOptions& o, bool compile) {
  if (o.source.empty()) return build(g, o, compile);
  // Same error type, message prefixed with the model (unsupported stays
  // unsupported for the conformance runner).
  try {
    return build(g, o, compile);
  } catch (const Unsupported& e) {
    throw Unsupported(fmt::format("{}: {}", o.source, e.what()));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", o.source, e.what()));
  }
}

}  // namespace kiln::codegen
