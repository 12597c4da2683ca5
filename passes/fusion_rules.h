// The fuser's rules: what each op is to fusion, the groups being built, and
// whether two groups may become one kernel. passes/fuse.cpp drives them;
// passes/fuse_outline.cpp turns the final groups into `fused` nodes.
//
// A group is one future GPU kernel. It has at most one anchor:
//  - none (Plain): pointwise and injective ops evaluated on demand over one
//    iteration space, so every value it writes has one shape;
//  - Compute: conv / conv_transpose / gemm / matmul / attention, plus an
//    epilogue applied to each output element as it is stored;
//  - Reduction: softmax, layer_normalization, reduce_*, pooling... plus a
//    prologue (a Plain group computing its data operand while it is read)
//    and an epilogue;
//  - Attention: matmul -> pointwise -> softmax(last axis) -> pointwise ->
//    matmul, softmax(QK^T)V as one flash-attention kernel, plus an epilogue.
// Epilogue values carry a "map id": values with the same id hold the same
// elements of the anchor's output in the same order (pointwise ops and
// reshapes keep the id, transpose and split start new ones). An epilogue op
// may combine only in-group values of one id and one shape, so each output
// element is produced from one accumulator element: no broadcast of
// in-group values, no mixing of different elements.
#pragma once
#include <string>
#include <unordered_map>
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
Role op_role(const Node& n);

enum class GroupKind { Plain, Compute, Reduction, Attention };

struct Group {
  std::vector<Node*> nodes;  // members in the order they joined
  Node* anchor = nullptr;    // the compute/reduction op (the second matmul for attention)
  GroupKind kind = GroupKind::Plain;
  bool alive = true;         // false once merged into another group
};

// The kind attribute of the fused node made from a group.
std::string group_kind_name(const Group& g);

// Every node of a graph starts in a group of its own; merging joins them.
class FusionState {
 public:
  explicit FusionState(const Graph& g);

  const Graph& graph() const { return g_; }
  int group_of(const Node* n) const { return group_.at(n); }
  Group& group(int id) { return groups_[id]; }
  const Group& group(int id) const { return groups_[id]; }
  int num_groups() const { return static_cast<int>(groups_.size()); }
  int position(const Node* n) const { return pos_.at(n); }
  // Group of the node producing `v`, or -1 for inputs and constants.
  int group_of_value(const Value* v) const;

  // Values of groups a and b (b may be -1) that nodes outside them use or the
  // graph returns: what the fused node would have to write.
  std::vector<Value*> escaping(int a, int b = -1) const;
  // True when joining these groups would make a cycle: a path leaving their
  // union and coming back into it.
  bool would_cycle(const std::vector<int>& parts) const;
  // Moves b's nodes into a. Kind and anchor are the caller's business.
  void merge(int a, int b);

  // Map ids of epilogue values (-1: none, e.g. a reduction's prologue).
  int map_id(const Value* v) const;
  void set_map_id(const Value* v, int id) { map_[v] = id; }
  int new_map_id() { return next_map_++; }

 private:
  const Graph& g_;
  std::vector<Group> groups_;
  std::unordered_map<const Node*, int> group_, pos_;
  std::unordered_map<const Value*, int> map_;
  int next_map_ = 0;
};

// Each check returns "" when the merge is legal, else why not (for --stats).
// Anchored group `g` takes `c` into its epilogue (c is a singleton).
std::string check_epilogue(const FusionState& s, int g, const Node& c);
// Two groups without anchors become one (c's group and a producer's group).
std::string check_plain(const FusionState& s, int a, int b);
// Plain group `p` becomes the prologue of reduction `r` (a singleton).
std::string check_prologue(const FusionState& s, int p, const Node& r);
// matmul `m2` closes an attention kernel: its operand 0 comes from a softmax
// group whose input comes from a matmul group. Sets `scores` and `probs`.
std::string check_attention(const FusionState& s, const Node& m2, int& scores, int& probs);

// "%name" of a value for messages, "(unnamed)" when it has no name.
std::string value_label(const Value* v);

}  // namespace kiln::fusion
