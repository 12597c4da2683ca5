// plan_memory(): aliasing decisions in one forward walk over the node order,
// then offsets for the arena buffers from an offline best-fit allocator.
// See memory_plan.h for the rules; memory_plan_validate.cpp checks a plan.
#include "passes/memory_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_set>

#include "ir/error.h"
#include "ir/op_registry.h"
#include "ops/registry.h"

namespace kiln {

std::string_view storage_name(Storage s) {
  switch (s) {
    case Storage::Arena:
      return "arena";
    case Storage::Output:
      return "output";
    case Storage::Input:
      return "input";
    case Storage::Constant:
      return "constant";
  }
  return "?";
}

bool is_pointwise_node(const Node& n) {
  if (n.op() == "fused") {
    if (!n.body() || n.body()->num_nodes() == 0) return false;
    for (const auto& b : n.body()->nodes())
      if (!is_pointwise_node(*b)) return false;
    return true;
  }
  const OpDef* def = op_registry().find(n.op());
  return def && def->category == OpCategory::Pointwise;
}

namespace {
bool same_elements(const Value* a, const Value* r) {
  return a->type().numel() == r->type().numel() && dtype_size(a->dtype()) == dtype_size(r->dtype()) &&
         a->type().layout == r->type().layout;
}

// Whether every body value computed from `p` is computed by pointwise ops
// and has `numel` elements (so element i reads only element i of p).
bool flows_elementwise(const Value* p, int64_t numel) {
  // A set beside the work list: a search of the list per value was
  // quadratic in the body's size (a long pointwise chain is one body).
  std::vector<const Value*> todo = {p};
  std::unordered_set<const Value*> queued = {p};
  for (size_t i = 0; i < todo.size(); ++i) {
    for (const Use& u : todo[i]->uses()) {
      if (!is_pointwise_node(*u.user)) return false;
      for (const Value* o : u.user->outputs()) {
        if (o->type().numel() != numel) return false;
        if (queued.insert(o).second) todo.push_back(o);
      }
    }
  }
  return true;
}
}  // namespace

bool may_overwrite(const Node& n, const std::vector<int>& operands, const Value* r) {
  bool fused = n.op() == "fused" && n.body() && n.body()->inputs().size() == size_t(n.num_inputs());
  if (!fused && !is_pointwise_node(n)) return false;
  for (int k : operands) {
    const Value* x = n.input(k);
    if (!x || !same_elements(x, r)) return false;
    if (fused && !flows_elementwise(n.body()->inputs()[k], r->type().numel())) return false;
  }
  return !operands.empty();
}

const ValuePlan* MemoryPlan::find(const Value* v) const {
  auto it = index.find(v);
  return it == index.end() ? nullptr : &values[it->second];
}

namespace {

constexpr int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// The placed buffers, by live range, so the allocator asks for those that
// overlap one range in time proportional to the answer (a scan of all placed
// buffers per buffer made planning quadratic in the graph's size). A range
// [f, l] meets [first, last] when it contains the point f, or starts in (f, l]:
// a segment tree over positions answers the first, a map by start the second.
class LiveRangeIndex {
 public:
  explicit LiveRangeIndex(int positions) : n_(positions), tree_(4 * size_t(positions)) {}
  void add(int id, int first, int last) {
    insert(1, 0, n_ - 1, first, last, id);
    by_first_[first].push_back(id);
  }
  // Appends every added id whose range meets [first, last], each once.
  void overlapping(int first, int last, std::vector<int>& out) const {
    for (int node = 1, l = 0, r = n_ - 1;;) {
      out.insert(out.end(), tree_[node].begin(), tree_[node].end());
      if (l == r) break;
      int m = (l + r) / 2;
      if (first <= m) node = 2 * node, r = m;
      else node = 2 * node + 1, l = m + 1;
    }
    for (auto it = by_first_.upper_bound(first); it != by_first_.end() && it->first <= last; ++it)
      out.insert(out.end(), it->second.begin(), it->second.end());
  }

