#include "backends/reference/executor.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "backends/reference/control_flow_run.h"
#include "ir/control_flow.h"
#include "ir/error.h"
#include "ir/graph_inputs.h"
#include "ops/registry.h"

namespace kiln {

namespace {

// What one run carries through the graph and its fused bodies.
struct Run {
  const SymbolBindings* symbols = nullptr;
  const std::unordered_set<const Value*>* shape_constants = nullptr;
  const NodeOverride* run_instead = nullptr;
  std::unordered_map<const Value*, Tensor> constants;  // shape constants at this run's values
};

TensorType type_at(const TensorType& t, const Run& run) {
  if (!run.symbols || !has_symbolic_dims(t.shape)) return t;
  return TensorType(t.dtype, eval_shape(t.shape, *run.symbols), t.layout);
}

// The node's integer attributes at the run's values (a reshape's target, a
// slice's end); the node's own map when none is symbolic. An attention whose
// k_capacity / v_capacity names a symbol the run binds (a KV cache bound in
// place, runtime/in_place_cache.h) also gets k_rows / v_rows, its value: the
// rows between two heads of k / v (ops/attention_ops.cpp). They exist only
// in this per-run copy, never in a graph.
const AttrMap& attrs_at(const Node& n, const Run& run, AttrMap& scratch) {
  if (!run.symbols) return n.attrs();
  bool symbolic = false;
  std::vector<std::pair<const char*, int64_t>> rows;
  for (const auto& [name, a] : n.attrs()) {
    if (const auto* v = std::get_if<int64_t>(&a); v && is_symbolic_dim(*v)) symbolic = true;
    if (const auto* l = std::get_if<std::vector<int64_t>>(&a); l && has_symbolic_dims(*l)) symbolic = true;
  }
  if (n.op() == "attention")
    for (auto [attr, key] : {std::pair{"k_capacity", "k_rows"}, std::pair{"v_capacity", "v_rows"}})
      if (auto it = run.symbols->find(n.attrs().get_string(attr, "")); it != run.symbols->end())
        rows.emplace_back(key, it->second);
  if (!symbolic && rows.empty()) return n.attrs();
  scratch = n.attrs();
  for (const auto& [key, value] : rows) scratch.set(key, value);
  for (const auto& [name, a] : n.attrs()) {
    if (const auto* v = std::get_if<int64_t>(&a); v && is_symbolic_dim(*v)) {
      scratch.set(name, eval_dim(*v, *run.symbols));
    } else if (const auto* l = std::get_if<std::vector<int64_t>>(&a); l && has_symbolic_dims(*l)) {
      scratch.set(name, eval_shape(*l, *run.symbols));
    }
  }
  return scratch;
}

std::vector<Tensor> execute(const Graph& g, std::unordered_map<const Value*, Tensor> env, Run& run,
                            const NodeTimer* timer = nullptr);

std::vector<Tensor> run_node(const Node& n, const std::vector<const Tensor*>& ins, Run& run) {
  if (run.run_instead && *run.run_instead)
    if (std::optional<std::vector<Tensor>> outs = (*run.run_instead)(n, ins)) return std::move(*outs);
  std::vector<TensorType> types;
  for (int i = 0; i < n.num_outputs(); ++i) types.push_back(type_at(n.output(i)->type(), run));
  if (is_control_flow(n))
    return run_control_flow(n, ins, [&](int r, const std::vector<const Tensor*>& region_ins) {
      return run_graph_reference(*n.region(r), region_ins);
    });
  if (n.body()) {
    const Graph& body = *n.body();
    KILN_CHECK(ins.size() == body.inputs().size(), "graph @{} takes {} inputs, got {}", body.name(),
               body.inputs().size(), ins.size());
    std::unordered_map<const Value*, Tensor> env;
    for (size_t i = 0; i < ins.size(); ++i) env[body.inputs()[i]] = *ins[i];
    return execute(body, std::move(env), run);
  }
  const OpDef& def = op_registry().get(n.op());
  AttrMap scratch;
  std::vector<Tensor> outs = evaluate_op(def, attrs_at(n, run, scratch), ins, types, n.describe());
  for (int i = 0; i < n.num_outputs(); ++i)
    KILN_CHECK(outs[i].shape() == types[i].shape && outs[i].dtype() == types[i].dtype,
               "{} produced {} for result {}, inferred {}", n.describe(), outs[i].type().str(), i, types[i].str());
  return outs;
}

// Runs the nodes of `g` with the given values for its inputs, releasing
// intermediates after their last use.
std::vector<Tensor> execute(const Graph& g, std::unordered_map<const Value*, Tensor> env, Run& run,
                            const NodeTimer* timer) {
  std::unordered_map<const Value*, int> remaining;
  for (const auto& n : g.nodes())
    for (Value* v : n->inputs())
      if (v && !v->is_constant()) ++remaining[v];
  for (Value* v : g.outputs()) ++remaining[v];

  auto lookup = [&](const Value* v) -> const Tensor* {
    if (v->is_constant()) {
      if (!run.symbols || !run.shape_constants->count(v)) return &v->data();
      auto [it, fresh] = run.constants.try_emplace(v);
      if (fresh) {
        it->second = v->data().clone();
        for (int64_t i = 0; i < it->second.numel(); ++i)
          it->second.data<int64_t>()[i] = substitute_dim(it->second.data<int64_t>()[i], *run.symbols);
      }
      return &it->second;
    }
    auto it = env.find(v);
    KILN_CHECK(it != env.end(), "value %{} used before it is computed", v->name());
    return &it->second;
  };
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    std::vector<const Tensor*> ins;
    for (Value* v : n.inputs()) ins.push_back(v ? lookup(v) : nullptr);
    auto start = std::chrono::steady_clock::now();
    std::vector<Tensor> outs = run_node(n, ins, run);
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

bool symbolic_control_flow(const Graph& g) {
  for (const auto& n : g.nodes()) {
    if (is_control_flow(*n)) {
      for (const Value* o : n->outputs())
        if (has_symbolic_dims(o->shape())) return true;
      for (const auto& r : n->regions()) {
        for (const Value* v : r->inputs())
          if (has_symbolic_dims(v->shape())) return true;
        for (const auto& rn : r->nodes())
          for (const Value* o : rn->outputs())
            if (has_symbolic_dims(o->shape())) return true;
      }
    }
    if (n->body() && symbolic_control_flow(*n->body())) return true;
  }
  return false;
}

void find_shape_constants(const Graph& g, std::unordered_set<const Value*>& r) {
  for (const Value* c : g.constants()) {
    if (!c->has_data() || c->dtype() != DType::I64) continue;
    const int64_t* p = c->data().data<int64_t>();
    if (std::any_of(p, p + c->data().numel(), [](int64_t x) { return x < 0 && is_symbolic_dim(x); })) r.insert(c);
  }
  for (const auto& n : g.nodes())
    if (n->body()) find_shape_constants(*n->body(), r);
}

}  // namespace

ReferenceExecutor::ReferenceExecutor(const Graph& g) : g_(g) {
  if (g.symbols().empty()) return;
  symbolic_ok_ = !symbolic_control_flow(g);
  find_shape_constants(g, shape_constants_);
}

std::vector<Tensor> ReferenceExecutor::run(const std::map<std::string, Tensor>& inputs) const {
  return run(inputs, RunOptions{});
}

std::vector<Tensor> ReferenceExecutor::run(const std::map<std::string, Tensor>& inputs, const NodeTimer& timer) const {
  RunOptions o;
  o.timer = timer;
  return run(inputs, o);
}

std::vector<Tensor> ReferenceExecutor::run(const std::map<std::string, Tensor>& inputs, const RunOptions& o) const {
  KILN_CHECK(!o.symbols || symbolic_ok_, "graph @{} has control flow with symbolic types: run a specialised copy",
             g_.name());
  Run run;
  run.symbols = o.symbols;
  run.shape_constants = &shape_constants_;
  run.run_instead = &o.run_instead;
  return execute(g_, bind_graph_inputs(g_, inputs, o.symbols), run, &o.timer);
}

std::vector<Tensor> run_graph_reference(const Graph& g, const std::vector<const Tensor*>& inputs) {
  KILN_CHECK(inputs.size() == g.inputs().size(), "graph @{} takes {} inputs, got {}", g.name(), g.inputs().size(),
             inputs.size());
  std::unordered_map<const Value*, Tensor> env;
  for (size_t i = 0; i < inputs.size(); ++i) env[g.inputs()[i]] = *inputs[i];
  Run run;
  return execute(g, std::move(env), run);
}

}  // namespace kiln
