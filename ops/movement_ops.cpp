// Shape and data-movement ops, part 2: concat, split, slice, pad (see
// shape_ops.cpp for part 1 and copy_strided). Kernels move bytes, so every
// dtype works; contiguous rows are copied with one memcpy.
#include <algorithm>
#include <cstring>

#include "ops/data_dependent_size.h"
#include "ops/op_helpers.h"
#include "ops/shape_ops.h"

namespace kiln::ops {

// ---------------------------------------------------------------------------
// Slice canonicalisation (ONNX Slice semantics -> SliceSpec).

int64_t slice_extent(int64_t start, int64_t end, int64_t step) {
  if (step > 0) return end > start ? (end - start + step - 1) / step : 0;
  return start > end ? (start - end + (-step) - 1) / (-step) : 0;
}

bool symbolic_end_within(int64_t end, int64_t lo, int64_t hi, const std::vector<SymbolDecl>& ranges) {
  if (!is_symbolic_dim(end)) return lo <= end && end <= hi;
  SymbolBindings at_min, at_max;
  for (const auto& [mono, coeff] : dim_poly(end)) {
    if (coeff < 0) return false;
    for (const std::string& sym : mono) {
      auto d = std::find_if(ranges.begin(), ranges.end(), [&](const SymbolDecl& r) { return r.name == sym; });
      if (d == ranges.end() || d->min < 0 || d->max < d->min) return false;
      at_min[sym] = d->min;
      at_max[sym] = d->max;
    }
  }
  return eval_dim(end, at_min) >= lo && eval_dim(end, at_max) <= hi;
}

SliceSpec canonical_slice(const Shape& in, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                          std::vector<int64_t> axes, std::vector<int64_t> steps, bool allow_data_dependent,
                          const std::vector<SymbolDecl>* ranges) {
  const int r = static_cast<int>(in.size());
  if (starts.size() != ends.size())
    fail("slice starts ({} values) and ends ({} values) differ in length", starts.size(), ends.size());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size()) fail("slice axes has {} values but starts has {}", axes.size(), starts.size());
  if (steps.size() != starts.size()) fail("slice steps has {} values but starts has {}", steps.size(), starts.size());
  SliceSpec spec;
  spec.starts.assign(r, 0);
  spec.ends.assign(in.begin(), in.end());
  spec.steps.assign(r, 1);
  std::vector<bool> seen(r, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + r : axes[i];
    if (a < 0 || a >= r) fail("slice axis {} is out of range for rank {}", axes[i], r);
    if (seen[a]) fail("slice axis {} is given twice", axes[i]);
    seen[a] = true;
    int64_t dim = in[a], step = steps[i];
    if (step == 0) fail("slice step for axis {} is 0", axes[i]);
    if (step == INT64_MIN) step = INT64_MIN + 1;  // same result for any dim, keeps -step defined
    int64_t s = starts[i], e = ends[i];
    // Whole: 0 to an open end, or to the dim itself (x.split(n) of an x with
    // n rows writes Slice 0:0+n).
    if (is_symbolic_dim(dim) && s == 0 && (e >= kSliceOpenEnd || e == dim) && step == 1) continue;
    // A static dim cut at a symbolic end that stays inside it over the
    // symbols' ranges (x[:, :seq] of a longer buffer): the size is end - start.
    if (!is_symbolic_dim(dim) && !is_symbolic_dim(s) && is_symbolic_dim(e) && step == 1 && ranges && s >= 0 &&
        s <= dim && symbolic_end_within(e, s, dim, *ranges)) {
      spec.starts[a] = s;
      spec.ends[a] = e;
      continue;
    }
    if (is_symbolic_dim(s) || is_symbolic_dim(e))
      unsupported(
          "slicing [{}] along dim {} from {} to {}: a symbolic start or end is supported only to take a dim "
          "whole",
          dims_str(in), a, dim_str(s), dim_str(e));
    if (is_symbolic_dim(dim)) {
      // Clamping to a symbolic size is not a polynomial: kiln does not guess.
      if (!allow_data_dependent || spec.data_dependent_axis >= 0)
        unsupported("slicing [{}] along dim {} ({}) needs its size: not supported with symbolic dims yet", dims_str(in),
                    a, dim_str(dim));
      spec.data_dependent_axis = static_cast<int>(a);
      spec.starts[a] = s;
      spec.ends[a] = e;
      spec.steps[a] = step;
      continue;
    }
    if (s < 0) s += dim;  // no overflow: only adds to negatives
    if (e < 0) e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      if (e < s) e = s;
    } else if (dim == 0) {
      s = e = -1;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      if (e > s) e = s;
    }
    spec.starts[a] = s;
    spec.ends[a] = e;
    spec.steps[a] = step;
  }
  return spec;
}

