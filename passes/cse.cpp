// cse: merges nodes that compute the same thing: same op, same operands
// (the same Values), equal attributes, no body. The later node's results are
// replaced by the earlier one's. Constants with equal bytes are merged too,
// so weights shared by exporters under two names are stored once.
#include <unordered_map>

#include "ops/registry.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

struct Key {
  const Node* n;
  bool operator==(const Key& o) const {
    return n->op() == o.n->op() && n->inputs() == o.n->inputs() && n->num_outputs() == o.n->num_outputs() &&
           n->attrs() == o.n->attrs();
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = std::hash<std::string>()(k.n->op());
    for (const Value* v : k.n->inputs()) h = h * 31 + std::hash<const void*>()(v);
    for (const auto& [name, a] : k.n->attrs()) h = h * 31 + std::hash<std::string>()(name);
    return h;
  }
};

class CommonSubexpressionElimination : public Pass {
 public:
  std::string_view name() const override { return "cse"; }
  bool run(Graph& g, const PassOptions&, PassStats& stats) override {
    bool changed = merge_constants(g, stats);
    std::unordered_map<Key, Node*, KeyHash> seen;
    for (Node* n : g.node_list()) {
      if (n->body()) continue;
      auto [it, inserted] = seen.emplace(Key{n}, n);
      if (inserted) continue;
      Node* first = it->second;
      for (int i = 0; i < n->num_outputs(); ++i) {
        if (n->output(i)->type() != first->output(i)->type()) goto next;
        // A graph output keeps its own value and name (callers bind outputs
        // by name; the pass manager checks it).
        if (g.is_output(n->output(i))) goto next;
      }
      for (int i = 0; i < n->num_outputs(); ++i) g.replace_all_uses(n->output(i), first->output(i));
      g.erase_node(n);
      stats.count("nodes-merged");
      changed = true;
    next:;
    }
    return changed;
  }

 private:
  static bool merge_constants(Graph& g, PassStats& stats) {
    bool changed = false;
    std::unordered_map<uint64_t, std::vector<Value*>> by_digest;
    for (Value* c : std::vector<Value*>(g.constants())) {
      if (!c->has_data() || g.is_output(c)) continue;
      auto& same = by_digest[c->digest()];
      Value* twin = nullptr;
      for (Value* d : same)
        if (d->data().same_bytes(c->data())) twin = d;
      if (!twin) {
        same.push_back(c);
        continue;
      }
      g.replace_all_uses(c, twin);
      stats.count("constants-merged");
      changed = true;
    }
    if (changed) g.remove_unused_constants();
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> create_cse_pass() { return std::make_unique<CommonSubexpressionElimination>(); }

}  // namespace kiln
