// Checks on an ONNX model before and after import: nesting depth, SSA form,
// and the dims the model declares against those kiln infers.
#include "frontend/importer.h"

#include <algorithm>
#include <unordered_set>

#include "frontend/tensor_proto.h"
#include "ir/data_dependent.h"
#include "ir/limits.h"
#include "ir/symbolic_dim.h"

namespace kiln::onnx_import_detail {

namespace {

// Deepest nesting of subgraph attributes (If/Loop/Scan bodies) under `g`,
// stopping as soon as it passes `cap` so a hostile file cannot make the walk
// itself deep.
int subgraph_depth(const onnx::GraphProto& g, int depth, int cap) {
  int deepest = depth;
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      std::vector<const onnx::GraphProto*> subs;
      if (a.has_g()) subs.push_back(&a.g());
      for (const auto& sg : a.graphs()) subs.push_back(&sg);
      for (const auto* sg : subs) {
        if (depth + 1 > cap) return depth + 1;
        deepest = std::max(deepest, subgraph_depth(*sg, depth + 1, cap));
        if (deepest > cap) return deepest;
      }
    }
  return deepest;
}

// Node names are unique within each graph (ONNX's IR spec: "within a
// namespace, each name MUST be unique for each given graph"; onnx.checker
// does not enforce it, ONNX Runtime refuses the model: "two nodes with same
// node name"). kiln's messages, dumps and profiles name nodes, so two of one
// name would make them ambiguous. An empty name is no name: exporters leave
// many nodes unnamed. `where` says which graph: "" for the main one, else
// "in the subgraph 'body' of node ..."; each subgraph is its own namespace.
void check_node_names(const onnx::GraphProto& g, const std::string& file, const std::string& where) {
  std::unordered_map<std::string, int> first;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (n.name().empty()) continue;
    auto [it, fresh] = first.emplace(n.name(), i);
    if (!fresh) {
      const onnx::NodeProto& m = g.node(it->second);
      fail(
          "{}: nodes {} and {}{} are both named \"{}\" ({} and {}): ONNX requires node names to be unique within a "
          "graph (ONNX Runtime refuses the model too); rename one, or leave it unnamed",
          file, it->second, i, where, short_name(n.name()), short_name(m.op_type()), short_name(n.op_type()));
    }
  }
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      const std::string in = fmt::format(" in the subgraph '{}' of {}", short_name(a.name()), node_label(n));
      if (a.has_g()) check_node_names(a.g(), file, in);
      for (const auto& sg : a.graphs()) check_node_names(sg, file, in);
    }
}

}  // namespace

