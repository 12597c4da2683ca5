#include "backends/reference/data_dependent_stages.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>

#include "backends/reference/control_flow_run.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "ops/shape_ops.h"

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
    if (n.op() == "slice") {
      // A symbolic dim clamped by a slice: with the operand's size known it
      // is an ordinary slice, canonicalised for that size; no count to read.
      const std::vector<int64_t> starts = attrs_.get_ints("starts"), ends = attrs_.get_ints("ends"),
                                 steps = attrs_.get_ints("steps");
      axis_ = ops::data_dependent_slice_axis(n.input(0)->shape(), starts, ends, steps);
      KILN_CHECK(axis_ >= 0, "{}: no data-dependent axis", n.describe());
      ops::SliceSpec one =
          ops::canonical_slice(operands[0]->shape(), {starts[axis_]}, {ends[axis_]}, {axis_}, {steps[axis_]});
      std::vector<int64_t> st = starts, en = ends, sp = steps;
      st[axis_] = one.starts[axis_];
      en[axis_] = one.ends[axis_];
      sp[axis_] = one.steps[axis_];
      attrs_.set("starts", st);
      attrs_.set("ends", en);
      attrs_.set("steps", sp);
    } else if (n.op() == "topk") {
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
    if (n_.op() == "slice") {
      *count = outs[0].shape()[axis_];
    } else if (n_.op() == "topk") {
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

// A region (an if's branch, a loop's body) run as a graph of its own, with
// the symbols bound so far substituted and its own data-dependent nodes run
// as the top level's are. Returns its results; binds the symbols it decided.
std::vector<Tensor> run_region(const Graph& g, const Graph& region, const std::vector<const Tensor*>& inputs,
                               const RunStaticGraph& run_static, const DataDependentRunHooks& hooks,
                               DataDependentRunResult& r) {
  std::unique_ptr<Graph> own = region.clone();
  const auto decided_inside = data_dependent_symbols(*own);
  std::vector<SymbolDecl> decls;
  for (const SymbolDecl& d : g.symbols())
    if (r.symbols.count(d.name) || decided_inside.count(d.name)) decls.push_back(d);
  own->set_symbols(std::move(decls));
  SymbolBindings outer = r.symbols;
  for (const auto& [name, node] : decided_inside) outer.erase(name);  // a loop's body decides them again
  std::unique_ptr<Graph> ready = specialize_graph(*own, outer, op_registry());
  std::map<std::string, Tensor> feed;
  for (size_t k = 0; k < ready->inputs().size(); ++k) feed[ready->inputs()[k]->name()] = *inputs.at(k);
  DataDependentRunResult inner = run_data_dependent_stages(*ready, feed, run_static, hooks);
  for (const auto& [name, value] : inner.symbols) r.symbols[name] = value;
  r.stages += inner.stages;
  return std::move(inner.outputs);
}

// An if whose branches decide sizes (ir/data_dependent.h): its condition is
// known now, so the taken branch runs as a graph of its own.
std::vector<Tensor> run_taken_branch(const Graph& g, const Node& n, const std::vector<const Tensor*>& operands,
                                     const RunStaticGraph& run_static, const DataDependentRunHooks& hooks,
                                     DataDependentRunResult& r) {
  const Tensor& cond = *operands.at(0);
  KILN_CHECK(cond.dtype() == DType::Bool && cond.numel() == 1, "{}: condition {}", n.describe(), cond.type().str());
  std::vector<const Tensor*> ins(operands.begin() + 1, operands.end());
  return run_region(g, *n.region(cond.get_int(0) != 0 ? 0 : 1), ins, run_static, hooks, r);
}

// A loop whose body decides sizes: driven on the host as the reference
// backend drives any loop (backends/reference/control_flow_run.h), each
// iteration's body run as a graph of its own, its size symbols bound anew.
std::vector<Tensor> run_loop_with_sizes(const Graph& g, const Node& n, const std::vector<const Tensor*>& operands,
                                        const RunStaticGraph& run_static, const DataDependentRunHooks& hooks,
                                        DataDependentRunResult& r) {
  return run_control_flow(n, operands, [&](int region, const std::vector<const Tensor*>& ins) {
    return run_region(g, *n.region(region), ins, run_static, hooks, r);
  });
}

// The value of an if's size symbol: the dim of its results that the symbol
// stands for, as the taken branch gave it.
int64_t if_result_size(const Node& n, const std::vector<Tensor>& outs, const std::string& sym) {
  const int64_t dim = symbol_dim(sym);
  for (int i = 0; i < n.num_outputs(); ++i)
    for (size_t d = 0; d < n.output(i)->shape().size(); ++d)
      if (n.output(i)->shape()[d] == dim) return outs.at(i).shape()[d];
  fail("{}: no result dim is its size symbol {}", n.describe(), sym);
}

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
    const std::string sym = n.attrs().get_string(kSizeSymbolAttr, "");
    int64_t count = 0;
    std::vector<Tensor> outs;
    if (n.op() == "if") {
      outs = run_taken_branch(g, n, operands, run_static, hooks, r);
      if (!sym.empty()) count = if_result_size(n, outs, sym);
    } else if (n.op() == "loop" || n.op() == "scan") {
      outs = run_loop_with_sizes(g, n, operands, run_static, hooks, r);
    } else {
      LoweredNode lowered(n, operands);
      if (hooks.inspect) hooks.inspect(lowered.graph());
      outs = lowered.run(run_static, &count);
    }
    if (const SymbolDecl* d = g.find_symbol(sym); d && (count < d->min || count > d->max))
      fail("{}: its result size {} is {}, outside the range [{}, {}] of {}", n.describe(), sym, count, d->min, d->max,
           sym);
    if (!sym.empty()) r.symbols[sym] = count;
    for (int k = 0; k < n.num_outputs(); ++k) env[n.output(k)->name()] = std::move(outs.at(k));
    lo = i + 1;
  }
  for (const Value* v : g.outputs()) r.outputs.push_back(*value_of(v));
  return r;
}

}  // namespace kiln
