#include "codegen/emitters/elementwise/emit_fused.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_body_eval.h"
#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_io.h"

#include "ir/error.h"
#include "ir/op_registry.h"
#include "ir/shape_utils.h"
#include "ops/symbolic_values.h"

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

namespace {

// What emit_fused_pointwise builds before it writes text: the kernel's
// operands (the body's inputs, then the constants its nodes read), one step
// per body node, the results, and the constants' data.
struct FusedPointwisePlan {
  std::vector<TensorType> operands;
  std::vector<PointwiseStep> steps;
  std::vector<std::pair<int, TensorType>> results;
  std::vector<Tensor> constants;
  SymbolicScalars scalars;  // operands computed from `ks` (emit_pointwise.h)
};

// Every decision of the emitter: check_fused_pointwise runs this alone, the
// emitter renders what it returns, so the two cannot disagree.
FusedPointwisePlan plan_fused_pointwise(const Node& n, const OpRegistry& ops) {
  if (!is_pointwise_fused(n, ops))
    unsupported("codegen: {} is not a fused node of kind pointwise with only pointwise ops in its body", n.describe());
  const Graph& body = *n.body();
  KILN_CHECK(body.inputs().size() == static_cast<size_t>(n.num_inputs()), "{}: body takes {} inputs, node gives {}",
             n.describe(), body.inputs().size(), n.num_inputs());
  KILN_CHECK(body.outputs().size() == static_cast<size_t>(n.num_outputs()), "{}: body returns {}, node has {}",
             n.describe(), body.outputs().size(), n.num_outputs());
  FusedPointwisePlan plan;
  std::vector<TensorType>& operands = plan.operands;
  std::unordered_map<const Value*, int> index;  // body value -> kernel value
  index.reserve(body.inputs().size() + 2 * body.nodes().size());
  for (size_t i = 0; i < body.inputs().size(); ++i) {
    Value* v = body.inputs()[i];
    index[v] = static_cast<int>(operands.size());
    operands.push_back(v->type());
    // An operand that is a scalar constant holding a symbolic shape value: computed from `ks`.
    const Value* given = n.input(static_cast<int>(i));
    if (given && given->is_constant() && given->has_data() && holds_symbolic_values(given->data()) &&
        given->data().numel() == 1)
      plan.scalars[static_cast<int>(i)] = given->data().data<int64_t>()[0];
  }
  // Constants become operands after the body's inputs (numbered before any step).
  // A constant holding a symbolic shape value (`past`) is computed in the
  // kernel; its buffer (zeros: handles are process-local) is not read.
  auto add_constant = [&](Value* v) {
    if (!v->is_constant() || index.count(v)) return;
    const int i = static_cast<int>(operands.size());
    index[v] = i;
    operands.push_back(v->type());
    if (v->has_data() && holds_symbolic_values(v->data())) {
      if (v->data().numel() != 1)
        unsupported(
            "codegen: {}: constant %{} holds symbolic shape values {}: only a scalar one is computed in the kernel",
            n.describe(), v->name(), describe_symbolic_values(v->data()));
      plan.scalars[i] = v->data().data<int64_t>()[0];
      plan.constants.push_back(Tensor(v->type()));
      return;
    }
    plan.constants.push_back(v->data());
  };
  for (const auto& bn : body.nodes())
    for (Value* v : bn->inputs()) add_constant(v);
  for (Value* v : body.outputs()) add_constant(v);
  const int nops = static_cast<int>(operands.size());
  plan.steps.reserve(body.nodes().size());
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
    KILN_CHECK(st.expr.result_dtype() == bn->output(0)->dtype(), "{}: expression gives {}, inferred {}", bn->describe(),
               dtype_name(st.expr.result_dtype()), dtype_name(bn->output(0)->dtype()));
    index[bn->output(0)] = nops + static_cast<int>(plan.steps.size());
    plan.steps.push_back(std::move(st));
  }
  for (int r = 0; r < n.num_outputs(); ++r) {
    Value* v = body.outputs()[r];
    auto it = index.find(v);
    KILN_CHECK(it != index.end(), "{}: body result %{} is not computed", n.describe(), v->name());
    plan.results.emplace_back(it->second, n.output(r)->type());
  }
  check_pointwise_multi(plan.steps, plan.operands, plan.results, "fused", plan.scalars);
  return plan;
}

}  // namespace