 private:
  void insert(int node, int l, int r, int first, int last, int id) {
    if (last < l || r < first) return;
    if (first <= l && r <= last) return tree_[node].push_back(id);
    int m = (l + r) / 2;
    insert(2 * node, l, m, first, last, id);
    insert(2 * node + 1, m + 1, r, first, last, id);
  }
  int n_;
  std::vector<std::vector<int>> tree_;
  std::map<int, std::vector<int>> by_first_;
};

// Positions of nodes and the last position each value is needed at.
struct Liveness {
  std::unordered_map<const Node*, int> pos;
  int end = 0;  // one past the last node: graph outputs are needed "at the end"

  explicit Liveness(const Graph& g) {
    int i = 0;
    for (const auto& n : g.nodes()) pos[n.get()] = i++;
    end = i;
  }
  int produced(const Value* v) const { return v->producer() ? pos.at(v->producer()) : -1; }
  int last_use(const Graph& g, const Value* v) const {
    int last = produced(v);
    for (const Use& u : v->uses()) last = std::max(last, pos.at(u.user));
    if (g.is_output(v)) last = end;
    return last;
  }
};

// A run of bytes being assembled during the walk.
struct Group {
  Storage storage = Storage::Arena;
  int output_index = -1;
  int first = 0, last = 0;
  int64_t size = 0;
  std::vector<const Value*> members;
};

class Planner {
 public:
  Planner(const Graph& g, const MemoryPlanOptions& o) : g_(g), o_(o), live_(g) {
    for (size_t i = 0; i < g.outputs().size(); ++i)
      if (!output_index_.count(g.outputs()[i])) output_index_[g.outputs()[i]] = int(i);
  }

  MemoryPlan run() {
    MemoryPlan plan;
    plan.graph = &g_;
    plan.options = o_;
    for (const auto& n : g_.nodes()) visit(*n, plan);
    finish(plan);
    return plan;
  }

 private:
  bool is_user_output(const Value* v) const { return !o_.outputs_in_arena && output_index_.count(v); }

  // The group holding v's bytes; inputs and constants get a read-only group on first use.
  int group_of(const Value* v) {
    auto it = group_of_.find(v);
    if (it != group_of_.end()) return it->second;
    KILN_CHECK(v->is_input() || v->is_constant(), "value {} has no group", v->name());
    Group gr;
    gr.storage = v->is_input() ? Storage::Input : Storage::Constant;
    gr.first = gr.last = -1;
    gr.members.push_back(v);
    groups_.push_back(gr);
    return group_of_[v] = int(groups_.size()) - 1;
  }

  void join(const Value* r, int gi) {
    Group& gr = groups_[gi];
    gr.members.push_back(r);
    gr.last = std::max(gr.last, live_.last_use(g_, r));
    gr.size = std::max(gr.size, int64_t(r->type().nbytes()));
    if (is_user_output(r)) gr.storage = Storage::Output, gr.output_index = output_index_.at(r);
    group_of_[r] = gi;
  }

  int new_group(const Value* r) {
    Group gr;
    gr.first = gr.last = live_.produced(r);
    groups_.push_back(gr);
    join(r, int(groups_.size()) - 1);
    return int(groups_.size()) - 1;
  }

  // Whether r = reshape/identity(x) can share x's bytes.
  bool view_ok(const Value* r, const Value* x) {
    if (r->type().nbytes() != x->type().nbytes()) return false;
    // A reshape reinterprets row-major order; an NHWC tag changes that order.
    if (r->type().layout != x->type().layout) return false;
    if (r->type().layout != Layout::Default && r->shape() != x->shape()) return false;
    if (!output_index_.count(r)) return true;
    const Group& gx = groups_[group_of(x)];
    if (gx.storage == Storage::Input || gx.storage == Storage::Constant) return false;
    // A caller buffer holds one output; in the arena, outputs may share bytes.
    return o_.outputs_in_arena || gx.storage == Storage::Arena;
  }

  // Whether result r of node n (at position t) may overwrite operand x.
  bool in_place_ok(const Node& n, int t, const Value* r, const Value* x, const std::vector<int>& taken) {
    if (x->is_input() || x->is_constant()) return false;
    int gi = group_of(x);
    const Group& gx = groups_[gi];
    if (gx.storage != Storage::Arena || gx.last != t) return false;
    if (std::find(taken.begin(), taken.end(), gi) != taken.end()) return false;
    // Every operand reading these bytes must read element i only for element i.
    std::vector<int> readers;
    for (int k = 0; k < n.num_inputs(); ++k) {
      const Value* in = n.input(k);
      if (in && !in->is_input() && !in->is_constant() && group_of(in) == gi) readers.push_back(k);
    }
    return may_overwrite(n, readers, r);
  }

