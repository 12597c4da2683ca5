// Reductions that select or scan along one axis: argmax, argmin, topk, cumsum, cumprod.
// All view the operand as [outer, n, inner] around the axis and walk the
// axis in the middle loop with `inner` positions handled together, so reads
// stay sequential whatever the axis.
#include <algorithm>
#include <numeric>

#include "ops/data_dependent_size.h"
#include "ops/reduction_internal.h"

namespace kiln::ops {

namespace {

// NaN ranks above every number (numpy's argmax/argmin return the first NaN;
// topk with largest=1 lists NaNs first).
template <typename A>
inline bool ranks_above(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}
template <typename A>
inline bool ranks_below(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    if (std::isnan(a)) return !std::isnan(b);  // argmin also picks NaN, like numpy
    if (std::isnan(b)) return false;
  }
  return a < b;
}
template <typename A>
inline bool same_rank(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  }
  return a == b;
}

// ---- argmax / argmin ---------------------------------------------------------

template <typename A>
void arg_extreme(const A* v, const Shape& shape, int axis, bool is_max, bool last, Tensor& out) {
  AxisGeometry g = axis_geometry(shape, axis);
  int64_t* o = out.data<int64_t>();
  std::vector<A> best(g.inner);
  for (int64_t b = 0; b < g.outer; ++b) {
    const A* base = v + b * g.n * g.inner;
    int64_t* ob = o + b * g.inner;
    for (int64_t i = 0; i < g.inner; ++i) {
      best[i] = base[i];
      ob[i] = 0;
    }
    for (int64_t j = 1; j < g.n; ++j) {
      const A* row = base + j * g.inner;
      for (int64_t i = 0; i < g.inner; ++i) {
        A val = row[i];
        bool better = is_max ? ranks_above(val, best[i]) : ranks_below(val, best[i]);
        if (better || (last && same_rank(val, best[i]))) {
          best[i] = val;
          ob[i] = j;
        }
      }
    }
  }
}

OpDef arg_def(std::string name, bool is_max) {
  OpDef d;
  d.name = std::move(name);
  d.category = OpCategory::Reduction;
  d.attrs = {{"axis", AttrKind::Int, true}, {"keepdims", AttrKind::Int}, {"select_last_index", AttrKind::Int}};
  d.infer = [](InferContext& c) {
    if (c.rank(0) == 0) c.fail("operand 0 is a scalar; {} needs rank >= 1", c.op());
    int axis = axis_attr(c, "axis", 0);
    bool keep = flag_attr(c, "keepdims", 1);
    flag_attr(c, "select_last_index", 0);
    Shape s = c.shape(0);
    if (s[axis] == 0) c.fail("{} over axis {} of size 0 has no answer", c.op(), axis);
    if (keep) s[axis] = 1;
    else s.erase(s.begin() + axis);
    return std::vector<TensorType>{TensorType(DType::I64, s)};
  };
  d.reference = [is_max](KernelContext& k) {
    const Tensor& x = k.in(0);
    int64_t axis = k.attrs.require_int("axis");
    bool last = k.attrs.get_int("select_last_index", 0) != 0;
    int ax = static_cast<int>(axis < 0 ? axis + x.rank() : axis);
    with_numeric_data(x, [&](const auto* p) { arg_extreme(p, x.shape(), ax, is_max, last, k.out()); });
  };
  d.doc = is_max ? "index (i64) of the largest element along axis; first of ties unless select_last_index; NaN wins"
                 : "index (i64) of the smallest element along axis; first of ties unless select_last_index; NaN wins";
  return d;
}

// ---- topk ----------------------------------------------------------------