void check_fused_pointwise(const Node& n, const OpRegistry& ops) { (void)plan_fused_pointwise(n, ops); }

FusedPointwiseKernel emit_fused_pointwise(const Node& n, const OpRegistry& ops) {
  FusedPointwisePlan plan = plan_fused_pointwise(n, ops);
  FusedPointwiseKernel fk;
  fk.kernel = emit_pointwise_multi(plan.steps, plan.operands, plan.results, "fused", plan.scalars);
  fk.constants = std::move(plan.constants);
  return fk;
}

}  // namespace kiln::codegen

namespace kiln::codegen {

bool is_on_demand_fused(const Node& n, const OpRegistry& ops) {
  if (n.op() != "fused" || !n.body()) return false;
  const std::string kind = n.attrs().get_string("kind", "");
  if (kind != "pointwise" && kind != "injective") return false;
  for (const auto& bn : n.body()->nodes())
    if (!body_node_evaluable(*bn, ops)) return false;
  return !n.body()->nodes().empty() && n.num_outputs() > 0;
}

FusedPointwiseKernel emit_fused_on_demand(const Node& n, const OpRegistry& ops) {
  if (!is_on_demand_fused(n, ops))
    unsupported("codegen: {} is not a fused pointwise/injective node of evaluable ops", n.describe());
  const Graph& body = *n.body();
  KILN_CHECK(body.inputs().size() == static_cast<size_t>(n.num_inputs()), "{}: body takes {} inputs, node gives {}",
             n.describe(), body.inputs().size(), n.num_inputs());
  KILN_CHECK(body.outputs().size() == static_cast<size_t>(n.num_outputs()), "{}: body returns {}, node has {}",
             n.describe(), body.outputs().size(), n.num_outputs());
  FusedPointwiseKernel fk;
  std::vector<KernelBuffer> bufs;
  std::map<const Value*, std::string> names;
  const Shape& shape = n.output(0)->shape();
  for (int r = 0; r < n.num_outputs(); ++r) {
    if (n.output(r)->shape() != shape)
      unsupported("codegen: {}: results of different shapes {} and {}", n.describe(), n.output(0)->type().str(),
                  n.output(r)->type().str());
    bufs.push_back({fmt::format("out{}", r), n.output(r)->dtype(), true, n.output(r)->type().numel()});
  }
  for (Value* v : body.inputs()) {
    names[v] = fmt::format("in{}", names.size());
    bufs.push_back({names[v], v->dtype(), false, v->type().numel()});
  }
  auto add_constant = [&](Value* v) {
    if (!v->is_constant() || names.count(v)) return;
    names[v] = fmt::format("in{}", names.size());
    bufs.push_back({names[v], v->dtype(), false, v->type().numel()});
    fk.constants.push_back(v->data());
  };
  for (const auto& bn : body.nodes())
    for (Value* v : bn->inputs()) add_constant(v);
  for (Value* v : body.outputs()) add_constant(v);
  BodyEvaluator ev(body, ops, names);
  std::string loop;
  for (int r = 0; r < n.num_outputs(); ++r)
    loop += fmt::format("    out{}[i] = {};\n", r, ev.value(body.outputs()[r], "i"));
  if (deciding_only()) return fk;  // decided; the rest is text (codegen/core/deciding_only.h)
  std::vector<DType> dts = ev.dtypes();
  for (const KernelBuffer& b : bufs) dts.push_back(b.dtype);
  PointwiseKernel& k = fk.kernel;
  k.numel = shape_numel(shape);
  k.outputs = n.num_outputs();
  for (const KernelBuffer& b : bufs) k.counts.push_back(b.count);
  std::string src = fmt::format("// fused {}: {}\n", n.attrs().get_string("kind", ""), n.describe());
  src += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_params(bufs));
  src += ev.definitions();
  src += fmt::format("  const long long n = {}LL;\n", k.numel);
  src += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;\n";
  src += "       i += (long long)gridDim.x * blockDim.x) {\n";
  src += loop + "  }\n}\n";
  src += kernel_sim_entry(bufs);
  std::string named = name_kernel("kiln_fe", n.attrs().get_string("kind", "fused"), src, k.name);
  k.source = kernel_headers(dts) + std::string(expr_prelude()) + named;
  k.grid = static_cast<unsigned>(std::min<int64_t>((k.numel + k.block - 1) / k.block, 8192));
  return fk;
}

}  // namespace kiln::codegen
