// share-transposed-weights: a matmul by the transpose of a rank-2 constant
// that other nodes read as it is becomes a gemm reading the constant with
// trans_b, so the plan stores the weight once:
//   e = gather(W, ids); ...; y = matmul(x, transpose(W))     (x: [b, s, K])
//   ->  y = reshape(gemm(reshape(x, [b*s, K]), W) {trans_b=1}, [b, s, N])
// Language models with tied embeddings export exactly this (GPT-2's lm_head:
// MatMul(h, Transpose(wte)) next to Gather(wte, ids)); fold-constants would
// otherwise store a transposed copy of the embedding beside it (GPT-2: 154 MB
// of 651 MB). The GEMM emitter and the reference read B as [N, K] with
// trans_b (K contiguous, the layout tensor-core GEMMs load best), so nothing
// is copied at run time either.
//
// Left alone: a transpose whose constant nothing reads as it is (folding it
// stores the weight once, transposed: plans of such models are unchanged),
// also when only transposes read it (ALBERT's layers share one weight, each
// transposing it; cse keeps one folded copy), and a weight computed at run
// time. The left operand's dims before K become the gemm's rows (their
// product, symbolic where they are: [batch, seq, K] -> [batch*seq, K]). It
// runs first in the pipeline, before fold-constants folds the transpose.
#include <optional>

#include "ir/symbolic_dim.h"
#include "passes/pass.h"
#include "passes/pass_list.h"
#include "passes/rewrite_util.h"

namespace kiln {
namespace {

bool swaps_two_dims(const Node& t) {
  if (t.op() != "transpose" || t.num_inputs() != 1 || !t.input(0) || t.input(0)->type().rank() != 2) return false;
  std::vector<int64_t> perm = t.attrs().get_ints("perm", {1, 0});  // no perm: reversed dims
  return perm == std::vector<int64_t>{1, 0};
}

// The constant `w` is read as it is (by a node other than a transpose like
// `t`, or returned): folding `t` would store it twice. Only transposes of it
// (ALBERT's layers sharing one weight, each transposing it) fold into one
// transposed constant that cse keeps once: left to that.
bool read_as_is(const Graph& g, const Value* w) {
  if (g.is_output(w)) return true;
  for (const Use& u : w->uses())
    if (!swaps_two_dims(*u.user)) return true;
  return false;
}

class ShareTransposedWeights : public Pass {
 public:
  std::string_view name() const override { return "share-transposed-weights"; }

  bool run(Graph& g, const PassOptions&, PassStats& stats) override {
    bool changed = false;
    std::optional<rewrite::NameSet> names;  // built at the first rewrite
    for (Node* n : g.node_list()) {
      if (n->op() != "matmul" || n->num_inputs() != 2 || !n->input(0) || !n->input(1)) continue;
      Node* t = n->input(1)->producer();
      if (!t || !swaps_two_dims(*t)) continue;
      Value* w = t->input(0);
      if (!w->is_constant() || !read_as_is(g, w)) continue;
      Value* x = n->input(0);
      if (x->type().rank() < 2 || x->dtype() != w->dtype()) continue;
      if (!names) names.emplace(g);
      rewrite(g, n, x, w, *names);
      rewrite::erase_if_dead(g, t);
      stats.count("matmuls-reading-weights-transposed");
      changed = true;
    }
    return changed;
  }

 private:
  static void rewrite(Graph& g, Node* n, Value* x, Value* w, rewrite::NameSet& fresh) {
    const TensorType& xt = x->type();
    // The rows: the product of the dims before K (batch*seq where symbolic).
    int64_t M = 1;
    for (size_t d = 0; d + 1 < xt.shape.size(); ++d) M = dim_mul(M, xt.shape[d]);
    const int64_t K = xt.shape.back(), N = w->shape()[0];
    Value* a = x;
    if (xt.rank() != 2) {
      AttrMap ra;
      ra.set("shape", Shape{M, K});
      a = g.add_node("reshape", {x}, {TensorType(xt.dtype, {M, K})}, std::move(ra), n->name(), n)->output();
      a->set_name(fresh.fresh(n->output()->name() + ".rows"));
    }
    AttrMap ga;
    ga.set("trans_b", int64_t(1));
    Node* gemm = g.add_node("gemm", {a, w}, {TensorType(xt.dtype, {M, N})}, std::move(ga), n->name(), n);
    Value* y = gemm->output();
    if (xt.rank() != 2) {
      y->set_name(fresh.fresh(n->output()->name() + ".gemm"));
      AttrMap ra;
      ra.set("shape", n->output()->shape());
      y = g.add_node("reshape", {y}, {n->output()->type()}, std::move(ra), n->name(), n)->output();
    }
    rewrite::replace_node_result(g, n, y);
  }
};

}  // namespace

std::unique_ptr<Pass> create_share_transposed_weights_pass() { return std::make_unique<ShareTransposedWeights>(); }

}  // namespace kiln
