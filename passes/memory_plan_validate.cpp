// MemoryPlan::validate() and str(): checks a plan against its graph without
// trusting the planner's own bookkeeping (live ranges and content classes are
// recomputed from the graph's use lists), so tests catch planner bugs.
#include <algorithm>
#include <map>
#include <queue>
#include <tuple>

#include "ir/error.h"
#include "passes/memory_plan.h"

namespace kiln {

namespace {

std::string vname(const Value* v) {
  if (!v->name().empty()) return "%" + v->name();
  if (v->producer()) return fmt::format("result {} of {}", v->producer_output(), v->producer()->describe());
  return "an unnamed value";
}

// Values whose contents are the same bytes (a value and its views).
struct ContentClass {
  const Value* root = nullptr;  // not a view
  Storage storage = Storage::Arena;
  int output_index = -1;
  int64_t offset = 0, size = 0;
  int first = 0, last = 0;  // when some member's contents are needed
};

}  // namespace

void MemoryPlan::validate() const {
  if (!graph) fail("memory plan: no graph");
  const Graph& g = *graph;
  std::unordered_map<const Node*, int> pos;
  int end = 0;
  for (const auto& n : g.nodes()) pos[n.get()] = end++;
  auto last_use = [&](const Value* v) {
    int last = v->producer() ? pos.at(v->producer()) : -1;
    for (const Use& u : v->uses()) last = std::max(last, pos.at(u.user));
    return g.is_output(v) ? end : last;
  };
  auto fail_at = [&](const Value* v, const std::string& what) { fail("memory plan: {}: {}", vname(v), what); };

  size_t results = 0;
  std::map<const Value*, ContentClass> classes;  // by root
  std::unordered_map<const Value*, const Value*> class_of;
  for (const auto& n : g.nodes()) {
    for (const Value* v : n->outputs()) {
      ++results;
      const ValuePlan* p = find(v);
      if (!p || p->value != v) fail_at(v, "not planned");
      if (p->size != int64_t(v->type().nbytes()))
        fail_at(v, fmt::format("size {} but the type needs {}", p->size, v->type().nbytes()));
      if (p->storage == Storage::Arena) {
        if (p->offset % options.alignment)
          fail_at(v, fmt::format("offset {} is not {}-aligned", p->offset, options.alignment));
        if (p->offset < 0 || p->offset + p->size > arena_bytes)
          fail_at(v, fmt::format("bytes [{}, {}) lie outside the arena of {}", p->offset, p->offset + p->size,
                                 arena_bytes));
      }
      if (p->storage == Storage::Output && (p->output_index < 0 || p->output_index >= int(g.outputs().size()) ||
                                            !g.outputs()[p->output_index]->producer()))
        fail_at(v, fmt::format("in the buffer of output {}, which is not a node result", p->output_index));
      if (p->storage == Storage::Output &&
          (p->offset < 0 || p->offset + p->size > int64_t(g.outputs()[p->output_index]->type().nbytes())))
        fail_at(v, fmt::format("does not fit in the buffer of output {}", p->output_index));
      if (g.is_output(v)) {
        bool user = !options.outputs_in_arena;
        if (user && (p->storage != Storage::Output || g.outputs()[p->output_index] != v))
          fail_at(v, "is a graph output but is not in its own output buffer");
        if (!user && p->storage != Storage::Arena) fail_at(v, "is a graph output but is not in the arena");
      }
      const ValuePlan* of = p->alias_of ? find(p->alias_of) : nullptr;
      int t = pos.at(n.get());
      switch (p->alias) {
        case AliasKind::None:
          if (p->storage == Storage::Input || p->storage == Storage::Constant)
            fail_at(v, "owns its bytes but lies in read-only storage");
          classes[v] = {v, p->storage, p->output_index, p->offset, p->size, t, last_use(v)};
          class_of[v] = v;
          break;
        case AliasKind::View: {
          if ((n->op() != "reshape" && n->op() != "identity") || n->input(0) != p->alias_of)
            fail_at(v, "is a view but not the result of a reshape/identity of its alias");
          const Value* x = p->alias_of;
          if (x->type().nbytes() != v->type().nbytes()) fail_at(v, "views a value of another byte size");
          if (!of) {  // a view of a graph input or constant
            Storage s = x->is_input() ? Storage::Input : Storage::Constant;
            if (p->storage != s)
              fail_at(v, fmt::format("views {} but lies in {} storage", vname(x), storage_name(p->storage)));
            if (!classes.count(x)) classes[x] = {x, s, -1, 0, p->size, -1, last_use(x)}, class_of[x] = x;
          } else if (of->storage != p->storage || of->offset != p->offset || of->output_index != p->output_index) {
            fail_at(v, fmt::format("views {} but does not share its bytes", vname(x)));
          }
          ContentClass& c = classes.at(class_of.at(x));
          c.last = std::max(c.last, last_use(v));
          class_of[v] = c.root;
          break;
        }
        case AliasKind::InPlace: {
          if (!of) fail_at(v, "is written in place over a graph input or constant");
          const Value* x = p->alias_of;
          if (std::find(n->inputs().begin(), n->inputs().end(), x) == n->inputs().end())
            fail_at(v, fmt::format("is written in place over {}, which is not an operand", vname(x)));
          if (of->storage != p->storage || of->offset != p->offset || of->output_index != p->output_index ||
              of->size != p->size)
            fail_at(v, fmt::format("is written in place over {} but does not share its bytes", vname(x)));
          const ContentClass& old = classes.at(class_of.at(x));
          if (old.last != t)
            fail_at(v, fmt::format("overwrites {}, whose contents are needed after {}", vname(x), n->describe()));
          std::vector<int> readers;
          for (int k = 0; k < n->num_inputs(); ++k)
            if (n->input(k) && class_of.count(n->input(k)) && class_of.at(n->input(k)) == old.root)
              readers.push_back(k);
          if (!may_overwrite(*n, readers, v))
            fail_at(v, fmt::format("is written over {} by {}, which may read an element of it after writing there",
                                   vname(x), n->describe()));
          classes[v] = {v, p->storage, p->output_index, p->offset, p->size, t, last_use(v)};
          class_of[v] = v;
          break;
        }
      }
    }
  }
  if (results != values.size())
    fail("memory plan: {} values planned but the graph has {} node results", values.size(), results);

  // No two content classes needed at the same time share bytes, except an
  // in-place result and the class it overwrites, at the overwriting node.
  std::vector<const ContentClass*> live;
  for (const auto& [root, c] : classes)
    if ((c.storage == Storage::Arena || c.storage == Storage::Output) && c.size > 0) live.push_back(&c);
  auto touches = [&](const ContentClass& a, const ContentClass& b) {  // b overwrites a in place
    const ValuePlan* p = find(b.root);
    return p->alias == AliasKind::InPlace && class_of.at(p->alias_of) == a.root && a.last == b.first &&
           a.offset == b.offset && a.size == b.size;
  };
  // Swept in order of first need, each class is compared with the classes
  // live at that moment whose bytes could meet its own (comparing each pair
  // of classes at one place was quadratic on long graphs, whose arenas
  // reuse a few places thousands of times). Classes live together share no
  // bytes, as each was checked on arrival, except an in-place pair, whose
  // bytes are the same: so the ones meeting [offset, offset + size) are
  // those at the highest place not above `offset`, then those below its end.
  std::sort(live.begin(), live.end(), [](const ContentClass* a, const ContentClass* b) {
    return std::tuple(a->first, a->storage, a->output_index, a->offset) <
           std::tuple(b->first, b->storage, b->output_index, b->offset);
  });
  using Place = std::tuple<Storage, int, int64_t>;
  std::multimap<Place, const ContentClass*> active;
  using Expiry = std::pair<int, std::multimap<Place, const ContentClass*>::iterator>;
  auto later = [](const Expiry& x, const Expiry& y) { return x.first > y.first; };
  std::priority_queue<Expiry, std::vector<Expiry>, decltype(later)> expiry(later);
  for (const ContentClass* bp : live) {
    const ContentClass& b = *bp;
    while (!expiry.empty() && expiry.top().first < b.first) {
      active.erase(expiry.top().second);
      expiry.pop();
    }
    auto same_store = [&](const ContentClass& a) { return a.storage == b.storage && a.output_index == b.output_index; };
    auto it = active.upper_bound(Place(b.storage, b.output_index, b.offset));
    if (it != active.begin() && same_store(*std::prev(it)->second)) it = active.lower_bound(std::prev(it)->first);
    for (; it != active.end() && same_store(*it->second) && it->second->offset < b.offset + b.size; ++it) {
      const ContentClass& a = *it->second;
      if (a.offset + a.size <= b.offset || a.last < b.first || b.last < a.first) continue;
      if (touches(a, b) || touches(b, a)) continue;
      fail("memory plan: {} (nodes {}..{}) and {} (nodes {}..{}) are live together but share bytes [{}, {}) of {}",
           vname(a.root), a.first, a.last, vname(b.root), b.first, b.last, std::max(a.offset, b.offset),
           std::min(a.offset + a.size, b.offset + b.size),
           a.storage == Storage::Arena ? std::string("the arena") : fmt::format("output {}", a.output_index));
    }
    expiry.emplace(b.last, active.emplace(Place(b.storage, b.output_index, b.offset), bp));
  }
  // A workspace lies in the arena and shares no byte with a value live at its node.
  for (const WorkspacePlan& w : workspaces) {
    auto at = pos.find(w.node);
    if (at == pos.end() || at->second != w.position)
      fail("memory plan: a workspace names a node that is not at position {}", w.position);
    const std::string who = w.node->describe();
    if (w.size <= 0 || w.offset < 0 || w.offset % options.alignment || w.offset + w.size > arena_bytes)
      fail("memory plan: workspace of {}: bytes [{}, {}) are not an aligned range of the arena of {}", who, w.offset,
           w.offset + w.size, arena_bytes);
    for (const ContentClass* c : live)
      if (c->storage == Storage::Arena && c->first <= w.position && w.position <= c->last &&
          c->offset < w.offset + w.size && w.offset < c->offset + c->size)
        fail("memory plan: workspace of {} shares bytes with {}, live at that node (nodes {}..{})", who, vname(c->root),
             c->first, c->last);
  }
}

const WorkspacePlan* MemoryPlan::workspace(const Node* n) const {
  for (const WorkspacePlan& w : workspaces)
    if (w.node == n) return &w;
  return nullptr;
}

std::string MemoryPlan::str() const {
  std::string s = fmt::format("arena {} bytes (naive {}, live peak {}), {} in place, {} views, {} view copies\n",
                              arena_bytes, naive_bytes, live_peak_bytes, in_place, views, view_copies);
  for (const ValuePlan& p : values) {
    std::string alias =
        p.alias == AliasKind::None
            ? ""
            : fmt::format(" {} {}", p.alias == AliasKind::View ? "view-of" : "in-place-over", vname(p.alias_of));
    std::string where =
        p.storage == Storage::Output ? fmt::format("output {}", p.output_index) : std::string(storage_name(p.storage));
    s += fmt::format("  {:<24} {:<10} @{:<12} {:>12} B  live {}..{}{}\n", vname(p.value), where, p.offset, p.size,
                     p.first, p.last, alias);
  }
  for (const WorkspacePlan& w : workspaces)
    s += fmt::format("  {:<24} {:<10} @{:<12} {:>12} B  live {}..{}\n", "workspace of #" + std::to_string(w.position),
                     "arena", w.offset, w.size, w.position, w.position);
  return s;
}

}  // namespace kiln
