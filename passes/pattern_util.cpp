#include "passes/pattern_util.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "ir/op_registry.h"
#include "ops/registry.h"

namespace kiln::patterns {

Node* producer(Value* v, std::string_view op) {
  if (!v) return nullptr;
  Node* p = v->producer();
  return p && p->op() == op ? p : nullptr;
}

bool single_use(const Graph& g, const Value* v) { return v && v->uses().size() == 1 && !g.is_output(v); }

Node* sole_user(const Graph& g, const Value* v, std::string_view op) {
  if (!single_use(g, v)) return nullptr;
  Node* u = v->uses()[0].user;
  return u->op() == op ? u : nullptr;
}

Value* other_operand(const Node* n, const Value* v) {
  if (n->num_inputs() != 2) return nullptr;
  if (n->input(0) == v && n->input(1) != v) return n->input(1);
  if (n->input(1) == v && n->input(0) != v) return n->input(0);
  return nullptr;
}

std::optional<double> uniform_value(const Value* v) {
  if (!v || !v->is_constant() || !v->has_data()) return std::nullopt;
  const Tensor& t = v->data();
  if (t.numel() < 1 || t.numel() > (1 << 20) || !(is_float(t.dtype()) || is_int(t.dtype()))) return std::nullopt;
  double first = t.get_double(0);
  for (int64_t i = 1; i < t.numel(); ++i) {
    double x = t.get_double(i);
    if (!(x == first || (std::isnan(x) && std::isnan(first)))) return std::nullopt;
  }
  return first;
}

bool near(double got, double want, DType dt) {
  double rel = dt == DType::BF16 ? 1e-2 : dt == DType::F16 ? 2e-3 : 1e-4;
  return std::abs(got - want) <= rel * std::abs(want);
}

bool is_const_near(const Value* v, double want) {
  std::optional<double> c = uniform_value(v);
  return c && near(*c, want, v->dtype());
}

std::optional<double> scalar_factor(const Node* n, Value** x) {
  if (n->op() != "mul" && n->op() != "div") return std::nullopt;
  if (n->num_inputs() != 2 || n->num_outputs() != 1) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    if (n->op() == "div" && side == 0) continue;  // c / x is no scaling of x
    Value* c = n->input(side);
    Value* other = n->input(1 - side);
    std::optional<double> f = uniform_value(c);
    if (!f || !std::isfinite(*f) || !is_float(other->dtype())) continue;
    if (n->output()->type() != other->type()) continue;  // the constant would grow x
    if (n->op() == "div") {
      if (*f == 0) return std::nullopt;
      *f = 1.0 / *f;
    }
    *x = other;
    return f;
  }
  return std::nullopt;
}

bool is_identity_cast(const Node* n) {
  return n->op() == "cast" && n->num_inputs() == 1 && n->num_outputs() == 1 && n->input(0) &&
         n->input(0)->dtype() == n->output()->dtype();
}

Node* make_node(Graph& g, const std::string& op, std::vector<Value*> inputs, AttrMap attrs, std::string name,
                Node* before, int num_outputs) {
  const OpDef& def = op_registry().get(op);
  InferContext ctx(op, inputs, attrs, num_outputs, fmt::format("new {} node \"{}\"", op, name));
  std::vector<TensorType> types = infer_types(def, ctx);
  return g.add_node(op, std::move(inputs), std::move(types), std::move(attrs), std::move(name), before);
}

void erase_dead(Graph& g, const std::vector<Node*>& nodes) {
  std::vector<Node*> left(nodes.begin(), nodes.end());
  std::sort(left.begin(), left.end());
  left.erase(std::unique(left.begin(), left.end()), left.end());
  for (bool progress = true; progress;) {
    progress = false;
    for (auto it = left.begin(); it != left.end();) {
      bool dead = true;
      for (Value* o : (*it)->outputs()) dead &= !o->has_uses() && !g.is_output(o);
      if (!dead) {
        ++it;
        continue;
      }
      g.erase_node(*it);
      it = left.erase(it);
      progress = true;
    }
  }
}

std::string joined_names(const Graph& g, const std::vector<Node*>& nodes) {
  std::set<const Node*> want(nodes.begin(), nodes.end());
  std::set<std::string> seen;
  std::string r;
  for (const auto& n : g.nodes()) {
    if (!want.count(n.get()) || n->name().empty() || !seen.insert(n->name()).second) continue;
    if (!r.empty()) r += "+";
    r += n->name();
  }
  return r;
}

bool comes_before(const Graph& g, const Node* a, const Node* b) {
  for (const auto& n : g.nodes()) {
    if (n.get() == a) return true;
    if (n.get() == b) return false;
  }
  return false;
}

}  // namespace kiln::patterns
