#include "codegen/emitters/reduction/emit_fused_reduction.h"

#include <climits>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "codegen/core/emit_body_eval.h"
#include "codegen/core/emit_expr.h"
#include "codegen/emitters/data_movement/emit_injective.h"
#include "codegen/emitters/reduction/emit_normalization.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"
#include "ops/reduction_spec.h"

namespace kiln::codegen {

namespace {

bool anchor_supported(const std::string& op) {
  return op == "softmax" || op == "log_softmax" || ops::find_reduction_spec(op) != nullptr ||
         normalization_supported(op);
}

const Node* find_anchor(const Graph& body, const OpRegistry& ops) {
  const Node* anchor = nullptr;
  for (const auto& bn : body.nodes()) {
    const OpDef* def = ops.find(bn->op());
    if (def && def->category == OpCategory::Reduction) {
      if (anchor) return nullptr;
      anchor = bn.get();
    }
  }
  return anchor;
}

// o0 * s0 + ... over the coordinates coordinates_code() declares.
// Symbolic strides (a broadcast along a symbolic image) read `ks` through `syms`.
std::string coord_offset(const std::vector<int64_t>& strides, const KernelSymbols* syms = nullptr) {
  std::string s;
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] == 0) continue;
    if (!s.empty()) s += " + ";
    if (is_symbolic_dim(strides[d])) {
      KILN_CHECK(syms, "codegen: a symbolic stride {} in a kernel without symbols", dim_str(strides[d]));
      s += fmt::format("(long long)o{} * {}", d, syms->lit(strides[d]));
    } else {
      s += strides[d] == 1 ? fmt::format("(long long)o{}", d) : fmt::format("(long long)o{} * {}LL", d, strides[d]);
    }
  }
  return s.empty() ? "0" : s;
}

}  // namespace

bool is_reduction_fused(const Node& n, const OpRegistry& ops) {
  return is_reduction_fused_with(n, ops, anchor_supported);
}

bool is_reduction_fused_with(const Node& n, const OpRegistry& ops, bool (*anchor_ok)(const std::string& op)) {
  if (n.op() != "fused" || !n.body() || n.attrs().get_string("kind", "") != "reduction") return false;
  const Node* anchor = find_anchor(*n.body(), ops);
  if (!anchor || !anchor_ok(anchor->op())) return false;
  for (const auto& bn : n.body()->nodes())
    if (bn.get() != anchor && !body_node_evaluable(*bn, ops)) return false;
  for (Value* v : anchor->inputs())
    if (!v) return false;
  return true;
}

