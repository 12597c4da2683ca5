// The CPU reference backend: runs a Graph node by node with each op's
// reference semantics. It is the oracle every other backend and every pass is
// compared against, and the fallback where no GPU exists.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// Profiling hook (kiln bench --profile): called after each top-level node
// runs, with its wall time in milliseconds.
using NodeTimer = std::function<void(const Node& n, double ms)>;

class ReferenceExecutor {
 public:
  // The graph must outlive the executor.
  explicit ReferenceExecutor(const Graph& g);

  // Inputs by graph-input name (all must be given, with the declared types).
  // Returns one tensor per graph output, in order.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) const;
  // The same, timing every node through `timer` when it is set.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs, const NodeTimer& timer) const;

 private:
  const Graph& g_;
};

// Runs a graph whose inputs are given positionally (used for fused bodies).
std::vector<Tensor> run_graph_reference(const Graph& g, const std::vector<const Tensor*>& inputs);

}  // namespace kiln
