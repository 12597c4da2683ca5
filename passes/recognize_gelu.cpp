// recognize-patterns, gelu part: anchors on each erf / tanh node and matches
//   erf form:  0.5 * x * (1 + erf(x * 0.70710678))      x / 1.41421356 as well
//   tanh form: 0.5 * x * (1 + tanh(0.79788456 * (x + 0.044715 * x^3)))
//              (GPT-2's gelu_new; x^3 as pow(x, 3), x * (x * x) or pow(x, 2) * x)
// with the product 0.5 * x * (...) in any association and order, and 0.5 as
// a multiplication or a division by 2. Constants are compared numerically
// with the dtype's rounding (pattern_util near()). Every intermediate must be
// used only inside the pattern; x itself may have other users.
#include "passes/pattern_util.h"
#include "passes/recognize_patterns.h"

namespace kiln::patterns {
namespace {

constexpr double kSqrtHalf = 0.70710678118654752;
constexpr double kSqrt2OverPi = 0.79788456080286536;
constexpr double kCubeCoef = 0.044715;

// `n` multiplies exactly `x` by a constant near `want` (x * c, c * x, x / (1/c)).
bool scales_by(const Node* n, const Value* x, double want) {
  if (!n) return false;
  Value* y = nullptr;
  std::optional<double> f = scalar_factor(n, &y);
  return f && y == x && near(*f, want, x->dtype());
}

// `v` is x * 0.5 (or x / 2), used once.
Node* half_of(const Graph& g, Value* v, Value* x) {
  if (!single_use(g, v) || !v->producer()) return nullptr;
  return scales_by(v->producer(), x, 0.5) ? v->producer() : nullptr;
}

// `a` is (1 + f(x)); matches the product 0.5 * x * a in the associations
// exporters emit: (x * a) * 0.5, (x * 0.5) * a, x * (a * 0.5), (a / 2) * x...
// Appends the nodes to `chain` and returns the last one.
Node* match_half_x_product(const Graph& g, Value* a, Value* x, std::vector<Node*>& chain) {
  bool have_x = false, have_half = false;
  Value* cur = a;
  for (int step = 0; step < 2 && !(have_x && have_half); ++step) {
    if (!single_use(g, cur)) return nullptr;
    Node* u = cur->uses()[0].user;
    if (!have_half && scales_by(u, cur, 0.5)) {
      have_half = true;
    } else if (u->op() == "mul") {
      Value* o = other_operand(u, cur);
      if (!o) return nullptr;
      if (o == x && !have_x) {
        have_x = true;
      } else if (Node* h = !have_x && !have_half ? half_of(g, o, x) : nullptr) {
        chain.push_back(h);
        have_x = have_half = true;
      } else {
        return nullptr;
      }
    } else {
      return nullptr;
    }
    chain.push_back(u);
    cur = u->output();
  }
  if (!(have_x && have_half) || cur->type() != x->type()) return nullptr;
  return chain.back();
}

// `f` (erf or tanh of something) feeds 1 + f, then the 0.5 * x product.
Node* match_tail(const Graph& g, Node* f, Value* x, std::vector<Node*>& chain) {
  Node* add = sole_user(g, f->output(), "add");
  if (!add || add->output()->type() != f->output()->type()) return nullptr;
  Value* one = other_operand(add, f->output());
  if (!one || !is_const_near(one, 1.0)) return nullptr;
  chain.push_back(add);
  return match_half_x_product(g, add->output(), x, chain);
}

// erf(x * 0.7071) or erf(x / 1.4142): returns x.
Value* match_erf_arg(const Graph& g, Node* erf, std::vector<Node*>& chain) {
  Value* u = erf->input(0);
  if (!single_use(g, u) || !u->producer()) return nullptr;
  Value* x = nullptr;
  std::optional<double> f = scalar_factor(u->producer(), &x);
  if (!f || !near(*f, kSqrtHalf, x->dtype())) return nullptr;
  chain.push_back(u->producer());
  return x;
}

// `v` is x^3, used once: pow(x, 3), x * (x * x), (x * x) * x, x * pow(x, 2).
bool is_cube(const Graph& g, Value* v, Value* x, std::vector<Node*>& chain) {
  if (!single_use(g, v)) return false;
  if (Node* p = producer(v, "pow")) {
    if (p->input(0) != x || !is_const_near(p->input(1), 3.0)) return false;
    chain.push_back(p);
    return true;
  }
  Node* m = producer(v, "mul");
  if (!m) return false;
  Value* sq = other_operand(m, x);
  if (!sq || !single_use(g, sq)) return false;
  Node* s = sq->producer();
  bool square = s && ((s->op() == "mul" && s->input(0) == x && s->input(1) == x) ||
                      (s->op() == "pow" && s->input(0) == x && is_const_near(s->input(1), 2.0)));
  if (!square) return false;
  chain.push_back(s);
  chain.push_back(m);
  return true;
}

// tanh(0.7978 * (x + 0.044715 * x^3)): returns x.
Value* match_tanh_arg(const Graph& g, Node* tanh, std::vector<Node*>& chain) {
  Value* u = tanh->input(0);
  if (!single_use(g, u) || !u->producer()) return nullptr;
  Value* s = nullptr;
  std::optional<double> f = scalar_factor(u->producer(), &s);
  if (!f || !near(*f, kSqrt2OverPi, s->dtype()) || !single_use(g, s)) return nullptr;
  Node* add = producer(s, "add");
  if (!add) return nullptr;
  for (int side = 0; side < 2; ++side) {
    Value* x = add->input(side);
    Value* w = add->input(1 - side);
    if (!single_use(g, w) || !w->producer() || w->type() != x->type()) continue;
    Value* cube = nullptr;
    std::optional<double> c = scalar_factor(w->producer(), &cube);
    if (!c || !near(*c, kCubeCoef, x->dtype())) continue;
    std::vector<Node*> part;
    if (!is_cube(g, cube, x, part)) continue;
    chain.insert(chain.end(), part.begin(), part.end());
    chain.push_back(w->producer());
    chain.push_back(add);
    chain.push_back(u->producer());
    return x;
  }
  return nullptr;
}

}  // namespace

int recognize_gelu(Graph& g, PassStats& stats) {
  // Anchors first: a match erases only mul/div/add/pow nodes, never another anchor.
  std::vector<Node*> anchors;
  for (Node* n : g.node_list())
    if ((n->op() == "erf" || n->op() == "tanh") && n->num_inputs() == 1 && is_float(n->output()->dtype()))
      anchors.push_back(n);
  int rewritten = 0;
  for (Node* f : anchors) {
    bool tanh = f->op() == "tanh";
    std::vector<Node*> chain;
    Value* x = tanh ? match_tanh_arg(g, f, chain) : match_erf_arg(g, f, chain);
    if (!x || x->type() != f->output()->type()) continue;
    chain.push_back(f);
    Node* last = match_tail(g, f, x, chain);
    if (!last) continue;
    AttrMap attrs;
    attrs.set("approximate", std::string(tanh ? "tanh" : "none"));
    Node* gelu = make_node(g, "gelu", {x}, std::move(attrs), joined_names(g, chain), last);
    std::string out_name = last->output()->name();
    g.replace_all_uses(last->output(), gelu->output());
    erase_dead(g, chain);
    gelu->output()->set_name(out_name);
    stats.count("gelu");
    if (tanh) stats.count("gelu-tanh");
    ++rewritten;
  }
  return rewritten;
}

}  // namespace kiln::patterns