FusedAnchor fused_anchor_io(const Node& n, const OpRegistry& ops, const std::map<const Value*, std::string>& computed) {
  if (n.op() != "fused" || !n.body()) fail("codegen: {} is not a fused node", n.describe());
  const Graph& body = *n.body();
  KILN_CHECK(body.inputs().size() == static_cast<size_t>(n.num_inputs()), "{}: body takes {} inputs, node gives {}",
             n.describe(), body.inputs().size(), n.num_inputs());
  KILN_CHECK(body.outputs().size() == static_cast<size_t>(n.num_outputs()), "{}: body returns {}, node has {}",
             n.describe(), body.outputs().size(), n.num_outputs());
  FusedAnchor fa;
  fa.anchor = find_anchor(body, ops);
  if (!fa.anchor) unsupported("codegen: {}: the body needs exactly one reduction-category op", n.describe());
  const Node& anchor = *fa.anchor;
  AnchorIO& io = fa.io;

  std::map<const Value*, std::string> names;
  bool narrow = true;
  for (int r = 0; r < n.num_outputs(); ++r) {
    io.buffers.push_back(
        {fmt::format("out{}", r), n.output(r)->dtype(), true, kernel_buffer_count(n.output(r)->type())});
    io.dtypes.push_back(n.output(r)->dtype());
  }
  auto add_buffer = [&](Value* v) {
    names[v] = fmt::format("in{}", names.size());
    io.buffers.push_back({names[v], v->dtype(), false, kernel_buffer_count(v->type())});
    io.dtypes.push_back(v->dtype());
  };
  for (Value* v : body.inputs())
    if (!computed.count(v)) add_buffer(v);
  for (const auto& bn : body.nodes())
    for (Value* v : bn->inputs())
      if (v && v->is_constant() && !names.count(v)) {
        add_buffer(v);
        fa.constants.push_back(v->data());
      }
  // A symbolic size's largest value is not known here: 64-bit indices.
  auto fits = [](const Value* v) { return !has_symbolic_dims(v->shape()) && v->type().numel() <= INT32_MAX; };
  for (const auto& bn : body.nodes()) {
    for (Value* v : bn->inputs())
      if (v) narrow = narrow && fits(v);
    for (int r = 0; r < bn->num_outputs(); ++r) narrow = narrow && fits(bn->output(r));
  }
  // Shape-generic (symbolic sizes): the anchor's kernel takes the symbols of
  // its operand 0 (every shape-generic anchor's set); a prologue's index maps
  // (an embedding's gather) spell theirs with the same slots, so the body
  // may use no other symbol.
  std::vector<Shape> body_shapes;
  for (const auto& bn : body.nodes()) {
    for (Value* v : bn->inputs())
      if (v) body_shapes.push_back(v->shape());
    for (int r = 0; r < bn->num_outputs(); ++r) body_shapes.push_back(bn->output(r)->shape());
  }
  const KernelSymbols syms(std::vector<Shape>{anchor.input(0)->shape()});
  if (KernelSymbols(body_shapes).names() != syms.names())
    unsupported("codegen: {}: the body uses symbols that {}'s operand {} does not", n.describe(), anchor.describe(),
                anchor.input(0)->type().str());
  const InjectiveSymbolsScope scope(syms.empty() ? nullptr : &syms);
  auto ev = std::make_shared<BodyEvaluator>(body, ops, names, syms.empty() ? nullptr : &syms);
  for (const auto& [v, lambda] : computed) ev->computed_by(v, lambda);

  // Epilogue: values depending on an anchor result, by the result (root).
  std::map<const Value*, int> root;
  for (int r = 0; r < anchor.num_outputs(); ++r) root[anchor.output(r)] = r;
  std::vector<const Node*> epilogue;
  for (const auto& bn : body.nodes()) {
    if (bn.get() == &anchor) continue;
    int rt = -1;
    for (Value* v : bn->inputs()) {
      auto it = root.find(v);
      if (it == root.end()) continue;
      if (rt >= 0 && rt != it->second)
        unsupported("codegen: {}: epilogue op {} combines two results of {}", n.describe(), bn->describe(),
                    anchor.op());
      rt = it->second;
    }
    if (rt < 0) continue;
    for (int r = 0; r < bn->num_outputs(); ++r) root[bn->output(r)] = rt;
    epilogue.push_back(bn.get());
  }
  // Results: stored with their anchor result, or recorded as operand 0 is read.
  const Value* op0 = anchor.input(0);
  std::vector<std::vector<std::pair<int, const Value*>>> stores(anchor.num_outputs());
  std::vector<std::pair<int, const Value*>> records;
  for (int r = 0; r < n.num_outputs(); ++r) {
    const Value* v = body.outputs()[r];
    auto it = root.find(v);
    if (it != root.end()) {
      stores[it->second].push_back({r, v});
    } else {
      if (v->shape() != op0->shape())
        unsupported("codegen: {}: result %{} {} is neither computed from {}'s results nor of its input's shape {}",
                    n.describe(), v->name(), v->type().str(), anchor.op(), op0->type().str());
      records.push_back({r, v});
    }
  }

  std::string lambdas;
  for (int r = 0; r < anchor.num_outputs(); ++r) {
    const Value* res = anchor.output(r);
    std::string code;
    std::map<const Value*, std::string> var = {{res, "v"}};
    int count = 0;
    for (const Node* en : epilogue) {
      if (root.at(en->output(0)) != r) continue;
      const Value* out = en->output(0);
      const OpDef& def = ops.get(en->op());
      if (en->op() == "reshape") {
        var[out] = var.at(en->input(0));
        continue;
      }
      if (def.category != OpCategory::Pointwise || !def.expr)
        unsupported(
            "codegen: {}: epilogue op {} is not pointwise (only pointwise ops and reshape are applied at the "
            "store)",
            n.describe(), en->describe());
      const TensorType& t = out->type();
      const std::string e = fmt::format("e{}", count++);
      std::string inner, loads_code;
      bool coords = false;
      std::vector<std::string> loads;
      std::vector<DType> dts;
      for (size_t k = 0; k < en->inputs().size(); ++k) {
        const Value* in = en->input(static_cast<int>(k));
        dts.push_back(in->dtype());
        std::string a;
        if (var.count(in)) {
          if (in->shape() != t.shape)
            unsupported("codegen: {}: epilogue op {} broadcasts a value computed from {}", n.describe(), en->describe(),
                        anchor.op());
          a = var.at(in);
        } else if (root.count(in)) {
          unsupported("codegen: {}: epilogue op {} reads a value of another anchor result", n.describe(),
                      en->describe());
        } else if (in->shape() == t.shape) {
          a = ev->value(in, "i");
        } else if (!has_symbolic_dims(in->shape()) && in->type().numel() == 1) {
          a = ev->value(in, "0");
        } else {
          if (broadcast_shapes(in->shape(), t.shape) != t.shape)
            fail("codegen: {}: operand {} does not broadcast to {}", en->describe(), in->type().str(), t.str());
          const bool symbolic = has_symbolic_dims(in->shape()) || has_symbolic_dims(t.shape);
          a = ev->value(in, symbolic ? coord_offset(symbolic_broadcast_strides(in->shape(), t.shape), &syms)
                                     : coord_offset(broadcast_strides(in->shape(), t.shape)));
          coords = true;
        }
        loads_code += fmt::format("      const {} a{} = {};\n", cuda_storage_type(in->dtype()), k, a);
        loads.push_back(cuda_load(in->dtype(), fmt::format("a{}", k)));
      }
      if (coords) inner += coordinates_code(t.shape, "i", "      ");
      inner += loads_code;
      ExprBuilder eb(dts);
      Expr ex = def.expr(eb, en->attrs());
      KILN_CHECK(ex.result_dtype() == t.dtype, "{}: expression gives {}, inferred {}", en->describe(),
                 dtype_name(ex.result_dtype()), dtype_name(t.dtype));
      for (const ExprNode& nd : ex.nodes) io.dtypes.push_back(nd.dtype);
      std::string rv = emit_expr(ex, loads, "x", "      ", inner);
      code += fmt::format("    {} {};\n    {{\n{}      {} = {};\n    }}\n", cuda_storage_type(t.dtype), e, inner, e,
                          cuda_store(t.dtype, rv));
      var[out] = e;
    }
    for (const auto& [ri, v] : stores[r]) code += fmt::format("    out{}[i] = {};\n", ri, var.at(v));
    lambdas += fmt::format("  const auto kiln_st{} = [&](long long i, {} v) {{\n{}    (void)i; (void)v;\n  }};\n", r,
                           cuda_storage_type(res->dtype()), code);
  }
  if (!records.empty()) {
    std::string code;
    for (const auto& [ri, v] : records) code += fmt::format("    out{}[i] = {};\n", ri, ev->value(v, "i"));
    lambdas += fmt::format("  const auto kiln_rec = [&](long long i) -> {} {{\n{}    return {};\n  }};\n",
                           cuda_storage_type(op0->dtype()), code, ev->value(op0, "i"));
    io.has_records = true;
  }
  for (Value* v : anchor.inputs()) (void)ev->value(v, "i");  // defines every lambda load() names
  io.setup = ev->definitions() + finish_index_types(lambdas, narrow);
  for (DType t : ev->dtypes()) io.dtypes.push_back(t);
  const bool has_records = io.has_records;
  const Node* an = fa.anchor;
  io.load = [ev, an, has_records](int k, const std::string& idx, bool record) {
    if (record && k == 0 && has_records) return fmt::format("kiln_rec({})", idx);
    return ev->value(an->input(k), idx);
  };
  io.store = [](int r, const std::string& idx, const std::string& value, const std::string& indent) {
    return fmt::format("{}kiln_st{}({}, {});\n", indent, r, idx, value);
  };
  return fa;
}

