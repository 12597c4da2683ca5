#include "backends/sim/sim_executor.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <unordered_map>

#include "backends/reference/control_flow_run.h"
#include "backends/sim/sim_module.h"
#include "codegen/emitter_table.h"
#include "codegen/kernel_build.h"
#include "ir/control_flow.h"
#include "ir/error.h"
#include "ir/graph_inputs.h"
#include "ir/op_registry.h"
#include "ir/string_values.h"
#include "ops/cpu_only.h"
#include "ops/registry.h"

namespace kiln::codegen {

namespace {

bool is_view(const Node& n) { return is_view_node(n); }

// One compiler for the process: it keeps the loaded modules (entries stay
// valid) and so compiles a kernel once per process.
SimCompiler& compiler(const std::filesystem::path& dir) {
  static std::mutex mu;
  static std::map<std::filesystem::path, std::unique_ptr<SimCompiler>> compilers;
  std::lock_guard<std::mutex> lock(mu);
  auto& c = compilers[dir];
  if (!c) c = std::make_unique<SimCompiler>(dir);
  return *c;
}

}  // namespace

struct SimExecutor::Impl {
  const Graph& g;
  std::unordered_map<const Node*, std::vector<NodeKernel>> kernels;
  std::map<std::string, SimEntry> entries;
  // Control-flow nodes: one executor per region, run as the shared driver
  // (backends/reference/control_flow_run.h) asks.
  std::unordered_map<const Node*, std::vector<std::unique_ptr<SimExecutor>>> regions;
};

SimExecutor::SimExecutor(const Graph& g, std::filesystem::path cache_dir) : impl_(new Impl{g, {}, {}, {}}) {
  // Every node first, so an unsupported graph fails before any compilation.
  refuse_string_tensors(g, "sim backend", "on the kernel simulator");
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    if (is_view(n)) continue;
    if (is_control_flow(n)) {
      for (const auto& r : n.regions()) impl_->regions[&n].push_back(std::make_unique<SimExecutor>(*r, cache_dir));
      continue;
    }
    if (ops::is_cpu_only_op(n.op()))
      unsupported("sim backend: op {} {} (there is no kernel for it by design; use --backend ref) ({})", n.op(),
                  ops::kCpuOnlyRefusal, n.describe());
    if (!emitter_for(n)) {
      std::string what = n.op();
      if (n.op() == "fused") what += " (kind " + n.attrs().get_string("kind", "?") + ")";
      unsupported("sim backend: no kernel emitter for op {} yet ({})", what, n.describe());
    }
  }
  std::vector<KernelSource> sources;
  std::map<std::string, bool> seen;
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    if (is_view(n) || is_control_flow(n)) continue;
    std::vector<NodeKernel> ks = emitter_for(n)->emit(n);
    for (const NodeKernel& k : ks) {
      if (!seen[k.name]) sources.push_back({k.name, k.source});
      seen[k.name] = true;
    }
    impl_->kernels.emplace(&n, std::move(ks));
  }
  if (!sources.empty()) impl_->entries = compiler(cache_dir).compile(sources);
}

SimExecutor::~SimExecutor() = default;

std::vector<Tensor> SimExecutor::run(const std::map<std::string, Tensor>& inputs) const {
  return run(inputs, KernelTimer());
}

std::vector<Tensor> SimExecutor::run(const std::map<std::string, Tensor>& inputs, const KernelTimer& timer) const {
  return execute(bind_graph_inputs(impl_->g, inputs), timer);
}

std::vector<Tensor> SimExecutor::run_positional(const std::vector<const Tensor*>& inputs,
                                                const KernelTimer& timer) const {
  const Graph& g = impl_->g;
  KILN_CHECK(inputs.size() == g.inputs().size(), "graph @{} takes {} inputs, got {}", g.name(), g.inputs().size(),
             inputs.size());
  std::unordered_map<const Value*, Tensor> env;
  for (size_t i = 0; i < inputs.size(); ++i) env[g.inputs()[i]] = *inputs[i];
  return execute(std::move(env), timer);
}

