// Index-pattern ops: results laid out by position arithmetic.
//
//   one_hot {axis, depth}(indices, values: [off, on]):
//     out[..., d at axis, ...] = indices[...] == d ? on : off; indices in
//     [-depth, -1] count from the end, others give an all-off row
//   trilu {upper, k}(x): keeps x[..., i, j] where j - i >= k (upper) or
//     j - i <= k (lower) in the last two dims, zero elsewhere
//   eye_like {dtype?, k}(x): a matrix of x's shape with ones on diagonal k
//     (column - row = k), in `dtype` (x's when absent)
//   reverse_sequence {batch_axis, time_axis}(x, sequence_lens):
//     for batch b, the first sequence_lens[b] steps along time_axis reversed,
//     the rest copied
#include <cmath>

#include "ops/index_common.h"

namespace kiln::ops::index {

namespace {

// ---------------------------------------------------------------------------
// one_hot

std::vector<TensorType> infer_one_hot(InferContext& c) {
  if (c.dtype(0) == DType::Bool) c.fail("indices must be numeric, got bool");
  if (c.rank(1) != 1 || c.shape(1)[0] != 2)
    c.fail("values must hold exactly two elements [off, on], got shape [{}]", fmt::join(c.shape(1), ","));
  const int64_t depth = c.attrs().require_int("depth");
  if (depth < 1) c.fail("depth must be positive, got {}", depth);
  const int r = c.rank(0);
  const int64_t axis = c.attrs().get_int("axis", -1);
  if (axis < -r - 1 || axis > r) c.fail("axis {} is out of range [{}, {}]", axis, -r - 1, r);
  const int64_t a = axis < 0 ? axis + r + 1 : axis;
  Shape out = c.shape(0);
  out.insert(out.begin() + a, depth);
  return {TensorType(c.dtype(1), out)};
}

// Position of each index in [0, depth), or -1 when it is outside
// [-depth, depth). Float indices truncate toward zero (NaN is outside).
std::vector<int64_t> one_hot_positions(const Tensor& idx, int64_t depth) {
  std::vector<int64_t> pos(idx.numel());
  auto place = [&](int64_t i, int64_t v) {
    int64_t p = v < 0 ? v + depth : v;
    pos[i] = p >= 0 && p < depth ? p : -1;
  };
  if (is_float(idx.dtype())) {
    std::vector<double> v = load_all<double>(idx);
    for (int64_t i = 0; i < idx.numel(); ++i) {
      double t = std::trunc(v[i]);
      if (!(t >= -double(depth) && t < double(depth))) pos[i] = -1;
      else place(i, static_cast<int64_t>(t));
    }
  } else if (idx.dtype() == DType::U64) {
    const uint64_t* p = idx.data<uint64_t>();
    for (int64_t i = 0; i < idx.numel(); ++i) pos[i] = p[i] < uint64_t(depth) ? int64_t(p[i]) : -1;
  } else {
    std::vector<int64_t> v = load_all<int64_t>(idx);
    for (int64_t i = 0; i < idx.numel(); ++i) place(i, v[i]);
  }
  return pos;
}

void one_hot_kernel(KernelContext& ctx) {
  const Tensor& idx = ctx.in(0);
  const Tensor& values = ctx.in(1);
  Tensor& y = ctx.out();
  const int64_t depth = ctx.attrs.require_int("depth");
  const int r = idx.rank();
  int64_t axis = ctx.attrs.get_int("axis", -1);
  if (axis < 0) axis += r + 1;
  const int64_t outer = dims_product(idx.shape(), 0, axis);
  const int64_t inner = dims_product(idx.shape(), axis, idx.shape().size());
  KILN_CHECK(values.numel() == 2 && y.dtype() == values.dtype() && y.numel() == outer * depth * inner,
             "{}: operands were not checked by inference", ctx.label);
  const std::vector<int64_t> pos = one_hot_positions(idx, depth);
  const uint8_t* v = static_cast<const uint8_t*>(values.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  dispatch_bytes(dtype_size(y.dtype()), [&](auto z) {
    using E = decltype(z);
    for (int64_t e = 0; e < y.numel(); ++e) copy_elem<E>(dst, e, v, 0);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t p = pos[o * inner + i];
        if (p >= 0) copy_elem<E>(dst, (o * depth + p) * inner + i, v, 1);
      }
  });
}

// ---------------------------------------------------------------------------
// trilu

std::vector<TensorType> infer_trilu(InferContext& c) {
  if (c.rank(0) < 2) c.fail("input must have rank >= 2, got {}", c.rank(0));
  int64_t upper = c.attrs().get_int("upper", 1);
  if (upper != 0 && upper != 1) c.fail("upper must be 0 or 1, got {}", upper);
  return {c.type(0)};
}

void trilu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out();
  const bool upper = ctx.attrs.get_int("upper", 1) == 1;
  const Shape& s = x.shape();
  KILN_CHECK(s.size() >= 2 && y.type() == x.type(), "{}: operands were not checked by inference", ctx.label);
  const int64_t rows = s[s.size() - 2], cols = s.back();
  // Clamping k keeps i + k in range without changing which elements are kept.
  const int64_t k = std::clamp<int64_t>(ctx.attrs.get_int("k", 0), -rows - 1, cols + 1);
  const int64_t mats = dims_product(s, 0, s.size() - 2);
  const size_t es = dtype_size(x.dtype());
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  if (y.nbytes()) std::memset(dst, 0, y.nbytes());
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i) {
      // Kept columns [lo, hi).
      int64_t lo = upper ? std::max<int64_t>(0, i + k) : 0;
      int64_t hi = upper ? cols : std::min<int64_t>(cols, i + k + 1);
      if (hi <= lo) continue;
      size_t off = static_cast<size_t>((m * rows + i) * cols + lo) * es;
      std::memcpy(dst + off, src + off, static_cast<size_t>(hi - lo) * es);
    }
}

