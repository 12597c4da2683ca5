// The IR verifier: checks what a pass can break and names the node at fault.
//
// Checked, per graph (bodies of fused nodes recursively):
//  - value names are unique (empty names are allowed: the printer numbers them);
//  - a constant's data has the constant's type;
//  - every operand is a value of this graph defined before its use (inputs
//    and constants always are; results once their node has come);
//  - use lists match the operands exactly;
//  - graph outputs are values of the graph;
//  - each node's op exists; its attributes are declared and its result count
//    and types (dtype and shape) equal what inference gives. Inference sees
//    constants' values only. Layout tags are not compared: passes set
//    them (see docs/ir.md "Layouts");
//  - a fused node (op "fused") has a body whose inputs and outputs have the
//    node's operand and result types; the body is verified the same way. Its
//    attributes are free-form. No other node may carry a body.
#include "ir/verifier.h"

#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/short_name.h"

namespace kiln {

namespace {

constexpr int kMaxDepth = 64;

// Names come from models: shortened, as every message shortens them.
std::string vname(const Value* v) { return "%" + short_name(v->name()); }

struct PairHash {
  size_t operator()(const std::pair<const Node*, int>& p) const {
    return std::hash<const void*>()(p.first) * 31 + static_cast<size_t>(p.second);
  }
};

class Verifier {
 public:
  explicit Verifier(const OpRegistry& r) : registry_(r) {}

  // `where` prefixes messages for bodies: "in the body of node ...: ".
  void graph(const Graph& g, const std::string& where, int depth) {
    if (depth > kMaxDepth) err(where, "bodies nest deeper than {} levels", kMaxDepth);
    std::unordered_map<const Value*, int> position;  // -1: always defined; else index of the producing node
    std::unordered_map<std::string, const Value*> names;
    std::vector<const Value*> values;  // in order, for deterministic messages
    auto add_value = [&](const Value* v, int pos) {
      position[v] = pos;
      values.push_back(v);
      if (v->name().empty()) return;
      auto [it, fresh] = names.emplace(v->name(), v);
      if (!fresh) err(where, "value name {} is used by two values of graph @{}", vname(v), g.name());
    };
    for (const Value* v : g.inputs()) add_value(v, -1);
    for (const Value* c : g.constants()) {
      add_value(c, -1);
      if (c->has_data() && c->data().type() != c->type())
        err(where, "constant {} has type {} but its data is {}", vname(c), c->type().str(), c->data().type().str());
    }
    std::unordered_set<const Node*> nodes;
    int index = 0;
    for (const auto& n : g.nodes()) {
      nodes.insert(n.get());
      if (n->owner() != &g) err(where, "{} is listed in graph @{} but owned by another graph", n->describe(), g.name());
      for (const Value* v : n->outputs()) add_value(v, index);
      ++index;
    }

    index = 0;
    size_t operands = 0;
    for (const auto& np : g.nodes()) {
      const Node& n = *np;
      for (int i = 0; i < n.num_inputs(); ++i) {
        const Value* v = n.input(i);
        if (!v) continue;
        auto it = position.find(v);
        if (it == position.end())
          err(where, "{}: operand {} ({}) is not a value of graph @{}", n.describe(), i, vname(v), g.name());
        if (it->second >= index)
          err(where, "{}: operand {} ({}) is used before it is defined", n.describe(), i, vname(v));
        ++operands;
      }
      node(n, where, depth);
      ++index;
    }
    // Use lists: every use is real and listed once, and there are as many
    // uses as operands (linear, with a set, as values may have many uses).
    std::unordered_set<std::pair<const Node*, int>, PairHash> seen;
    for (const Value* v : values) {
      for (const Use& u : v->uses()) {
        if (!nodes.count(u.user))
          err(where, "the use list of {} names a node that is not in graph @{}", vname(v), g.name());
        if (u.operand < 0 || u.user->input(u.operand) != v)
          err(where, "the use list of {} says {} uses it as operand {}, but it does not", vname(v),
              u.user->describe(), u.operand);
        if (!seen.insert({u.user, u.operand}).second)
          err(where, "the use list of {} holds operand {} of {} twice", vname(v), u.operand, u.user->describe());
      }
    }
    if (seen.size() != operands) {
      for (const auto& n : g.nodes())
        for (int i = 0; i < n->num_inputs(); ++i)
          if (n->input(i) && !seen.count({n.get(), i}))
            err(where, "{}: the use list of operand {} ({}) lacks this use", n->describe(), i, vname(n->input(i)));
    }
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      const Value* v = g.outputs()[i];
      if (!v) err(where, "graph @{}: output {} is missing", g.name(), i);
      if (!position.count(v)) err(where, "graph @{}: output {} ({}) is not a value of the graph", g.name(), i, vname(v));
    }
  }

 private:
  template <typename... Args>
  [[noreturn]] void err(const std::string& where, fmt::format_string<Args...> f, Args&&... args) {
    throw Error("verifier: " + where + fmt::format(f, std::forward<Args>(args)...));
  }

  void node(const Node& n, const std::string& where, int depth) {
    if (n.op() == "fused") return fused(n, where, depth);
    if (n.body()) err(where, "{} has a body but only fused nodes may", n.describe());
    const OpDef* def = registry_.find(n.op());
    if (!def) err(where, "{}: unknown op '{}'", n.describe(), n.op());
    std::vector<TensorType> want;
    try {
      InferContext ctx(n.op(), n.inputs(), n.attrs(), n.num_outputs(), n.describe());
      want = infer_types(*def, ctx);
    } catch (const Error& e) {
      throw Error("verifier: " + where + e.what());
    }
    if (static_cast<int>(want.size()) != n.num_outputs())
      err(where, "{}: has {} results but inference gives {}", n.describe(), n.num_outputs(), want.size());
    for (int i = 0; i < n.num_outputs(); ++i) {
      const TensorType& have = n.output(i)->type();
      if (have.dtype != want[i].dtype || have.shape != want[i].shape)
        err(where, "{}: result {} has type {} but inference gives {}", n.describe(), i, have.str(), want[i].str());
    }
  }

  void fused(const Node& n, const std::string& where, int depth) {
    const Graph* body = n.body();
    if (!body) err(where, "{}: a fused node needs a body", n.describe());
    if (body->inputs().size() != size_t(n.num_inputs()))
      err(where, "{}: has {} operands but its body takes {} inputs", n.describe(), n.num_inputs(), body->inputs().size());
    for (int i = 0; i < n.num_inputs(); ++i) {
      if (!n.input(i)) err(where, "{}: operand {} is absent (fused nodes take every operand)", n.describe(), i);
      if (n.input(i)->type() != body->inputs()[i]->type())
        err(where, "{}: operand {} has type {} but body input {} has type {}", n.describe(), i,
            n.input(i)->type().str(), vname(body->inputs()[i]), body->inputs()[i]->type().str());
    }
    if (body->outputs().size() != size_t(n.num_outputs()))
      err(where, "{}: has {} results but its body returns {}", n.describe(), n.num_outputs(), body->outputs().size());
    for (int i = 0; i < n.num_outputs(); ++i) {
      const Value* o = body->outputs()[i];
      if (o && o->type() != n.output(i)->type())
        err(where, "{}: result {} has type {} but the body returns {}", n.describe(), i, n.output(i)->type().str(),
            o->type().str());
    }
    graph(*body, where + "in the body of " + n.describe() + ": ", depth + 1);
  }

  const OpRegistry& registry_;
};

}  // namespace

void verify_graph(const Graph& g, const OpRegistry& registry) { Verifier(registry).graph(g, "", 0); }

}  // namespace kiln
