#include "backends/reference/data_dependent_stages.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>

#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/specialize.h"
#include "ops/registry.h"

namespace kiln {

std::unique_ptr<Graph> extract_stage(const Graph& g, size_t lo, size_t hi) {
  std::unique_ptr<Graph> c = g.clone();
  const std::vector<Node*> nodes = c->node_list();
  KILN_CHECK(lo <= hi && hi <= nodes.size(), "stage [{}, {}) of a graph of {} nodes", lo, hi, nodes.size());
  std::unordered_map<const Value*, size_t> made_by;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (Value* v : nodes[i]->outputs()) made_by[v] = i;
  auto in_range = [&](const Value* v) {
    auto it = made_by.find(v);
    return it != made_by.end() && it->second >= lo && it->second < hi;
  };
  // What the range reads from before it, and what is read of it later.
  std::vector<Value*> reads, results;
  std::set<const Value*> seen;
  for (size_t i = lo; i < hi; ++i)
    for (Value* v : nodes[i]->inputs())
      if (v && !v->is_constant() && !in_range(v) && seen.insert(v).second) reads.push_back(v);
  seen.clear();
  auto add_result = [&](Value* v) {
    if (v && in_range(v) && seen.insert(v).second) results.push_back(v);
  };
  for (size_t i = hi; i < nodes.size(); ++i)
    for (Value* v : nodes[i]->inputs()) add_result(v);
  for (Value* v : c->outputs()) add_result(v);

  c->set_outputs(results);
  for (size_t i = nodes.size(); i-- > hi;) c->erase_node(nodes[i]);
  for (Value* v : reads) {
    if (v->is_input()) continue;
    const std::string name = v->name();
    v->set_name(name + ".before_stage");
    Value* in = c->add_input(name, v->type());
    c->replace_all_uses(v, in);
  }
  for (size_t i = lo; i-- > 0;) c->erase_node(nodes[i]);
  for (Value* in : std::vector<Value*>(c->inputs()))
    if (!in->has_uses() && !c->is_output(in)) c->remove_input(in);
  c->remove_unused_constants();
  return c;
}

Tensor trim_to_count(const Tensor& t, int axis, int64_t count) {
  const Shape& s = t.shape();
  KILN_CHECK(axis >= 0 && axis < t.rank() && count >= 0 && count <= s[axis], "trimming {} to {} along axis {}",
             t.type().str(), count, axis);
  Shape out_shape = s;
  out_shape[axis] = count;
  Tensor out(TensorType(t.dtype(), out_shape));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < t.rank(); ++d) inner *= s[d];
  const size_t row = static_cast<size_t>(inner) * dtype_size(t.dtype());
  const auto* src = static_cast<const uint8_t*>(t.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  if (row * count > 0)
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * count * row, src + o * s[axis] * row, count * row);
  return out;
}

namespace {

// One data-dependent node lowered and run alone (ops/data_dependent_size.h).
class LoweredNode {
 public:
  LoweredNode(const Node& n, const std::vector<const Tensor*>& operands) : n_(n) {
    attrs_ = n.attrs();
    attrs_.erase(kSizeSymbolAttr);
    for (size_t i = 0; i < operands.size(); ++i) {
      if (n.op() == "topk" && i == 1) break;  // k is read on the host; topk runs with k = the axis size
      if (!operands[i]) {
        ins_.push_back(nullptr);
        continue;
      }
      std::string name = fmt::format("operand{}", i);
      ins_.push_back(graph_.add_input(name, operands[i]->type()));
      feed_[name] = *operands[i];
    }
    int results = n.num_outputs();
    if (n.op() == "topk") {
      axis_ = static_cast<int>(attrs_.get_int("axis", -1));
      if (axis_ < 0) axis_ += operands[0]->rank();
      attrs_.set("k", operands[0]->shape()[axis_]);
      attrs_.set("sorted", int64_t(1));  // the first k of the sorted whole line are a top k
      k_ = read_k(*operands[1], operands[0]->shape()[axis_]);
    } else {
      axis_ = n.op() == "nonzero" ? 1 : 0;  // nonzero: [rank, count]; non_max_suppression: [count, 3]
      attrs_.set("bounded", int64_t(1));
      results += 1;  // the count
    }
    const OpDef& def = op_registry().get(n.op());
    InferContext ic(n.op(), ins_, attrs_, results, n.describe());
    std::vector<TensorType> types = infer_types(def, ic);
    Node* node = graph_.add_node(n.op(), ins_, types, attrs_, n.name());
    graph_.set_outputs(node->outputs());
  }

  const Graph& graph() const { return graph_; }

