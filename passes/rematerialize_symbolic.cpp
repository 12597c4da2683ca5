// rematerialize-symbolic: gives each reader of a value computed from the
// graph's symbols alone its own copy of the nodes computing it, so the
// fuser can compute the value inside each reader's kernel instead of
// launching a kernel that stores it for all of them.
//
//   %pos = add(range(0, seq), splat<past>)        (before: one kernel writes
//   %cos = cos(mul(cast(%pos), %inv_freq))         %cos and %sin, and each
//   %q1  = mul(%q, %cos)    %k1 = mul(%k, %cos)    rotary kernel reads them)
//
//   %q1 = mul(%q, cos(mul(cast(add(range(0, seq), past)), %inv_freq)))
//   %k1 = mul(%k, cos(...a copy of its own...))   (after)
//
// A static graph has no such values: fold-constants folds everything
// computed from constants. With shape profiles the positions of a decoder
// (starting at `past`) and what is computed from them (rotary cos/sin) stay
// nodes, because their sizes and values change with the shape; computing
// them per element from the kernel's symbols costs a few instructions, a
// launch of their own costs a few microseconds at batch 1.
//
// Copied: nodes with one result, no region, and a pointwise, injective or
// view role for the fuser (passes/fusion_state.h: a range is injective),
// whose operands are constants or such nodes' results; at most kMaxCone
// nodes per copy; only for readers that can compute it in their own kernel
// (absorbs_a_copy). Left alone: a value read by one node only (nothing to
// share), and the original of a value that is a graph output (callers bind
// it by name). A reader gets a copy of every node computing the value when
// any of them has another reader. Originals nobody reads any more are erased.
#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "passes/fusion_state.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

constexpr size_t kMaxCone = 64;

bool copyable(const Node& n, const std::unordered_set<const Node*>& symbolic) {
  if (n.body() || n.num_outputs() != 1 || n.num_inputs() == 0) return false;
  fusion::Role r = fusion::op_role(n);
  if (r != fusion::Role::Pointwise && r != fusion::Role::Injective && r != fusion::Role::View) return false;
  for (const Value* v : n.inputs())
    if (!v || (!v->is_constant() && !(v->producer() && symbolic.count(v->producer())))) return false;
  return true;
}

// Whether the fuser can compute a copied value inside the reader's own kernel:
// a pointwise, injective, view or reduction reader. An anchor (attention,
// GEMM, conv) or an opaque op reads its operands from memory, so a copy of
// its own would be a kernel of its own: such readers share the original
// (GPT-2's causal mask, read by every layer's attention, stays one kernel).
bool absorbs_a_copy(const Node& reader) {
  fusion::Role r = fusion::op_role(reader);
  return r == fusion::Role::Pointwise || r == fusion::Role::Injective || r == fusion::Role::View ||
         r == fusion::Role::Reduction;
}

class RematerializeSymbolic : public Pass {
 public:
  std::string_view name() const override { return "rematerialize-symbolic"; }
  bool run(Graph& g, const PassOptions&, PassStats& stats) override {
    if (g.symbols().empty()) return false;
    std::unordered_set<const Node*> symbolic;
    std::vector<Node*> order;
    for (Node* n : g.node_list())
      if (copyable(*n, symbolic)) {
        symbolic.insert(n);
        order.push_back(n);
      }
    if (symbolic.empty()) return false;
    // The readers outside the symbolic nodes each one reaches (nullptr: a graph output).
    std::unordered_map<const Node*, std::set<const Node*>> readers;
    std::unordered_map<const Node*, size_t> cone;  // nodes computing each one's value
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Node* n = *it;
      std::set<const Node*>& r = readers[n];
      if (g.is_output(n->output(0))) r.insert(nullptr);
      for (const Use& u : n->output(0)->uses()) {
        if (symbolic.count(u.user)) r.insert(readers[u.user].begin(), readers[u.user].end());
        else r.insert(u.user);
      }
    }
    for (const Node* n : order) {
      size_t c = 1;
      for (const Value* v : n->inputs())
        if (v->producer()) c += cone[v->producer()];
      cone[n] = c;
    }
    bool changed = false;
    for (Node* c : g.node_list()) {
      if (symbolic.count(c) || !absorbs_a_copy(*c)) continue;
      std::unordered_map<const Value*, Value*> copies;  // this reader's
      for (int i = 0; i < c->num_inputs(); ++i) {
        Value* v = c->input(i);
        if (!v || !v->producer() || !symbolic.count(v->producer())) continue;
        if (!shared(v->producer(), c, readers)) continue;  // its own already
        if (cone[v->producer()] > kMaxCone) {
          stats.count("cones-too-large");
          continue;
        }
        c->set_input(i, copy_for(g, v, c, copies, stats));
        changed = true;
      }
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it)
      if (!(*it)->output(0)->has_uses() && !g.is_output((*it)->output(0))) {
        g.erase_node(*it);
        stats.count("originals-erased");
      }
    return changed;
  }

 private:
  // Whether a node computing n's value (n included) has a reader other than `c`.
  static bool shared(const Node* n, const Node* c,
                     const std::unordered_map<const Node*, std::set<const Node*>>& readers) {
    const std::set<const Node*>& r = readers.at(n);
    if (r.size() != 1 || *r.begin() != c) return true;
    for (const Value* v : n->inputs())
      if (v->producer() && shared(v->producer(), c, readers)) return true;
    return false;
  }

  // v's value computed by copies of its nodes placed before `reader`.
  static Value* copy_for(Graph& g, Value* v, Node* reader, std::unordered_map<const Value*, Value*>& copies,
                         PassStats& stats) {
    if (v->is_constant()) return v;
    if (auto it = copies.find(v); it != copies.end()) return it->second;
    const Node* n = v->producer();
    std::vector<Value*> ins;
    for (Value* in : n->inputs()) ins.push_back(copy_for(g, in, reader, copies, stats));
    Node* m = g.add_node(n->op(), std::move(ins), {v->type()}, n->attrs(), n->name(), reader);
    if (!v->name().empty()) m->output(0)->set_name(v->name() + ".for." + reader_label(*reader));
    stats.count("nodes-copied");
    copies[v] = m->output(0);
    return m->output(0);
  }

  // The reader's first result's name, else its op.
  static std::string reader_label(const Node& r) {
    if (r.num_outputs() > 0 && !r.output(0)->name().empty()) return r.output(0)->name();
    return r.op();
  }
};

}  // namespace

std::unique_ptr<Pass> create_rematerialize_symbolic_pass() { return std::make_unique<RematerializeSymbolic>(); }

}  // namespace kiln
