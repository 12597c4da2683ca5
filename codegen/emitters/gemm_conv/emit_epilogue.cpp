#include "codegen/emitters/gemm_conv/emit_epilogue.h"

#include <algorithm>
#include <climits>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "codegen/emitters/gemm_conv/epilogue_place.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

namespace {

constexpr int64_t kNarrow = (int64_t{1} << 31) - 1;

bool is_layout_op(const std::string& op) {
  return op == "reshape" || op == "identity" || op == "transpose" || op == "split" || op == "slice" || op == "gather";
}

// 64-bit indices past kNarrow elements, or at a symbolic size (its largest value is not known here).
bool wide_type(const TensorType& t) { return has_symbolic_dims(t.shape) || t.numel() > kNarrow; }

KernelSymbols symbols_of(const std::vector<TensorType>& slots, const std::vector<TensorType>& results,
                         const Graph* body) {
  std::vector<Shape> shapes;
  for (const TensorType& t : slots) shapes.push_back(t.shape);
  for (const TensorType& t : results) shapes.push_back(t.shape);
  if (body)
    for (const auto& bn : body->nodes())
      for (Value* o : bn->outputs()) shapes.push_back(o->shape());
  return KernelSymbols(shapes);
}

}  // namespace

Epilogue Epilogue::from_node(const Node& anchor) {
  Epilogue e;
  e.anchor_ = &anchor;
  e.node_ = &anchor;
  KILN_CHECK(anchor.num_outputs() == 1, "{}: an anchor with {} results", anchor.describe(), anchor.num_outputs());
  e.results_.push_back(anchor.output(0)->type());
  for (int i = 0; i < anchor.num_inputs(); ++i) {
    Value* v = anchor.input(i);
    e.anchor_slots_.push_back(v ? i : -1);
    e.slots_.push_back(v ? v->type() : TensorType());
    e.slot_values_.push_back(v);
  }
  // A symbolic size's largest value is not known here: 64-bit indices.
  e.wide_ = wide_type(anchor.output(0)->type());
  for (const TensorType& t : e.slots_) e.wide_ = e.wide_ || wide_type(t);
  e.syms_ = symbols_of(e.slots_, e.results_, nullptr);
  return e;
}