  // Runs it; returns the node's results trimmed to the count.
  std::vector<Tensor> run(const RunStaticGraph& run_static, int64_t* count) {
    std::vector<Tensor> outs = run_static(graph_, feed_);
    if (n_.op() == "topk") {
      *count = k_;
    } else {
      *count = outs.back().data<int64_t>()[0];
      outs.pop_back();
      const int64_t bound = outs[0].shape()[axis_];
      if (*count < 0 || *count > bound)
        fail("{}: its kernel wrote the count {}, outside [0, {}] (the bound of its result)", n_.describe(), *count,
             bound);
    }
    for (Tensor& t : outs) t = trim_to_count(t, axis_, *count);
    return outs;
  }

 private:
  int64_t read_k(const Tensor& k, int64_t axis_size) const {
    KILN_CHECK(k.dtype() == DType::I64 && k.numel() == 1, "{}: k is {}", n_.describe(), k.type().str());
    const int64_t v = k.data<int64_t>()[0];
    if (v < 0 || v > axis_size)
      fail("{}: k = {} is out of range for axis {} of size {}", n_.describe(), v, axis_, axis_size);
    return v;
  }

  const Node& n_;
  Graph graph_{"lowered"};
  AttrMap attrs_;
  std::vector<Value*> ins_;
  std::map<std::string, Tensor> feed_;
  int axis_ = 0;
  int64_t k_ = 0;
};

}  // namespace

DataDependentRunResult run_data_dependent_stages(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                                 const RunStaticGraph& run_static, const DataDependentRunHooks& hooks) {
  DataDependentRunResult r;
  if (!g.symbols().empty()) {
    std::vector<std::pair<std::string, Shape>> shapes;
    for (const auto& [name, t] : inputs) shapes.emplace_back(name, t.shape());
    r.symbols = bind_symbols(g, shapes, "run");
  }
  std::unordered_map<std::string, Tensor> env(inputs.begin(), inputs.end());
  auto value_of = [&](const Value* v) -> const Tensor* {
    if (!v) return nullptr;
    if (v->is_constant()) return &v->data();
    auto it = env.find(v->name());
    KILN_CHECK(it != env.end(), "value %{} used before it is computed", v->name());
    return &it->second;
  };
  const std::vector<Node*> nodes = g.node_list();
  size_t lo = 0;
  for (size_t i = 0; i <= nodes.size(); ++i) {
    if (i < nodes.size() && !is_data_dependent_node(*nodes[i])) continue;
    if (i > lo) {
      // The stage uses the symbols bound so far only: later nodes' size
      // symbols are not declared in it (the verifier would name a use).
      std::unique_ptr<Graph> cut = extract_stage(g, lo, i);
      std::vector<SymbolDecl> bound;
      for (const SymbolDecl& d : cut->symbols())
        if (r.symbols.count(d.name)) bound.push_back(d);
      cut->set_symbols(std::move(bound));
      std::unique_ptr<Graph> stage = specialize_graph(*cut, r.symbols, op_registry());
      std::vector<std::string> out_names;
      for (const Value* v : stage->outputs()) out_names.push_back(v->name());
      if (hooks.prepare) hooks.prepare(*stage);
      if (hooks.inspect) hooks.inspect(*stage);
      std::map<std::string, Tensor> feed;
      for (const Value* in : stage->inputs()) feed[in->name()] = env.at(in->name());
      std::vector<Tensor> outs = run_static(*stage, feed);
      for (size_t k = 0; k < outs.size(); ++k) env[out_names[k]] = std::move(outs[k]);
      ++r.stages;
    }
    if (i == nodes.size()) break;
    const Node& n = *nodes[i];
    std::vector<const Tensor*> operands;
    for (const Value* v : n.inputs()) operands.push_back(value_of(v));
    LoweredNode lowered(n, operands);
    if (hooks.inspect) hooks.inspect(lowered.graph());
    int64_t count = 0;
    std::vector<Tensor> outs = lowered.run(run_static, &count);
    const std::string sym = n.attrs().get_string(kSizeSymbolAttr, "");
    if (const SymbolDecl* d = g.find_symbol(sym); d && (count < d->min || count > d->max))
      fail("{}: its result size {} is {}, outside the range [{}, {}] of {}", n.describe(), sym, count, d->min, d->max,
           sym);
    r.symbols[sym] = count;
    for (int k = 0; k < n.num_outputs(); ++k) env[n.output(k)->name()] = std::move(outs.at(k));
    lo = i + 1;
  }
  for (const Value* v : g.outputs()) r.outputs.push_back(*value_of(v));
  return r;
}

}  // namespace kiln
