#include "ir/graph_inputs.h"

#include "ir/error.h"

namespace kiln {

std::unordered_map<const Value*, Tensor> bind_graph_inputs(const Graph& g,
                                                           const std::map<std::string, Tensor>& inputs) {
  std::unordered_map<const Value*, Tensor> env;
  for (Value* in : g.inputs()) {
    auto it = inputs.find(in->name());
    if (it == inputs.end()) fail("no value given for input \"{}\" ({})", in->name(), in->type().str());
    if (it->second.dtype() != in->dtype() || it->second.shape() != in->shape())
      fail("input \"{}\" is {} but the graph expects {}", in->name(), it->second.type().str(), in->type().str());
    env[in] = it->second;
  }
  for (auto& [name, t] : inputs) {
    bool found = false;
    for (Value* in : g.inputs()) found |= in->name() == name;
    if (!found) fail("\"{}\" is not an input of the graph", name);
  }
  return env;
}

}  // namespace kiln
