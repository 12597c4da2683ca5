#include "ir/graph_inputs.h"

#include "ir/error.h"

namespace kiln {

std::unordered_map<const Value*, Tensor> bind_graph_inputs(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                                           const SymbolBindings* symbols) {
  std::unordered_map<const Value*, Tensor> env;
  for (Value* in : g.inputs()) {
    auto it = inputs.find(in->name());
    if (it == inputs.end()) fail("no value given for input \"{}\" ({})", in->name(), in->type().str());
    const bool symbolic = symbols && has_symbolic_dims(in->shape());
    const Shape want = symbolic ? eval_shape(in->shape(), *symbols) : in->shape();
    if (it->second.dtype() != in->dtype() || it->second.shape() != want)
      fail("input \"{}\" is {} but the graph expects {}", in->name(), it->second.type().str(),
           symbolic ? TensorType(in->dtype(), want).str() : in->type().str());
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
