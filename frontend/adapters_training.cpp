// The optimizer ops of domain ai.onnx.preview.training (version 1):
// Adagrad, Momentum (standard and Nesterov) and Adam, each one update step of
// n tensors decomposed at import into kiln's pointwise ops (the formulas of
// the ONNX operator definitions). The learning rate R and the step count T
// are runtime scalars: T's conditions ("T > 0") are `where`s, not decided at
// compile time. Gradient (automatic differentiation of a graph) is not
// imported. Registered as "ai.onnx.preview.training:Op" (domain_adapter_key).
#include "frontend/import_context.h"

namespace kiln::adapters {

namespace {

constexpr const char* kTrainingDomain = "ai.onnx.preview.training";

// The optimizer's operands: R, T, then `groups` lists of n tensors each
// (X, G, and the optimizer's state), n from the operand count.
struct Groups {
  Value* r = nullptr;
  Value* t = nullptr;
  int n = 0;
  std::vector<std::vector<Value*>> lists;
};

Groups read_groups(ImportContext& c, int groups) {
  Groups g;
  const int tensors = c.num_inputs() - 2;
  if (tensors <= 0 || tensors % groups != 0)
    c.fail("takes R, T and {} lists of as many tensors each; got {} operands", groups, c.num_inputs());
  g.r = c.input(0);
  g.t = c.input(1);
  if (g.r->type().numel() != 1) c.fail("R (the learning rate) must be a scalar, got {}", g.r->type().str());
  if (g.t->type().numel() != 1 || g.t->dtype() != DType::I64)
    c.fail("T (the update count) must be an i64 scalar, got {}", g.t->type().str());
  if (g.r->dtype() != DType::F32 && g.r->dtype() != DType::F64)
    c.unsupported("R has dtype {}; only f32 and f64 are supported", dtype_name(g.r->dtype()));
  g.n = tensors / groups;
  g.lists.resize(groups);
  for (int k = 0; k < groups; ++k)
    for (int i = 0; i < g.n; ++i) {
      Value* v = c.input(2 + k * g.n + i);
      if (v->dtype() != g.r->dtype())
        c.fail("operand {} has dtype {} but R has {}", 2 + k * g.n + i, dtype_name(v->dtype()),
               dtype_name(g.r->dtype()));
      if (k > 0 && v->shape() != g.lists[0][i]->shape())
        c.fail("operand {} has type {} but the tensor it updates has {}", 2 + k * g.n + i, v->type().str(),
               g.lists[0][i]->type().str());
      g.lists[k].push_back(v);
    }
  return g;
}

double required_float(ImportContext& c, const char* name) {
  if (!c.attrs().has(name)) c.fail("attribute '{}' is required", name);
  return c.attrs().get_float(name, 0.f);
}

// Small helpers over ImportContext::emit for the formulas below.
struct Math {
  ImportContext& c;
  DType dt;
  Value* k(double v) { return c.constant(Tensor::scalar(dt, v), "k"); }
  Value* add(Value* a, Value* b) { return c.emit1("add", {a, b}); }
  Value* sub(Value* a, Value* b) { return c.emit1("sub", {a, b}); }
  Value* mul(Value* a, Value* b) { return c.emit1("mul", {a, b}); }
  Value* div(Value* a, Value* b) { return c.emit1("div", {a, b}); }
  Value* sqrt(Value* a) { return c.emit1("sqrt", {a}); }
  Value* pow(Value* a, Value* b) { return c.emit1("pow", {a, b}); }
  Value* where(Value* cond, Value* a, Value* b) { return c.emit1("where", {cond, a, b}); }
  // T as a float scalar, and "T > 0".
  Value* t_float(Value* t) {
    AttrMap a;
    a.set("to", std::string(dtype_name(dt)));
    return c.emit1("cast", {t}, a);
  }
  Value* t_positive(Value* t) { return c.emit1("greater", {t, c.constant(Tensor::scalar(DType::I64, 0), "zero")}); }
  // norm_coefficient * X + G
  Value* regularized(double norm, Value* x, Value* g) { return norm == 0 ? g : add(mul(k(norm), x), g); }
};

void adagrad(ImportContext& c) {
  c.only_attrs({"decay_factor", "epsilon", "norm_coefficient"});
  const double decay = c.attrs().get_float("decay_factor", 0.f);
  const double eps = c.attrs().get_float("epsilon", 0.f);
  const double norm = c.attrs().get_float("norm_coefficient", 0.f);
  Groups g = read_groups(c, 3);
  Math m{c, g.r->dtype()};
  // r = R / (1 + T * decay_factor)
  Value* r = m.div(g.r, m.add(m.k(1), m.mul(m.t_float(g.t), m.k(decay))));
  std::vector<Value*> xs, hs;
  for (int i = 0; i < g.n; ++i) {
    Value* gr = m.regularized(norm, g.lists[0][i], g.lists[1][i]);
    Value* h_new = m.add(g.lists[2][i], m.mul(gr, gr));
    Value* h_adaptive = m.add(m.sqrt(h_new), m.k(eps));
    xs.push_back(m.sub(g.lists[0][i], m.div(m.mul(r, gr), h_adaptive)));
    hs.push_back(h_new);
  }
  xs.insert(xs.end(), hs.begin(), hs.end());
  c.set_outputs(xs);
}

void momentum(ImportContext& c) {
  c.only_attrs({"alpha", "beta", "mode", "norm_coefficient"});
  const double alpha = required_float(c, "alpha");
  const double beta = required_float(c, "beta");
  const double norm = required_float(c, "norm_coefficient");
  if (!c.attrs().has("mode")) c.fail("attribute 'mode' is required");
  const std::string mode = c.attrs().get_string("mode", "");
  if (mode != "standard" && mode != "nesterov") c.fail("mode '{}' is neither 'standard' nor 'nesterov'", mode);
  Groups g = read_groups(c, 3);
  Math m{c, g.r->dtype()};
  // The first update (T = 0) takes the gradient as it is: beta becomes 1.
  Value* beta_t = m.where(m.t_positive(g.t), m.k(beta), m.k(1));
  std::vector<Value*> xs, vs;
  for (int i = 0; i < g.n; ++i) {
    Value* x = g.lists[0][i];
    Value* gr = m.regularized(norm, x, g.lists[1][i]);
    Value* v_new = m.add(m.mul(m.k(alpha), g.lists[2][i]), m.mul(beta_t, gr));
    Value* step = mode == "standard" ? v_new : m.add(gr, m.mul(m.k(alpha), v_new));
    xs.push_back(m.sub(x, m.mul(g.r, step)));
    vs.push_back(v_new);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  c.set_outputs(xs);
}

void adam(ImportContext& c) {
  c.only_attrs({"alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post"});
  const double alpha = c.attrs().get_float("alpha", 0.9f);
  const double beta = c.attrs().get_float("beta", 0.999f);
  const double eps = c.attrs().get_float("epsilon", 0.f);
  const double norm = c.attrs().get_float("norm_coefficient", 0.f);
  const double norm_post = c.attrs().get_float("norm_coefficient_post", 0.f);
  Groups g = read_groups(c, 4);
  Math m{c, g.r->dtype()};
  // From the second update on, R is bias-corrected:
  // R * sqrt(1 - beta^T) / (1 - alpha^T).
  Value* t = m.t_float(g.t);
  Value* corrected = m.div(m.mul(g.r, m.sqrt(m.sub(m.k(1), m.pow(m.k(beta), t)))), m.sub(m.k(1), m.pow(m.k(alpha), t)));
  Value* r = m.where(m.t_positive(g.t), corrected, g.r);
  std::vector<Value*> xs, vs, hs;
  for (int i = 0; i < g.n; ++i) {
    Value* x = g.lists[0][i];
    Value* gr = m.regularized(norm, x, g.lists[1][i]);
    Value* v_new = m.add(m.mul(m.k(alpha), g.lists[2][i]), m.mul(m.k(1 - alpha), gr));
    Value* h_new = m.add(m.mul(m.k(beta), g.lists[3][i]), m.mul(m.k(1 - beta), m.mul(gr, gr)));
    Value* x_new = m.sub(x, m.div(m.mul(r, v_new), m.add(m.sqrt(h_new), m.k(eps))));
    xs.push_back(norm_post == 0 ? x_new : m.mul(m.k(1 - norm_post), x_new));
    vs.push_back(v_new);
    hs.push_back(h_new);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  xs.insert(xs.end(), hs.begin(), hs.end());
  c.set_outputs(xs);
}

}  // namespace

void register_training(AdapterTable& t) {
  t.add(domain_adapter_key(kTrainingDomain, "Adagrad"), adagrad);
  t.add(domain_adapter_key(kTrainingDomain, "Momentum"), momentum);
  t.add(domain_adapter_key(kTrainingDomain, "Adam"), adam);
}

}  // namespace kiln::adapters