  void visit(const Node& n, MemoryPlan& plan) {
    int t = live_.pos.at(&n);
    bool view_op = n.op() == "reshape" || n.op() == "identity";
    if (view_op && o_.views && n.num_outputs() == 1 && n.input(0)) {
      const Value* r = n.output(0);
      const Value* x = n.input(0);
      if (view_ok(r, x)) {
        join(r, group_of(x));
        record(plan, r, AliasKind::View, x);
        ++plan.views;
        return;
      }
      ++plan.view_copies;
    }
    bool may_reuse = o_.in_place && !view_op && (n.op() == "fused" || is_pointwise_node(n));
    std::vector<int> taken;  // groups already overwritten by an earlier result of n
    for (int k = 0; k < n.num_outputs(); ++k) {
      const Value* r = n.output(k);
      const Value* over = nullptr;
      // Among dying operands, continue the buffer that started earliest: a
      // residual stream then stays in one long-lived buffer instead of a new
      // one per block, which packs better.
      if (may_reuse)
        for (const Value* x : n.inputs())
          if (x && in_place_ok(n, t, r, x, taken) &&
              (!over || groups_[group_of(x)].first < groups_[group_of(over)].first))
            over = x;
      if (over) {
        int gi = group_of(over);
        taken.push_back(gi);
        join(r, gi);
        record(plan, r, AliasKind::InPlace, over);
        ++plan.in_place;
      } else {
        new_group(r);
        record(plan, r, AliasKind::None, nullptr);
      }
    }
  }

  void record(MemoryPlan& plan, const Value* r, AliasKind kind, const Value* of) {
    ValuePlan vp;
    vp.value = r;
    vp.size = int64_t(r->type().nbytes());
    vp.alias = kind;
    vp.alias_of = of;
    vp.buffer = group_of_.at(r);
    vp.first = live_.produced(r);
    vp.last = live_.last_use(g_, r);
    plan.index[r] = plan.values.size();
    plan.values.push_back(vp);
    if (!output_index_.count(r)) plan.naive_bytes += vp.size;
  }

  void finish(MemoryPlan& plan) {
    // Groups -> buffers (read-only groups of inputs/constants included, so
    // every value names a buffer), then arena offsets.
    plan.buffers.resize(groups_.size());
    for (size_t i = 0; i < groups_.size(); ++i) {
      const Group& gr = groups_[i];
      BufferPlan& b = plan.buffers[i];
      b.storage = gr.storage;
      b.output_index = gr.output_index;
      b.first = gr.first;
      b.last = gr.last;
      b.size = gr.size;
      b.members = gr.members;
    }
    // Workspaces join the packing as buffers live at their node only, then leave the list.
    const size_t value_buffers = plan.buffers.size();
    if (o_.workspace_bytes)
      for (const auto& n : g_.nodes()) {
        const int64_t bytes = o_.workspace_bytes(*n);
        if (bytes <= 0) continue;
        BufferPlan b;
        b.first = b.last = live_.pos.at(n.get());
        b.size = bytes;
        plan.buffers.push_back(b);
        plan.workspaces.push_back({n.get(), b.first, 0, bytes});
      }
    plan.arena_bytes = allocate(plan.buffers, o_.alignment);
    plan.live_peak_bytes = live_peak(plan.buffers, live_.end, o_.alignment);
    for (size_t i = 0; i < plan.workspaces.size(); ++i)
      plan.workspaces[i].offset = plan.buffers[value_buffers + i].offset;
    plan.buffers.resize(value_buffers);
    for (ValuePlan& vp : plan.values) {
      const BufferPlan& b = plan.buffers[vp.buffer];
      vp.storage = b.storage;
      vp.offset = b.offset;
      vp.output_index = b.output_index;
      const ValuePlan* of = vp.alias_of ? plan.find(vp.alias_of) : nullptr;
      vp.root = vp.alias == AliasKind::None ? vp.value : of ? of->root : vp.alias_of;
    }
  }