Epilogue Epilogue::from_fused(const Node& n, const OpRegistry& ops, const std::vector<std::string>& anchors) {
  if (n.op() != "fused" || !n.body()) unsupported("codegen: {} is not a fused node", n.describe());
  const Graph& body = *n.body();
  KILN_CHECK(body.inputs().size() == static_cast<size_t>(n.num_inputs()), "{}: body takes {} inputs, node gives {}",
             n.describe(), body.inputs().size(), n.num_inputs());
  KILN_CHECK(body.outputs().size() == static_cast<size_t>(n.num_outputs()), "{}: body returns {}, node has {}",
             n.describe(), body.outputs().size(), n.num_outputs());
  Epilogue e;
  e.node_ = &n;
  e.body_ = &body;
  e.ops_ = &ops;
  for (Value* v : body.inputs()) {
    e.slots_.push_back(v->type());
    e.slot_values_.push_back(v);
  }
  std::unordered_map<const kiln::Value*, bool> in_group;  // values holding anchor elements
  for (const auto& bn : body.nodes()) {
    const bool is_anchor = std::find(anchors.begin(), anchors.end(), bn->op()) != anchors.end();
    if (is_anchor) {
      if (e.anchor_)
        unsupported("codegen: {}: two anchors ({} and {}) in one body", n.describe(), e.anchor_->op(), bn->op());
      e.anchor_ = bn.get();
      in_group[bn->output(0)] = true;
    } else {
      if (!e.anchor_)
        unsupported("codegen: {}: {} comes before the anchor; only epilogue ops may follow it", n.describe(), bn->op());
      const OpDef* def = ops.find(bn->op());
      const bool pointwise = def && def->category == OpCategory::Pointwise && def->expr && !bn->body();
      if (!pointwise && !is_layout_op(bn->op()))
        unsupported(
            "codegen: {}: {} cannot be an epilogue op (pointwise, reshape, transpose, split, slice or "
            "gather of one index)",
            n.describe(), bn->op());
      bool reads_group = false;
      for (int i = 0; i < bn->num_inputs(); ++i) {
        Value* v = bn->input(i);
        if (!v) unsupported("codegen: {}: {} has an absent operand", n.describe(), bn->op());
        if (in_group.count(v)) {
          if (!pointwise && i != 0)
            unsupported("codegen: {}: {} reads an epilogue value as operand {}", n.describe(), bn->op(), i);
          reads_group = true;
        }
      }
      if (!reads_group) unsupported("codegen: {}: {} reads no value of the anchor's result", n.describe(), bn->op());
      if (bn->op() == "gather") {
        // One constant index: a body constant, or a constant operand of the fused node.
        Value* iv = bn->input(1);
        const Value* src = iv;
        if (!iv->is_constant()) {
          auto it = std::find(body.inputs().begin(), body.inputs().end(), iv);
          src = it == body.inputs().end() ? nullptr : n.input(static_cast<int>(it - body.inputs().begin()));
        }
        if (!src || !src->is_constant() || src->type().numel() != 1 || !is_int(src->dtype()))
          unsupported("codegen: {}: a gather in an epilogue needs one constant integer index", n.describe());
        e.gather_index_[bn.get()] = src->data();
      }
      for (Value* o : bn->outputs()) in_group[o] = true;
    }
    // Constants the body reads become slots after the node's inputs.
    for (Value* v : bn->inputs())
      if (v && v->is_constant() && std::find(e.slot_values_.begin(), e.slot_values_.end(), v) == e.slot_values_.end()) {
        e.slots_.push_back(v->type());
        e.slot_values_.push_back(v);
        e.constants_.push_back(v->data());
      }
  }
  if (!e.anchor_) unsupported("codegen: {}: no anchor ({}) in the body", n.describe(), fmt::join(anchors, ", "));
  KILN_CHECK(e.anchor_->num_outputs() == 1, "{}: anchor {} has {} results", n.describe(), e.anchor_->op(),
             e.anchor_->num_outputs());
  for (int r = 0; r < n.num_outputs(); ++r) {
    Value* v = body.outputs()[r];
    if (!in_group.count(v))
      unsupported("codegen: {}: result {} (%{}) is not computed from the anchor's result", n.describe(), r, v->name());
    e.results_.push_back(n.output(r)->type());
  }
  for (int i = 0; i < e.anchor_->num_inputs(); ++i) {
    Value* v = e.anchor_->input(i);
    if (!v) {
      e.anchor_slots_.push_back(-1);
      continue;
    }
    if (in_group.count(v)) unsupported("codegen: {}: the anchor reads its own epilogue", n.describe());
    auto it = std::find(e.slot_values_.begin(), e.slot_values_.end(), v);
    KILN_CHECK(it != e.slot_values_.end(), "{}: anchor operand %{} is neither an input nor a constant", n.describe(),
               v->name());
    e.anchor_slots_.push_back(static_cast<int>(it - e.slot_values_.begin()));
  }
  e.wide_ = wide_type(e.anchor_->output(0)->type());
  for (const TensorType& t : e.slots_) e.wide_ = e.wide_ || wide_type(t);
  for (const TensorType& t : e.results_) e.wide_ = e.wide_ || wide_type(t);
  for (const auto& bn : body.nodes())
    for (Value* o : bn->outputs()) e.wide_ = e.wide_ || wide_type(o->type());
  e.syms_ = symbols_of(e.slots_, e.results_, &body);
  return e;
}

void Epilogue::read_symbols_of(const KernelSymbols& kernel) {
  for (const std::string& name : syms_.names())
    if (std::find(kernel.names().begin(), kernel.names().end(), name) == kernel.names().end())
      unsupported("codegen epilogue: its symbol {} is not one of the kernel's ({})", name,
                  fmt::join(kernel.names(), ", "));
  syms_ = kernel;
}

int Epilogue::anchor_slot(int i) const {
  return i >= 0 && i < static_cast<int>(anchor_slots_.size()) ? anchor_slots_[i] : -1;
}

