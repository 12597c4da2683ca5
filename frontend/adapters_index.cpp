// ONNX adapters for the index family (see import_context.h). Every opset form
// becomes one canonical kiln op with explicit attributes; compile-time
// operands (OneHot depth, Trilu k) are hoisted into attributes.
//
//   Gather -> gather {axis}                 GatherElements -> gather_elements {axis}
//   GatherND -> gather_nd {batch_dims}
//   Scatter (opset 9-10), ScatterElements -> scatter_elements {axis, reduction}
//   ScatterND -> scatter_nd {reduction}
//   OneHot -> one_hot {axis, depth}(indices, values)
//   NonZero -> nonzero     Compress -> compress {axis?}     Unique -> unique {sorted, axis?}
//   Trilu -> trilu {upper, k}   EyeLike -> eye_like {dtype?, k}
//   ReverseSequence -> reverse_sequence {batch_axis, time_axis}
#include <cmath>

#include "frontend/import_context.h"
#include "frontend/tensor_proto.h"
#include "ir/data_dependent.h"
#include "ir/symbolic_dim.h"

namespace kiln::adapters {

namespace {

// Axis attribute `name` normalised against `rank` (axes may be negative in ONNX).
int64_t axis_attr(ImportContext& c, const char* name, int64_t dflt, int rank) {
  int64_t a = c.attrs().get_int(name, dflt);
  int64_t n = a < 0 ? a + rank : a;
  if (n < 0 || n >= rank) c.fail("{} {} is out of range for rank {}", name, a, rank);
  return n;
}

int rank_of(ImportContext& c, int i) { return static_cast<int>(c.input(i)->shape().size()); }

// A compile-time scalar (or one-element tensor) operand as an integer.
int64_t scalar_int(ImportContext& c, int i, const std::string& what) {
  const Tensor& t = c.require_value(i, what);
  if (t.numel() != 1) c.fail("{} must hold exactly one element, got {}", what, t.type().str());
  if (is_float(t.dtype())) {
    double v = std::trunc(t.get_double(0));
    if (!std::isfinite(v) || std::fabs(v) > 9.0e18) c.fail("{} is {}, not a usable integer", what, t.get_double(0));
    return static_cast<int64_t>(v);
  }
  return t.get_int(0);
}

void gather_like(ImportContext& c, const char* op) {
  c.only_attrs({"axis"});
  AttrMap a;
  a.set("axis", axis_attr(c, "axis", 0, rank_of(c, 0)));
  c.set_outputs({c.emit1(op, {c.input(0), c.input(1)}, a)});
}

void gather_nd(ImportContext& c) {
  c.only_attrs({"batch_dims"});
  AttrMap a;
  a.set("batch_dims", c.attrs().get_int("batch_dims", 0));
  c.set_outputs({c.emit1("gather_nd", {c.input(0), c.input(1)}, a)});
}

void scatter_elements(ImportContext& c) {
  // Scatter (opset 9-10) is ScatterElements without reduction.
  bool old = c.op_type() == "Scatter";
  if (old) c.only_attrs({"axis"});
  else c.only_attrs({"axis", "reduction"});
  AttrMap a;
  a.set("axis", axis_attr(c, "axis", 0, rank_of(c, 0)));
  a.set("reduction", c.attrs().get_string("reduction", "none"));
  c.set_outputs({c.emit1("scatter_elements", {c.input(0), c.input(1), c.input(2)}, a)});
}

void scatter_nd(ImportContext& c) {
  c.only_attrs({"reduction"});
  AttrMap a;
  a.set("reduction", c.attrs().get_string("reduction", "none"));
  c.set_outputs({c.emit1("scatter_nd", {c.input(0), c.input(1), c.input(2)}, a)});
}

void one_hot(ImportContext& c) {
  c.only_attrs({"axis"});
  AttrMap a;
  a.set("axis", c.attrs().get_int("axis", -1));
  a.set("depth", scalar_int(c, 1, "OneHot depth"));
  c.set_outputs({c.emit1("one_hot", {c.input(0), c.input(2)}, a)});
}

// An input the model alone fixes gives a count known at compile time; any
// other (a graph input, even one given at compile time) leaves it to the run:
// the count is a size symbol in [0, numel] (ir/data_dependent.h).
void nonzero(ImportContext& c) {
  c.only_attrs({});
  AttrMap a;
  if (!c.fixed_value(c.input(0))) {
    std::string sym = c.declare_size_symbol("nonzero_n", dim_product(c.input(0)->shape()));
    if (!sym.empty()) a.set(kSizeSymbolAttr, sym);
  }
  c.set_outputs({c.emit1("nonzero", {c.input(0)}, a)});
}

void compress(ImportContext& c) {
  c.only_attrs({"axis"});
  AttrMap a;
  if (c.attrs().has("axis")) a.set("axis", axis_attr(c, "axis", 0, rank_of(c, 0)));
  c.set_outputs({c.emit1("compress", {c.input(0), c.input(1)}, a)});
}

void unique(ImportContext& c) {
  c.only_attrs({"sorted", "axis"});
  AttrMap a;
  a.set("sorted", c.attrs().get_int("sorted", 1));
  if (c.attrs().has("axis")) a.set("axis", axis_attr(c, "axis", 0, rank_of(c, 0)));
  int n = c.num_outputs();
  while (n > 1 && !c.output_used(n - 1)) --n;
  c.set_outputs(c.emit("unique", {c.input(0)}, a, n));
}

void trilu(ImportContext& c) {
  c.only_attrs({"upper"});
  AttrMap a;
  a.set("upper", c.attrs().get_int("upper", 1));
  a.set("k", c.has_input(1) ? scalar_int(c, 1, "Trilu k") : int64_t(0));
  c.set_outputs({c.emit1("trilu", {c.input(0)}, a)});
}

void eye_like(ImportContext& c) {
  c.only_attrs({"dtype", "k"});
  AttrMap a;
  if (c.attrs().has("dtype"))
    a.set("dtype", std::string(dtype_name(dtype_from_onnx(static_cast<int>(c.attrs().get_int("dtype", 0)),
                                                          c.label() + ": attribute 'dtype'"))));
  a.set("k", c.attrs().get_int("k", 0));
  c.set_outputs({c.emit1("eye_like", {c.input(0)}, a)});
}

void reverse_sequence(ImportContext& c) {
  c.only_attrs({"batch_axis", "time_axis"});
  AttrMap a;
  a.set("batch_axis", c.attrs().get_int("batch_axis", 1));
  a.set("time_axis", c.attrs().get_int("time_axis", 0));
  c.set_outputs({c.emit1("reverse_sequence", {c.input(0), c.input(1)}, a)});
}

}  // namespace

void register_index(AdapterTable& t) {
  t.add("Gather", [](ImportContext& c) { gather_like(c, "gather"); });
  t.add("GatherElements", [](ImportContext& c) { gather_like(c, "gather_elements"); });
  t.add("GatherND", gather_nd);
  t.add("Scatter", scatter_elements);
  t.add("ScatterElements", scatter_elements);
  t.add("ScatterND", scatter_nd);
  t.add("OneHot", one_hot);
  t.add("NonZero", nonzero);
  t.add("Compress", compress);
  t.add("Unique", unique);
  t.add("Trilu", trilu);
  t.add("EyeLike", eye_like);
  t.add("ReverseSequence", reverse_sequence);
}

}  // namespace kiln::adapters
