// recognize-patterns, attention part: anchors on each softmax over the last
// axis and matches
//   p = softmax(mask_ops(scale_ops(matmul(q', k'))))
//   out = matmul(p', v)
// where, walking back from the softmax:
//   mask_ops  at most one add of an additive mask (either operand) and one
//             where(cond, s, fill) / where(cond, fill, s) with fill very
//             negative, in either order. A constant lower-triangular mask or
//             cond (aligned to the bottom right, Sq <= Sk) becomes causal=1;
//             so does one computed from ranges that is causal at every
//             shape (a decoder's mask starting at `past`:
//             passes/causal_mask_symbolic.h);
//             any other where becomes the additive mask where(cond, 0, fill),
//             which is exact only for fill = -inf or a fill so low that the
//             scores vanish next to it in float (<= lowest/2, not f16).
//   scale_ops multiplications/divisions by constants, between the mask and
//             the matmul (a scaling outside the mask would scale it too), on
//             q (q' = q * c) and on k' (k' = k^T * c or (k * c)^T): all
//             multiply into `scale`, e.g. ViT/SDPA's sqrt(scale) on both.
//   k'        any chain of transposes and scalings of some value; k is that
//             value transposed by the composed perm with the last two dims
//             swapped (one new transpose node, none when it is the identity:
//             layout passes may cancel it).
//   p'        p through identity casts and SDPA's where(isnan(p), 0, p)
//             (-> nan_to_zero=1). A softmax in f32 between a cast up from
//             f16/bf16 scores and a cast back down (softmax(s, dtype=float32)
//             .to(f16)) is the f16/bf16 op, which computes in float anyway.
// Ranks 4 ([B,H,S,D]) and 3 ([B*H,S,D], reshaped to [1,B*H,S,D] around the
// op); q, k and v must agree on the batch dims (no broadcasting). Every
// intermediate must be used only inside the pattern; q, k, v and the masks
// may have other users. The head split/merge transposes stay outside.
#include <cmath>
#include <limits>

#include "ir/symbolic_dim.h"
#include "passes/causal_mask_symbolic.h"
#include "passes/pattern_util.h"
#include "passes/recognize_patterns.h"

