#include "passes/fusion_state.h"

#include <algorithm>
#include <utility>

#include "ir/error.h"
#include "ops/registry.h"

namespace kiln::fusion {

Role op_role(const Node& n) {
  const std::string& op = n.op();
  if (n.body() || op == "fused" || n.num_outputs() == 0) return Role::Opaque;
  // A KV cache's append (kv-cache-in-place): the runtime binds its operand
  // and result as one buffer and writes only the new positions, which a
  // fused kernel would not do.
  if (op == "concat" && n.attrs().get_int("in_place_append", 0) == 1) return Role::Opaque;
  if (op == "reshape" || op == "identity") return Role::View;
  // A range is an index map with no data operand (start + i * delta): it
  // joins the kernel reading it where codegen evaluates it there
  // (codegen/core/emit_body_eval.h), so a decoder's positions and mask need
  // no launch of their own; the fuser asks codegen about every group.
  if (op == "range") return Role::Injective;
  if (op == "conv" || op == "conv_transpose" || op == "gemm" || op == "matmul" || op == "attention")
    return Role::Compute;
  const OpDef* d = op_registry().find(op);
  if (!d) return Role::Opaque;
  switch (d->category) {
    case OpCategory::Pointwise:
      return Role::Pointwise;
    case OpCategory::Injective:
      return Role::Injective;
    case OpCategory::Reduction:
      return Role::Reduction;
    default:
      return Role::Opaque;
  }
}

FusionState::FusionState(const Graph& g) : g_(g) {
  outputs_.insert(g.outputs().begin(), g.outputs().end());
  for (const auto& np : g.nodes()) pos_[np.get()] = static_cast<int>(pos_.size());
  size_t n = pos_.size();
  groups_.reserve(n);
  out_.resize(n);
  in_.resize(n);
  parent_.resize(n);
  size_.assign(n, 1);
  label_.resize(n);
  ord_.resize(n);
  seen_.assign(n, 0);
  for (const auto& np : g.nodes()) {
    Node* node = np.get();
    int id = static_cast<int>(groups_.size());
    parent_[id] = label_[id] = ord_[id] = id;  // the node order is a topological order
    Group grp;
    grp.nodes = {node};
    Role r = op_role(*node);
    grp.non_views = r == Role::View ? 0 : 1;
    if (r == Role::Compute || r == Role::Reduction) {
      grp.anchor = node;
      grp.kind = r == Role::Compute ? GroupKind::Compute : GroupKind::Reduction;
      map_[node->output(0)] = new_map_id();
    }
    groups_.push_back(std::move(grp));
    for (Value* v : node->outputs())
      if (v->has_uses() || outputs_.count(v)) out_[id].push_back(v);
    for (const Value* v : node->inputs())
      if (v && v->producer() && pos_.count(v->producer()) &&
          std::find(in_[id].begin(), in_[id].end(), v) == in_[id].end())
        in_[id].push_back(v);
  }
}

int FusionState::find(int x) const {
  int root = x;
  while (parent_[root] != root) root = parent_[root];
  while (parent_[x] != root) x = std::exchange(parent_[x], root);  // path compression
  return root;
}

int FusionState::group_of(const Node* n) const { return label_[find(pos_.at(n))]; }

int FusionState::group_of_value(const Value* v) const {
  if (!v || !v->producer()) return -1;
  auto it = pos_.find(v->producer());
  return it == pos_.end() ? -1 : label_[find(it->second)];
}

int FusionState::map_id(const Value* v) const {
  auto it = map_.find(v);
  return it == map_.end() ? -1 : it->second;
}

bool FusionState::escapes(const Value* v, int a, int b) const {
  if (outputs_.count(v)) return true;
  for (const Use& u : v->uses()) {
    int x = group_of(u.user);
    if (x != a && x != b) return true;
  }
  return false;
}

std::vector<Value*> FusionState::escaping(int a, int b) const {
  // A value none of whose users is outside its own group cannot escape a
  // larger one: only the frontier lists need looking at.
  std::vector<Value*> out;
  for (int gi : {a, b}) {
    if (gi < 0) continue;
    for (Value* v : out_[gi])
      if (escapes(v, a, b)) out.push_back(v);
  }
  return out;
}

bool FusionState::window_search(const std::vector<int>& parts, bool forward, bool stop_at_cycle,
                                std::vector<int>* found) const {
  auto inside = [&](int x) { return std::find(parts.begin(), parts.end(), x) != parts.end(); };
  int lo = ord_[parts[0]], hi = lo;
  for (int p : parts) {
    lo = std::min(lo, ord_[p]);
    hi = std::max(hi, ord_[p]);
  }
  // Groups outside (lo, hi) cannot be on a path between two parts: indices
  // grow along every edge of the graph of groups.
  int stamp = ++stamp_;
  bool cycle = false;
  std::vector<int> stack;
  // Calls f(x) for each neighbour group of gi in the search's direction.
  auto neighbours = [&](int gi, auto&& f) {
    if (forward) {
      for (const Value* v : out_[gi])
        for (const Use& u : v->uses()) f(group_of(u.user));
    } else {
      for (const Value* v : in_[gi]) f(group_of_value(v));
    }
  };
  auto visit = [&](int from, int x) {
    if (x == from) return;
    if (inside(x)) {
      if (!inside(from)) cycle = true;
      return;
    }
    if (ord_[x] <= lo || ord_[x] >= hi || seen_[x] == stamp) return;
    seen_[x] = stamp;
    stack.push_back(x);
    if (found) found->push_back(x);
  };
  for (int p : parts) neighbours(p, [&](int x) { visit(p, x); });
  while (!stack.empty() && !(cycle && stop_at_cycle)) {
    int x = stack.back();
    stack.pop_back();
    neighbours(x, [&](int y) { visit(x, y); });
  }
  return cycle;
}

bool FusionState::would_cycle(const std::vector<int>& parts) const {
  // A path from one part back into the union runs forward through outside
  // groups only; searching forward from the parts finds it.
  return window_search(parts, true, true, nullptr);
}

void FusionState::reorder(const std::vector<int>& parts, int a) {
  // Pearce-Kelly for a contraction: between the parts' lowest and highest
  // index, the groups reaching a part (B) must come before the merged group
  // and those reached from one (F) after it; no group is both (convexity).
  // They and the parts give up their indices, which are handed out again
  // sorted: B (in their old order) the lowest, then the merged group, and F
  // (in their old order) the highest. B only moves down and F only up, so
  // every other edge keeps its direction.
  std::vector<int> fwd, bwd;
  bool cycle = window_search(parts, true, false, &fwd);
  KILN_CHECK(!cycle, "fuse: merging a group that is not convex");
  window_search(parts, false, false, &bwd);
  auto by_ord = [&](int x, int y) { return ord_[x] < ord_[y]; };
  std::sort(fwd.begin(), fwd.end(), by_ord);
  std::sort(bwd.begin(), bwd.end(), by_ord);
  std::vector<int> slots;
  for (const std::vector<int>* list : std::initializer_list<const std::vector<int>*>{&fwd, &bwd, &parts})
    for (int x : *list) slots.push_back(ord_[x]);
  std::sort(slots.begin(), slots.end());
  size_t i = 0;
  for (int x : bwd) ord_[x] = slots[i++];
  ord_[a] = slots[i];
  i = slots.size() - fwd.size();
  for (int x : fwd) ord_[x] = slots[i++];
}

void FusionState::merge(int a, const std::vector<int>& others) {
  std::vector<int> parts = {a};
  for (int b : others)
    if (b != a && std::find(parts.begin(), parts.end(), b) == parts.end()) parts.push_back(b);
  if (parts.size() == 1) return;
  reorder(parts, a);
  Group& ga = groups_[a];
  for (size_t k = 1; k < parts.size(); ++k) {
    int b = parts[k];
    Group& gb = groups_[b];
    if (ga.nodes.size() < gb.nodes.size()) std::swap(ga.nodes, gb.nodes);
    ga.nodes.insert(ga.nodes.end(), gb.nodes.begin(), gb.nodes.end());
    ga.non_views += gb.non_views;
    gb.nodes.clear();
    gb.alive = false;
    // Union by size; the root's label says the survivor is `a`.
    int ra = find(a), rb = find(b);
    if (size_[ra] < size_[rb]) std::swap(ra, rb);
    parent_[rb] = ra;
    size_[ra] += size_[rb];
    label_[ra] = a;
  }
  // The frontier of the union: the parts' frontiers in join order, less what
  // is now read only inside. Its outside inputs likewise, once each.
  std::vector<Value*> out;
  std::vector<const Value*> in;
  std::unordered_set<const Value*> in_seen;
  for (int p : parts) {
    for (Value* v : out_[p])
      if (escapes(v, a, a)) out.push_back(v);
    for (const Value* v : in_[p])
      if (group_of_value(v) != a && in_seen.insert(v).second) in.push_back(v);
    out_[p].clear();
    out_[p].shrink_to_fit();
    in_[p].clear();
    in_[p].shrink_to_fit();
  }
  out_[a] = std::move(out);
  in_[a] = std::move(in);
}

}  // namespace kiln::fusion