std::vector<const Node*> Epilogue::epilogue_nodes() const {
  std::vector<const Node*> after;
  if (!body_) return after;
  bool seen = false;
  for (const auto& bn : body_->nodes()) {
    if (seen) after.push_back(bn.get());
    seen = seen || bn.get() == anchor_;
  }
  return after;
}

std::string Epilogue::params() const {
  std::string p;
  for (size_t r = 0; r < results_.size(); ++r)
    p += fmt::format("{}KILN_PTR({}) out{}", r ? ", " : "", cuda_storage_type(results_[r].dtype), r);
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (!slot_values_[s]) {
      // An absent operand still has a buffer position (the sim backend passes every input).
      p += fmt::format(", KILN_PTR(const unsigned char) in{}", s);
      continue;
    }
    p += fmt::format(", KILN_PTR(const {}) in{}", cuda_storage_type(slots_[s].dtype), s);
  }
  return p;
}

std::string Epilogue::sim_entry(const std::string& name, bool workspace, bool tickets, bool syms) const {
  std::string b = "#ifdef KILN_SIM\n";
  b += fmt::format(
      "extern \"C\" int {}_sim(const ::kiln::sim::LaunchConfig* cfg, void* const* buffers, const long long* counts, "
      "std::string* error) {{\n  try {{\n    ::kiln::sim::launch(*cfg, {}",
      name, name);
  const size_t nr = results_.size();
  for (size_t r = 0; r < nr; ++r)
    b += fmt::format(",\n        ::kiln::sim::arg(static_cast<{}*>(buffers[{}]), counts[{}], \"out{}\")",
                     cuda_storage_type(results_[r].dtype), r, r, r);
  for (size_t s = 0; s < slots_.size(); ++s)
    b += fmt::format(",\n        ::kiln::sim::arg(static_cast<const {}*>(buffers[{}]), counts[{}], \"in{}\")",
                     slot_values_[s] ? std::string(cuda_storage_type(slots_[s].dtype)) : "unsigned char", nr + s,
                     nr + s, s);
  if (workspace)
    b += fmt::format(",\n        ::kiln::sim::arg(static_cast<float*>(buffers[{}]), counts[{}], \"ws\")",
                     nr + slots_.size(), nr + slots_.size());
  if (tickets)
    b += fmt::format(",\n        ::kiln::sim::arg(static_cast<unsigned*>(buffers[{}]), counts[{}], \"tickets\")",
                     nr + slots_.size() + 1, nr + slots_.size() + 1);
  if (syms)  // a shape-generic kernel's kiln_syms, by value (codegen/core/size_expr.h)
    b += fmt::format(",\n        *static_cast<const kiln_syms*>(buffers[{}])",
                     nr + slots_.size() + (workspace ? 1 : 0) + (tickets ? 1 : 0));
  b += ");\n    return 0;\n";
  b += "  } catch (const ::kiln::sim::SimError& ex) {\n    *error = ex.what();\n    return 1;\n";
  b += "  } catch (const std::exception& ex) {\n    *error = ex.what();\n    return 2;\n  }\n}\n#endif\n";
  return b;
}

std::string Epilogue::fp_includes() const {
  bool f16 = false, bf16 = false, low_bit = false;
  auto see = [&](DType t) {
    f16 = f16 || t == DType::F16;
    bf16 = bf16 || t == DType::BF16;
    low_bit = low_bit || is_low_bit(t);
  };
  for (const TensorType& t : results_) see(t.dtype);
  for (size_t s = 0; s < slots_.size(); ++s)
    if (slot_values_[s]) see(slots_[s].dtype);
  see(anchor_->output(0)->dtype());
  if (body_)
    for (const auto& bn : body_->nodes())
      for (Value* o : bn->outputs()) see(o->dtype());
  std::string s;
  if (f16 || bf16) {
    s += "#ifndef KILN_SIM\n";
    if (f16) s += "#include <cuda_fp16.h>\n";
    if (bf16) s += "#include <cuda_bf16.h>\n";
    s += "#endif\n";
  }
  if (low_bit) s += low_bit_prelude();  // an epilogue that casts to, or quantizes into, a low-bit type
  return s;
}

