#include "passes/rewrite_util.h"

#include "ir/error.h"
#include "ops/registry.h"

namespace kiln::rewrite {

const Tensor* constant_data(const Value* v) {
  if (!v || !v->is_constant() || !v->has_data()) return nullptr;
  return &v->data();
}

bool is_splat_of(const Value* v, double x) {
  const Tensor* t = constant_data(v);
  if (!t || t->numel() == 0) return false;
  for (int64_t i = 0; i < t->numel(); ++i)
    if (t->get_double(i) != x) return false;
  return true;
}

std::optional<std::vector<TensorType>> infer(const std::string& op, const std::vector<Value*>& inputs,
                                             const AttrMap& attrs, int num_outputs) {
  const OpDef* def = op_registry().find(op);
  if (!def) return std::nullopt;
  try {
    InferContext ctx(op, inputs, attrs, num_outputs, op);
    return infer_types(*def, ctx);
  } catch (const Error&) {
    return std::nullopt;
  }
}

bool infers_to(const std::string& op, const std::vector<Value*>& inputs, const AttrMap& attrs, const TensorType& want) {
  auto got = infer(op, inputs, attrs, 1);
  return got && got->size() == 1 && (*got)[0].dtype == want.dtype && (*got)[0].shape == want.shape;
}

bool can_replace(const Graph& g, const Value* from, const Value* to) {
  if (!to || from == to || from->type() != to->type()) return false;
  if (!g.is_output(from)) return true;
  return to->kind() == ValueKind::Result && !g.is_output(to);
}

void replace_node_result(Graph& g, Node* n, Value* to) {
  Value* from = n->output(0);
  bool was_output = g.is_output(from);
  std::string name = from->name();
  g.replace_all_uses(from, to);
  g.erase_node(n);
  if (was_output) to->set_name(name);
}

bool erase_if_dead(Graph& g, Node* n) {
  for (Value* o : n->outputs())
    if (o->has_uses() || g.is_output(o)) return false;
  g.erase_node(n);
  return true;
}

NameSet::NameSet(const Graph& g) {
  for (Value* v : g.inputs()) used_.insert(v->name());
  for (Value* v : g.constants()) used_.insert(v->name());
  for (const auto& n : g.nodes())
    for (Value* v : n->outputs()) used_.insert(v->name());
}

std::string NameSet::fresh(const std::string& base) {
  std::string name = base;
  for (int i = 1; used_.count(name); ++i) name = base + "." + std::to_string(i);
  used_.insert(name);
  return name;
}

std::string join_names(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "+" + b;
}

}  // namespace kiln::rewrite
