#include "codegen/core/emit_body_eval.h"

#include <climits>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "codegen/emitters/data_movement/emit_injective.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

namespace {

// A literal of dtype t's storage type with the given bit pattern.
std::string storage_literal(DType t, uint64_t bits) {
  switch (t) {
    case DType::F32:
      return fmt::format("__uint_as_float(0x{:x}u)", static_cast<uint32_t>(bits));
    case DType::F64:
      return fmt::format("__longlong_as_double(0x{:x}LL)", bits);
    case DType::F16:
      return fmt::format("__ushort_as_half((unsigned short)0x{:x})", static_cast<uint16_t>(bits));
    case DType::BF16:
      return fmt::format("__ushort_as_bfloat16((unsigned short)0x{:x})", static_cast<uint16_t>(bits));
    default:
      return fmt::format("({})0x{:x}ULL", cuda_storage_type(t), bits);
  }
}

// o0 * s0 + o1 * s1 ... (terms with stride 0 dropped), "0" when none; a
// symbolic stride spelled through `syms`.
std::string linear_offset(const std::vector<int64_t>& strides, const KernelSymbols* syms) {
  std::string s;
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] == 0) continue;
    if (!s.empty()) s += " + ";
    if (is_symbolic_dim(strides[d])) {
      KILN_CHECK(syms, "codegen: a symbolic stride {} in a body evaluated without symbols", dim_str(strides[d]));
      s += fmt::format("(long long)o{} * {}", d, syms->lit(strides[d]));
      continue;
    }
    s += strides[d] == 1 ? fmt::format("(long long)o{}", d) : fmt::format("(long long)o{} * {}LL", d, strides[d]);
  }
  return s.empty() ? "0" : s;
}

}  // namespace

bool body_node_evaluable(const Node& n, const OpRegistry& ops) {
  if (n.body()) return false;
  for (Value* v : n.inputs())
    if (!v) return false;
  if (is_evaluable_range(n)) return true;
  const OpDef* def = ops.find(n.op());
  if (!def) return false;
  if (def->category == OpCategory::Pointwise && def->expr) return n.num_outputs() == 1;
  return injective_supported(n.op());
}

bool is_evaluable_range(const Node& n) {
  if (n.op() != "range" || n.body() || n.num_inputs() != 3 || n.num_outputs() != 1) return false;
  const DType t = n.output(0)->dtype();
  return n.output(0)->shape().size() == 1 && t != DType::Bool && (t == DType::F32 || t == DType::F64 || is_int(t));
}

BodyEvaluator::BodyEvaluator(const Graph& body, const OpRegistry& ops, std::map<const Value*, std::string> buffers,
                             const KernelSymbols* syms, std::map<const Value*, int64_t> scalars)
    : body_(body), ops_(ops), buffers_(std::move(buffers)), scalars_(std::move(scalars)) {
  if (syms) syms_ = *syms;
  // A symbolic size's largest value is not known here: 64-bit indices.
  auto check = [&](const Value* v) {
    narrow_ = narrow_ && !has_symbolic_dims(v->shape()) && v->type().numel() <= INT32_MAX;
  };
  for (Value* v : body_.inputs()) check(v);
  for (const auto& n : body_.nodes()) {
    for (Value* v : n->inputs())
      if (v) check(v);
    for (int r = 0; r < n->num_outputs(); ++r) check(n->output(r));
  }
}

std::string BodyEvaluator::value(const Value* v, const std::string& idx) {
  if (auto sv = scalars_.find(v); sv != scalars_.end()) {
    KILN_CHECK(syms_, "codegen: %{} holds a symbolic size, but the body is evaluated without symbols", v->name());
    return fmt::format("(({}){})", cuda_storage_type(v->dtype()), syms_->lit(sv->second));
  }
  if (auto c = callers_.find(v); c != callers_.end()) return fmt::format("{}({})", c->second, idx);
  auto b = buffers_.find(v);
  if (b != buffers_.end()) return fmt::format("{}[{}]", b->second, idx);
  if (!v->producer()) fail("codegen: body value %{} is neither an input, a constant nor computed", v->name());
  define(v);
  return fmt::format("{}({})", lambdas_.at(v), idx);
}