std::string symbolic_cut_refusal(const Node& bn) {
  const Shape& is = bn.input(0)->shape();
  const Shape& os = bn.output(0)->shape();
  const int r = static_cast<int>(is.size());
  if (bn.op() == "gather") {
    const int a = normalize_axis(bn.attrs().get_int("axis", 0), r, "gather axis");
    if (is_symbolic_dim(is[a]))
      return fmt::format("picks along static dims only (gather axis {} is {})", a, dim_str(is[a]));
    return "";
  }
  if (bn.op() != "slice") return "";
  const std::vector<int64_t> st = bn.attrs().get_ints("starts"), sp = bn.attrs().get_ints("steps");
  if (static_cast<int>(st.size()) != r || static_cast<int>(sp.size()) != r || static_cast<int>(os.size()) != r)
    return "slices with starts and steps given for every dim only";
  for (int d = 0; d < r; ++d) {
    if (!is_symbolic_dim(is[d]) && !is_symbolic_dim(os[d])) continue;
    if (st[d] != 0 || sp[d] != 1 || os[d] != is[d])
      return fmt::format("slices along static dims only (dim {} is {} and the slice keeps {} of it)", d, dim_str(is[d]),
                         dim_str(os[d]));
  }
  return "";
}

// Coordinates of index `pos` over `shape`, as variables `<p>_<d>`.
// A dim as C text: a constant as a number, a symbolic one from `ks` (a shape-generic kernel).
std::string dim_c(const KernelSymbols& ks, int64_t d) { return is_symbolic_dim(d) ? ks.lit(d) : std::to_string(d); }

std::vector<std::string> epilogue_coords(const std::string& pos, const Shape& shape, const std::string& p,
                                         const char* idx, const std::string& ind, std::string& b,
                                         const KernelSymbols& ks) {
  const int r = static_cast<int>(shape.size());
  std::vector<std::string> c(r);
  if (r == 0) return c;
  b += fmt::format("{}{} {}_r = {};\n", ind, idx, p, pos);
  for (int d = r - 1; d >= 0; --d) {
    c[d] = fmt::format("{}_{}", p, d);
    if (shape[d] == 1) {
      b += fmt::format("{}const {} {} = 0;\n", ind, idx, c[d]);
    } else if (d == 0) {
      b += fmt::format("{}const {} {} = {}_r;\n", ind, idx, c[d], p);
    } else {
      b += fmt::format("{}const {} {} = {}_r % {}; {}_r /= {};\n", ind, idx, c[d], p, dim_c(ks, shape[d]), p,
                       dim_c(ks, shape[d]));
    }
    b += fmt::format("{}(void){};  // a broadcast operand may not read it\n", ind, c[d]);
  }
  return c;
}

std::string epilogue_linear(const std::vector<std::string>& c, const std::vector<int64_t>& strides, const char* idx,
                            const KernelSymbols& ks) {
  std::string s;
  for (size_t d = 0; d < c.size(); ++d) {
    if (strides[d] == 0) continue;
    if (!s.empty()) s += " + ";
    s += strides[d] == 1 ? c[d] : fmt::format("{} * ({}){}", c[d], idx, dim_c(ks, strides[d]));
  }
  return s.empty() ? "0" : s;
}

std::string epilogue_and_ok(const std::string& a, const std::string& b) {
  if (a == "true") return b;
  if (b == "true") return a;
  return fmt::format("({} && {})", a, b);
}

