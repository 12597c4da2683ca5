// The fuser's bookkeeping: which group (future kernel) each node is in, and
// the two questions the rules ask of a candidate merge, answered in time
// that does not grow with the size of the groups or of the graph
// (docs/fusion.md, "Compile cost"):
//  - escaping(a, b): what the merged group would have to write. Each group
//    keeps the list of its values used outside it (or returned), so only
//    that frontier is looked at, not every member;
//  - would_cycle(parts): whether a path leaves the union and comes back.
//    The graph of groups (the quotient) is kept acyclic with a topological
//    index per group, updated on each merge (Pearce and Kelly's dynamic
//    topological order); a path out of the union and back can only pass
//    through groups whose index lies between the parts', so the search
//    stays inside that window.
// Group ids are stable: the id passed first to merge() survives, and the
// groups left at the end are walked in id order (= original node order of
// their first member), so which nodes end up together, and in which fused
// node, is what the old whole-group walks decided.
#pragma once
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"

namespace kiln::fusion {

enum class Role {
  Opaque,     // never fused (irregular compute ops, fused nodes, ops with no results)
  View,       // reshape, identity: no kernel of their own
  Pointwise,  // OpCategory::Pointwise
  Injective,  // OpCategory::Injective other than views (transpose, slice, gather, split...)
  Reduction,  // OpCategory::Reduction: anchors a reduction kernel
  Compute,    // conv, conv_transpose, gemm, matmul, attention: anchors an epilogue kernel
};
// What an op is to fusion (the starting groups follow it).
Role op_role(const Node& n);

enum class GroupKind { Plain, Compute, Reduction, Attention };

struct Group {
  // Members in no particular order: a merge appends the smaller list to the
  // larger one, so moving members costs O(n log n) over the whole pass.
  std::vector<Node*> nodes;
  Node* anchor = nullptr;  // the compute/reduction op (the second matmul for attention)
  GroupKind kind = GroupKind::Plain;
  bool alive = true;  // false once merged into another group
  int non_views = 0;  // members that are not views (reshape/identity)
  // A Compute group's layer norm (check_row_norm): its epilogue then takes
  // pointwise ops only, as a reduction's does.
  const Node* row_norm = nullptr;
};

// Every node of a graph starts in a group of its own; merging joins them.
class FusionState {
 public:
  explicit FusionState(const Graph& g);

  const Graph& graph() const { return g_; }
  int group_of(const Node* n) const;
  Group& group(int id) { return groups_[id]; }
  const Group& group(int id) const { return groups_[id]; }
  int num_groups() const { return static_cast<int>(groups_.size()); }
  int position(const Node* n) const { return pos_.at(n); }
  // Group of the node producing `v`, or -1 for inputs and constants.
  int group_of_value(const Value* v) const;

  // Values of groups a and b (b may be -1) that nodes outside them use or the
  // graph returns: what the fused node would have to write. In the order of
  // the members that produce them (a's before b's, each in the order its
  // members joined), so messages name the same value first every time.
  std::vector<Value*> escaping(int a, int b = -1) const;
  // True when joining these groups would make a cycle: a path leaving their
  // union and coming back into it.
  bool would_cycle(const std::vector<int>& parts) const;
  // Moves the nodes of `others` into a, in that order; their union must be
  // convex (would_cycle false). Kind and anchor are the caller's business.
  void merge(int a, const std::vector<int>& others);
  void merge(int a, int b) { merge(a, std::vector<int>{b}); }

  // Map ids of epilogue values (-1: none, e.g. a reduction's prologue).
  int map_id(const Value* v) const;
  void set_map_id(const Value* v, int id) { map_[v] = id; }
  int new_map_id() { return next_map_++; }

 private:
  int find(int x) const;
  bool escapes(const Value* v, int a, int b) const;
  // Groups outside `parts` reachable from them (forward) or reaching them
  // (backward) through groups whose topological index lies strictly between
  // the parts' lowest and highest. Returns true when such a path re-enters
  // the parts (the union would not be convex); stops there when `stop_at_cycle`.
  bool window_search(const std::vector<int>& parts, bool forward, bool stop_at_cycle, std::vector<int>* found) const;
  void reorder(const std::vector<int>& parts, int a);

  const Graph& g_;
  std::vector<Group> groups_;
  std::unordered_map<const Node*, int> pos_;  // original position = starting group id
  std::unordered_set<const Value*> outputs_;
  // Union-find over starting group ids; label_[root] is the surviving group id.
  mutable std::vector<int> parent_;
  std::vector<int> size_, label_;
  // Topological index of each live group in the graph of groups.
  std::vector<int> ord_;
  // Per group: its values used outside it or returned (the frontier), in
  // join order; and the node results from outside it that it reads.
  std::vector<std::vector<Value*>> out_;
  std::vector<std::vector<const Value*>> in_;
  // Visit marks for window_search (a fresh stamp per search, no clearing).
  mutable std::vector<int> seen_;
  mutable int stamp_ = 0;
  std::unordered_map<const Value*, int> map_;
  int next_map_ = 0;
};

}  // namespace kiln::fusion
