#include "passes/fuse_outline.h"

#include <algorithm>
#include <fmt/format.h>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/specialize.h"
#include "ir/symbolic_dim.h"
#include "ops/registry.h"

namespace kiln::fusion {

namespace {

constexpr int64_t kBodyConstantElements = 16;

// Copies `members` into a body graph; no body when the members write nothing
// used outside (dead code: nothing to launch).
FusedParts build_parts(const Graph& g, const FusionState& s, std::vector<Node*> members) {
  FusedParts p;
  std::sort(members.begin(), members.end(),
            [&](const Node* a, const Node* b) { return s.position(a) < s.position(b); });
  std::unordered_set<const Node*> in(members.begin(), members.end());
  for (Node* m : members)
    for (Value* o : m->outputs()) {
      bool used_outside = g.is_output(o);
      for (const Use& u : o->uses()) used_outside |= !in.count(u.user);
      if (used_outside) p.results.push_back(o);
    }
  if (p.results.empty()) return p;

  auto body = std::make_unique<Graph>("fused_0");  // renamed fused_<index> when outlined
  std::unordered_map<const Value*, Value*> map = {{nullptr, nullptr}};
  for (Node* m : members)
    for (Value* v : m->inputs()) {
      if (!v || map.count(v) || (v->producer() && in.count(v->producer()))) continue;
      if (v->is_constant() && v->type().numel() <= kBodyConstantElements) {
        map[v] = v->has_data() ? body->add_constant(v->name(), v->data())
                               : body->add_constant_ref(v->name(), v->type(), v->digest());
        continue;
      }
      p.operands.push_back(v);
      map[v] = body->add_input(v->name(), v->type());
    }

  std::vector<std::string> names;
  // A set beside the list: searching the list per member was quadratic in
  // the group's size (a 100k-node pointwise chain is one group).
  std::unordered_set<std::string> named;
  for (Node* m : members) {
    std::vector<Value*> ins;
    for (Value* v : m->inputs()) ins.push_back(map.at(v));
    std::vector<TensorType> types;
    for (Value* o : m->outputs()) types.push_back(o->type());
    Node* copy = body->add_node(m->op(), ins, types, m->attrs(), m->name());
    for (int i = 0; i < m->num_outputs(); ++i) {
      Value* o = m->output(i);
      copy->output(i)->set_name(o->name());
      map[o] = copy->output(i);
    }
    if (!m->name().empty() && named.insert(m->name()).second) names.push_back(m->name());
  }
  std::vector<Value*> body_outs;
  for (Value* r : p.results) body_outs.push_back(map.at(r));
  body->set_outputs(body_outs);
  p.body = std::move(body);
  p.name = fmt::format("{}", fmt::join(names, "+"));
  return p;
}

std::vector<TensorType> result_types(const FusedParts& p) {
  std::vector<TensorType> types;
  for (Value* r : p.results) types.push_back(r->type());
  return types;
}

// Builds the fused node for one group at the end of `g` and removes the
// group's nodes. Returns the new node, or nullptr for a dead group.
Node* outline(Graph& g, const FusionState& s, const Group& grp, FusedParts p, int index) {
  if (!p.body) return nullptr;
  p.body->set_name(fmt::format("fused_{}", index));
  AttrMap attrs;
  attrs.set("kind", group_kind_name(grp));
  Node* f = g.add_node("fused", p.operands, result_types(p), std::move(attrs), p.name);
  f->set_body(std::move(p.body));
  std::vector<std::string> result_names;
  for (size_t i = 0; i < p.results.size(); ++i) {
    result_names.push_back(p.results[i]->name());
    g.replace_all_uses(p.results[i], f->output(static_cast<int>(i)));
  }
  std::vector<Node*> members = grp.nodes;
  std::sort(members.begin(), members.end(),
            [&](const Node* a, const Node* b) { return s.position(a) < s.position(b); });
  for (auto it = members.rbegin(); it != members.rend(); ++it) g.erase_node(*it);
  for (size_t i = 0; i < p.results.size(); ++i) f->output(static_cast<int>(i))->set_name(result_names[i]);
  return f;
}

// Kahn's algorithm, taking among ready nodes the one that came first.
void reorder(Graph& g, const std::unordered_map<const Node*, int>& key) {
  std::vector<Node*> nodes = g.node_list();
  std::unordered_map<const Node*, int> pending;
  using Item = std::pair<int, Node*>;
  auto later = [](const Item& a, const Item& b) { return a.first > b.first; };
  std::priority_queue<Item, std::vector<Item>, decltype(later)> ready(later);
  for (Node* n : nodes) {
    int k = 0;
    for (Value* v : n->inputs()) k += v && v->producer() ? 1 : 0;
    pending[n] = k;
    if (k == 0) ready.push({key.at(n), n});
  }
  size_t placed = 0;
  while (!ready.empty()) {
    Node* n = ready.top().second;
    ready.pop();
    g.move_node(n, nullptr);
    ++placed;
    for (Value* o : n->outputs())
      for (const Use& u : o->uses())
        if (--pending[u.user] == 0) ready.push({key.at(u.user), u.user});
  }
  KILN_CHECK(placed == nodes.size(), "fuse: the fused graph has a cycle ({} of {} nodes ordered)", placed,
             nodes.size());
}

}  // namespace

bool becomes_fused_node(const Group& grp) {
  if (!grp.alive || grp.nodes.size() < 2) return false;
  for (const Node* n : grp.nodes)
    if (op_role(*n) != Role::View) return true;
  return false;
}

FusedParts fused_parts(const Graph& g, const FusionState& s, const Group& grp) { return build_parts(g, s, grp.nodes); }

std::vector<SymbolBindings> range_ends(const Graph& g) {
  if (g.symbols().empty()) return {};
  const auto by_data = data_dependent_symbols(g);
  SymbolBindings lo, hi;
  for (const SymbolDecl& d : g.symbols()) {
    if (by_data.count(d.name)) continue;
    lo[d.name] = d.min;
    hi[d.name] = d.max;
  }
  if (lo.empty()) return {};
  if (lo == hi) return {lo};
  return {lo, hi};
}

namespace {

bool has_symbolic_types(const Graph& g) {
  for (const Value* v : g.inputs())
    if (has_symbolic_dims(v->shape())) return true;
  for (const auto& n : g.nodes()) {
    for (const Value* o : n->outputs())
      if (has_symbolic_dims(o->shape())) return true;
    for (const auto& r : n->regions())
      if (has_symbolic_types(*r)) return true;
  }
  return false;
}

// Whether dim `d` never decreases as a symbol grows within its range
// (`lo`: each symbol at its low end): written in t = symbol - low >= 0 for
// every symbol, no term but the constant has a negative coefficient. Enough
// for a limit that grows with the sizes to be reached at the high end.
bool grows_with_symbols(int64_t d, const SymbolBindings& lo) {
  if (!is_symbolic_dim(d)) return true;
  using Poly = std::map<DimMonomial, __int128>;  // over the t's; 128 bits: low ends multiply out
  Poly shifted;
  for (const auto& [mono, coeff] : dim_poly(d)) {
    Poly term = {{{}, coeff}};
    for (const std::string& sym : mono) {  // term *= (low + t_sym)
      auto at = lo.find(sym);
      const int64_t low = at == lo.end() ? 0 : at->second;  // none: a data-dependent symbol, left unbound
      Poly next;
      for (const auto& [m, c] : term) {
        next[m] += c * low;
        DimMonomial with = m;
        with.insert(std::upper_bound(with.begin(), with.end(), sym), sym);
        next[with] += c;
      }
      term = std::move(next);
    }
    for (const auto& [m, c] : term) shifted[m] += c;
  }
  for (const auto& [m, c] : shifted)
    if (!m.empty() && c < 0) return false;
  return true;
}

// The first dim of the node's types, or of its body's, that
// grows_with_symbols rejects (0: none).
int64_t shrinking_dim(const Node& n, const SymbolBindings& lo) {
  auto check = [&](const Value* v) -> int64_t {
    if (!v) return 0;
    for (int64_t d : v->shape())
      if (!grows_with_symbols(d, lo)) return d;
    return 0;
  };
  for (const Value* v : n.inputs())
    if (int64_t d = check(v)) return d;
  for (const Value* v : n.outputs())
    if (int64_t d = check(v)) return d;
  if (n.body())
    for (const auto& bn : n.body()->nodes())
      for (const Value* v : bn->outputs())
        if (int64_t d = check(v)) return d;
  return 0;
}

std::string bindings_str(const SymbolBindings& b) {
  std::vector<std::string> parts;
  for (const auto& [name, v] : b) parts.push_back(fmt::format("{}={}", name, v));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::string ask_codegen(const WhyNoKernel& why_no_kernel, FusedParts& p, const Group& grp,
                        const std::vector<SymbolBindings>& ends, const WhyNoKernel& why_not_generic) {
  if (!why_no_kernel || !p.body) return "";
  Graph scratch("probe");
  // The symbols' ranges, declared as the real graph declares them: an
  // emitter sizing a shape-generic kernel reads them from the node's graph
  // (an attention's tiles and workspace at the largest shapes).
  if (!ends.empty()) {
    std::vector<SymbolDecl> decls;
    for (const auto& [name, lo] : ends.front()) decls.push_back({name, lo, ends.back().at(name)});
    scratch.set_symbols(std::move(decls));
  }
  std::vector<Value*> operands;
  for (Value* v : p.operands) operands.push_back(scratch.add_input(v->name(), v->type()));
  AttrMap attrs;
  attrs.set("kind", group_kind_name(grp));
  Node* f = scratch.add_node("fused", operands, result_types(p), std::move(attrs), p.name);
  for (size_t i = 0; i < p.results.size(); ++i) f->output(static_cast<int>(i))->set_name(p.results[i]->name());
  scratch.set_outputs(f->outputs());
  f->set_body(std::move(p.body));
  // Handed back however codegen answers (it reports refusals by value, but
  // the body must not be lost to an exception either).
  struct GiveBack {
    Node* f;
    FusedParts& p;
    ~GiveBack() { p.body = f->take_body(); }
  } give_back{f, p};
  if (ends.empty() || !has_symbolic_types(scratch)) return why_no_kernel(*f);
  if (why_not_generic) {
    std::string why = why_not_generic(*f);
    if (!why.empty()) return fmt::format("{}: {}", f->describe(), why);
    // The plan emits this very node, symbolic, once: the kernel that runs at
    // every value of the range. Its decisions are made for the whole range
    // (a size it cannot bound it treats as any value), so it is asked as it
    // is; the specialised questions below cannot see them.
    why = why_no_kernel(*f);
    if (!why.empty()) return why;
  }
  // Codegen bakes sizes into kernels; the plan specialises a node with
  // symbolic dims before it emits one. The sizes it may be emitted at lie
  // between the ends of the symbols' ranges, and what codegen refuses for
  // size (grid limits, 32-bit indexing: limits that grow with the sizes,
  // docs/fusion.md) it refuses at the high end -- where every size is
  // largest, which holds when no size shrinks as a symbol grows. A group
  // with such a size is not judged from two points.
  if (int64_t d = shrinking_dim(*f, ends.front()))
    return fmt::format(
        "{}: its size {} shrinks as a symbol grows, so codegen's size limits are not decided at the "
        "ends of the ranges",
        f->describe(), dim_str(d));
  for (const SymbolBindings& b : ends) {
    std::unique_ptr<Graph> at;
    try {
      at = specialize_graph(scratch, b, op_registry());
    } catch (const Error& e) {
      return fmt::format("at {}: {}", bindings_str(b), e.what());
    }
    std::string why = why_no_kernel(*at->nodes().front());
    if (!why.empty()) return fmt::format("at {}: {}", bindings_str(b), why);
  }
  return "";
}

int outline_groups(Graph& g, const FusionState& s, PassStats& stats, std::unordered_map<int, FusedParts> built) {
  std::unordered_map<const Node*, int> key;
  for (const auto& n : g.nodes()) key[n.get()] = s.position(n.get());
  // Parts built before the loop may read results of groups outlined since,
  // whose values are gone: each maps to the fused node's result replacing it.
  // (Only those parts are looked up: a value created in the loop may reuse a
  // dead value's address.)
  std::unordered_map<const Value*, Value*> outlined;
  int made = 0;
  for (int gi = 0; gi < s.num_groups(); ++gi) {
    const Group& grp = s.group(gi);
    if (!becomes_fused_node(grp)) continue;
    int last = 0;
    for (const Node* n : grp.nodes) last = std::max(last, s.position(n));
    std::string kind = group_kind_name(grp);
    FusedParts parts;
    if (auto it = built.find(gi); it != built.end()) {
      parts = std::move(it->second);
      for (Value*& v : parts.operands)
        if (auto o = outlined.find(v); o != outlined.end()) v = o->second;
    } else {
      parts = build_parts(g, s, grp.nodes);
    }
    const std::vector<Value*> replaced = parts.results;
    Node* f = outline(g, s, grp, std::move(parts), made);
    if (!f) continue;
    for (size_t i = 0; i < replaced.size(); ++i) outlined[replaced[i]] = f->output(static_cast<int>(i));
    ++made;
    key[f] = last;
    stats.count("nodes-fused", static_cast<int64_t>(grp.nodes.size()));
    stats.count("fused." + kind);
  }
  if (made == 0) return 0;
  reorder(g, key);
  g.remove_unused_constants();
  return made;
}

}  // namespace kiln::fusion
