// ONNX adapters for the reduction family (see import_context.h): ReduceX,
// ArgMax/ArgMin, CumSum, TopK, Softmax/LogSoftmax/Hardmax. They resolve opset
// differences so each kiln op has one meaning:
//  - ReduceX axes come from an attribute (ReduceSum < 13, others < 18) or an
//    optional operand that must be known at compile time; kiln gets explicit,
//    sorted, normalized axes. Empty axes reduce everything unless
//    noop_with_empty_axes=1, which makes the node an identity.
//  - CumSum's and CumProd's axis and TopK's k operands become attributes.
//  - Softmax-family opset < 13 flattens the input to 2D at `axis`; that is
//    reshape -> op(axis=1) -> reshape unless it already equals the one-axis form.
#include <algorithm>
#include <set>

#include "frontend/import_context.h"
#include "ir/data_dependent.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"

namespace kiln::adapters {

namespace {

// Rejects ONNX attributes the adapter does not translate.
void allow_attrs(ImportContext& c, std::initializer_list<const char*> allowed) {
  for (const auto& [name, a] : c.attrs()) {
    bool ok = false;
    for (const char* n : allowed) ok |= name == n;
    if (!ok) c.unsupported("attribute '{}' is not supported at opset {}", name, c.opset());
  }
}

int64_t flag(ImportContext& c, const char* name, int64_t dflt) {
  int64_t v = c.attrs().get_int(name, dflt);
  if (v != 0 && v != 1) c.fail("attribute '{}' must be 0 or 1, got {}", name, v);
  return v;
}

int normalized_axis(ImportContext& c, int64_t axis, int rank, const char* what) {
  if (axis < -rank || axis >= rank) c.fail("{} = {} is out of range for rank {}", what, axis, rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// ReduceX: `axes_input_opset` is the opset from which axes is an operand.
Adapter reduce_adapter(std::string kiln_op, int64_t axes_input_opset) {
  return [kiln_op, axes_input_opset](ImportContext& c) {
    bool axes_operand = c.opset() >= axes_input_opset;
    if (axes_operand) allow_attrs(c, {"keepdims", "noop_with_empty_axes"});
    else allow_attrs(c, {"axes", "keepdims"});
    int rank = c.input(0)->type().rank();
    std::vector<int64_t> axes;
    if (axes_operand) {
      if (c.has_input(1)) {
        const Tensor& t = c.require_value(1, "axes");
        if (t.dtype() != DType::I64) c.fail("axes operand must be i64, got {}", dtype_name(t.dtype()));
        if (t.rank() > 1) c.fail("axes operand must be 1-D, got rank {}", t.rank());
        axes = t.to_int_vector();
      }
    } else {
      if (c.num_inputs() > 1) c.fail("takes 1 operand at opset {}, got {}", c.opset(), c.num_inputs());
      axes = c.attrs().get_ints("axes");
    }
    bool keepdims = flag(c, "keepdims", 1) != 0;
    bool noop = flag(c, "noop_with_empty_axes", 0) != 0;
    if (axes.empty()) {
      if (noop) {
        // "The output tensor would be equivalent to the input tensor."
        c.set_outputs({c.input(0)});
        return;
      }
      for (int i = 0; i < rank; ++i) axes.push_back(i);
    }
    std::set<int64_t> norm;
    for (int64_t a : axes) {
      int n = normalized_axis(c, a, rank, "axis");
      if (!norm.insert(n).second) c.fail("axis {} appears twice in axes", n);
    }
    AttrMap attrs;
    attrs.set("axes", std::vector<int64_t>(norm.begin(), norm.end()));
    attrs.set("keepdims", int64_t(keepdims));
    c.set_outputs({c.emit1(kiln_op, {c.input(0)}, attrs)});
  };
}

Adapter arg_adapter(std::string kiln_op) {
  return [kiln_op](ImportContext& c) {
    allow_attrs(c, {"axis", "keepdims", "select_last_index"});
    int rank = c.input(0)->type().rank();
    AttrMap attrs;
    attrs.set("axis", int64_t(normalized_axis(c, c.attrs().get_int("axis", 0), rank, "axis")));
    attrs.set("keepdims", flag(c, "keepdims", 1));
    attrs.set("select_last_index", flag(c, "select_last_index", 0));
    c.set_outputs({c.emit1(kiln_op, {c.input(0)}, attrs)});
  };
}

// CumSum and CumProd (opset 26): the axis operand becomes an attribute.
Adapter scan_adapter(std::string kiln_op) {
  return [kiln_op](ImportContext& c) {
    allow_attrs(c, {"exclusive", "reverse"});
    int rank = c.input(0)->type().rank();
    const Tensor& t = c.require_value(1, "axis");
    if (t.dtype() != DType::I64 && t.dtype() != DType::I32)
      c.fail("axis operand must be i32 or i64, got {}", dtype_name(t.dtype()));
    if (t.numel() != 1 || t.rank() > 1) c.fail("axis operand must hold one value, got {}", t.type().str());
    AttrMap attrs;
    attrs.set("axis", int64_t(normalized_axis(c, t.get_int(0), rank, "axis")));
    attrs.set("exclusive", flag(c, "exclusive", 0));
    attrs.set("reverse", flag(c, "reverse", 0));
    c.set_outputs({c.emit1(kiln_op, {c.input(0)}, attrs)});
  };
}

AttrMap topk_attrs(ImportContext& c) {
  int rank = c.input(0)->type().rank();
  AttrMap attrs;
  attrs.set("axis", int64_t(normalized_axis(c, c.attrs().get_int("axis", -1), rank, "axis")));
  attrs.set("largest", flag(c, "largest", 1));
  attrs.set("sorted", flag(c, "sorted", 1));
  return attrs;
}

void topk_with_run_time_k(ImportContext& c) {
  AttrMap attrs = topk_attrs(c);
  if (c.input(0)->type().rank() == 0) c.fail("operand 0 is a scalar; TopK needs rank >= 1");
  std::string sym = c.declare_size_symbol("topk_k", c.input(0)->shape()[attrs.get_int("axis", -1)]);
  if (sym.empty()) {  // in a region: k must be known at compile time there
    const Tensor& t = c.require_value(1, "k");
    attrs.set("k", t.get_int(0));
    c.set_outputs(c.emit("topk", {c.input(0)}, attrs, c.output_used(1) ? 2 : 1));
    return;
  }
  attrs.set(kSizeSymbolAttr, sym);
  c.set_outputs(c.emit("topk", {c.input(0), c.input(1)}, attrs, c.output_used(1) ? 2 : 1));
}

void topk(ImportContext& c) {
  int64_t k;
  if (c.opset() < 10) {
    allow_attrs(c, {"k", "axis"});
    if (!c.attrs().has("k")) c.fail("attribute 'k' is missing");
    k = c.attrs().require_int("k");
  } else {
    allow_attrs(c, c.opset() >= 11 ? std::initializer_list<const char*>{"axis", "largest", "sorted"}
                                   : std::initializer_list<const char*>{"axis"});
    Value* kv = c.input(1);
    if (kv->dtype() != DType::I64) c.fail("k operand must be i64, got {}", dtype_name(kv->dtype()));
    if (has_symbolic_dims(kv->shape()) || shape_numel(kv->shape()) != 1 || kv->type().rank() > 1)
      c.fail("k operand must hold one value, got {}", kv->type().str());
    // A k the model alone fixes is an attribute; any other is read at run
    // time, the result size a symbol in [0, the axis size]
    // (ir/data_dependent.h).
    const Tensor* t = c.fixed_value(kv);
    if (!t) return topk_with_run_time_k(c);
    k = t->get_int(0);
  }
  AttrMap attrs = topk_attrs(c);
  attrs.set("k", k);
  int n = c.output_used(1) ? 2 : 1;
  c.set_outputs(c.emit("topk", {c.input(0)}, attrs, n));
}

// Softmax, LogSoftmax, Hardmax.
Adapter softmax_adapter(std::string kiln_op) {
  return [kiln_op](ImportContext& c) {
    allow_attrs(c, {"axis"});
    Value* x = c.input(0);
    const Shape& s = x->shape();
    int rank = static_cast<int>(s.size());
    if (rank == 0) c.fail("operand 0 is a scalar; {} needs rank >= 1", c.op_type());
    bool old = c.opset() < 13;
    // The old form flattens like Flatten, whose axis may also equal rank.
    int64_t a = c.attrs().get_int("axis", old ? 1 : -1);
    int axis = old && a == rank ? rank : normalized_axis(c, a, rank, "axis");
    AttrMap attrs;
    bool trailing_ones = axis < rank;
    for (int d = axis + 1; d < rank; ++d) trailing_ones &= s[d] == 1;
    if (!old || trailing_ones) {
      // Flattening [axis:] to one dim changes nothing when the dims after
      // axis are all 1.
      attrs.set("axis", int64_t(axis));
      c.set_outputs({c.emit1(kiln_op, {x}, attrs)});
      return;
    }
    int64_t rows = 1, cols = 1;
    for (int d = 0; d < axis; ++d) rows *= s[d];
    for (int d = axis; d < rank; ++d) cols *= s[d];
    AttrMap to2d, back;
    to2d.set("shape", std::vector<int64_t>{rows, cols});
    back.set("shape", std::vector<int64_t>(s.begin(), s.end()));
    attrs.set("axis", int64_t(1));
    Value* flat = c.emit1("reshape", {x}, to2d);
    Value* y = c.emit1(kiln_op, {flat}, attrs);
    c.set_outputs({c.emit1("reshape", {y}, back)});
  };
}

}  // namespace

void register_reduction(AdapterTable& t) {
  t.add("ReduceSum", reduce_adapter("reduce_sum", 13));
  t.add("ReduceMean", reduce_adapter("reduce_mean", 18));
  t.add("ReduceMax", reduce_adapter("reduce_max", 18));
  t.add("ReduceMin", reduce_adapter("reduce_min", 18));
  t.add("ReduceProd", reduce_adapter("reduce_prod", 18));
  t.add("ReduceL1", reduce_adapter("reduce_l1", 18));
  t.add("ReduceL2", reduce_adapter("reduce_l2", 18));
  t.add("ReduceLogSum", reduce_adapter("reduce_log_sum", 18));
  t.add("ReduceLogSumExp", reduce_adapter("reduce_log_sum_exp", 18));
  t.add("ReduceSumSquare", reduce_adapter("reduce_sum_square", 18));
  t.add("ArgMax", arg_adapter("argmax"));
  t.add("ArgMin", arg_adapter("argmin"));
  t.add("CumSum", scan_adapter("cumsum"));
  t.add("CumProd", since_opset(26, scan_adapter("cumprod")));
  t.add("TopK", topk);
  t.add("Softmax", softmax_adapter("softmax"));
  t.add("LogSoftmax", softmax_adapter("log_softmax"));
  t.add("Hardmax", softmax_adapter("hardmax"));
}

}  // namespace kiln::adapters
