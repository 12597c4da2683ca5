// ONNX control flow: If, Loop and Scan become kiln's `if`, `loop` and `scan`
// (ir/control_flow.h), their subgraphs regions whose outer reads are
// captured as operands (ImportContext::import_regions).
//
//   If (1, 11, 13, 16, 19, 21, 23+): a condition known at compile time
//     inlines the chosen branch (no node at all); otherwise both branches
//     become regions and must give the same static types.
//   Loop (1, 11, 13, 16, 19, 21, 23+): loop-carried values must keep their
//     type across iterations (kiln compiles static shapes); scan outputs need
//     a trip count known at compile time and a condition that cannot end the
//     loop early, because their length is part of their static type. A loop
//     stays a loop, except one whose body needs a value of each iteration at
//     compile time (a Slice start from the iteration number): with its trip
//     count (at most 256) and conditions known, it is unrolled at import.
//   Scan 8 (batched, sequence_lens only when every entry is the full length),
//     9, 11, 16, 19, 21, 23+ (negative axes from 11).
//
// Sequence and optional values do not cross region boundaries (they are
// resolved at import, see adapters_sequence.cpp): only an inlined subgraph
// carries them. An If whose branches return one is inlined when its
// condition is known at compile time (also from an input the caller
// supplies, as a shape operand would be); a Loop carrying one is unrolled,
// which needs its trip count and conditions at compile time. Otherwise such
// a subgraph is unsupported, named as such.
#include <algorithm>

#include "frontend/import_context.h"
#include "ir/data_dependent.h"
#include "ir/short_name.h"
#include "ir/symbolic_dim.h"

