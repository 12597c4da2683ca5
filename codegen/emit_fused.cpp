#include "codegen/emit_fused.h"

#include <unordered_map>

#include "ir/error.h"
#include "ir/op_registry.h"

namespace kiln::codegen {

bool is_pointwise_fused(const Node& n, const OpRegistry& ops) {
  if (n.op() != "fused" || !n.body() || n.attrs().get_string("kind", "") != "pointwise") return false;
  for (const auto& bn : n.body()->nodes()) {
    const OpDef* def = ops.find(bn->op());
    if (!def || def->category != OpCategory::Pointwise || !def->expr || bn->body()) return false;
    for (Value* v : bn->inputs())
      if (!v) return false;
  }
  return !n.body()->nodes().empty();
}

FusedPointwiseKernel emit_fused_pointwise(const Node& n, const OpRegistry& ops) {
  if (!is_pointwise_fused(n, ops))
    unsupported("codegen: {} is not a fused node of kind pointwise with only pointwise ops in its body", n.describe());
  const Graph& body = *n.body();
  KILN_CHECK(body.inputs().size() == static_cast<size_t>(n.num_inputs()), "{}: body takes {} inputs, node gives {}",
             n.describe(), body.inputs().size(), n.num_inputs());
  KILN_CHECK(body.outputs().size() == static_cast<size_t>(n.num_outputs()), "{}: body returns {}, node has {}",
             n.describe(), body.outputs().size(), n.num_outputs());
  FusedPointwiseKernel fk;
  std::vector<TensorType> operands;
  std::unordered_map<const Value*, int> index;  // body value -> kernel value
  for (Value* v : body.inputs()) {
    index[v] = static_cast<int>(operands.size());
    operands.push_back(v->type());
  }
  // Constants become operands after the body's inputs (numbered before any step).
  for (const auto& bn : body.nodes())
    for (Value* v : bn->inputs())
      if (v->is_constant() && !index.count(v)) {
        index[v] = static_cast<int>(operands.size());
        operands.push_back(v->type());
        fk.constants.push_back(v->data());
      }
  for (Value* v : body.outputs())
    if (v->is_constant() && !index.count(v)) {
      index[v] = static_cast<int>(operands.size());
      operands.push_back(v->type());
      fk.constants.push_back(v->data());
    }
  const int nops = static_cast<int>(operands.size());
  std::vector<PointwiseStep> steps;
  for (const auto& bn : body.nodes()) {
    const OpDef& def = ops.get(bn->op());
    KILN_CHECK(bn->num_outputs() == 1, "{}: a pointwise op with {} results", bn->describe(), bn->num_outputs());
    PointwiseStep st;
    std::vector<DType> dts;
    for (Value* v : bn->inputs()) {
      auto it = index.find(v);
      KILN_CHECK(it != index.end(), "{}: %{} used before it is computed", bn->describe(), v->name());
      st.args.push_back(it->second);
      dts.push_back(v->dtype());
    }
    ExprBuilder b(dts);
    st.expr = def.expr(b, bn->attrs());
    KILN_CHECK(st.expr.result_dtype() == bn->output(0)->dtype(), "{}: expression gives {}, inferred {}",
               bn->describe(), dtype_name(st.expr.result_dtype()), dtype_name(bn->output(0)->dtype()));
    index[bn->output(0)] = nops + static_cast<int>(steps.size());
    steps.push_back(std::move(st));
  }
  std::vector<std::pair<int, TensorType>> results;
  for (int r = 0; r < n.num_outputs(); ++r) {
    Value* v = body.outputs()[r];
    auto it = index.find(v);
    KILN_CHECK(it != index.end(), "{}: body result %{} is not computed", n.describe(), v->name());
    results.emplace_back(it->second, n.output(r)->type());
  }
  fk.kernel = emit_pointwise_multi(steps, operands, results, "fused");
  return fk;
}

}  // namespace kiln::codegen
