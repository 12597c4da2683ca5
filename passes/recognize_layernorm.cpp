// recognize-patterns, layer norm part: anchors on each sqrt node and matches
// the two decompositions of layer normalization over the trailing axes
// [axis, rank) (reduce_mean with keepdims=1, axes exactly that suffix):
//   torch (older exports):  d = x - mean(x); var = mean(d^2)      (d^2 as pow(d, 2) or d * d)
//   ONNX function expansion: var = mean(x^2) - mean(x)^2; d = x - mean(x)
// then sd = sqrt(var + eps), n = d / sd (or d * reciprocal(sd)), then
// optionally * gamma and + beta when they vary only along the normalized dims
// (identity casts between the steps are looked through) ->
// layer_normalization(x, gamma or ones, beta?) {axis, epsilon}.
// Every intermediate is used only inside the pattern, except that with an f32
// x the mean and reciprocal(sd) may have users after the pattern: they take
// the op's mean and inv_std_dev results (what the ONNX expansion returns).
// The ONNX expansion's E[x^2] - E[x]^2 becomes the op's two-pass variance,
// which is at least as accurate.
#include <cmath>
#include <set>

#include "passes/pattern_util.h"
#include "passes/recognize_patterns.h"

namespace kiln::patterns {
namespace {

// pow(v, 2) or v * v: returns v.
Value* square_base(Value* sq) {
  Node* p = sq->producer();
  if (!p) return nullptr;
  if (p->op() == "mul" && p->input(0) == p->input(1)) return p->input(0);
  if (p->op() == "pow" && is_const_near(p->input(1), 2.0)) return p->input(0);
  return nullptr;
}

// reduce_mean(x) over [k, rank) with keepdims: returns k, or -1.
int mean_axis(const Node* r) {
  if (!r || r->op() != "reduce_mean" || r->attrs().get_int("keepdims", 1) != 1) return -1;
  std::vector<int64_t> axes = r->attrs().get_ints("axes");
  int rank = r->input(0)->type().rank();
  if (axes.empty() || axes.back() != rank - 1) return -1;
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[i - 1] + 1) return -1;
  return static_cast<int>(axes.front());
}

// `p` can be layer norm's scale/bias for x normalized from `axis`: a float of
// x's dtype whose broadcast to x varies only along [axis, rank).
bool suffix_param(const Value* p, const Value* x, int axis) {
  const Shape &ps = p->shape(), &xs = x->shape();
  if (p->dtype() != x->dtype() || ps.size() > xs.size()) return false;
  size_t off = xs.size() - ps.size();
  for (size_t j = 0; j < ps.size(); ++j) {
    if (ps[j] != 1 && ps[j] != xs[off + j]) return false;
    if (static_cast<int>(off + j) < axis && ps[j] != 1) return false;
  }
  return true;
}

// All uses of `v` are by nodes in `inside` (v is no graph output).
bool used_only_by(const Graph& g, const Value* v, const std::set<Node*>& inside) {
  if (g.is_output(v)) return false;
  for (const Use& u : v->uses())
    if (!inside.count(u.user)) return false;
  return true;
}

// The sole user of `v`, skipping identity casts (added to `chain`); `v` is
// updated to the value that user reads.
Node* next_user(const Graph& g, Value*& v, std::vector<Node*>& chain) {
  while (single_use(g, v)) {
    Node* u = v->uses()[0].user;
    if (!is_identity_cast(u)) return u;
    chain.push_back(u);
    v = u->output();
  }
  return nullptr;
}

struct LayerNormMatch {
  Value* x = nullptr;
  Value* mean = nullptr;  // reduce_mean(x)
  Value* d = nullptr;     // x - mean
  int axis = -1;
  double eps = 0;
  std::vector<Node*> chain;
};

// From sqrt(var + eps) back to x; fills everything but the normalization step.
bool match_statistics(const Graph& g, Node* sqrt, LayerNormMatch& m) {
  Value* ve = sqrt->input(0);
  Node* add = producer(ve, "add");
  if (!add || !single_use(g, ve)) return false;
  Value* var = nullptr;
  for (int side = 0; side < 2 && !var; ++side) {
    std::optional<double> e = uniform_value(add->input(1 - side));
    if (e && *e >= 0 && std::isfinite(*e) && add->output()->type() == add->input(side)->type()) {
      var = add->input(side);
      m.eps = *e;
    }
  }
  if (!var || !single_use(g, var)) return false;
  m.chain = {sqrt, add};
  if (Node* r2 = producer(var, "reduce_mean")) {  // torch: mean((x - mean)^2)
    Value* sq = r2->input(0);
    Value* d = single_use(g, sq) ? square_base(sq) : nullptr;
    if (!d || sq->type() != d->type()) return false;
    Node* sub = producer(d, "sub");
    if (!sub || !(m.mean = sub->input(1)) || !(m.x = sub->input(0))) return false;
    m.d = d;
    m.axis = mean_axis(r2);
    m.chain.insert(m.chain.end(), {r2, sq->producer(), sub});
  } else if (Node* vs = producer(var, "sub")) {  // ONNX: mean(x^2) - mean(x)^2
    Value *ex2 = vs->input(0), *m2 = vs->input(1);
    Node* r2 = producer(ex2, "reduce_mean");
    if (!r2 || !single_use(g, ex2) || !single_use(g, m2) || !single_use(g, r2->input(0))) return false;
    m.x = square_base(r2->input(0));
    m.mean = square_base(m2);
    if (!m.x || !m.mean || r2->input(0)->type() != m.x->type() || m2->type() != m.mean->type()) return false;
    m.axis = mean_axis(r2);
    m.chain.insert(m.chain.end(), {vs, r2, r2->input(0)->producer(), m2->producer()});
    for (const Use& u : m.mean->uses())
      if (u.user->op() == "sub" && u.user->input(0) == m.x && u.user->input(1) == m.mean) m.d = u.user->output();
    if (!m.d) return false;
    m.chain.push_back(m.d->producer());
  } else {
    return false;
  }
  Node* r1 = producer(m.mean, "reduce_mean");
  if (!r1 || r1->input(0) != m.x || mean_axis(r1) != m.axis || m.axis < 0 || !is_float(m.x->dtype())) return false;
  if (m.d->type() != m.x->type()) return false;
  m.chain.push_back(r1);
  return true;
}

}  // namespace