int data_dependent_slice_axis(const Shape& in, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                              const std::vector<int64_t>& steps) {
  for (size_t i = 0; i < in.size() && i < starts.size() && i < ends.size() && i < steps.size(); ++i)
    if (is_symbolic_dim(in[i]) && (starts[i] != 0 || ends[i] != in[i] || steps[i] != 1)) return static_cast<int>(i);
  return -1;
}

namespace {

std::vector<int64_t> attr_ints(InferContext& c, const char* name) { return c.attrs().get_ints(name); }

// ---------------------------------------------------------------------------
// concat

OpDef concat_op() {
  OpDef d;
  d.name = "concat";
  d.symbolic_dims = true;  // the concat axis adds up as a polynomial
  d.category = OpCategory::Injective;
  d.keeps_layout = true;
  d.max_inputs = -1;
  // in_place_append=1 (passes/kv_cache_in_place.cpp): the caller may bind
  // one buffer as operand 0 (a graph input) and the result (a graph output);
  // the meaning is unchanged.
  d.attrs = {{"axis", AttrKind::Int, true}, {"in_place_append", AttrKind::Int, false}};
  d.infer = [](InferContext& c) {
    for (int i = 0; i < c.num_inputs(); ++i)
      if (!c.has_input(i)) c.fail("operand {} is missing", i);
    if (int64_t f = c.attrs().get_int("in_place_append", 0); f != 0 && f != 1)
      c.fail("in_place_append is {}; it must be 0 or 1", f);
    require_same_dtype(c);
    int r = c.rank(0);
    if (r == 0) c.fail("cannot concatenate scalars");
    int64_t axis_attr = c.attrs().require_int("axis");
    int64_t a = axis_attr < 0 ? axis_attr + r : axis_attr;
    if (a < 0 || a >= r) c.fail("axis {} is out of range for rank {}", axis_attr, r);
    Shape out = c.shape(0);
    for (int i = 1; i < c.num_inputs(); ++i) {
      const Shape& s = c.shape(i);
      if (static_cast<int>(s.size()) != r)
        c.fail("operand {} is {} but operand 0 is {} (ranks differ)", i, c.type(i).str(), c.type(0).str());
      for (int k = 0; k < r; ++k)
        if (k != a && s[k] != out[k])
          c.fail("operand {} is {} but operand 0 is {}: dim {} differs off the concat axis {}", i, c.type(i).str(),
                 c.type(0).str(), k, a);
      if (is_symbolic_dim(out[a]) || is_symbolic_dim(s[a])) {
        try {
          out[a] = dim_add(out[a], s[a]);
        } catch (const Error& e) {
          c.fail("{}", e.what());
        }
      } else if (__builtin_add_overflow(out[a], s[a], &out[a])) {
        c.fail("concatenated dim {} overflows", a);
      }
    }
    return std::vector<TensorType>{TensorType(c.dtype(0), out)};
  };
  d.reference = [](KernelContext& k) {
    Tensor& out = k.out(0);
    int r = out.rank();
    int64_t axis = k.attrs.require_int("axis");
    if (axis < 0) axis += r;
    size_t es = dtype_size(out.dtype());
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= out.shape()[i];
    for (int i = static_cast<int>(axis) + 1; i < r; ++i) inner *= out.shape()[i];
    auto* dst = static_cast<uint8_t*>(out.raw());
    size_t out_row = static_cast<size_t>(out.shape()[axis] * inner) * es;
    size_t off = 0;
    for (size_t j = 0; j < k.inputs.size(); ++j) {
      const Tensor& in = k.in(static_cast<int>(j));
      size_t row = static_cast<size_t>(in.shape()[axis] * inner) * es;
      const auto* src = static_cast<const uint8_t*>(in.raw());
      if (row)
        for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * out_row + off, src + o * row, row);
      off += row;
    }
  };
  d.doc = "Joins operands along `axis` (negative counts from the end); all other dims must match.";
  return d;
}