// ---------------------------------------------------------------------------
// eye_like

DType eye_like_dtype(const AttrMap& a, DType input) {
  if (!a.has("dtype")) return input;
  std::string name = a.get_string("dtype", "");
  std::optional<DType> d = dtype_from_name(name);
  if (!d) fail("unknown dtype '{}'", name);
  return *d;
}

std::vector<TensorType> infer_eye_like(InferContext& c) {
  if (c.rank(0) != 2) c.fail("input must be 2-D, got rank {}", c.rank(0));
  DType d = c.dtype(0);
  try {
    d = eye_like_dtype(c.attrs(), c.dtype(0));
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  return {TensorType(d, c.shape(0))};
}

void eye_like_kernel(KernelContext& ctx) {
  Tensor& y = ctx.out();
  KILN_CHECK(y.rank() == 2, "{}: result was not checked by inference", ctx.label);
  const int64_t rows = y.shape()[0], cols = y.shape()[1];
  const int64_t k = std::clamp<int64_t>(ctx.attrs.get_int("k", 0), -rows, cols);
  if (y.nbytes()) std::memset(y.raw(), 0, y.nbytes());
  for (int64_t i = std::max<int64_t>(0, -k); i < rows && i + k < cols; ++i) y.set_double(i * cols + i + k, 1.0);
}

// ---------------------------------------------------------------------------
// reverse_sequence

std::vector<TensorType> infer_reverse_sequence(InferContext& c) {
  if (c.rank(0) < 2) c.fail("input must have rank >= 2, got {}", c.rank(0));
  const int64_t ba = c.attrs().get_int("batch_axis", 1), ta = c.attrs().get_int("time_axis", 0);
  if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
    c.fail("batch_axis ({}) and time_axis ({}) must be 0 and 1 in some order", ba, ta);
  require_index_dtype(c, 1, "sequence_lens");
  if (c.rank(1) != 1 || c.shape(1)[0] != c.shape(0)[ba])
    c.fail("sequence_lens must be 1-D with one length per batch entry ({}), got shape [{}]", c.shape(0)[ba],
           fmt::join(c.shape(1), ","));
  return {c.type(0)};
}

void reverse_sequence_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& lens = ctx.in(1);
  Tensor& y = ctx.out();
  const int ba = static_cast<int>(ctx.attrs.get_int("batch_axis", 1));
  const int ta = static_cast<int>(ctx.attrs.get_int("time_axis", 0));
  const Shape& s = x.shape();
  KILN_CHECK(s.size() >= 2 && (ba == 0 || ba == 1) && (ta == 0 || ta == 1) && ba != ta && lens.numel() == s[ba] &&
                 y.type() == x.type(),
             "{}: operands were not checked by inference", ctx.label);
  const std::vector<int64_t> st = strides_of(s);
  const int64_t batch = s[ba], steps = s[ta];
  const size_t es = dtype_size(x.dtype());
  const size_t row = static_cast<size_t>(dims_product(s, 2, s.size())) * es;
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  dispatch_index(ctx, lens, [&](auto z) {
    using I = decltype(z);
    const I* lp = lens.data<I>();
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = lp[b];
      if (len < 0 || len > steps)
        throw Error(fmt::format("{}: sequence_lens[{}] = {} is outside [0, {}]", ctx.label, b, len, steps));
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t from = t < len ? len - 1 - t : t;
        if (row)
          std::memcpy(dst + static_cast<size_t>(b * st[ba] + t * st[ta]) * es,
                      src + static_cast<size_t>(b * st[ba] + from * st[ta]) * es, row);
      }
    }
  });
}

}  // namespace

void register_layout_ops(OpRegistry& r) {
  OpDef oh;
  oh.name = "one_hot";
  oh.category = OpCategory::Injective;
  oh.min_inputs = oh.max_inputs = 2;
  oh.attrs = {{"axis", AttrKind::Int}, {"depth", AttrKind::Int, true}};
  oh.infer = infer_one_hot;
  oh.reference = one_hot_kernel;
  oh.doc = "values[1] where indices equal the position along the new `axis` of size depth, values[0] elsewhere";
  r.add(std::move(oh));

  OpDef tr;
  tr.name = "trilu";
  tr.category = OpCategory::Injective;
  tr.attrs = {{"upper", AttrKind::Int}, {"k", AttrKind::Int}};
  tr.infer = infer_trilu;
  tr.reference = trilu_kernel;
  tr.doc = "upper (col - row >= k) or lower (col - row <= k) triangle of the last two dims, zeros elsewhere";
  r.add(std::move(tr));

  OpDef ey;
  ey.name = "eye_like";
  ey.category = OpCategory::Injective;
  ey.attrs = {{"dtype", AttrKind::String}, {"k", AttrKind::Int}};
  ey.infer = infer_eye_like;
  ey.reference = eye_like_kernel;
  ey.doc = "ones on diagonal k of a matrix shaped like the input, zeros elsewhere, in `dtype` (the input's if absent)";
  r.add(std::move(ey));

  OpDef rs;
  rs.name = "reverse_sequence";
  rs.category = OpCategory::Injective;
  rs.min_inputs = rs.max_inputs = 2;
  rs.attrs = {{"batch_axis", AttrKind::Int}, {"time_axis", AttrKind::Int}};
  rs.infer = infer_reverse_sequence;
  rs.reference = reverse_sequence_kernel;
  rs.doc = "reverses the first sequence_lens[b] steps along time_axis of each batch entry b";
  r.add(std::move(rs));
}

}  // namespace kiln::ops::index