  // Offline packing: place buffers one by one at the lowest-waste gap among
  // already placed buffers whose live ranges overlap (best fit), trying a few
  // orders and keeping the smallest arena. Sizes are rounded up to the
  // alignment, so every offset stays aligned.
  static int64_t allocate(std::vector<BufferPlan>& bufs, int64_t align) {
    std::vector<int> arena;
    for (int i = 0; i < int(bufs.size()); ++i)
      if (bufs[i].storage == Storage::Arena && bufs[i].size > 0) arena.push_back(i);
    auto sz = [&](int i) { return round_up(bufs[i].size, align); };
    auto len = [&](int i) { return int64_t(bufs[i].last - bufs[i].first + 1); };
    std::vector<std::function<bool(int, int)>> orders = {
        // greedy by size (TFLite, Pisarchyk & Lee 2020), earlier first on ties
        [&](int a, int b) { return std::tuple(-sz(a), bufs[a].first, a) < std::tuple(-sz(b), bufs[b].first, b); },
        // greedy by size, longer-lived first on ties
        [&](int a, int b) { return std::tuple(-sz(a), -len(a), a) < std::tuple(-sz(b), -len(b), b); },
        // largest size x lifetime area first
        [&](int a, int b) { return std::pair(-sz(a) * len(a), a) < std::pair(-sz(b) * len(b), b); },
        // in order of production (what a linear-scan allocator sees)
        [&](int a, int b) { return std::pair(bufs[a].first, a) < std::pair(bufs[b].first, b); },
    };
    int64_t best = -1;
    std::vector<int64_t> best_offsets;
    int positions = 1;
    for (int i : arena) positions = std::max(positions, bufs[i].last + 1);
    for (auto& less : orders) {
      std::vector<int> order = arena;
      std::sort(order.begin(), order.end(), less);
      std::vector<int64_t> off(bufs.size(), 0);
      LiveRangeIndex placed(positions);
      int64_t total = 0;
      std::vector<int> overlapping;
      std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, end) of overlapping placed buffers
      for (int i : order) {
        overlapping.clear();
        placed.overlapping(bufs[i].first, bufs[i].last, overlapping);
        busy.clear();
        for (int p : overlapping) busy.emplace_back(off[p], off[p] + sz(p));
        std::sort(busy.begin(), busy.end());
        int64_t need = sz(i), at = -1, at_gap = 0, end = 0;
        for (auto [b, e] : busy) {
          int64_t gap = b - end;
          if (gap >= need && (at < 0 || gap < at_gap)) at = end, at_gap = gap;
          end = std::max(end, e);
        }
        off[i] = at >= 0 ? at : end;
        total = std::max(total, off[i] + need);
        placed.add(i, bufs[i].first, bufs[i].last);
      }
      if (best < 0 || total < best) best = total, best_offsets = off;
    }
    for (int i : arena) bufs[i].offset = best_offsets[i];
    return std::max<int64_t>(best, 0);
  }

  static int64_t live_peak(const std::vector<BufferPlan>& bufs, int end, int64_t align) {
    std::vector<int64_t> delta(size_t(end) + 2, 0);
    for (const BufferPlan& b : bufs) {
      if (b.storage != Storage::Arena || b.size == 0) continue;
      delta[b.first] += round_up(b.size, align);
      delta[b.last + 1] -= round_up(b.size, align);
    }
    int64_t cur = 0, peak = 0;
    for (int64_t d : delta) peak = std::max(peak, cur += d);
    return peak;
  }

  const Graph& g_;
  MemoryPlanOptions o_;
  Liveness live_;
  std::unordered_map<const Value*, int> output_index_;
  std::unordered_map<const Value*, int> group_of_;
  std::vector<Group> groups_;
};

}  // namespace

MemoryPlan plan_memory(const Graph& g, const MemoryPlanOptions& opts) {
  if (opts.alignment <= 0 || (opts.alignment & (opts.alignment - 1)))
    fail("memory plan: alignment {} is not a power of two", opts.alignment);
  return Planner(g, opts).run();
}

}  // namespace kiln