// ---------------------------------------------------------------------------
// split

OpDef split_op() {
  OpDef d;
  d.name = "split";
  // Dims off the axis are copied. A symbolic axis keeps the static sizes of
  // `split` (TorchScript's trace of a loop over torch.where's hits, Mixtral's
  // experts, splits a data-dependent count into pieces of 1): the dim must
  // equal their sum when the node runs, which a graph specialised to it checks
  // in this inference and the reference kernel checks again; codegen refuses
  // a shape-generic kernel for it (it could not check).
  d.symbolic_dims = true;
  d.category = OpCategory::Injective;
  d.keeps_layout = true;
  d.max_outputs = -1;
  d.attrs = {{"axis", AttrKind::Int, true}, {"split", AttrKind::Ints, true}};
  d.infer = [](InferContext& c) {
    int r = c.rank(0);
    if (r == 0) c.fail("cannot split a scalar");
    int64_t axis_attr = c.attrs().require_int("axis");
    int64_t a = axis_attr < 0 ? axis_attr + r : axis_attr;
    if (a < 0 || a >= r) c.fail("axis {} is out of range for rank {}", axis_attr, r);
    std::vector<int64_t> split = attr_ints(c, "split");
    if (static_cast<int>(split.size()) != c.num_outputs())
      c.fail("split [{}] has {} parts but {} results are asked for", fmt::join(split, ","), split.size(),
             c.num_outputs());
    int64_t sum = 0;
    std::vector<TensorType> r_types;
    for (int64_t s : split) {
      if (s < 0) c.fail("split [{}] has a negative size", fmt::join(split, ","));
      if (__builtin_add_overflow(sum, s, &sum)) c.fail("split [{}] overflows", fmt::join(split, ","));
      Shape o = c.shape(0);
      o[a] = s;
      r_types.emplace_back(c.dtype(0), o);
    }
    if (!is_symbolic_dim(c.shape(0)[a]) && sum != c.shape(0)[a])
      c.fail("split [{}] sums to {} but dim {} of {} is {}", fmt::join(split, ","), sum, a, c.type(0).str(),
             c.shape(0)[a]);
    return r_types;
  };
  d.reference = [](KernelContext& k) {
    const Tensor& in = k.in(0);
    int r = in.rank();
    int64_t axis = k.attrs.require_int("axis");
    if (axis < 0) axis += r;
    size_t es = dtype_size(in.dtype());
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= in.shape()[i];
    for (int i = static_cast<int>(axis) + 1; i < r; ++i) inner *= in.shape()[i];
    // Results typed over a symbolic axis (infer above) meet the real dim here.
    int64_t sum = 0;
    for (const Tensor& out : k.outputs) sum += out.shape()[axis];
    if (sum != in.shape()[axis])
      throw Error(fmt::format("{}: split [{}] sums to {} but dim {} of the operand is {} when it runs", k.label,
                              fmt::join(k.attrs.get_ints("split"), ","), sum, axis, in.shape()[axis]));
    const auto* src = static_cast<const uint8_t*>(in.raw());
    size_t in_row = static_cast<size_t>(in.shape()[axis] * inner) * es;
    size_t off = 0;
    for (Tensor& out : k.outputs) {
      size_t row = static_cast<size_t>(out.shape()[axis] * inner) * es;
      auto* dst = static_cast<uint8_t*>(out.raw());
      if (row)
        for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * row, src + o * in_row + off, row);
      off += row;
    }
  };
  d.doc = "Cuts the operand along `axis` into one result per entry of `split` (the sizes, summing to the dim).";
  return d;
}

