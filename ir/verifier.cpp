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
//    attributes are free-form;
//  - a control-flow node (if, loop, scan) agrees with its regions
//    (ir/control_flow.h: branch result types, loop-carried types, scan
//    slices) and each region is verified as a graph. A region may use only
//    its own values, so an outer value read without being captured as an
//    operand is "not a value of" the region. No other node may carry regions;
//  - symbolic dims (ir/symbolic_dim.h): the top-level graph declares each
//    symbol once with a range 0 <= min <= max; every symbol a value's type
//    uses, in the graph or any region, is declared there; regions declare
//    none of their own. A data-dependent size symbol (ir/data_dependent.h)
//    is named by one top-level node, declared, and shapes no input.
#include "ir/verifier.h"

#include <map>
#include <memory_resource>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "ir/control_flow.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/floor_div_dims.h"
#include "ir/short_name.h"
#include "ir/symbolic_dim.h"

namespace kiln {

namespace {

constexpr int kMaxDepth = 64;
// Use lists up to this long are searched for duplicates directly.
constexpr size_t kShortUseList = 8;

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

  // The top-level graph's symbol table: names valid and unique, ranges sane.
  void symbols(const Graph& g) {
    for (const SymbolDecl& s : g.symbols()) {
      if (!is_symbol_name(s.name)) err("", "graph @{}: \"{}\" is not a valid symbol name", g.name(), s.name);
      if (parse_derived_symbol(s.name))  // ir/floor_div_dims.h: a size computed from its base, never declared
        err("", "graph @{}: \"{}\" names a derived size (floor division), not a symbol to declare", g.name(), s.name);
      if (!declared_.insert(s.name).second) err("", "graph @{}: symbol {} is declared twice", g.name(), s.name);
      if (s.min < 0 || s.min > s.max)
        err("", "graph @{}: symbol {} has the range [{}, {}] (need 0 <= min <= max)", g.name(), s.name, s.min, s.max);
    }
    // Data-dependent sizes (ir/data_dependent.h): one node per symbol, the
    // symbol declared, and no input shaped by it (a run binds it, not the inputs).
    std::map<std::string, const Node*, std::less<>> by_data;
    try {
      by_data = data_dependent_symbols(g);
    } catch (const Error& e) {
      err("", "graph @{}: {}", g.name(), e.what());
    }
    for (const auto& [sym, n] : by_data) {
      if (!declared_.count(sym))
        err("", "graph @{}: {} names the size symbol {}, which the graph does not declare", g.name(), n->describe(),
            sym);
      for (const Value* in : g.inputs())
        for (int64_t d : in->shape())
          for (const std::string& used : is_symbolic_dim(d) ? dim_symbols(d) : std::vector<std::string>{})
            if (used == sym)
              err("", "graph @{}: input {} has type {} but {} is the size symbol of {}: the data decides it", g.name(),
                  vname(in), in->type().str(), sym, n->describe());
    }
  }