std::vector<Tensor> SimExecutor::execute(std::unordered_map<const Value*, Tensor> env, const KernelTimer& timer) const {
  const Graph& g = impl_->g;
  std::unordered_map<const Value*, int> remaining;
  for (const auto& n : g.nodes())
    for (Value* v : n->inputs())
      if (v && !v->is_constant()) ++remaining[v];
  for (Value* v : g.outputs()) ++remaining[v];
  auto lookup = [&](const Value* v) -> const Tensor& {
    if (v->is_constant()) return v->data();
    auto it = env.find(v);
    KILN_CHECK(it != env.end(), "value %{} used before it is computed", v->name());
    return it->second;
  };
  Tensor tile_counters(TensorType(DType::U32, {0}));  // zeroed; grown (zeroed again) as kernels need more
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    std::vector<Tensor> outs;
    if (is_control_flow(n)) {
      std::vector<const Tensor*> ins;
      for (Value* v : n.inputs()) ins.push_back(v ? &lookup(v) : nullptr);
      const auto& subs = impl_->regions.at(&n);
      outs = run_control_flow(n, ins, [&](int r, const std::vector<const Tensor*>& region_ins) {
        return subs.at(r)->run_positional(region_ins, timer);
      });
    } else if (is_view(n)) {
      outs.push_back(lookup(n.input(0)).reshaped(n.output(0)->shape()));
    } else {
      for (int r = 0; r < n.num_outputs(); ++r) outs.emplace_back(n.output(r)->type());
      // The node's scratch (split-K partial sums), shared by its kernels.
      const std::vector<NodeKernel>& kernels = impl_->kernels.at(&n);
      const int64_t ws_bytes = node_workspace_bytes(kernels);
      Tensor workspace(TensorType(DType::F32, {ws_bytes / 4}));
      for (const NodeKernel& k : kernels) {
        std::vector<void*> bufs;
        std::vector<long long> counts;
        auto add = [&](const Tensor& t) {
          // Inputs are only read: the kernels take them as const pointers.
          bufs.push_back(const_cast<void*>(t.raw()));
          counts.push_back(t.numel());
        };
        if (k.results.empty()) {
          for (const Tensor& t : outs) add(t);
        } else {
          for (int r : k.results) add(outs.at(r));
        }
        for (Value* v : n.inputs()) {
          if (v) {
            add(lookup(v));
          } else {  // an absent optional operand: a null buffer of 0 elements
            bufs.push_back(nullptr);
            counts.push_back(0);
          }
        }
        for (const Tensor& t : k.extra) add(t);
        if (k.workspace_f32 > 0) add(workspace);
        if (k.tile_counters > 0) {
          // One zeroed region for the whole run, as a GPU context's arena has
          // (codegen::NodeKernel::tile_counters): each kernel must leave it zero.
          if (tile_counters.numel() < k.tile_counters)
            tile_counters = Tensor(TensorType(DType::U32, {k.tile_counters}));
          add(tile_counters);
        }
        if (k.grid.count() == 0) continue;
        kiln::sim::LaunchConfig cfg;
        cfg.kernel = k.name;
        cfg.grid = dim3(k.grid.x, k.grid.y, k.grid.z);
        cfg.block = dim3(k.block.x, k.block.y, k.block.z);
        cfg.shared_bytes = k.shared_bytes;
        auto start = std::chrono::steady_clock::now();
        try {
          sim_launch(impl_->entries.at(k.name), cfg, bufs, counts);
        } catch (const kiln::sim::SimError& e) {
          fail("sim backend: {}: kernel {} failed: {}", n.describe(), k.name, e.what());
        }
        if (k.tile_counters > 0 &&
            !std::all_of(tile_counters.data<uint32_t>(), tile_counters.data<uint32_t>() + tile_counters.numel(),
                         [](uint32_t c) { return c == 0; }))
          fail(
              "sim backend: {}: kernel {} left its split-K tile counters nonzero (the next launch would "
              "miscount)",
              n.describe(), k.name);
        if (timer)
          timer(n, k, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
    }
    for (Value* v : n.inputs())
      if (v && !v->is_constant() && --remaining[v] == 0) env.erase(v);
    for (int i = 0; i < n.num_outputs(); ++i)
      if (remaining[n.output(i)] > 0) env[n.output(i)] = std::move(outs[i]);
  }
  std::vector<Tensor> results;
  for (Value* v : g.outputs()) results.push_back(lookup(v));
  return results;
}

}  // namespace kiln::codegen