template <typename A>
void topk_kernel(const A* v, const Tensor& x, int axis, int64_t k, bool largest, Tensor& values, Tensor* indices) {
  AxisGeometry g = axis_geometry(x.shape(), axis);
  std::vector<int64_t> order(g.n);
  std::vector<A> line(g.n);
  for (int64_t b = 0; b < g.outer; ++b) {
    for (int64_t i = 0; i < g.inner; ++i) {
      int64_t in_base = b * g.n * g.inner + i, out_base = b * k * g.inner + i;
      for (int64_t j = 0; j < g.n; ++j) line[j] = v[in_base + j * g.inner];
      std::iota(order.begin(), order.end(), 0);
      // Ties keep the lower index first (as ONNX specifies). NaN ranks above
      // every number, so it leads with largest=1 and trails with largest=0.
      auto cmp = [&](int64_t p, int64_t q) {
        A hi = largest ? line[p] : line[q], lo = largest ? line[q] : line[p];
        return ranks_above(hi, lo) || (!ranks_above(lo, hi) && p < q);
      };
      std::partial_sort(order.begin(), order.begin() + k, order.end(), cmp);
      for (int64_t j = 0; j < k; ++j) {
        copy_element(x, in_base + order[j] * g.inner, values, out_base + j * g.inner);
        if (indices) indices->data<int64_t>()[out_base + j * g.inner] = order[j];
      }
    }
  }
}

OpDef topk_def() {
  OpDef d;
  d.name = "topk";
  d.category = OpCategory::Compute;
  d.max_outputs = 2;
  // k: an attribute, or (k decided at run time) operand 1, an i64 holding one
  // value, with the result size the node's size symbol
  // (ops/data_dependent_size.h; the lowering runs topk with k = the axis
  // size, sorted, and keeps the first k).
  d.max_inputs = 2;
  d.symbolic_dims = true;  // the k operand's form keeps every dim but the axis; the attribute form refuses symbols
  d.attrs = {{"k", AttrKind::Int},
             {"axis", AttrKind::Int},
             {"largest", AttrKind::Int},
             {"sorted", AttrKind::Int},
             {kSizeSymbolAttr, AttrKind::String}};
  d.infer = [](InferContext& c) {
    if (c.rank(0) == 0) c.fail("operand 0 is a scalar; topk needs rank >= 1");
    int axis = axis_attr(c, "axis", -1);
    flag_attr(c, "largest", 1);
    flag_attr(c, "sorted", 1);
    if (c.dtype(0) == DType::Bool) c.fail("operand 0 is bool; topk needs a numeric dtype");
    if (size_form(c) == SizeForm::Bounded) c.fail("topk has no bounded form (it runs with k = the axis size)");
    if (c.attrs().has(kSizeSymbolAttr)) {
      if (c.attrs().has("k")) c.fail("k is an attribute and {} is given: k comes from operand 1 then", kSizeSymbolAttr);
      if (!c.has_input(1)) c.fail("{} is given but operand 1 (k) is missing", kSizeSymbolAttr);
      if (c.dtype(1) != DType::I64 || has_symbolic_dims(c.shape(1)) || shape_numel(c.shape(1)) != 1)
        c.fail("operand 1 (k) must be an i64 holding one value, got {}", c.type(1).str());
      Shape s = c.shape(0);
      s[axis] = size_symbol_dim(c);
      return std::vector<TensorType>{TensorType(c.dtype(0), s), TensorType(DType::I64, s)};
    }
    if (c.has_input(1)) c.fail("operand 1 (k) needs the size symbol attribute {}", kSizeSymbolAttr);
    if (!c.attrs().has("k")) c.fail("attribute 'k' is missing");
    if (has_symbolic_dims(c.shape(0)))
      c.unsupported("kiln cannot infer topk with symbolic dims yet: operand 0 is {}", c.type(0).str());
    int64_t k = c.attrs().require_int("k");
    Shape s = c.shape(0);
    if (k < 0 || k > s[axis]) c.fail("k = {} is out of range for axis {} of size {}", k, axis, s[axis]);
    s[axis] = k;
    return std::vector<TensorType>{TensorType(c.dtype(0), s), TensorType(DType::I64, s)};
  };
  d.reference = [](KernelContext& k) {
    if (k.attrs.has(kSizeSymbolAttr)) refuse_unlowered(k);
    const Tensor& x = k.in(0);
    int64_t axis = k.attrs.get_int("axis", -1);
    if (axis < 0) axis += x.rank();
    int64_t kk = k.attrs.require_int("k");
    bool largest = k.attrs.get_int("largest", 1) != 0;
    Tensor* idx = k.outputs.size() > 1 ? &k.out(1) : nullptr;
    with_numeric_data(x, [&](const auto* p) { topk_kernel(p, x, static_cast<int>(axis), kk, largest, k.out(0), idx); });
  };
  d.doc =
      "the k largest (or smallest) elements along axis and their i64 indices, sorted; ties keep the lower index; k an "
      "attribute, or operand 1 read at run time (size_symbol)";
  return d;
}