  // `where` prefixes messages for bodies: "in the body of node ...: ".
  void graph(const Graph& g, const std::string& where, int depth) {
    if (depth > kMaxDepth) err(where, "bodies nest deeper than {} levels", kMaxDepth);
    // The tables' entries come from one arena released at once: freeing
    // them one by one cost as much as filling them on large graphs.
    std::pmr::monotonic_buffer_resource arena;
    std::pmr::unordered_map<const Value*, int> position(
        &arena);  // -1: always defined; else index of the producing node
    std::pmr::unordered_map<std::string_view, const Value*> names(&arena);  // views of the values' own names
    std::vector<const Value*> values;                                       // in order, for deterministic messages
    // Sized once: the verifier runs after every pass, and rehashing as the
    // tables grow was a good part of its time on large graphs.
    size_t expect = g.inputs().size() + g.constants().size() + 2 * g.num_nodes();
    position.reserve(expect);
    names.reserve(expect);
    values.reserve(expect);
    if (depth > 0 && !g.symbols().empty())
      err(where, "graph @{} is a region but declares symbols (only the top-level graph does)", g.name());
    if (depth > 0 && !region_of_top_level_if_or_loop_)
      for (const auto& n : g.nodes())
        if (is_data_dependent_node(*n))
          err(where,
              "{} in graph @{} has a data-dependent size, which only the top-level graph's nodes and the regions "
              "of its ifs, loops and scans (and of such nodes inside them) may have",
              n->describe(), g.name());
    auto add_value = [&](const Value* v, int pos) {
      check_dims(v, where);
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
    std::pmr::unordered_set<const Node*> nodes(&arena);
    nodes.reserve(g.num_nodes());
    int index = 0;
    for (const auto& n : g.nodes()) {
      nodes.insert(n.get());
      if (n->owner() != &g) err(where, "{} is listed in graph @{} but owned by another graph", n->describe(), g.name());
      for (int i = 0; i < n->num_outputs(); ++i) add_value(n->output(i), index);  // outputs() would copy
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
    // uses as operands. A use (user, operand) that is real belongs to one
    // value only, so duplicates are looked for within each value's list (a
    // set only for long lists), not in one set of every use of the graph.
    size_t uses = 0;
    std::pmr::unordered_set<std::pair<const Node*, int>, PairHash> long_list(&arena);
    for (const Value* v : values) {
      const std::vector<Use>& us = v->uses();
      if (us.size() > kShortUseList) long_list.clear();
      for (size_t k = 0; k < us.size(); ++k) {
        const Use& u = us[k];
        if (!nodes.count(u.user))
          err(where, "the use list of {} names a node that is not in graph @{}", vname(v), g.name());
        if (u.operand < 0 || u.user->input(u.operand) != v)
          err(where, "the use list of {} says {} uses it as operand {}, but it does not", vname(v), u.user->describe(),
              u.operand);
        bool twice = false;
        if (us.size() > kShortUseList) {
          twice = !long_list.insert({u.user, u.operand}).second;
        } else {
          for (size_t j = 0; j < k && !twice; ++j) twice = us[j].user == u.user && us[j].operand == u.operand;
        }
        if (twice)
          err(where, "the use list of {} holds operand {} of {} twice", vname(v), u.operand, u.user->describe());
      }
      uses += us.size();
    }
    if (uses != operands) {
      for (const auto& n : g.nodes())
        for (int i = 0; i < n->num_inputs(); ++i) {
          const Value* v = n->input(i);
          if (!v) continue;
          bool listed = false;
          for (const Use& u : v->uses()) listed |= u.user == n.get() && u.operand == i;
          if (!listed) err(where, "{}: the use list of operand {} ({}) lacks this use", n->describe(), i, vname(v));
        }
    }
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      const Value* v = g.outputs()[i];
      if (!v) err(where, "graph @{}: output {} is missing", g.name(), i);
      if (!position.count(v))
        err(where, "graph @{}: output {} ({}) is not a value of the graph", g.name(), i, vname(v));
    }
  }

 private:
  template <typename... Args>
  [[noreturn]] void err(const std::string& where, fmt::format_string<Args...> f, Args&&... args) {
    throw Error("verifier: " + where + fmt::format(f, std::forward<Args>(args)...));
  }

  // Every negative dim is a symbolic dim whose symbols the graph declares.
  void check_dims(const Value* v, const std::string& where) {
    for (int64_t d : v->shape()) {
      if (d >= 0) continue;
      if (!is_symbolic_dim(d)) err(where, "{} has type {} with a negative dim", vname(v), v->type().str());
      for (const std::string& s : dim_symbols(d))
        if (!declared_.count(s))
          err(where, "{} has type {} but symbol {} is not declared by the graph", vname(v), v->type().str(), s);
    }
  }

  void node(const Node& n, const std::string& where, int depth) {
    if (n.op() == "fused") return fused(n, where, depth);
    if (is_control_flow(n)) return control_flow(n, where, depth);
    if (n.body()) err(where, "{} has a body but only fused and control-flow nodes may", n.describe());
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
    if (n.num_regions() != 1)
      err(where, "{}: a fused node has one body, not {} regions", n.describe(), n.num_regions());
    if (body->inputs().size() != size_t(n.num_inputs()))
      err(where, "{}: has {} operands but its body takes {} inputs", n.describe(), n.num_inputs(),
          body->inputs().size());
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

  // if/loop/scan: the node agrees with its regions (ir/control_flow.h), and
  // each region is verified as a graph of its own, so a region that reads
  // an outer value it was not given as a parameter is reported there.
  void control_flow(const Node& n, const std::string& where, int depth) {
    try {
      check_control_flow(n);
    } catch (const Error& e) {
      throw Error("verifier: " + where + e.what());
    }
    // The regions of a top-level if, loop or scan may decide sizes, and so
    // may the regions of such nodes inside them (ir/data_dependent.h): the
    // run drives the node on the host and runs each region as a graph of its
    // own, stage by stage.
    const bool saved = region_of_top_level_if_or_loop_;
    region_of_top_level_if_or_loop_ = (depth == 0 || saved) && (n.op() == "if" || n.op() == "loop" || n.op() == "scan");
    for (int r = 0; r < n.num_regions(); ++r)
      graph(*n.region(r), where + fmt::format("in region {} (@{}) of {}: ", r, n.region(r)->name(), n.describe()),
            depth + 1);
    region_of_top_level_if_or_loop_ = saved;
  }

  const OpRegistry& registry_;
  std::unordered_set<std::string> declared_;
  bool region_of_top_level_if_or_loop_ = false;
};

}  // namespace

void verify_graph(const Graph& g, const OpRegistry& registry) {
  Verifier v(registry);
  v.symbols(g);
  v.graph(g, "", 0);
}

}  // namespace kiln