// The places of a layout op's results (reshape, identity, transpose, split,
// slice, one-index gather) given its input's place `src`: statements into `b`
// mapping the element's index, the variables named `pre` with their kind
// ("e_{}3" -> e_p3, e_ok3, e_c3_...), so a second walk with another `pre` can
// map another element alongside.
void Epilogue::place_layout(const Node& node, const EpiloguePlace& src, const std::string& pre, const std::string& ind,
                            std::string& b, std::unordered_map<const kiln::Value*, EpiloguePlace>& place) const {
  const Node* bn = &node;
  const std::string& op = bn->op();
  const char* idx = index_type();
  auto nm = [&](const char* kind) { return fmt::format(fmt::runtime(pre), kind); };
  const std::string p = nm("p"), okv = nm("ok");
  // A shape-generic kernel (symbols()) splits and joins coordinates by the
  // sizes read from `ks`; a static one by numbers (the text it always had).
  auto coords = [&](const Shape& s) { return epilogue_coords(src.pos, s, nm("c"), idx, ind, b, syms_); };
  auto linear = [&](const std::vector<std::string>& c, const Shape& s) {
    return has_symbolic_dims(s) ? epilogue_linear(c, symbolic_strides(s), idx, syms_)
                                : epilogue_linear(c, strides_of(s), idx);
  };
  // A shape-generic epilogue (a plan with shape profiles) cuts and picks
  // along static dims only: a symbolic dim passes whole (rotary's halves of
  // the head dim over [b, h, seq, d]), so the element's bounds stay constants.
  if (!syms_.empty() && (op == "slice" || op == "gather")) {
    const std::string why = symbolic_cut_refusal(*bn);
    if (!why.empty()) unsupported("codegen epilogue: {}: a shape-generic epilogue {}", bn->describe(), why);
  }
  if (op == "reshape" || op == "identity") {
    place[bn->output(0)] = EpiloguePlace{src.ok, src.pos, src.var, src.dtype, bn->output(0)->shape()};
    return;
  }
  if (op == "transpose") {
    std::vector<int64_t> perm = bn->attrs().get_ints("perm");
    const Shape& os = bn->output(0)->shape();
    std::vector<std::string> c = coords(src.shape);
    std::vector<std::string> oc;
    for (int64_t q : perm) oc.push_back(c.at(q));
    b += fmt::format("{}const {} {} = {};\n", ind, idx, p, linear(oc, os));
    place[bn->output(0)] = EpiloguePlace{src.ok, p, src.var, src.dtype, os};
    return;
  }
  if (op == "split") {
    const int r = static_cast<int>(src.shape.size());
    const int a = normalize_axis(bn->attrs().require_int("axis"), r, "split axis");
    if (is_symbolic_dim(src.shape[a]))
      unsupported("codegen epilogue: {}: a shape-generic epilogue splits along static axes only (axis {} is {})",
                  bn->describe(), a, dim_str(src.shape[a]));
    std::vector<std::string> c = coords(src.shape);
    int64_t start = 0;
    for (int k = 0; k < bn->num_outputs(); ++k) {
      Value* o = bn->output(k);
      const int64_t len = o->shape()[a];
      std::vector<std::string> oc = c;
      oc[a] = fmt::format("({} - {})", c[a], start);
      const std::string ok = fmt::format("{}_{}", okv, k), pk = fmt::format("{}_{}", p, k);
      b += fmt::format("{}const bool {} = {} && {} >= {} && {} < {};\n", ind, ok, src.ok, c[a], start, c[a],
                       start + len);
      b += fmt::format("{}const {} {} = {};\n", ind, idx, pk, linear(oc, o->shape()));
      place[o] = EpiloguePlace{ok, pk, src.var, src.dtype, o->shape()};
      start += len;
    }
    return;
  }
  if (op == "slice") {
    std::vector<int64_t> st = bn->attrs().get_ints("starts"), sp = bn->attrs().get_ints("steps");
    const Shape& os = bn->output(0)->shape();
    const int r = static_cast<int>(src.shape.size());
    KILN_CHECK(static_cast<int>(st.size()) == r && static_cast<int>(sp.size()) == r,
               "codegen epilogue: {}: starts/steps are not canonical (one per dim)", bn->describe());
    std::vector<std::string> c = coords(src.shape);
    std::vector<std::string> oc(r);
    std::string ok = src.ok;
    for (int d = 0; d < r; ++d) {
      if (st[d] == 0 && sp[d] == 1 && os[d] == src.shape[d]) {
        oc[d] = c[d];
        continue;
      }
      // t = (c - start) * sign(step): the element is in the slice when t >= 0, t % |step| == 0 and
      // t / |step| < out dim.
      const std::string t = fmt::format("{}_{}", nm("t"), d);
      const int64_t step = sp[d] > 0 ? sp[d] : -sp[d];
      b += fmt::format("{}const {} {} = {};\n", ind, idx, t,
                       sp[d] > 0 ? fmt::format("{} - {}", c[d], st[d]) : fmt::format("{} - {}", st[d], c[d]));
      const std::string cond =
          step == 1 ? fmt::format("({} >= 0 && {} < {})", t, t, os[d])
                    : fmt::format("({} >= 0 && {} % {} == 0 && {} / {} < {})", t, t, step, t, step, os[d]);
      ok = epilogue_and_ok(ok, cond);
      oc[d] = step == 1 ? t : fmt::format("({} / {})", t, step);
    }
    b += fmt::format("{}const bool {} = {};\n", ind, okv, ok);
    b += fmt::format("{}const {} {} = {} ? {} : 0;\n", ind, idx, p, okv, linear(oc, os));
    place[bn->output(0)] = EpiloguePlace{okv, p, src.var, src.dtype, os};
    return;
  }
  if (op == "gather") {
    const int r = static_cast<int>(src.shape.size());
    const int a = normalize_axis(bn->attrs().get_int("axis", 0), r, "gather axis");
    auto gi = gather_index_.find(bn);
    KILN_CHECK(gi != gather_index_.end(), "codegen epilogue: {}: no constant index", bn->describe());
    const Tensor* data = &gi->second;
    if (data->numel() != 1 || !is_int(data->dtype()))
      unsupported("codegen epilogue: {}: gather needs one integer index", bn->describe());
    int64_t ix = data->get_int(0);
    if (ix < 0) ix += src.shape[a];
    if (ix < 0 || ix >= src.shape[a])
      fail("codegen epilogue: {}: gather index {} is out of range for dim {}", bn->describe(), data->get_int(0),
           src.shape[a]);
    std::vector<std::string> c = coords(src.shape);
    std::vector<std::string> oc;
    for (int d = 0; d < a; ++d) oc.push_back(c[d]);
    for (int j = 0; j < data->rank(); ++j) oc.push_back("0");
    for (int d = a + 1; d < r; ++d) oc.push_back(c[d]);
    const Shape& os = bn->output(0)->shape();
    b += fmt::format("{}const bool {} = {};\n", ind, okv, epilogue_and_ok(src.ok, fmt::format("{} == {}", c[a], ix)));
    b += fmt::format("{}const {} {} = {};\n", ind, idx, p, linear(oc, os));
    place[bn->output(0)] = EpiloguePlace{okv, p, src.var, src.dtype, os};
    return;
  }
  fail("codegen epilogue: {} is not a layout op", bn->describe());
}