namespace kiln::adapters {

namespace {

std::vector<TensorType> types_of(const std::vector<Value*>& vs) {
  std::vector<TensorType> t;
  for (const Value* v : vs) t.push_back(TensorType(v->dtype(), v->shape()));
  return t;
}

std::vector<Value*> with_captures(std::vector<Value*> operands, const std::vector<Value*>& captures) {
  operands.insert(operands.end(), captures.begin(), captures.end());
  return operands;
}

// A single-element operand as the scalar kiln's ops take ([1] -> []).
Value* as_scalar(ImportContext& c, Value* v, DType want, const char* what) {
  if (v->dtype() != want || v->type().numel() != 1)
    c.fail("the {} has type {}; it must be a single {}", what, v->type().str(), dtype_name(want));
  if (v->type().rank() == 0) return v;
  AttrMap a;
  a.set("shape", std::vector<int64_t>{});
  return c.emit1("reshape", {v}, a);
}

void if_adapter(ImportContext& c) {
  c.only_attrs({"then_branch", "else_branch"});
  Value* cond = c.input(0);
  if (cond->dtype() != DType::Bool || cond->type().numel() != 1)
    c.fail("the condition has type {}; it must be a single bool", cond->type().str());
  // Folded at import: the branch not taken is never imported, so it may even
  // use what kiln does not support (as ONNX Runtime's constant folding would).
  // A condition that only an input given at compile time would decide stays
  // a runtime condition (fixed_value does not freeze inputs).
  auto inline_branch = [&](const Tensor& t) {
    const bool taken = t.get_int(0) != 0;
    c.skip_subgraph(taken ? "else_branch" : "then_branch");
    c.set_output_values(c.inline_subgraph_values(taken ? "then_branch" : "else_branch", {}));
  };
  if (const Tensor* t = c.fixed_value(cond)) return inline_branch(*t);
  // The branches may decide sizes (torchvision's batched NMS, guarded by "no
  // boxes?"): their nodes get size symbols, and the if runs taking its branch
  // once the condition is known (ir/data_dependent.h).
  ImportContext::Regions regions;
  try {
    regions = c.import_regions({{"then_branch", "then", {}}, {"else_branch", "else", {}}}, /*size_symbols=*/true);
  } catch (const SequenceInRegion&) {
    // Branches returning sequences or optionals: which one is taken decides
    // the structure of the result, so the condition must be known at
    // compile time, as a shape operand must (an input given then is frozen).
    if (const Tensor* t = c.value_of(cond)) return inline_branch(*t);
    throw;
  }
  const Graph& then_g = *regions.graphs[0];
  const Graph& else_g = *regions.graphs[1];
  if (then_g.outputs().size() != else_g.outputs().size())
    c.fail("the then branch returns {} values but the else branch {}", then_g.outputs().size(),
           else_g.outputs().size());
  std::vector<TensorType> types;
  std::string size_symbol;  // for the one result dim the branches disagree on
  for (size_t i = 0; i < then_g.outputs().size(); ++i) {
    const TensorType& a = then_g.outputs()[i]->type();
    const TensorType& b = else_g.outputs()[i]->type();
    auto differ = [&](const char* why) {
      c.unsupported(
          "output {} is {} from the then branch but {} from the else branch; with a condition known only at run "
          "time kiln needs both to have one type{}",
          i, a.str(), b.str(), why);
    };
    if (a.dtype != b.dtype || a.rank() != b.rank()) differ("");
    Shape s = a.shape;
    for (int d = 0; d < a.rank(); ++d) {
      if (a.shape[d] == b.shape[d]) continue;
      if (!size_symbol.empty()) differ(", or to differ in one dim only");
      // The taken branch decides it: at most the larger of the two.
      size_symbol = c.declare_size_symbol("if_n", dim_add(a.shape[d], b.shape[d]));
      if (size_symbol.empty()) differ(", or the If at the top level of the model to let them differ in one dim");
      s[d] = symbol_dim(size_symbol);
    }
    types.push_back(TensorType(a.dtype, s));
  }
  AttrMap attrs;
  if (!size_symbol.empty()) attrs.set(kSizeSymbolAttr, size_symbol);
  Value* scalar_cond = as_scalar(c, cond, DType::Bool, "condition");
  c.set_outputs(c.emit_with_regions("if", with_captures({scalar_cond}, regions.captures), attrs, types,
                                    std::move(regions.graphs)));
}

// Whether the body's condition result is certainly true in every iteration
// given that it enters true: the condition parameter itself (through
// identities) or a constant true.
bool condition_stays_true(const Graph& body) {
  const Value* v = body.outputs()[0];
  for (int guard = 0; guard < 1000 && v; ++guard) {
    if (v == body.inputs()[1]) return true;
    if (v->is_constant()) return v->has_data() && v->data().numel() == 1 && v->data().get_int(0) != 0;
    const Node* p = v->producer();
    if (!p || (p->op() != "identity" && p->op() != "reshape")) return false;
    v = p->input(0);
  }
  return false;
}

std::string describe(const ImportedValue& v) {
  if (v.is_tensor()) return v.tensor->type().str();
  return v.is_sequence() ? fmt::format("a sequence of {} elements", v.elements.size()) : "an empty optional";
}

// Loops unrolled at import at most this many iterations (each one copies the body).
constexpr int64_t kMaxUnrolledIterations = 256;

// Imports a Loop whose body cannot be a region because it needs a value of
// each iteration at compile time: once per iteration, the iteration number a
// constant, as long as the trip count and every condition are known at
// compile time. Returns false (nothing bound) when they are not.
bool unroll_loop(ImportContext& c, const std::vector<ImportedValue>& init) {
  const Tensor* m = c.has_input(0) ? c.value(0) : nullptr;
  const Tensor* cv = c.has_input(1) ? c.value(1) : nullptr;
  if (!m || (c.has_input(1) && !cv)) return false;
  const int64_t trips = std::max<int64_t>(m->get_int(0), 0);
  if (trips > kMaxUnrolledIterations) return false;
  const int carried = static_cast<int>(init.size());
  std::vector<ImportedValue> values = init;
  std::vector<std::vector<Value*>> scans;
  bool go = !cv || cv->get_int(0) != 0;
  // Zero iterations: the loop-carried values as they enter; scan outputs
  // would be empty tensors of a type only the body knows.
  if (trips == 0 || !go) {
    if (c.num_outputs() > carried) return false;
    c.skip_subgraph("body");
    c.set_output_values(values);
    return true;
  }
  for (int64_t i = 0; i < trips && go; ++i) {
    std::vector<ImportedValue> ins{ImportedValue::of(c.constant(Tensor::scalar(DType::I64, double(i)), "iteration")),
                                   ImportedValue::of(c.constant(Tensor::scalar(DType::Bool, 1), "condition"))};
    ins.insert(ins.end(), values.begin(), values.end());
    std::vector<ImportedValue> outs = c.inline_subgraph_values("body", ins);
    if (int(outs.size()) < 1 + carried)
      c.fail("the body returns {} values for {} loop-carried ones", outs.size(), carried);
    if (!outs[0].is_tensor()) c.fail("the body's condition result must be a tensor");
    const Tensor* next = c.fixed_value(outs[0].tensor);
    if (!next) return false;  // a condition known only at run time: no unrolling
    go = next->get_int(0) != 0;
    for (int j = 0; j < carried; ++j) {
      const ImportedValue& in = init[j];
      const ImportedValue& out = outs[1 + j];
      // A sequence may change its length, an optional its presence; a
      // tensor keeps its type (the loop's result has one static type).
      bool same = in.is_tensor() ? out.is_tensor() && out.tensor->dtype() == in.tensor->dtype() &&
                                       out.tensor->shape() == in.tensor->shape()
                  : in.is_sequence() ? out.is_sequence()
                                     : true;  // an empty optional may come back holding a value
      if (!same)
        c.unsupported("loop-carried value {} enters as {} but the body returns {}", j, describe(in), describe(out));
      values[j] = out;
    }
    scans.resize(outs.size() - 1 - carried);
    for (size_t k = 0; k < scans.size(); ++k) {
      if (!outs[1 + carried + k].is_tensor()) c.fail("scan output {} must be a tensor", k);
      Value* e = outs[1 + carried + k].tensor;
      Shape s = e->shape();
      s.insert(s.begin(), 1);
      AttrMap a;
      a.set("shape", std::vector<int64_t>(s.begin(), s.end()));
      scans[k].push_back(c.emit1("reshape", {e}, a));
    }
  }
  std::vector<ImportedValue> results = values;
  for (auto& parts : scans) {
    AttrMap a;
    a.set("axis", int64_t(0));
    results.push_back(ImportedValue::of(parts.size() == 1 ? parts[0] : c.emit1("concat", parts, a)));
  }
  c.set_output_values(results);
  return true;
}

void loop_adapter(ImportContext& c) {
  c.only_attrs({"body"});
  const int carried = c.num_inputs() - 2 > 0 ? c.num_inputs() - 2 : 0;
  // Carrying a sequence or an optional: only an unrolled loop can (each
  // iteration's copy of the body sees the value's structure).
  std::vector<ImportedValue> carried_values;
  bool composite = false;
  for (int i = 0; i < carried; ++i) {
    carried_values.push_back(c.operand(2 + i));
    composite |= !carried_values.back().is_tensor();
  }
  if (composite) {
    if (unroll_loop(c, carried_values)) return;
    c.unsupported(
        "a loop-carried value is a sequence or an optional; kiln unrolls such a loop at import, which needs its "
        "trip count (at most {}) and every condition known at compile time",
        kMaxUnrolledIterations);
  }
  for (int i = 0; i < carried; ++i)
    if (!c.has_input(2 + i)) c.fail("loop-carried value {} (operand {}) is missing", i, 2 + i);
  Value* trip = c.has_input(0) ? as_scalar(c, c.input(0), DType::I64, "trip count (M)") : nullptr;
  Value* cond = c.has_input(1) ? as_scalar(c, c.input(1), DType::Bool, "condition") : nullptr;
  std::vector<Value*> init;
  for (int i = 0; i < carried; ++i) init.push_back(c.input(2 + i));
  std::vector<TensorType> params{TensorType(DType::I64, {}), TensorType(DType::Bool, {})};
  for (const TensorType& t : types_of(init)) params.push_back(t);
  ImportContext::Regions regions;
  try {
    // A top-level loop's body may decide sizes (NonZero on a per-iteration
    // value, ir/data_dependent.h): its symbols are declared on the main graph
    // and bound anew by each iteration's run.
    regions = c.import_regions({{"body", "body", params}}, /*size_symbols=*/true);
  } catch (const NotKnownAtCompileTime&) {
    // The body needs a per-iteration value at compile time (a Slice start
    // computed from the iteration number): unrolled when it can be.
    std::vector<ImportedValue> init_values;
    for (Value* v : init) init_values.push_back(ImportedValue::of(v));
    if (unroll_loop(c, init_values)) return;
    throw;
  }
  Graph& body = *regions.graphs[0];
  if (int(body.outputs().size()) < 1 + carried)
    c.fail("the body returns {} values; it must return the condition and {} loop-carried values", body.outputs().size(),
           carried);
  const TensorType& cond_out = body.outputs()[0]->type();
  if (cond_out.dtype != DType::Bool || cond_out.numel() != 1)
    c.fail("the body's condition output has type {}; it must be a single bool", cond_out.str());
  if (cond_out.rank() != 0) {
    // ONNX allows [1]; the region returns the scalar the loop reads.
    Value* old = body.outputs()[0];
    AttrMap a;
    a.set("shape", std::vector<int64_t>{});
    Node* r = body.add_node("reshape", {old}, {TensorType(DType::Bool, {})}, a);
    r->output(0)->set_name(old->name() + ".scalar");
    body.set_output(0, r->output(0));
  }
  for (int i = 0; i < carried; ++i) {
    const TensorType& out = body.outputs()[1 + i]->type();
    if (out.dtype != init[i]->dtype() || out.shape != init[i]->shape())
      c.unsupported(
          "loop-carried value {} enters as {} but the body returns {}; kiln compiles static shapes, so a "
          "loop-carried value must keep its type across iterations",
          i, init[i]->type().str(), out.str());
  }
  // Without a trip count, a condition that enters true and stays true never
  // ends the loop: refused here rather than hanging at run time.
  {
    const Tensor* cv = c.has_input(1) ? c.fixed_value(c.input(1)) : nullptr;
    bool enters_true = !c.has_input(1) || (cv && cv->get_int(0) != 0);
    if (!c.has_input(0) && enters_true && condition_stays_true(body))
      c.fail("the loop has no trip count and a condition that never turns false: it would never end");
  }
  const int scans = int(body.outputs().size()) - 1 - carried;
  std::vector<TensorType> types = types_of(init);
  if (scans > 0) {
    // The stacked length is part of the scan outputs' static type: it must
    // be the trip count, known now, with no early exit.
    const Tensor* m = c.value(0);
    const Tensor* cv = c.value(1);
    bool enters_true = !c.has_input(1) || (cv && cv->get_int(0) != 0);
    if (!m)
      c.unsupported(
          "the loop has scan outputs but its trip count is known only at run time; kiln compiles static shapes");
    if (!enters_true || !condition_stays_true(body))
      c.unsupported(
          "the loop has scan outputs and a condition that may end it early, so their length is known only at run "
          "time; kiln compiles static shapes");
    int64_t trips = std::max<int64_t>(m->get_int(0), 0);
    for (int k = 0; k < scans; ++k) {
      TensorType e = body.outputs()[1 + carried + k]->type();
      Shape s = e.shape;
      s.insert(s.begin(), trips);
      types.push_back(TensorType(e.dtype, s));
    }
  }
  std::vector<Value*> operands{trip, cond};
  operands.insert(operands.end(), init.begin(), init.end());
  AttrMap a;
  a.set("carried", int64_t(carried));
  c.set_outputs(
      c.emit_with_regions("loop", with_captures(operands, regions.captures), a, types, std::move(regions.graphs)));
}

// A list attribute of `n` entries (default all `dflt`); axes may be negative
// from opset 11 and are normalised against `ranks`.
std::vector<int64_t> per_entry(ImportContext& c, const char* name, size_t n, int64_t dflt) {
  std::vector<int64_t> v = c.attrs().get_ints(name, std::vector<int64_t>(n, dflt));
  if (v.size() != n) c.fail("attribute '{}' has {} entries, expected {}", name, v.size(), n);
  return v;
}

void scan_adapter(ImportContext& c) {
  const bool batched = c.opset() < 9;
  if (batched) c.only_attrs({"body", "num_scan_inputs", "directions"});
  else
    c.only_attrs({"body", "num_scan_inputs", "scan_input_axes", "scan_input_directions", "scan_output_axes",
                  "scan_output_directions"});
  const int m = static_cast<int>(c.attrs().require_int("num_scan_inputs"));
  const int first = batched ? 1 : 0;  // Scan-8's optional sequence_lens comes first
  const int n = c.num_inputs() - first - m;
  if (m < 1 || n < 0) c.fail("num_scan_inputs={} does not fit its {} operands", m, c.num_inputs());
  std::vector<Value*> states, xs;
  for (int i = 0; i < n; ++i) states.push_back(c.input(first + i));
  for (int j = 0; j < m; ++j) xs.push_back(c.input(first + n + j));
  std::vector<int64_t> in_axes(m, batched ? 0 : 0), in_rev, out_axes, out_rev;
  if (batched) {
    in_rev = per_entry(c, "directions", m, 0);
  } else {
    in_axes = per_entry(c, "scan_input_axes", m, 0);
    in_rev = per_entry(c, "scan_input_directions", m, 0);
  }
  // Element types the body sees: the batch dim (Scan-8) and the scan axis dropped.
  int64_t batch = 0;
  if (batched) {
    if (xs[0]->type().rank() < 2)
      c.fail("scan input 0 has type {}; Scan-8 needs [batch, sequence, ...]", xs[0]->type().str());
    batch = xs[0]->shape()[0];
  }
  auto unbatch = [&](const Value* v, const char* what) {
    TensorType t(v->dtype(), v->shape());
    if (!batched) return t;
    if (t.rank() < 1 || t.shape[0] != batch)
      c.fail("{} has type {}; every Scan-8 operand has the batch dim {} first", what, v->type().str(), batch);
    t.shape.erase(t.shape.begin());
    return t;
  };
  std::vector<TensorType> params;
  for (const Value* s : states) params.push_back(unbatch(s, "a state"));
  int64_t len = -1;
  for (int j = 0; j < m; ++j) {
    TensorType x = unbatch(xs[j], "a scan input");
    int64_t& axis = in_axes[j];
    if (axis < -x.rank() || axis >= x.rank())
      c.fail("scan_input_axes[{}] = {} is out of range for {}", j, axis, xs[j]->type().str());
    if (axis < 0) axis += x.rank();
    if (len >= 0 && x.shape[axis] != len) c.fail("scan inputs have different lengths ({} and {})", len, x.shape[axis]);
    len = x.shape[axis];
    x.shape.erase(x.shape.begin() + axis);
    params.push_back(x);
    if (in_rev[j] != 0 && in_rev[j] != 1) c.fail("scan direction {} must be 0 or 1", in_rev[j]);
  }
  if (batched && c.has_input(0)) {
    const Tensor& lens = c.require_value(0, "sequence_lens");
    for (int64_t i = 0; i < lens.numel(); ++i)
      if (lens.get_int(i) != len)
        c.unsupported("sequence_lens[{}] = {} is shorter than the sequence ({}); only full lengths are supported", i,
                      lens.get_int(i), len);
  }
  // The body may decide sizes (NonZero on a per-step slice, reduced inside
  // the body), as a Loop's may: each step runs it stage by stage.
  auto regions = c.import_regions({{"body", "body", params}}, /*size_symbols=*/true);
  Graph& body = *regions.graphs[0];
  for (const Value* out : body.outputs())
    for (const std::string& s : shape_symbols(out->shape()))
      if (data_dependent_symbols(body).count(s))
        c.unsupported(
            "the body returns {} {}, whose size {} each step decides anew: a scan output stacks the steps' "
            "results, which must share one type",
            short_name(out->name()), out->type().str(), s);
  if (int(body.outputs().size()) < n)
    c.fail("the body returns {} values but the scan has {} states", body.outputs().size(), n);
  const int k = int(body.outputs().size()) - n;
  if (batched) {
    out_axes.assign(k, 0);
    out_rev.assign(k, 0);
  } else {
    out_axes = per_entry(c, "scan_output_axes", k, 0);
    out_rev = per_entry(c, "scan_output_directions", k, 0);
  }
  std::vector<TensorType> types;
  for (int i = 0; i < n; ++i) {
    const TensorType& out = body.outputs()[i]->type();
    if (out.dtype != params[i].dtype || out.shape != params[i].shape)
      c.unsupported("state {} enters as {} but the body returns {}; a state must keep its type", i, params[i].str(),
                    out.str());
    types.push_back(TensorType(states[i]->dtype(), states[i]->shape()));
  }
  for (int j = 0; j < k; ++j) {
    TensorType e = body.outputs()[n + j]->type();
    int64_t& axis = out_axes[j];
    if (axis < -(e.rank() + 1) || axis > e.rank())
      c.fail("scan_output_axes[{}] = {} is out of range for elements of {}", j, axis, e.str());
    if (axis < 0) axis += e.rank() + 1;
    if (out_rev[j] != 0 && out_rev[j] != 1) c.fail("scan output direction {} must be 0 or 1", out_rev[j]);
    e.shape.insert(e.shape.begin() + axis, len);
    if (batched) e.shape.insert(e.shape.begin(), batch);
    types.push_back(TensorType(e.dtype, e.shape));
  }
  AttrMap a;
  a.set("carried", int64_t(n));
  a.set("scan_inputs", int64_t(m));
  a.set("input_axes", in_axes);
  a.set("input_reverse", in_rev);
  a.set("output_axes", out_axes);
  a.set("output_reverse", out_rev);
  a.set("batched", int64_t(batched ? 1 : 0));
  std::vector<Value*> operands = states;
  operands.insert(operands.end(), xs.begin(), xs.end());
  c.set_outputs(
      c.emit_with_regions("scan", with_captures(operands, regions.captures), a, types, std::move(regions.graphs)));
}

}  // namespace

void register_control_flow(AdapterTable& t) {
  t.add("If", if_adapter);
  t.add("Loop", loop_adapter);
  t.add("Scan", since_opset(8, scan_adapter));
}

}  // namespace kiln::adapters