// ---------------------------------------------------------------------------
// slice

OpDef slice_op() {
  OpDef d;
  d.name = "slice";
  // A symbolic dim is taken whole (0, dim, 1), or, in the symbol form
  // (ops/data_dependent_size.h), one symbolic dim is sliced with ONNX's
  // start/end/step and the result's size there is the node's size symbol:
  // the lowering runs it as an ordinary slice once the dim is known.
  d.symbolic_dims = true;
  d.category = OpCategory::Injective;
  d.keeps_layout = true;
  d.attrs = {{"starts", AttrKind::Ints, true},
             {"ends", AttrKind::Ints, true},
             {"steps", AttrKind::Ints, true},
             {kSizeSymbolAttr, AttrKind::String}};
  d.infer = [](InferContext& c) {
    std::vector<int64_t> st = attr_ints(c, "starts"), en = attr_ints(c, "ends"), sp = attr_ints(c, "steps");
    int r = c.rank(0);
    if (static_cast<int>(st.size()) != r || static_cast<int>(en.size()) != r || static_cast<int>(sp.size()) != r)
      c.fail("starts/ends/steps need one value per dim of {} (got {}, {}, {})", c.type(0).str(), st.size(), en.size(),
             sp.size());
    if (size_form(c) == SizeForm::Bounded)
      c.fail("slice has no bounded form (it runs once its operand's size is known)");
    const int dd_axis = c.attrs().has(kSizeSymbolAttr) ? data_dependent_slice_axis(c.shape(0), st, en, sp) : -1;
    if (c.attrs().has(kSizeSymbolAttr) && dd_axis < 0)
      c.fail("{} is given but no symbolic dim of {} is sliced", kSizeSymbolAttr, c.type(0).str());
    Shape out(r);
    for (int i = 0; i < r; ++i) {
      int64_t dim = c.shape(0)[i], s = st[i], e = en[i], p = sp[i];
      if (i == dd_axis) {
        if (p == 0) c.fail("dim {} ({}): the step is 0", i, dim_str(dim));
        out[i] = size_symbol_dim(c);
        continue;
      }
      // A static dim cut at a symbolic end (canonical_slice checked that it
      // stays within the dim over the symbols' ranges): end - start elements.
      if (!is_symbolic_dim(dim) && !is_symbolic_dim(s) && is_symbolic_dim(e)) {
        if (p != 1 || s < 0 || s > dim)
          c.fail("dim {} (size {}): start {}, end {}, step {}: a symbolic end needs step 1 and 0 <= start <= dim", i,
                 dim, s, dim_str(e), p);
        try {
          out[i] = dim_sub(e, s);
        } catch (const Error& err) {
          c.fail("{}", err.what());
        }
        continue;
      }
      if (is_symbolic_dim(dim)) {
        if (s != 0 || e != dim || p != 1)
          c.unsupported("dim {} ({}) is sliced ({}:{}:{}): a symbolic dim can only be taken whole", i, dim_str(dim),
                        dim_str(s), dim_str(e), p);
        out[i] = dim;
        continue;
      }
      bool ok = p > 0 ? (0 <= s && s <= e && e <= dim)
                      : (p < 0 && p != INT64_MIN && -1 <= e && e <= s && s <= std::max<int64_t>(dim - 1, -1) &&
                         (dim > 0 || s == -1));
      if (!ok)
        c.fail(
            "dim {} (size {}): start {}, end {}, step {} is not a canonical slice (step > 0: 0 <= start <= end <= "
            "dim; step < 0: -1 <= end <= start < dim)",
            i, dim, s, e, p);
      out[i] = slice_extent(s, e, p);
    }
    return std::vector<TensorType>{TensorType(c.dtype(0), out)};
  };
  d.reference = [](KernelContext& k) {
    if (k.attrs.has(kSizeSymbolAttr)) refuse_unlowered(k);
    const Tensor& in = k.in(0);
    Tensor& out = k.out(0);
    if (out.numel() == 0) return;
    std::vector<int64_t> st = k.attrs.get_ints("starts"), sp = k.attrs.get_ints("steps");
    std::vector<int64_t> ist = strides_of(in.shape()), src(ist.size());
    int64_t base = 0;
    for (size_t i = 0; i < ist.size(); ++i) {
      base += st[i] * ist[i];
      src[i] = ist[i] * sp[i];
    }
    size_t es = dtype_size(in.dtype());
    copy_strided(static_cast<const uint8_t*>(in.raw()) + base * static_cast<int64_t>(es), src, out.raw(),
                 strides_of(out.shape()), out.shape(), es);
  };
  d.doc =
      "Strided window: per dim, element k reads start + k*step for k < ceil((end-start)/step). One "
      "start/end/step per dim, canonical (step > 0: 0 <= start <= end <= dim; step < 0: "
      "-1 <= end <= start <= dim-1; empty as start == end); the ONNX adapter clamps and fills them in.";
  return d;
}