namespace kiln::patterns {
namespace {

struct WhereMask {
  Value* cond;
  double fill;
  bool masked_when_true;  // where(cond, fill, s) rather than where(cond, s, fill)
};

struct Match {
  Shape scores;  // softmax shape
  DType dt = DType::F32;
  Value* q = nullptr;
  Value* kt = nullptr;  // matmul(q, kt)'s second operand
  Value* v = nullptr;
  double scale = 1;
  std::vector<Value*> masks;  // additive
  std::vector<WhereMask> where_masks;
  bool causal = false, nan_to_zero = false;
  bool upcast = false;  // softmax in f32 between casts from and back to dt
  int adds = 0, wheres = 0;
  std::vector<Node*> chain;
};

double lowest(DType dt) {
  switch (dt) {
    case DType::F16:
      return -65504.0;
    case DType::BF16:
      return -3.3895313892515355e38;
    case DType::F64:
      return std::numeric_limits<double>::lowest();
    default:
      return std::numeric_limits<float>::lowest();
  }
}

bool very_negative(double v, DType dt) { return v == -INFINITY || v <= lowest(dt) / 2; }

// The constant `t`, read as [..., Sq, Sk], holds one causal pattern in every
// [Sq, Sk] block: kind(value) is 0 where key j <= i + Sk - Sq, 1 elsewhere.
template <typename Kind>
bool causal_pattern(const Value* c, int64_t sq, int64_t sk, Kind kind) {
  if (!c || !c->is_constant() || !c->has_data() || sq > sk) return false;
  const Tensor& t = c->data();
  if (t.rank() < 2 || t.shape()[t.rank() - 2] != sq || t.shape()[t.rank() - 1] != sk || t.numel() > (1 << 24))
    return false;
  for (int64_t e = 0; e < t.numel(); ++e) {
    int64_t j = e % sk, i = (e / sk) % sq;
    if (kind(t.get_double(e)) != (j <= i + sk - sq ? 0 : 1)) return false;
  }
  return true;
}

// Peels the scores `s` (a softmax operand or deeper) back to the q k^T matmul.
bool peel_scores(const Graph& g, Value* s, Match& m, bool scaled) {
  if (!single_use(g, s) || s->shape() != m.scores || s->dtype() != m.dt || !s->producer()) return false;
  Node* n = s->producer();
  if (n->op() == "matmul") {
    m.chain.push_back(n);
    m.q = n->input(0);
    m.kt = n->input(1);
    return true;
  }
  Value* x = nullptr;
  if (std::optional<double> f = scalar_factor(n, &x)) {
    m.scale *= *f;
    m.chain.push_back(n);
    return peel_scores(g, x, m, true);
  }
  if (scaled) return false;  // a mask below a scaling would be scaled too
  int64_t sq = m.scores.end()[-2], sk = m.scores.back();
  if (n->op() == "add" && m.adds == 0) {
    for (int side = 0; side < 2; ++side) {
      Match t = m;
      Value* mask = n->input(1 - side);
      if (mask->dtype() != m.dt || size_t(mask->type().rank()) > m.scores.size()) continue;
      ++t.adds;
      t.chain.push_back(n);
      auto kind = [&](double v) { return v == 0 ? 0 : very_negative(v, m.dt) ? 1 : -1; };
      if (causal_pattern(mask, sq, sk, kind) || symbolic_causal_additive(mask, sq, sk, very_negative, m.dt))
        t.causal = true;
      else t.masks.push_back(mask);
      if (peel_scores(g, n->input(side), t, false)) {
        m = std::move(t);
        return true;
      }
    }
    return false;
  }
  if (n->op() == "where" && m.wheres == 0) {
    for (int side = 1; side <= 2; ++side) {
      std::optional<double> fill = uniform_value(n->input(3 - side));
      Value* cond = n->input(0);
      if (!fill || !very_negative(*fill, m.dt) || cond->dtype() != DType::Bool ||
          size_t(cond->type().rank()) > m.scores.size())
        continue;
      Match t = m;
      ++t.wheres;
      t.chain.push_back(n);
      bool masked_when_true = side == 2;
      auto kind = [&](double c) { return (c != 0) == masked_when_true ? 1 : 0; };
      if (causal_pattern(cond, sq, sk, kind) || symbolic_causal_cond(cond, sq, sk, masked_when_true)) t.causal = true;
      else if (*fill == -INFINITY || (m.dt != DType::F16 && *fill <= lowest(m.dt) / 2))
        t.where_masks.push_back({cond, *fill, masked_when_true});
      else continue;
      if (peel_scores(g, n->input(side), t, false)) {
        m = std::move(t);
        return true;
      }
    }
  }
  return false;
}

// softmax's result through identity casts and where(isnan(p), 0, p) to the
// matmul with v.
Node* match_probs(const Graph& g, Value* p, Match& m) {
  for (int guard = 0; guard < 4; ++guard) {
    if (g.is_output(p)) return nullptr;
    if (p->uses().size() == 2) {  // isnan(p) and where(isnan(p), 0, p)
      Node* isnan = nullptr;
      for (const Use& u : p->uses())
        if (u.user->op() == "isnan") isnan = u.user;
      Node* where = isnan ? sole_user(g, isnan->output(), "where") : nullptr;
      if (!where || where->input(0) != isnan->output() || where->input(2) != p || where->input(1) == p ||
          uniform_value(where->input(1)) != 0.0 || where->output()->type() != p->type())
        return nullptr;
      m.nan_to_zero = true;
      m.chain.insert(m.chain.end(), {isnan, where});
      p = where->output();
      continue;
    }
    if (!single_use(g, p)) return nullptr;
    Node* u = p->uses()[0].user;
    bool downcast = m.upcast && u->op() == "cast" && u->output()->dtype() == m.dt && p->dtype() == DType::F32;
    if (is_identity_cast(u) || downcast) {
      m.upcast = m.upcast && !downcast;
      m.chain.push_back(u);
      p = u->output();
      continue;
    }
    if (u->op() != "matmul" || u->input(0) != p || u->input(1) == p || m.upcast) return nullptr;
    m.chain.push_back(u);
    m.v = u->input(1);
    return u;
  }
  return nullptr;
}

// Peels scalings off a single-use `x` into m.scale; returns what is left.
Value* peel_scalings(const Graph& g, Value* x, Match& m) {
  while (single_use(g, x) && x->producer()) {
    Value* inner = nullptr;
    std::optional<double> f = scalar_factor(x->producer(), &inner);
    if (!f) break;
    m.scale *= *f;
    m.chain.push_back(x->producer());
    x = inner;
  }
  return x;
}

// Grouped-query attention: Llama/Mistral exports repeat each key/value head
// for its query heads (repeat_kv) as reshape [B,Hk,S,D] -> [B,Hk,1,S,D],
// expand -> [B,Hk,G,S,D], reshape -> [B,Hk*G,S,D]. The attention op reads
// the Hk heads directly (head h -> h / G), so the copy goes: returns the
// [B,Hk,S,D] value under `x` (the chain's nodes into `chain`), or `x` itself.
Value* ungroup_heads(const Graph& g, Value* x, std::vector<Node*>& chain) {
  Node* merge = single_use(g, x) ? producer(x, "reshape") : nullptr;
  if (!merge || x->shape().size() != 4) return x;
  Value* e = merge->input(0);
  Node* expand = single_use(g, e) ? producer(e, "expand") : nullptr;
  if (!expand || e->shape().size() != 5) return x;
  Value* u = expand->input(0);
  Node* unsq = single_use(g, u) ? producer(u, "reshape") : nullptr;
  if (!unsq || u->shape().size() != 5) return x;
  Value* y = unsq->input(0);
  const Shape &xs = x->shape(), &es = e->shape(), &us = u->shape(), &ys = y->shape();
  if (ys.size() != 4 || us != Shape{ys[0], ys[1], 1, ys[2], ys[3]} || es != Shape{ys[0], ys[1], es[2], ys[2], ys[3]} ||
      is_symbolic_dim(es[2]) || es[2] < 2 || is_symbolic_dim(ys[1]) || xs != Shape{ys[0], ys[1] * es[2], ys[2], ys[3]})
    return x;
  chain.insert(chain.end(), {unsq, expand, merge});
  return y;
}

}  // namespace

int recognize_attention(Graph& g, PassStats& stats) {
  // Anchors first: a match erases its own softmax and no other.
  std::vector<Node*> anchors;
  for (Node* n : g.node_list())
    if (n->op() == "softmax") anchors.push_back(n);
  int rewritten = 0;
  for (Node* sm : anchors) {
    Match m;
    m.scores = sm->output()->shape();
    m.dt = sm->output()->dtype();
    int r = static_cast<int>(m.scores.size());
    int64_t axis = sm->attrs().get_int("axis", -1);
    if ((r != 3 && r != 4) || (axis != -1 && axis != r - 1) || !is_float(m.dt)) continue;
    Value* scores = sm->input(0);
    Node* up = producer(scores, "cast");
    if (m.dt == DType::F32 && up && single_use(g, scores) &&
        (up->input(0)->dtype() == DType::F16 || up->input(0)->dtype() == DType::BF16)) {
      m.upcast = true;  // softmax(x, dtype=float32).to(f16), as Llama-style exports do
      m.dt = up->input(0)->dtype();
      m.chain.push_back(up);
      scores = up->input(0);
    }
    if (!peel_scores(g, scores, m, false)) continue;
    m.chain.push_back(sm);
    Node* mm2 = match_probs(g, sm->output(), m);
    if (!mm2) continue;
    // q: scalings peeled; k: scalings and transposes peeled, perms composed.
    Value* q = peel_scalings(g, m.q, m);
    std::vector<int64_t> perm(r);
    for (int i = 0; i < r; ++i) perm[i] = i;
    Value* k = m.kt;
    std::vector<Node*> k_transposes;
    while (single_use(g, k) && k->producer()) {
      Node* p = k->producer();
      if (p->op() == "transpose") {
        std::vector<int64_t> pp = p->attrs().get_ints("perm"), composed(r);
        if (static_cast<int>(pp.size()) != r) break;
        for (int i = 0; i < r; ++i) composed[i] = pp[perm[i]];
        perm = composed;
        k_transposes.push_back(p);
        m.chain.push_back(p);
        k = p->input(0);
      } else {
        Value* inner = nullptr;
        std::optional<double> f = scalar_factor(p, &inner);
        if (!f) break;
        m.scale *= *f;
        m.chain.push_back(p);
        k = inner;
      }
    }
    std::swap(perm[r - 2], perm[r - 1]);
    // Grouped-query: k (its transposes keeping batch and heads in place) and
    // v both through repeat_kv: the op reads their Hk heads.
    if (r == 4 && perm[0] == 0 && perm[1] == 1 && k->type().rank() == 4 && m.v->type().rank() == 4 &&
        q->type().rank() == 4 && k->shape()[1] == q->shape()[1] && m.v->shape()[1] == q->shape()[1]) {
      std::vector<Node*> kc, vc;
      Value* k1 = ungroup_heads(g, k, kc);
      Value* v1 = ungroup_heads(g, m.v, vc);
      if (k1 != k && v1 != m.v && k1->shape()[1] == v1->shape()[1]) {
        k = k1;
        m.v = v1;
        m.chain.insert(m.chain.end(), kc.begin(), kc.end());
        m.chain.insert(m.chain.end(), vc.begin(), vc.end());
      }
    }
    // Shapes: q [.., Sq, D], k (after perm) [.., Sk, D], v [.., Sk, Dv], batch
    // dims equal (heads: or a multiple of k's and v's, grouped-query).
    const Shape &qs = q->shape(), &vs = m.v->shape();
    Shape ks(r);
    if (k->type().rank() != r) continue;
    for (int i = 0; i < r; ++i) ks[i] = k->shape()[perm[i]];
    if (qs.size() != size_t(r) || vs.size() != size_t(r) || q->dtype() != m.dt || k->dtype() != m.dt ||
        m.v->dtype() != m.dt)
      continue;
    const bool grouped = r == 4 && ks[1] != qs[1] && ks[1] == vs[1] && ks[0] == qs[0] && vs[0] == qs[0];
    if ((!grouped &&
         (!std::equal(qs.begin(), qs.end() - 2, ks.begin()) || !std::equal(qs.begin(), qs.end() - 2, vs.begin()))) ||
        ks[r - 1] != qs[r - 1] || ks[r - 2] != vs[r - 2] || !std::isfinite(float(m.scale)))
      continue;
    // Build: k transpose, masks, (reshapes for rank 3), attention.
    std::string name = joined_names(g, m.chain);
    std::string base = mm2->output()->name().empty() ? "attention" : mm2->output()->name();
    bool identity = true;
    for (int i = 0; i < r; ++i) identity &= perm[i] == i;
    if (!identity) {
      AttrMap a;
      a.set("perm", perm);
      k = make_node(g, "transpose", {k}, std::move(a), joined_names(g, k_transposes), mm2)->output();
      k->set_name(base + ".k");
    }
    std::vector<Value*> masks = m.masks;
    for (const WhereMask& w : m.where_masks) {
      Value* zero = g.add_constant(base + ".zero", Tensor::scalar(m.dt, 0.0));
      Value* fill = g.add_constant(base + ".fill", Tensor::scalar(m.dt, w.fill));
      std::vector<Value*> ins = {w.cond, w.masked_when_true ? fill : zero, w.masked_when_true ? zero : fill};
      masks.push_back(make_node(g, "where", ins, {}, name, mm2)->output());
    }
    if (masks.size() == 2) masks = {make_node(g, "add", masks, {}, name, mm2)->output()};
    Value* v = m.v;
    if (r == 3) {
      auto lift = [&](Value* x) {
        AttrMap a;
        a.set("shape", std::vector<int64_t>{1, x->shape()[0], x->shape()[1], x->shape()[2]});
        return make_node(g, "reshape", {x}, std::move(a), name, mm2)->output();
      };
      q = lift(q), k = lift(k), v = lift(v);
    }
    std::vector<Value*> ins = {q, k, v};
    if (!masks.empty()) ins.push_back(masks[0]);
    // Within a few float roundings of 1/sqrt(D) (sqrt(scale) on q and k,
    // squared) the scale is that value.
    double dflt = 1.0 / std::sqrt(double(qs[r - 1]));
    if (std::abs(m.scale - dflt) <= 4e-7 * dflt) m.scale = dflt;
    AttrMap attrs;
    attrs.set("scale", float(m.scale));
    attrs.set("causal", int64_t(m.causal));
    if (m.nan_to_zero) attrs.set("nan_to_zero", int64_t(1));
    Value* out = make_node(g, "attention", ins, std::move(attrs), name, mm2)->output();
    if (r == 3) {
      AttrMap a;
      a.set("shape", mm2->output()->shape());
      out = make_node(g, "reshape", {out}, std::move(a), name, mm2)->output();
    }
    std::string out_name = mm2->output()->name();
    g.replace_all_uses(mm2->output(), out);
    erase_dead(g, m.chain);
    out->set_name(out_name);
    stats.count("attention");
    if (m.causal) stats.count("attention-causal");
    ++rewritten;
  }
  return rewritten;
}

}  // namespace kiln::patterns
