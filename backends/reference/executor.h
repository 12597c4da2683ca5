// The CPU reference backend: runs a Graph node by node with each op's
// reference semantics. It is the oracle every other backend and every pass is
// compared against, and the fallback where no GPU exists.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "ir/symbolic_dim.h"

namespace kiln {

// Profiling hook (kiln bench --profile): called after each top-level node
// runs, with its wall time in milliseconds.
using NodeTimer = std::function<void(const Node& n, double ms)>;

// A node the caller runs itself, in place of its reference kernel: returns
// the node's results, or nothing to let the kernel run (the runtime's KV
// cache appended in place, runtime/in_place_cache.h).
using NodeOverride = std::function<std::optional<std::vector<Tensor>>(const Node&, const std::vector<const Tensor*>&)>;

struct RunOptions {
  // A graph with symbolic dims (a plan with shape profiles) runs as it is,
  // its types, integer attributes and shape constants taken at these
  // values node by node: no specialised copy per shape (ir/specialize.h).
  // Only where runs_symbolically() says so.
  const SymbolBindings* symbols = nullptr;
  NodeTimer timer;
  NodeOverride run_instead;
};

class ReferenceExecutor {
 public:
  // The graph must outlive the executor.
  explicit ReferenceExecutor(const Graph& g);

  // Whether the graph can run with RunOptions::symbols: everything but
  // control flow with symbolic types (its regions' shapes are checked
  // against the node's static types), which needs a specialised copy.
  bool runs_symbolically() const { return symbolic_ok_; }
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs, const RunOptions& o) const;

  // Inputs by graph-input name (all must be given, with the declared types).
  // Returns one tensor per graph output, in order.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) const;
  // The same, timing every node through `timer` when it is set.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs, const NodeTimer& timer) const;

 private:
  const Graph& g_;
  bool symbolic_ok_ = true;
  std::unordered_set<const Value*> shape_constants_;  // i64 constants holding symbolic dims
};

// Runs a graph whose inputs are given positionally (used for fused bodies).
std::vector<Tensor> run_graph_reference(const Graph& g, const std::vector<const Tensor*>& inputs);

}  // namespace kiln