// ---------------------------------------------------------------------------
// pad

enum class PadMode { Constant, Reflect, Edge, Wrap };

PadMode pad_mode(const std::string& m, InferContext* c) {
  if (m == "constant") return PadMode::Constant;
  if (m == "reflect") return PadMode::Reflect;
  if (m == "edge") return PadMode::Edge;
  if (m == "wrap") return PadMode::Wrap;
  if (c) c->fail("mode '{}' must be constant, reflect, edge or wrap", m);
  fail("pad mode '{}' is not known", m);
}

// Source index along a dim of size `dim` for virtual position p (which may be
// outside [0, dim)); -1 for constant padding.
int64_t pad_source(PadMode mode, int64_t p, int64_t dim) {
  if (p >= 0 && p < dim) return p;
  switch (mode) {
    case PadMode::Constant:
      return -1;
    case PadMode::Edge:
      return p < 0 ? 0 : dim - 1;
    case PadMode::Wrap:
      return ((p % dim) + dim) % dim;
    case PadMode::Reflect: {
      if (dim == 1) return 0;
      int64_t period = 2 * (dim - 1);
      int64_t m = ((p % period) + period) % period;
      return m >= dim ? period - m : m;
    }
  }
  return -1;
}

OpDef pad_op() {
  OpDef d;
  d.name = "pad";
  d.category = OpCategory::Injective;
  d.keeps_layout = true;
  d.max_inputs = 2;
  d.attrs = {{"pads", AttrKind::Ints, true}, {"mode", AttrKind::String}, {"value", AttrKind::Float}};
  d.infer = [](InferContext& c) {
    std::vector<int64_t> pads = attr_ints(c, "pads");
    int r = c.rank(0);
    if (static_cast<int>(pads.size()) != 2 * r)
      c.fail("pads [{}] needs {} values (begins then ends) for {}", fmt::join(pads, ","), 2 * r, c.type(0).str());
    PadMode mode = pad_mode(c.attrs().get_string("mode", "constant"), &c);
    if (c.has_input(1)) {
      if (mode != PadMode::Constant) c.fail("a padding value operand needs mode constant");
      if (c.attrs().has("value")) c.fail("the padding value is given both as attribute and operand");
      if (c.dtype(1) != c.dtype(0))
        c.fail("padding value is {} but the data is {}", dtype_name(c.dtype(1)), dtype_name(c.dtype(0)));
      if (c.type(1).numel() != 1) c.fail("padding value must be one element, got {}", c.type(1).str());
    }
    if (mode != PadMode::Constant && c.attrs().has("value")) c.fail("attribute 'value' needs mode constant");
    Shape out(r);
    for (int i = 0; i < r; ++i) {
      int64_t dim = c.shape(0)[i], b = pads[i], e = pads[i + r];
      constexpr int64_t kMax = int64_t(1) << 50;
      if (b > kMax || b < -kMax || e > kMax || e < -kMax) c.fail("pads [{}] are too large", fmt::join(pads, ","));
      if (__builtin_add_overflow(dim, b + e, &out[i])) c.fail("padded dim {} overflows", i);
      if (out[i] < 0) c.fail("pads {} and {} remove more than dim {} of {}", b, e, i, c.type(0).str());
      if (mode != PadMode::Constant && dim == 0 && out[i] > 0)
        c.fail("{} padding of the empty dim {} has nothing to copy", c.attrs().get_string("mode", ""), i);
    }
    try {
      shape_numel(out);
    } catch (const Error& e) {
      c.fail("{}", e.what());
    }
    return std::vector<TensorType>{TensorType(c.dtype(0), out)};
  };
  d.reference = [](KernelContext& k) {
    const Tensor& in = k.in(0);
    Tensor& out = k.out(0);
    if (out.numel() == 0) return;
    std::vector<int64_t> pads = k.attrs.get_ints("pads");
    PadMode mode = pad_mode(k.attrs.get_string("mode", "constant"), nullptr);
    const int r = in.rank();
    const int64_t es = static_cast<int64_t>(dtype_size(in.dtype()));
    const Shape &is = in.shape(), &os = out.shape();
    Tensor value = k.has(1) ? *k.inputs[1] : Tensor::scalar(in.dtype(), k.attrs.get_float("value", 0.0f));
    const auto* src = static_cast<const uint8_t*>(in.raw());
    auto* dst = static_cast<uint8_t*>(out.raw());
    if (r == 0) {
      std::memcpy(dst, src, es);
      return;
    }
    // Per dim, the source offset (index * stride) of each result index, or
    // kPadded where the constant goes.
    constexpr int64_t kPadded = INT64_MIN;
    std::vector<std::vector<int64_t>> map(r);
    std::vector<int64_t> ist = strides_of(is);
    for (int i = 0; i < r; ++i) {
      map[i].resize(os[i]);
      for (int64_t o = 0; o < os[i]; ++o) {
        int64_t p = pad_source(mode, o - pads[i], is[i]);
        map[i][o] = p < 0 ? kPadded : p * ist[i];
      }
    }
    // Rows along the last dim: result positions [mid_lo, mid_hi) read one
    // contiguous run of an operand row; the rest is per element.
    const int64_t inner = os[r - 1];
    const std::vector<int64_t>& im = map[r - 1];
    const int64_t mid_lo = std::clamp<int64_t>(pads[r - 1], 0, inner);
    const int64_t mid_hi = std::clamp<int64_t>(pads[r - 1] + is[r - 1], mid_lo, inner);
    auto edge = [&](uint8_t* dd, const uint8_t* s, int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o) {
        if (im[o] == kPadded) std::memcpy(dd + o * es, value.raw(), es);
        else std::memcpy(dd + o * es, s + im[o] * es, es);
      }
    };
    std::vector<int64_t> idx(r - 1, 0);
    const int64_t rows = out.numel() / inner;
    for (int64_t row = 0; row < rows; ++row) {
      uint8_t* dd = dst + row * inner * es;
      int64_t base = 0;
      bool padded = false;
      for (int i = 0; i < r - 1 && !padded; ++i) {
        padded = map[i][idx[i]] == kPadded;
        base += padded ? 0 : map[i][idx[i]];
      }
      if (padded) {
        fill_bytes(dd, value.raw(), es, inner);
      } else {
        const uint8_t* s = src + base * es;
        edge(dd, s, 0, mid_lo);
        if (mid_hi > mid_lo)
          std::memcpy(dd + mid_lo * es, s + im[mid_lo] * es, static_cast<size_t>(mid_hi - mid_lo) * es);
        edge(dd, s, mid_hi, inner);
      }
      for (int i = r - 2; i >= 0; --i) {
        if (++idx[i] < os[i]) break;
        idx[i] = 0;
      }
    }
  };
  d.doc =
      "Pads (or, with negative pads, crops) each dim: pads = [begin_0.., end_0..] for every dim. mode "
      "constant (value from the `value` attribute, default 0, or from a scalar operand 1 when not known at "
      "compile time), reflect (mirror without repeating the edge), edge (repeat the edge) or wrap (periodic).";
  return d;
}

}  // namespace

void register_movement_ops(OpRegistry& r) {
  r.add(concat_op());
  r.add(split_op());
  r.add(slice_op());
  r.add(pad_op());
}

}  // namespace kiln::ops
