// dce: removes nodes none of whose results reach a graph output, and
// constants nobody reads. Walks the order backwards so a dead chain goes in
// one sweep. Graph inputs stay even when unused: callers bind them by name.
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

class DeadCodeElimination : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  bool run(Graph& g, const PassOptions&, PassStats& stats) override {
    bool changed = false;
    std::vector<Node*> order = g.node_list();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node* n = *it;
      bool live = false;
      for (Value* o : n->outputs()) live |= o->has_uses() || g.is_output(o);
      if (live) continue;
      g.erase_node(n);
      stats.count("nodes-removed");
      changed = true;
    }
    int consts = g.remove_unused_constants();
    if (consts) stats.count("constants-removed", consts);
    return changed || consts > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> create_dce_pass() { return std::make_unique<DeadCodeElimination>(); }

}  // namespace kiln
