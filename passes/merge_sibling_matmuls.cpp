// merge-sibling-matmuls: matmuls that multiply the same value by different
// constant weights become one matmul by the weights concatenated along N,
// followed by a split (horizontal fusion, as TensorRT does):
//   q = matmul(x, Wq); k = matmul(x, Wk); v = matmul(x, Wv)
//   ->  qkv = matmul(x, concat(Wq, Wk, Wv)); q, k, v = split(qkv)
// One wider GEMM uses the GPU better than three narrow ones, and the fuser
// then stores the split parts (and each part's bias, head split...) in the
// GEMM's epilogue: BERT's query/key/value projections become one kernel.
//
// Applies to matmuls whose operand 0 is the same value and whose operand 1 is
// a rank-2 constant with data, of one dtype. The concatenated weight is a new
// constant; the old ones go when nothing else reads them. Left alone: gemm
// (alpha/beta/transposes), weights computed at run time or loaded by
// reference only (no bytes to concatenate), and a lone matmul.
//
// Models that share weights across layers (ALBERT: every layer reads the same
// Wq, Wk, Wv) have several sibling sets with the same weights: they share one
// concatenated constant, and every new value gets a fresh name (two values
// called %"wq+wk+wv" would break the graph).
#include <fmt/format.h>

#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>

#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

bool mergeable(const Node& n) {
  if (n.op() != "matmul" || n.num_inputs() != 2 || !n.input(0) || !n.input(1)) return false;
  const Value* w = n.input(1);
  return w->is_constant() && w->has_data() && w->type().rank() == 2 && n.input(0)->type().rank() >= 2;
}

// concat(ws, axis=1) of rank-2 tensors with equal rows and dtype.
Tensor concat_columns(const std::vector<const Tensor*>& ws) {
  int64_t rows = ws[0]->shape()[0], cols = 0;
  for (const Tensor* w : ws) cols += w->shape()[1];
  Tensor out(ws[0]->dtype(), {rows, cols});
  size_t esize = dtype_size(out.dtype());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t r = 0; r < rows; ++r)
    for (const Tensor* w : ws) {
      size_t row_bytes = static_cast<size_t>(w->shape()[1]) * esize;
      if (row_bytes == 0) continue;
      std::memcpy(dst, static_cast<const uint8_t*>(w->raw()) + r * row_bytes, row_bytes);
      dst += row_bytes;
    }
  return out;
}

class MergeSiblingMatmuls : public Pass {
 public:
  std::string_view name() const override { return "merge-sibling-matmuls"; }

  bool run(Graph& g, const PassOptions&, PassStats& stats) override {
    // Siblings by (operand 0, weight dtype), in graph order.
    std::vector<std::vector<Node*>> sets;
    std::unordered_map<const Value*, std::vector<size_t>> by_input;
    for (Node* n : g.node_list()) {
      if (!mergeable(*n)) continue;
      size_t* found = nullptr;
      for (size_t& i : by_input[n->input(0)])
        if (sets[i][0]->input(1)->dtype() == n->input(1)->dtype()) found = &i;
      if (found) {
        sets[*found].push_back(n);
      } else {
        by_input[n->input(0)].push_back(sets.size());
        sets.push_back({n});
      }
    }
    bool changed = false;
    // Built at the first merge: collecting every name of a graph with no
    // siblings to merge cost more than the pass's walk.
    std::optional<rewrite::NameSet> names;
    std::map<std::vector<const Value*>, Value*> concats;  // weights -> their concatenation
    for (const auto& set : sets) {
      if (set.size() < 2) continue;
      if (!names) names.emplace(g);
      merge(g, set, *names, concats);
      stats.count("matmuls-merged", static_cast<int64_t>(set.size()));
      changed = true;
    }
    if (changed) g.remove_unused_constants();
    return changed;
  }

 private:
  static void merge(Graph& g, const std::vector<Node*>& set, rewrite::NameSet& fresh,
                    std::map<std::vector<const Value*>, Value*>& concats) {
    std::vector<const Tensor*> ws;
    std::vector<const Value*> wvals;
    std::vector<std::string> names, wnames;
    std::vector<int64_t> widths;
    for (Node* n : set) {
      ws.push_back(&n->input(1)->data());
      wvals.push_back(n->input(1));
      widths.push_back(n->input(1)->shape()[1]);
      wnames.push_back(n->input(1)->name());
      if (!n->name().empty()) names.push_back(n->name());
    }
    Value*& w = concats[wvals];
    if (!w) w = g.add_constant(fresh.fresh(fmt::format("{}", fmt::join(wnames, "+"))), concat_columns(ws));
    TensorType out = set[0]->output(0)->type();
    int axis = out.rank() - 1;
    int64_t total = 0;
    for (int64_t n : widths) total += n;
    out.shape[axis] = total;
    std::string name = fmt::format("{}", fmt::join(names, "+"));
    Node* m = g.add_node("matmul", {set[0]->input(0), w}, {out}, {}, name, set[0]);
    std::vector<TensorType> parts;
    for (Node* n : set) parts.push_back(n->output(0)->type());
    AttrMap sa;
    sa.set("axis", int64_t(axis));
    sa.set("split", widths);
    Node* split = g.add_node("split", {m->output(0)}, parts, std::move(sa), name, set[0]);
    m->output(0)->set_name(fresh.fresh(set[0]->output(0)->name() + ".merged"));
    for (size_t i = 0; i < set.size(); ++i) {
      std::string keep = set[i]->output(0)->name();
      g.replace_all_uses(set[i]->output(0), split->output(static_cast<int>(i)));
      g.erase_node(set[i]);
      split->output(static_cast<int>(i))->set_name(keep);
    }
  }
};

}  // namespace

std::unique_ptr<Pass> create_merge_sibling_matmuls_pass() { return std::make_unique<MergeSiblingMatmuls>(); }

}  // namespace kiln
