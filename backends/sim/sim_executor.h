// The "sim" backend: runs a graph node by node, every node through a kernel
// the codegen emitters generate, compiled for the CPU simulator
// (backends/sim/sim_module.h). It checks the emitters end to end against the
// reference backend (kiln conformance --backend sim) without a GPU.
//
// Nodes: graph inputs and constants are host tensors; reshape and identity are
// views (no kernel); every other node (pointwise, injective, reduction,
// normalization ops, pools, argmax/argmin/hardmax/cumsum/topk, the losses,
// fused nodes...) needs an emitter in emitter_for()'s table
// (backends/sim/sim_executor.cpp) -- a node without one makes the constructor throw
// kiln::Unsupported("sim backend: no kernel emitter for op X yet"): there is no
// fallback to the reference. All kernels of the graph are compiled in one
// SimCompiler::compile call (cached on disk, see backends/sim/sim_module.h).
// Control-flow nodes (if, loop, scan) launch no kernel of their own: each of
// their regions gets a SimExecutor of its own, and the node runs through the
// driver the reference backend uses (backends/reference/control_flow_run.h).
// The executable must link kiln_sim_module with ENABLE_EXPORTS.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/emitter_table.h"
#include "ir/graph.h"

namespace kiln::codegen {

// Profiling hook (kiln bench --profile): called after each kernel launch with
// the node, the kernel and its wall time in milliseconds (views launch none).
using KernelTimer = std::function<void(const Node& n, const NodeKernel& k, double ms)>;

class SimExecutor {
 public:
  // Emits and compiles every kernel of `g` (which must outlive the executor).
  // Throws kiln::Unsupported for a node no emitter handles.
  explicit SimExecutor(const Graph& g, std::filesystem::path cache_dir = {});
  ~SimExecutor();

  // As ReferenceExecutor::run.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) const;
  // The same, timing every kernel through `timer` when it is set.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs, const KernelTimer& timer) const;
  // The graph's inputs given positionally (the regions of control-flow nodes).
  std::vector<Tensor> run_positional(const std::vector<const Tensor*>& inputs, const KernelTimer& timer = {}) const;

 private:
  std::vector<Tensor> execute(std::unordered_map<const Value*, Tensor> env, const KernelTimer& timer) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::codegen
