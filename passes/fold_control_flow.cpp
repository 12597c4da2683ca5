// fold-control-flow: control flow decided at compile time disappears.
//  - an `if` whose condition is a constant is replaced by the nodes of the
//    branch it takes (parameters mapped to the captured operands);
//  - a `loop` that runs zero times (constant trip count <= 0, or a constant
//    false condition) is replaced by its initial loop-carried values, and its
//    scan outputs by empty constants.
// Everything else is left alone, in particular a loop with a constant trip
// count: it stays a loop (no unrolling). Unrolling would copy the body once
// per iteration (code size and compile time growing with the trip count) to
// save a host-side branch per iteration on the CPU backends; it would pay
// only with GPU sub-plans, which kiln does not build yet. Runs inside regions
// too (after the frontend, which already inlines Ifs whose condition it
// knows, this catches conditions that fold-constants makes constant).
#include <set>
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/control_flow.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

const Tensor* constant_of(const Value* v) { return v && v->is_constant() && v->has_data() ? &v->data() : nullptr; }

class FoldControlFlow : public Pass {
 public:
  std::string_view name() const override { return "fold-control-flow"; }
  bool run(Graph& g, const PassOptions&, PassStats& stats) override { return fold(g, stats); }

 private:
  bool fold(Graph& g, PassStats& stats) {
    bool changed = false;
    for (Node* n : g.node_list()) {
      for (const auto& r : n->regions()) changed |= fold(*r, stats);
      if (n->op() == "if") {
        if (const Tensor* c = constant_of(n->input(0))) {
          inline_region(g, n, *n->region(c->get_int(0) ? 0 : 1), 1);
          stats.count("ifs-folded");
          changed = true;
        }
      } else if (n->op() == "loop") {
        const Tensor* trip = constant_of(n->input(0));
        const Tensor* cond = constant_of(n->input(1));
        if ((trip && trip->get_int(0) <= 0) || (cond && cond->get_int(0) == 0)) {
          skip_loop(g, n);
          stats.count("loops-removed");
          changed = true;
        }
      }
    }
    if (changed) g.remove_unused_constants();
    return changed;
  }

  // A fresh value name of `g` based on `base` (the verifier wants them unique).
  static std::string fresh(std::set<std::string>& taken, const std::string& base) {
    std::string name = base;
    for (int i = 1; !name.empty() && taken.count(name); ++i) name = base + "." + std::to_string(i);
    taken.insert(name);
    return name;
  }

  static std::set<std::string> names_of(const Graph& g) {
    std::set<std::string> s;
    for (const Value* v : g.inputs()) s.insert(v->name());
    for (const Value* v : g.constants()) s.insert(v->name());
    for (const auto& n : g.nodes())
      for (int i = 0; i < n->num_outputs(); ++i) s.insert(n->output(i)->name());
    return s;
  }

  // Copies region `r`'s nodes before `n`, its parameters bound to n's
  // operands from `first_operand` on, and replaces n's results by r's.
  void inline_region(Graph& g, Node* n, const Graph& r, int first_operand) {
    std::set<std::string> taken = names_of(g);
    std::unordered_map<const Value*, Value*> map;
    map[nullptr] = nullptr;
    for (size_t i = 0; i < r.inputs().size(); ++i) map[r.inputs()[i]] = n->input(first_operand + int(i));
    for (Value* c : r.constants()) {
      Value* nc = c->has_data() ? g.add_constant(fresh(taken, c->name()), c->data())
                                : g.add_constant_ref(fresh(taken, c->name()), c->type(), c->digest());
      map[c] = nc;
    }
    for (const auto& b : r.nodes()) {
      std::vector<Value*> ins;
      for (Value* v : b->inputs()) ins.push_back(map.at(v));
      std::vector<TensorType> types;
      for (Value* o : b->outputs()) types.push_back(o->type());
      Node* copy = g.add_node(b->op(), ins, types, b->attrs(), b->name(), n);
      for (const auto& sub : b->regions()) copy->add_region(sub->clone());
      for (int i = 0; i < b->num_outputs(); ++i) {
        copy->output(i)->set_name(fresh(taken, b->output(i)->name()));
        map[b->output(i)] = copy->output(i);
        made_.insert(copy->output(i));
      }
    }
    std::vector<std::pair<Value*, std::string>> renames;
    for (int i = 0; i < n->num_outputs(); ++i) replace_result(g, n, n->output(i), map.at(r.outputs()[i]), renames);
    g.erase_node(n);
    for (auto& [v, name] : renames) v->set_name(name);
  }

  // Replaces `from` (a result of `n`) by `to`. A graph output keeps its
  // name (the pass manager checks it): `to` takes it when it is a result
  // this pass just made and not an output yet, otherwise an identity of
  // `to` carries it. Names are set once `n` is gone (`renames`).
  void replace_result(Graph& g, Node* n, Value* from, Value* to, std::vector<std::pair<Value*, std::string>>& renames) {
    if (!g.is_output(from)) return g.replace_all_uses(from, to);
    bool fresh_result = to->producer() && to->producer() != n && !g.is_output(to) &&
                        std::none_of(renames.begin(), renames.end(), [&](const auto& r) { return r.first == to; });
    if (!fresh_result || !made_.count(to)) {
      Node* id = g.add_node("identity", {to}, {to->type()}, {}, "", n);
      to = id->output(0);
    }
    g.replace_all_uses(from, to);
    renames.push_back({to, from->name()});
  }

  void skip_loop(Graph& g, Node* n) {
    LoopSignature s = loop_signature(*n);
    std::set<std::string> taken = names_of(g);
    std::vector<std::pair<Value*, std::string>> renames;
    for (int i = 0; i < s.carried; ++i) replace_result(g, n, n->output(i), n->input(2 + i), renames);
    for (int k = 0; k < s.scans; ++k) {
      Value* out = n->output(s.carried + k);
      Value* empty = g.add_constant(fresh(taken, out->name() + ".empty"), Tensor(out->type()));
      replace_result(g, n, out, empty, renames);
    }
    g.erase_node(n);
    for (auto& [v, name] : renames) v->set_name(name);
  }

  std::unordered_set<const Value*> made_;  // results inline_region created (may take an output's name)
};

}  // namespace

std::unique_ptr<Pass> create_fold_control_flow_pass() { return std::make_unique<FoldControlFlow>(); }

}  // namespace kiln
