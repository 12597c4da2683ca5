// ONNX adapters for Slice and Pad (see import_context.h), their
// compile-time operands (starts/ends/axes/steps, pads) hoisted into
// attributes:
//
//   Slice -> slice {starts, ends, steps}   Pad -> pad {pads, mode, value}
#include <onnx/onnx_pb.h>

#include <cmath>
#include <optional>

#include "frontend/import_context.h"
#include "frontend/shape_operands.h"
#include "ir/data_dependent.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"
#include "ops/shape_ops.h"

namespace kiln::adapters {

namespace {

// ---------------------------------------------------------------------------
// Slice

void slice_adapter(ImportContext& c) {
  Value* x = c.input(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    c.only_attrs({"starts", "ends", "axes"});
    if (!c.attrs().has("starts") || !c.attrs().has("ends")) c.fail("attributes 'starts' and 'ends' are required");
    starts = c.attrs().get_ints("starts");
    ends = c.attrs().get_ints("ends");
    axes = c.attrs().get_ints("axes");
  } else {
    c.only_attrs({});
    // Symbolic values (a size Shape gave) are canonicalised below: they take
    // a symbolic dim whole, or are refused by name.
    starts = int_list(c, 1, "Slice starts", false, /*allow_symbolic=*/true);
    ends = int_list(c, 2, "Slice ends", false, /*allow_symbolic=*/true);
    if (c.has_input(3)) axes = int_list(c, 3, "Slice axes");
    if (c.has_input(4)) steps = int_list(c, 4, "Slice steps");
    if (c.has_input(3) && axes.size() != starts.size())
      c.fail("Slice axes has {} values but starts has {}", axes.size(), starts.size());
  }
  ops::SliceSpec spec;
  try {
    spec =
        ops::canonical_slice(x->shape(), starts, ends, axes, steps, /*allow_data_dependent=*/true, &c.symbol_ranges());
  } catch (const Unsupported&) {
    throw;
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  AttrMap m;
  m.set("starts", spec.starts);
  m.set("ends", spec.ends);
  m.set("steps", spec.steps);
  if (const int a = spec.data_dependent_axis; a >= 0) {
    // A symbolic dim clamped by the slice (torchvision's keep[:100] of the
    // boxes NMS kept): its size is decided when the dim is known, so the
    // slice gets a size symbol, at most what start:end:step could select.
    const int64_t s = spec.starts[a], e = spec.ends[a], p = spec.steps[a];
    const int64_t cap = p > 0 && s >= 0 && e >= 0 && e < ops::kSliceOpenEnd ? ops::slice_extent(s, e, p) : -1;
    std::string sym = c.declare_size_symbol("slice_n", x->shape()[a], cap);
    if (sym.empty())
      c.unsupported("slicing [{}] along dim {} ({}) needs its size: not supported with symbolic dims inside a region",
                    dims_str(x->shape()), a, dim_str(x->shape()[a]));
    m.set(kSizeSymbolAttr, sym);
  }
  c.set_outputs({c.emit1("slice", {x}, m)});
}

// ---------------------------------------------------------------------------
// Pad

// True when `v` is a constant or computed from constants only (no graph inputs).
bool fixed_by_model(const Value* v, int depth = 0) {
  if (v->is_constant()) return true;
  if (v->is_input() || depth > 64) return false;
  for (const Value* in : v->producer()->inputs())
    if (in && !fixed_by_model(in, depth + 1)) return false;
  return true;
}

// The one element of `t` as an f32 when that is exact (integers past 2^24 and
// most f64 values are not: those stay a constant operand of pad).
std::optional<float> exact_f32(const Tensor& t) {
  if (is_float(t.dtype())) {
    double d = t.get_double(0);
    float f = static_cast<float>(d);
    if (std::isnan(d) || static_cast<double>(f) == d) return f;
    return std::nullopt;
  }
  if (t.dtype() == DType::U64) {
    uint64_t u = static_cast<uint64_t>(t.get_int(0));
    if (u < (uint64_t(1) << 63) && static_cast<uint64_t>(static_cast<float>(u)) == u) return static_cast<float>(u);
    return std::nullopt;
  }
  int64_t i = t.get_int(0);
  float f = static_cast<float>(i);
  if (f > -9.2e18f && f < 9.2e18f && static_cast<int64_t>(f) == i) return f;
  return std::nullopt;
}

void pad_adapter(ImportContext& c) {
  Value* x = c.input(0);
  int r = x->type().rank();
  std::string mode = c.attrs().get_string("mode", "constant");
  std::vector<int64_t> pads;
  Value* value_operand = nullptr;
  std::optional<float> value;  // kept as an attribute when known and exact in f32
  if (c.opset() < 11) {
    const char* pads_name = c.opset() < 2 ? "paddings" : "pads";
    c.only_attrs({"mode", pads_name, "value"});
    if (!c.attrs().has(pads_name)) c.fail("attribute '{}' is missing", pads_name);
    pads = c.attrs().get_ints(pads_name);
    value = c.attrs().get_float("value", 0.0f);
  } else {
    c.only_attrs({"mode"});
    pads = int_list(c, 1, "Pad pads");
    if (c.has_input(2)) {
      Value* v = c.input(2);
      if (v->dtype() != x->dtype())
        c.fail("constant_value is {} but the data is {}", dtype_name(v->dtype()), dtype_name(x->dtype()));
      if (v->type().numel() != 1) c.fail("constant_value must be one element, got {}", v->type().str());
      // Only read the value when it is fixed by the model; asking for a graph
      // input's value would freeze that input into a constant.
      const Tensor* t = fixed_by_model(v) ? c.value(2) : nullptr;
      if (std::optional<float> f = t ? exact_f32(*t) : std::nullopt) value = f;
      else value_operand = v;
    }
    if (c.has_input(3)) {
      if (c.opset() < 18) c.fail("the axes operand needs opset 18");
      std::vector<int64_t> axes = norm_axes(c, int_list(c, 3, "Pad axes"), r, "axis");
      if (pads.size() != 2 * axes.size())
        c.fail("pads has {} values but {} axes need {}", pads.size(), axes.size(), 2 * axes.size());
      std::vector<int64_t> full(2 * r, 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        full[axes[i]] = pads[i];
        full[axes[i] + r] = pads[i + axes.size()];
      }
      pads = full;
    }
  }
  if (mode != "constant" && mode != "reflect" && mode != "edge" && !(mode == "wrap" && c.opset() >= 19))
    c.unsupported("mode '{}' is not supported at opset {}", mode, c.opset());
  if (static_cast<int>(pads.size()) != 2 * r)
    c.fail("pads [{}] needs {} values for rank {}", fmt::join(pads, ","), 2 * r, r);
  AttrMap m;
  m.set("pads", pads);
  if (mode != "constant") {
    m.set("mode", mode);
    value_operand = nullptr;
    value.reset();
  }
  std::vector<Value*> ins{x};
  if (value && (*value != 0 || std::signbit(*value) || std::isnan(*value))) m.set("value", *value);
  if (value_operand) ins.push_back(value_operand);
  c.set_outputs({c.emit1("pad", ins, m)});
}

}  // namespace

void register_slice_pad(AdapterTable& t) {
  t.add("Slice", slice_adapter);
  t.add("Pad", pad_adapter);
}

}  // namespace kiln::adapters
