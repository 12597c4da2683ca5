#include "backends/reference/executor.h"

#include <chrono>
#include <unordered_map>

#include "backends/reference/control_flow_run.h"
#include "ir/control_flow.h"
#include "ir/error.h"
#include "ir/graph_inputs.h"
#include "ops/registry.h"

namespace kiln {

namespace {

std::vector<Tensor> run_node(const Node& n, const std::vector<const Tensor*>& ins) {
  std::vector<TensorType> types;
  for (int i = 0; i < n.num_outputs(); ++i) types.push_back(n.output(i)->type());
  if (is_control_flow(n))
    return run_control_flow(n, ins, [&](int r, const std::vector<const Tensor*>& region_ins) {
      return run_graph_reference(*n.region(r), region_ins);
    });
  if (n.body()) return run_graph_reference(*n.body(), ins);
  const OpDef& def = op_registry().get(n.op());
  std::vector<Tensor> outs = evaluate_op(def, n.attrs(), ins, types, n.describe());
  for (int i = 0; i < n.num_outputs(); ++i)
    KILN_CHECK(outs[i].shape() == types[i].shape && outs[i].dtype() == types[i].dtype,
               "{} produced {} for result {}, inferred {}", n.describe(), outs[i].type().str(), i, types[i].str());
  return outs;
}

// Runs the nodes of `g` with the given values for its inputs, releasing
// intermediates after their last use.
std::vector<Tensor> execute(const Graph& g, std::unordered_map<const Value*, Tensor> env,
                            const NodeTimer* timer = nullptr) {
  std::unordered_map<const Value*, int> remaining;
  for (const auto& n : g.nodes())
    for (Value* v : n->inputs())
      if (v && !v->is_constant()) ++remaining[v];
  for (Value* v : g.outputs()) ++remaining[v];

  auto lookup = [&](const Value* v) -> const Tensor* {
    if (v->is_constant()) return &v->data();
    auto it = env.find(v);
    KILN_CHECK(it != env.end(), "value %{} used before it is computed", v->name());
    return &it->second;
  };
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    std::vector<const Tensor*> ins;
    for (Value* v : n.inputs()) ins.push_back(v ? lookup(v) : nullptr);
    auto start = std::chrono::steady_clock::now();
    std::vector<Tensor> outs = run_node(n, ins);
    if (timer && *timer)
      (*timer)(n, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    for (Value* v : n.inputs())
      if (v && !v->is_constant() && --remaining[v] == 0) env.erase(v);
    for (int i = 0; i < n.num_outputs(); ++i)
      if (remaining[n.output(i)] > 0) env[n.output(i)] = std::move(outs[i]);
  }
  std::vector<Tensor> results;
  for (Value* v : g.outputs()) results.push_back(*lookup(v));
  return results;
}

}  // namespace

ReferenceExecutor::ReferenceExecutor(const Graph& g) : g_(g) {}

std::vector<Tensor> ReferenceExecutor::run(const std::map<std::string, Tensor>& inputs) const {
  return run(inputs, NodeTimer());
}

std::vector<Tensor> ReferenceExecutor::run(const std::map<std::string, Tensor>& inputs, const NodeTimer& timer) const {
  return execute(g_, bind_graph_inputs(g_, inputs), &timer);
}

std::vector<Tensor> run_graph_reference(const Graph& g, const std::vector<const Tensor*>& inputs) {
  KILN_CHECK(inputs.size() == g.inputs().size(), "graph @{} takes {} inputs, got {}", g.name(), g.inputs().size(),
             inputs.size());
  std::unordered_map<const Value*, Tensor> env;
  for (size_t i = 0; i < inputs.size(); ++i) env[g.inputs()[i]] = *inputs[i];
  return execute(g, std::move(env));
}

}  // namespace kiln
