#include "ir/op_registry.h"

#include "ir/symbolic_dim.h"

namespace kiln {

std::string_view op_category_name(OpCategory c) {
  switch (c) {
    case OpCategory::Pointwise:
      return "pointwise";
    case OpCategory::Injective:
      return "injective";
    case OpCategory::Reduction:
      return "reduction";
    case OpCategory::Compute:
      return "compute";
    case OpCategory::Fused:
      return "fused";
  }
  return "?";
}

Value* InferContext::input(int i) const {
  if (!has_input(i)) fail("operand {} is missing", i);
  return inputs_[i];
}

std::vector<DType> InferContext::input_dtypes() const {
  std::vector<DType> r;
  for (int i = 0; i < num_inputs(); ++i) r.push_back(has_input(i) ? dtype(i) : DType::F32);
  return r;
}

const Tensor* InferContext::value(int i) const {
  if (!has_input(i)) return nullptr;
  Value* v = inputs_[i];
  if (v->is_constant() && v->has_data()) return &v->data();
  return oracle_ ? oracle_(v) : nullptr;
}

const Tensor& InferContext::require_value(int i, std::string_view what) const {
  const Tensor* t = value(i);
  if (!t)
    fail("{} (operand {}, %{}) must be known at compile time: kiln compiles static shapes", what, i, input(i)->name());
  return *t;
}

const Tensor& KernelContext::in(int i) const {
  if (!has(i)) throw Error(fmt::format("{}: operand {} is missing", label, i));
  return *inputs[i];
}

void OpRegistry::add(OpDef def) {
  KILN_CHECK(!ops_.count(def.name), "op '{}' registered twice", def.name);
  KILN_CHECK(def.infer, "op '{}' has no inference", def.name);
  KILN_CHECK(def.category != OpCategory::Pointwise || def.expr, "pointwise op '{}' has no expr", def.name);
  std::string name = def.name;
  ops_.emplace(std::move(name), std::move(def));
}

const OpDef* OpRegistry::find(std::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

const OpDef& OpRegistry::get(std::string_view name) const {
  const OpDef* d = find(name);
  if (!d) throw Unsupported(fmt::format("unknown op '{}'", name));
  return *d;
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> r;
  for (auto& [k, v] : ops_) r.push_back(&v);
  return r;
}

namespace {

// Symbolic operand dims, or symbolic dims in attributes (a reshape's
// shape), reaching an op whose inference is not symbol-aware.
void refuse_symbolic_dims(const OpDef& def, InferContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    int k = first_symbolic_dim(ctx.shape(i));
    if (k >= 0)
      ctx.unsupported(
          "kiln cannot infer {} with symbolic dims yet: operand {} is {} (dim {} is {}); give static shapes "
          "(--shapes)",
          def.name, i, ctx.type(i).str(), k, dim_str(ctx.shape(i)[k]));
  }
  // Shape values (an i64 constant a Shape op gave) may hold symbolic dims too;
  // such values are short, so longer constants are not searched.
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    Value* v = ctx.has_input(i) ? ctx.input(i) : nullptr;
    if (!v || !v->is_constant() || !v->has_data() || v->dtype() != DType::I64 || v->data().numel() > 1024) continue;
    const int64_t* p = v->data().data<int64_t>();
    for (int64_t k = 0; k < v->data().numel(); ++k)
      if (p[k] < 0 && is_symbolic_dim(p[k]))
        ctx.unsupported("kiln cannot compute {} on symbolic shape values yet: operand {} holds {}", def.name, i,
                        dim_str(p[k]));
  }
  for (const auto& [name, a] : ctx.attrs()) {
    if (const auto* v = std::get_if<std::vector<int64_t>>(&a); v && has_symbolic_dims(*v))
      ctx.unsupported("kiln cannot infer {} with symbolic dims yet: attribute '{}' is [{}]", def.name, name,
                      dims_str(*v));
    if (const auto* v = std::get_if<int64_t>(&a); v && is_symbolic_dim(*v))
      ctx.unsupported("kiln cannot infer {} with symbolic dims yet: attribute '{}' is {}", def.name, name, dim_str(*v));
  }
}

}  // namespace

std::vector<TensorType> infer_types(const OpDef& def, InferContext& ctx) {
  int n = ctx.num_inputs();
  if (n < def.min_inputs || (def.max_inputs >= 0 && n > def.max_inputs)) {
    if (def.max_inputs < 0) ctx.fail("expects at least {} operands, got {}", def.min_inputs, n);
    ctx.fail("expects {} to {} operands, got {}", def.min_inputs, def.max_inputs, n);
  }
  int m = ctx.num_outputs();
  if (m < def.min_outputs || (def.max_outputs >= 0 && m > def.max_outputs)) ctx.fail("cannot produce {} results", m);
  for (const AttrSpec& s : def.attrs) {
    const Attribute* a = ctx.attrs().find(s.name);
    if (!a && s.required) ctx.fail("required attribute '{}' is missing", s.name);
    if (a && attr_kind(*a) != s.kind && !(s.kind == AttrKind::Float && attr_kind(*a) == AttrKind::Int))
      ctx.fail("attribute '{}' should be {} but is {}", s.name, attr_kind_name(s.kind), attr_kind_name(attr_kind(*a)));
  }
  for (auto& [name, a] : ctx.attrs()) {
    bool known = false;
    for (const AttrSpec& s : def.attrs) known |= s.name == name;
    if (!known) ctx.unsupported("attribute '{}' is not supported by kiln's {}", name, def.name);
  }
  if (!def.symbolic_dims) refuse_symbolic_dims(def, ctx);
  if (!def.takes_strings)
    for (int i = 0; i < n; ++i)
      if (ctx.has_input(i) && ctx.dtype(i) == DType::String)
        ctx.unsupported("kiln's {} does not take string tensors (operand {} is {})", def.name, i, ctx.type(i).str());
  std::vector<TensorType> r = def.infer(ctx);
  if (!def.takes_strings)
    for (size_t i = 0; i < r.size(); ++i)
      if (r[i].dtype == DType::String)
        ctx.unsupported("kiln's {} does not produce string tensors (result {})", def.name, i);
  // A symbol-aware formula that slipped (a symbolic dim through plain
  // arithmetic) gives a negative non-handle: never let it pass as a dim.
  for (size_t i = 0; i < r.size(); ++i)
    for (int64_t d : r[i].shape)
      if (d < 0 && !is_symbolic_dim(d))
        ctx.fail("inference gives result {} the invalid dim {} (a kiln bug with symbolic dims)", i, d);
  if (static_cast<int>(r.size()) != m) {
    // Inference may return more results than asked for (optional outputs);
    // keep only those requested.
    if (static_cast<int>(r.size()) > m) r.resize(m);
    else ctx.fail("inference produced {} results, {} expected", r.size(), m);
  }
  if (def.category == OpCategory::Pointwise || def.keeps_layout) {
    // A result with the rank of a channels-last operand is channels-last too.
    for (TensorType& t : r)
      for (int i = 0; i < n; ++i)
        if (ctx.has_input(i) && ctx.type(i).layout == Layout::NHWC && ctx.rank(i) == t.rank()) t.layout = Layout::NHWC;
  }
  return r;
}

}  // namespace kiln