void BodyEvaluator::define(const Value* v) {
  if (lambdas_.count(v)) return;
  const Node& n = *v->producer();
  if (!body_node_evaluable(n, ops_))
    unsupported(
        "codegen: a fused body's {} cannot be evaluated on demand (only pointwise ops and the injective "
        "ops with index maps)",
        n.describe());
  const OpDef& def = ops_.get(n.op());
  const TensorType& t = v->type();
  const std::string S(cuda_storage_type(t.dtype));
  dtypes_.insert(t.dtype);
  std::string code;  // the lambda's body (inputs' lambdas get defined first, by value())
  if (is_evaluable_range(n)) {
    // start + i * delta as the reference computes it (emit_range): floats in
    // double, rounded once; integers wrapping in 64 bits. The limit is never
    // read (the length is the result's). A start holding a symbolic size
    // (`past`) comes from `ks` (value(): a scalar).
    const std::string start = value(n.input(0), "0"), delta = value(n.input(2), "0");
    if (is_float(t.dtype))
      code += fmt::format("    return ({})((double){} + (double)i * (double){});\n", S, start, delta);
    else
      code += fmt::format("    return ({})((unsigned long long){} + (unsigned long long)i * (unsigned long long){});\n",
                          S, start, delta);
  } else if (def.category == OpCategory::Pointwise) {
    std::vector<std::string> loads;
    std::vector<DType> dts;
    bool need_coords = false;
    std::vector<std::string> offs;
    for (Value* in : n.inputs()) {
      dtypes_.insert(in->dtype());
      dts.push_back(in->dtype());
      if (in->shape() == t.shape) {
        offs.push_back("i");
      } else if (!has_symbolic_dims(in->shape()) && in->type().numel() == 1) {
        offs.push_back("0");
      } else {
        if (broadcast_shapes(in->shape(), t.shape) != t.shape)
          fail("codegen: {}: operand {} does not broadcast to {}", n.describe(), in->type().str(), t.str());
        const bool symbolic = has_symbolic_dims(in->shape()) || has_symbolic_dims(t.shape);
        offs.push_back(linear_offset(
            symbolic ? symbolic_broadcast_strides(in->shape(), t.shape) : broadcast_strides(in->shape(), t.shape),
            syms_ ? &*syms_ : nullptr));
        need_coords = true;
      }
    }
    if (need_coords) code += coordinates_code(t.shape, "i", "    ");
    for (size_t k = 0; k < n.inputs().size(); ++k) {
      const Value* in = n.input(static_cast<int>(k));
      code += fmt::format("    const {} a{} = {};\n", cuda_storage_type(in->dtype()), k, value(in, offs[k]));
      loads.push_back(cuda_load(in->dtype(), fmt::format("a{}", k)));
    }
    ExprBuilder eb(dts);
    Expr e = def.expr(eb, n.attrs());
    KILN_CHECK(e.result_dtype() == t.dtype, "{}: expression gives {}, inferred {}", n.describe(),
               dtype_name(e.result_dtype()), dtype_name(t.dtype));
    for (const ExprNode& nd : e.nodes) dtypes_.insert(nd.dtype);
    std::string r = emit_expr(e, loads, "v", "    ", code);
    code += fmt::format("    return {};\n", cuda_store(t.dtype, r));
  } else {
    std::vector<TensorType> operands, outs;
    for (Value* in : n.inputs()) operands.push_back(in->type());
    for (int r = 0; r < n.num_outputs(); ++r) outs.push_back(n.output(r)->type());
    auto read = [&](int k, const std::string& off) { return value(n.input(k), off); };
    InjectiveMap m = injective_index_map(def, n.attrs(), operands, outs, v->producer_output(), read);
    code += coordinates_code(t.shape, "i", "    ");
    code += "    int src = 0;\n    kidx off = 0;\n";
    code += m.code;
    for (size_t k = 0; k < operands.size(); ++k) {
      if (!m.data[k]) continue;
      KILN_CHECK(operands[k].dtype == t.dtype, "{}: operand {} is {}, the result {}", n.describe(), k,
                 operands[k].str(), t.str());
      code += fmt::format("    if (src == {}) return {};\n", k, value(n.input(static_cast<int>(k)), "off"));
    }
    code += fmt::format("    return {};\n", m.fill_operand >= 0 ? value(n.input(m.fill_operand), "0")
                                                                : storage_literal(t.dtype, m.fill_bits));
  }
  const std::string name = fmt::format("kiln_ev{}", lambdas_.size());
  defs_ += fmt::format("  // %{} = {}\n  const auto {} = [&](long long i) -> {} {{\n", v->name(), n.op(), name, S);
  defs_ += code + "  };\n";
  lambdas_[v] = name;
}

std::string BodyEvaluator::definitions() const { return finish_index_types(defs_, narrow_); }

std::vector<DType> BodyEvaluator::dtypes() const { return {dtypes_.begin(), dtypes_.end()}; }

}  // namespace kiln::codegen