std::string Epilogue::code(const std::string& acc, const std::string& index, const std::string& ind0) const {
  const char* idx = index_type();
  const std::string ind = ind0 + "  ";
  std::string b = ind0 + "{\n";
  const TensorType& at = anchor_->output(0)->type();
  std::unordered_map<const kiln::Value*, EpiloguePlace> place;
  b += fmt::format("{}const {} e_p0 = {};\n", ind, idx, index);
  b += fmt::format("{}const {} e_v0 = {};\n", ind, cuda_storage_type(at.dtype), cuda_store(at.dtype, acc));
  place[anchor_->output(0)] = EpiloguePlace{"true", "e_p0", "e_v0", at.dtype, at.shape};
  int counter = 1;
  auto slot_of = [&](const kiln::Value* v) {
    auto it = std::find(slot_values_.begin(), slot_values_.end(), v);
    KILN_CHECK(it != slot_values_.end(), "codegen epilogue: %{} is not a slot", v->name());
    return static_cast<int>(it - slot_values_.begin());
  };
  for (const Node* bn : epilogue_nodes()) {
    const std::string& op = bn->op();
    const int id = counter++;
    const EpiloguePlace& src = [&]() -> const EpiloguePlace& {
      for (Value* v : bn->inputs())
        if (place.count(v)) return place.at(v);
      fail("codegen epilogue: {} reads no epilogue value", bn->describe());
    }();
    const std::string vv = fmt::format("e_v{}", id);
    if (!syms_.empty() && !is_layout_op(op) && ops_->get(op).category != OpCategory::Pointwise)
      unsupported("codegen epilogue: {}: a shape-generic epilogue takes pointwise and layout ops only", bn->describe());
    if (is_layout_op(op)) {
      place_layout(*bn, src, fmt::format("e_{{}}{}", id), ind, b, place);
      continue;
    }
    // A pointwise op: in-group operands share the element's index; the others broadcast into its shape.
    const OpDef& def = ops_->get(op);
    const Shape& os = bn->output(0)->shape();
    std::vector<DType> dts;
    std::vector<std::string> ins;
    std::vector<std::string> oc;  // the element's coordinates, computed once when an operand broadcasts
    bool have_coords = false;
    for (int i = 0; i < bn->num_inputs(); ++i) {
      Value* v = bn->input(i);
      dts.push_back(v->dtype());
      auto it = place.find(v);
      if (it != place.end()) {
        // docs/fusion.md: in-group operands hold the same element, in the op's own shape.
        if (it->second.pos != src.pos || it->second.ok != src.ok || it->second.shape != os)
          unsupported("codegen epilogue: {} combines epilogue values of different elements or shapes", bn->describe());
        ins.push_back(cuda_load(v->dtype(), it->second.var));
        continue;
      }
      const int s = slot_of(v);
      std::string off;
      if (v->shape() == os) {
        off = src.pos;
      } else if (!has_symbolic_dims(v->shape()) && v->type().numel() == 1) {
        off = std::string(1, '0');  // (not = "0": GCC 12 -Wrestrict false positive)
      } else {
        if (!have_coords) {
          oc = epilogue_coords(src.pos, os, fmt::format("e_c{}", id), idx, ind, b, syms_);
          have_coords = true;
        }
        off = has_symbolic_dims(os) || has_symbolic_dims(v->shape())
                  ? epilogue_linear(oc, symbolic_broadcast_strides(v->shape(), os), idx, syms_)
                  : epilogue_linear(oc, broadcast_strides(v->shape(), os), idx);
      }
      const std::string a = fmt::format("e_a{}_{}", id, i);
      // Elements outside the value (split/slice parts) read nothing.
      b += fmt::format("{}const {} {} = {}in{}[{} ? {} : 0];\n", ind, cuda_storage_type(v->dtype()), a, "", s, src.ok,
                       off);
      ins.push_back(cuda_load(v->dtype(), a));
    }
    ExprBuilder eb(dts);
    Expr ex = def.expr(eb, bn->attrs());
    const DType odt = bn->output(0)->dtype();
    KILN_CHECK(ex.result_dtype() == odt, "codegen epilogue: {}: expression gives {}, inferred {}", bn->describe(),
               dtype_name(ex.result_dtype()), dtype_name(odt));
    std::string res = emit_expr(ex, ins, fmt::format("e_x{}_", id), ind, b);
    b += fmt::format("{}const {} {} = {};\n", ind, cuda_storage_type(odt), vv, cuda_store(odt, res));
    place[bn->output(0)] = EpiloguePlace{src.ok, src.pos, vv, odt, os};
  }
  const std::vector<kiln::Value*> outs = body_ ? body_->outputs() : std::vector<kiln::Value*>{anchor_->output(0)};
  for (size_t r = 0; r < outs.size(); ++r) {
    const EpiloguePlace& pl = place.at(outs[r]);
    KILN_CHECK(pl.dtype == results_[r].dtype, "codegen epilogue: result {} is {}, the value {}", r,
               dtype_name(results_[r].dtype), dtype_name(pl.dtype));
    if (pl.ok == "true") b += fmt::format("{}out{}[{}] = {};\n", ind, r, pl.pos, pl.var);
    else b += fmt::format("{}if ({}) out{}[{}] = {};\n", ind, pl.ok, r, pl.pos, pl.var);
  }
  return b + ind0 + "}\n";
}

}  // namespace kiln::codegen