ReductionKernel emit_fused_reduction(const Node& n, const OpRegistry& ops, std::vector<Tensor>* constants) {
  if (!is_reduction_fused(n, ops))
    unsupported("codegen: {} is not a fused reduction node with a supported anchor", n.describe());
  FusedAnchor fa = fused_anchor_io(n, ops);
  const Node& a = *fa.anchor;
  const OpDef& def = ops.get(a.op());
  std::vector<TensorType> operands, results;
  for (Value* v : a.inputs()) operands.push_back(v->type());
  for (int r = 0; r < a.num_outputs(); ++r) results.push_back(a.output(r)->type());
  if (constants) *constants = fa.constants;
  if (a.op() == "softmax" || a.op() == "log_softmax") {
    int64_t axis = a.attrs().get_int("axis", -1);
    if (axis < 0) axis += operands[0].rank();
    return emit_softmax(a.op() == "log_softmax", operands[0], static_cast<int>(axis), fa.io);
  }
  if (const ops::ReductionSpec* s = ops::find_reduction_spec(a.op())) {
    if (operands.size() != 1 || results.size() != 1)
      unsupported("codegen: {}: anchor {} with {} operands", n.describe(), a.describe(), operands.size());
    return emit_reduction(*s, operands[0], a.attrs().get_ints("axes"), results[0], fa.io);
  }
  return emit_normalization(def, a.attrs(), operands, results, fa.io);
}

}  // namespace kiln::codegen