// ---- cumsum / cumprod ------------------------------------------------------

template <typename A, typename T>
void scan_kernel(const T* v, const Tensor& x, int axis, bool product, bool exclusive, bool reverse, Tensor& out) {
  std::vector<A> r(static_cast<size_t>(x.numel()));
  AxisGeometry g = axis_geometry(x.shape(), axis);
  const A identity = product ? A(1) : A(0);
  std::vector<A> acc(g.inner);
  for (int64_t b = 0; b < g.outer; ++b) {
    std::fill(acc.begin(), acc.end(), identity);
    for (int64_t step = 0; step < g.n; ++step) {
      int64_t j = reverse ? g.n - 1 - step : step;
      int64_t off = (b * g.n + j) * g.inner;
      for (int64_t i = 0; i < g.inner; ++i) {
        A before = acc[i];
        acc[i] = product ? before * static_cast<A>(v[off + i]) : before + static_cast<A>(v[off + i]);
        r[off + i] = exclusive ? before : acc[i];
      }
    }
  }
  store_all(out, r);
}

// cumsum and cumprod: one definition, the running sum or product along axis.
OpDef scan_def(const std::string& name, bool product) {
  OpDef d;
  d.name = name;
  d.category = OpCategory::Compute;
  d.attrs = {{"axis", AttrKind::Int, true}, {"exclusive", AttrKind::Int}, {"reverse", AttrKind::Int}};
  d.symbolic_dims = true;  // the result is the operand's shape: dims are copied, never computed
  d.infer = [name](InferContext& c) {
    if (c.rank(0) == 0) c.fail("operand 0 is a scalar; {} needs rank >= 1", name);
    axis_attr(c, "axis", 0);
    flag_attr(c, "exclusive", 0);
    flag_attr(c, "reverse", 0);
    if (c.dtype(0) == DType::Bool) c.fail("operand 0 is bool; {} needs a numeric dtype", name);
    return same_as_input0(c);
  };
  d.reference = [product](KernelContext& k) {
    const Tensor& x = k.in(0);
    int64_t axis = k.attrs.require_int("axis");
    if (axis < 0) axis += x.rank();
    bool exclusive = k.attrs.get_int("exclusive", 0) != 0, reverse = k.attrs.get_int("reverse", 0) != 0;
    // Floats accumulate in double; integers wrap like the dtype does (products
    // in unsigned 64 bits, whose low bits are the signed product's).
    with_numeric_data(x, [&](const auto* p) {
      using T = std::remove_cv_t<std::remove_pointer_t<decltype(p)>>;
      using ProdA = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
      using SumA = std::conditional_t<std::is_floating_point_v<T>, double,
                                      std::conditional_t<std::is_unsigned_v<T>, uint64_t, int64_t>>;
      if (product) scan_kernel<ProdA>(p, x, static_cast<int>(axis), true, exclusive, reverse, k.out());
      else scan_kernel<SumA>(p, x, static_cast<int>(axis), false, exclusive, reverse, k.out());
    });
  };
  d.doc = product ? "running product along axis (exclusive: without the element itself; reverse: from the end)"
                  : "running sum along axis (exclusive: without the element itself; reverse: from the end)";
  return d;
}

}  // namespace

void register_arg_topk_ops(OpRegistry& r) {
  r.add(arg_def("argmax", true));
  r.add(arg_def("argmin", false));
  r.add(topk_def());
}

void register_scan_ops(OpRegistry& r) {
  r.add(scan_def("cumsum", false));
  r.add(scan_def("cumprod", true));
}

}  // namespace kiln::ops