int recognize_layer_norm(Graph& g, PassStats& stats) {
  // Anchors first: a match erases one sqrt, its own anchor, and no other.
  std::vector<Node*> anchors;
  for (Node* n : g.node_list())
    if (n->op() == "sqrt") anchors.push_back(n);
  int rewritten = 0;
  for (Node* sqrt : anchors) {
    LayerNormMatch m;
    if (!match_statistics(g, sqrt, m)) continue;
    Value* sd = sqrt->output();
    // n = d / sd or d * reciprocal(sd); other reciprocal(sd) nodes give inv_std_dev.
    Node* norm = nullptr;
    std::vector<Node*> recips;
    bool bad = g.is_output(sd);
    for (const Use& u : sd->uses()) {
      Node* n = u.user;
      if (n->op() == "div" && n->input(0) == m.d && n->input(1) == sd && !norm) norm = n;
      else if (n->op() == "reciprocal") recips.push_back(n);
      else bad = true;
    }
    if (bad) continue;
    for (size_t i = 0; i < recips.size() && !norm; ++i)
      for (const Use& u : recips[i]->output()->uses())
        if (u.user->op() == "mul" && other_operand(u.user, recips[i]->output()) == m.d) norm = u.user;
    if (!norm || norm->output()->type() != m.x->type()) continue;
    m.chain.push_back(norm);
    m.chain.insert(m.chain.end(), recips.begin(), recips.end());
    // Scale and bias: y * gamma, then + beta, each optional.
    std::vector<Node*> tail = m.chain;
    Value* y = norm->output();
    Value *gamma = nullptr, *beta = nullptr;
    auto step = [&](const char* op, Value*& param) {
      Value* v = y;
      std::vector<Node*> casts;
      Node* u = next_user(g, v, casts);
      Value* p = u && u->op() == op ? other_operand(u, v) : nullptr;
      if (!p || !suffix_param(p, m.x, m.axis) || u->output()->type() != v->type()) return;
      param = p;
      tail.insert(tail.end(), casts.begin(), casts.end());
      tail.push_back(u);
      y = u->output();
    };
    step("mul", gamma);
    step("add", beta);
    Node* last = y->producer();
    // Intermediates used only inside; the mean and 1/sd may also feed later nodes.
    std::set<Node*> inside(tail.begin(), tail.end());
    std::vector<Value*> ext_mean_inv[2];
    bool ok = true;
    for (Node* n : tail) {
      if (n == last) continue;
      bool stat = n->output() == m.mean || n->op() == "reciprocal";
      if (used_only_by(g, n->output(), inside)) continue;
      if (!stat || m.x->dtype() != DType::F32) ok = false;
      for (const Use& use : n->output()->uses())
        if (!inside.count(use.user) && !comes_before(g, last, use.user)) ok = false;
      ext_mean_inv[n->op() == "reciprocal" ? 1 : 0].push_back(n->output());
    }
    for (Value* p : {gamma, beta})
      if (p && p->producer() && inside.count(p->producer())) ok = false;
    if (!ok) continue;
    int outputs = !ext_mean_inv[1].empty() ? 3 : !ext_mean_inv[0].empty() ? 2 : 1;
    if (!gamma) {
      Shape norm_shape(m.x->shape().begin() + m.axis, m.x->shape().end());
      Tensor ones(m.x->dtype(), norm_shape);
      for (int64_t i = 0; i < ones.numel(); ++i) ones.set_double(i, 1.0);
      gamma = g.add_constant((y->name().empty() ? "layer_norm" : y->name()) + ".ones", std::move(ones));
    }
    std::vector<Value*> ins = {m.x, gamma};
    if (beta) ins.push_back(beta);
    AttrMap attrs;
    attrs.set("axis", int64_t(m.axis));
    attrs.set("epsilon", float(m.eps));
    Node* ln = make_node(g, "layer_normalization", ins, std::move(attrs), joined_names(g, tail), last, outputs);
    std::string names[3] = {y->name()};
    g.replace_all_uses(y, ln->output(0));
    for (int k = 0; k < 2; ++k)
      for (Value* v : ext_mean_inv[k]) {
        if (names[k + 1].empty()) names[k + 1] = v->name();
        g.replace_all_uses(v, ln->output(k + 1));
      }
    erase_dead(g, tail);
    for (int k = 0; k < outputs; ++k) ln->output(k)->set_name(names[k]);
    stats.count("layer-norm");
    ++rewritten;
  }
  return rewritten;
}

}  // namespace kiln::patterns
