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
// The executable must link kiln_sim_module with ENABLE_EXPORTS.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::codegen {

// Grid or block dimensions of a launch. Converts from one unsigned (x), so
// 1-D emitters write `nk.grid = k.grid`.
struct LaunchDims {
  unsigned x = 0, y = 1, z = 1;
  LaunchDims() = default;
  LaunchDims(unsigned x_, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  unsigned long long count() const { return 1ull * x * y * z; }
  bool operator==(const LaunchDims&) const = default;
};

// One launch of an emitted kernel for a node.
struct NodeKernel {
  std::string name;    // kernel (and simulator entry <name>_sim) name
  std::string source;  // complete translation unit
  LaunchDims grid;     // count() == 0: nothing to launch (empty outputs)
  LaunchDims block;
  size_t shared_bytes = 0;  // dynamic shared memory per block
  // Buffers: the node's results listed in `results` (empty: all of them, in
  // order), then its inputs in order, then `extra` (host tensors the emitter
  // adds, e.g. a fused body's constants).
  std::vector<int> results;
  std::vector<Tensor> extra;
};

// An emitter: a name for messages, whether it handles a node, and the
// node's kernels (launched in order; e.g. one per result of a split).
struct KernelEmitter {
  const char* name;
  bool (*handles)(const Node&);
  std::vector<NodeKernel> (*emit)(const Node&);
};

// The first emitter of the table that handles `n`, or null.
const KernelEmitter* emitter_for(const Node& n);

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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::codegen