// Checks on the model's structure before anything is imported: nesting
// depth, node names unique per graph, and SSA form of the main graph (every value defined once, every
// operand defined, nodes in topological order, no cycles), each reported with
// the names involved.
void Importer::check_structure() {
  const onnx::GraphProto& g = model_.graph();
  int cap = limits().max_subgraph_depth;
  if (int depth = subgraph_depth(g, 0, cap); depth > cap)
    fail("{}: subgraphs are nested more than {} deep (the limit, as in ONNX Runtime)", file_, cap);
  check_node_names(g, file_, "");  // after the depth check: it walks the subgraphs

  auto label = [&](int i) { return node_label(g.node(i)); };
  // Who defines each name: -1 an initializer or graph input, else a node.
  std::unordered_map<std::string, int> producer;
  for (const auto& init : g.initializer()) producer.emplace(init.name(), -1);
  // An input listed twice would be imported once, silently (ONNX Runtime and
  // onnx's checker refuse the model: "Duplicate definition-site").
  std::unordered_set<std::string> inputs;
  for (const auto& vi : g.input()) {
    if (!inputs.insert(vi.name()).second)
      fail("{}: graph input \"{}\" is declared twice", file_, short_name(vi.name()));
    producer.emplace(vi.name(), -1);
  }
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& o : g.node(i).output()) {
      if (o.empty()) continue;
      auto [it, fresh] = producer.emplace(o, i);
      if (!fresh)
        fail("{}: {}: value \"{}\" is defined twice (also by {})", file_, label(i), short_name(o),
             it->second < 0 ? std::string("a graph input or initializer") : label(it->second));
    }
  bool sorted = true;
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& in : g.node(i).input()) {
      if (in.empty()) continue;
      auto it = producer.find(in);
      if (it == producer.end())
        fail("{}: {}: input \"{}\" is not defined by any node, initializer or graph input", file_, label(i),
             short_name(in));
      sorted &= it->second < i;
    }
  if (sorted) return;
  // Out of order: a cycle (named) or just unsorted nodes (ONNX requires
  // topological order, as its checker does).
  // Depth-first over "reads the output of", iterative: a hostile chain of a
  // million nodes must not overflow the stack.
  auto producer_of = [&](int i, int k) {
    const std::string& in = g.node(i).input(k);
    auto it = in.empty() ? producer.end() : producer.find(in);
    return it == producer.end() ? -1 : it->second;
  };
  std::vector<int> state(g.node_size(), 0);  // 0 new, 1 on the stack, 2 done
  std::vector<std::pair<int, int>> stack;    // (node, next input to follow)
  for (int root = 0; root < g.node_size(); ++root) {
    if (state[root]) continue;
    stack.push_back({root, 0});
    state[root] = 1;
    while (!stack.empty()) {
      auto& [i, k] = stack.back();
      if (k == g.node(i).input_size()) {
        state[i] = 2;
        stack.pop_back();
        continue;
      }
      int j = producer_of(i, k++);
      if (j < 0 || state[j] == 2) continue;
      if (state[j] == 1) {
        std::vector<std::string> names;
        auto from = std::find_if(stack.begin(), stack.end(), [j](const auto& e) { return e.first == j; });
        for (auto e = from; e != stack.end(); ++e) names.push_back(label(e->first));
        names.push_back(label(j));
        fail("{}: the graph has a cycle: {} (each reads the next one's output)", file_, fmt::join(names, " <- "));
      }
      state[j] = 1;
      stack.push_back({j, 0});
    }
  }
  for (int i = 0; i < g.node_size(); ++i)
    for (const std::string& in : g.node(i).input())
      if (!in.empty() && producer.at(in) >= i)
        fail("{}: {} reads \"{}\" before {} produces it: nodes must be topologically sorted", file_, label(i),
             short_name(in), label(producer.at(in)));
}

bool Importer::decided_by_data(int64_t dim) const {
  if (!is_symbolic_dim(dim)) return false;
  const auto by_data = data_dependent_symbols(*graph_);
  for (const std::string& s : dim_symbols(dim))
    if (by_data.count(s)) return true;
  return false;
}

// value_info entries declare the types of intermediate values: they must
// agree with what kiln infers (a disagreement means a broken model or a kiln
// bug, and either way the results could not be trusted).
void Importer::check_declared_types() {
  for (const auto& vi : model_.graph().value_info()) {
    auto it = env_.find(vi.name());
    if (it == env_.end() || !vi.type().has_tensor_type()) continue;
    Value* v = it->second;
    const auto& tt = vi.type().tensor_type();
    std::string ctx = fmt::format("{}: value_info \"{}\"", file_, short_name(vi.name()));
    if (tt.elem_type() != 0 && dtype_from_onnx(tt.elem_type(), ctx) != v->dtype())
      fail("{}: the model declares {} but kiln infers {}", ctx, dtype_name(dtype_from_onnx(tt.elem_type(), ctx)),
           v->type().str());
    if (!tt.has_shape()) continue;
    if (tt.shape().dim_size() != v->type().rank())
      fail("{}: the model declares rank {} but kiln infers {}", ctx, tt.shape().dim_size(), v->type().str());
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value() && d.dim_value() != v->shape()[i] && !decided_by_data(v->shape()[i]))
        fail("{}: the model declares dim {} = {} but kiln infers {}", ctx, i, d.dim_value(), v->type().str());
    }
  }
}

}  // namespace kiln::onnx_import_detail
