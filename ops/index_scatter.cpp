// Scatters: the result is a copy of `data` with `updates` written (or
// combined, per `reduction`) at positions given by an index operand.
// Updates apply in index order, so with reduction "none" a repeated index
// keeps the last update; with add/mul/max/min every update counts.
//
//   scatter_elements {axis, reduction}(data, indices, updates):
//     out[p with p[axis] = indices[p]] (op)= updates[p], for p over indices' shape
//   scatter_nd {reduction}(data, indices, updates):
//     indices[..., k] addresses a slice data[i0..ik-1, :]; updates holds one
//     such slice per index tuple (shape indices[:-1] + data[k:])
#include "ops/index_common.h"

namespace kiln::ops::index {

namespace {

void check_reduction(InferContext& c) {
  std::string r = c.attrs().get_string("reduction", "none");
  parse_reduction(c, r);
  if (r != "none" && is_low_bit(c.dtype(0)))
    c.unsupported("reduction \"{}\" on {} data is not supported", r, dtype_name(c.dtype(0)));
}

void check_updates_dtype(InferContext& c) {
  if (c.dtype(2) != c.dtype(0)) c.fail("updates are {} but data is {}", dtype_name(c.dtype(2)), dtype_name(c.dtype(0)));
}

std::vector<TensorType> infer_scatter_elements(InferContext& c) {
  require_index_dtype(c, 1, "indices");
  check_updates_dtype(c);
  check_reduction(c);
  const int r = c.rank(0);
  if (r < 1) c.fail("data must have rank >= 1, got a scalar");
  if (c.rank(1) != r) c.fail("indices rank {} differs from data rank {}", c.rank(1), r);
  if (c.shape(2) != c.shape(1))
    c.fail("updates shape [{}] differs from indices shape [{}]", dims_str(c.shape(2)), dims_str(c.shape(1)));
  int axis = 0;
  try {
    axis = normalize_axis(c.attrs().get_int("axis", 0), r);
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  for (int d = 0; d < r; ++d) {
    const int64_t di = c.shape(1)[d], dd = c.shape(0)[d];
    if (d == axis || di == dd) continue;
    // A symbolic dim against another dim: kiln cannot tell whether the
    // indices fit (Faster R-CNN scatters per-level results of equal shapes).
    if (is_symbolic_dim(di) || is_symbolic_dim(dd))
      c.unsupported("indices dim {} is {} and data's is {}: with a symbolic dim kiln needs them equal", d, dim_str(di),
                    dim_str(dd));
    if (di > dd) c.fail("indices dim {} is {} but data's is only {}", d, di, dd);
  }
  return {c.type(0)};
}

void scatter_elements_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& idx = ctx.in(1);
  const Tensor& upd = ctx.in(2);
  Tensor& y = ctx.out();
  const int r = x.rank();
  const int axis = normalize_axis(ctx.attrs.get_int("axis", 0), r);
  const CombineFn combine = combiner(x.dtype(), reduction_from_attrs(ctx.attrs));
  const Shape& is = idx.shape();
  const std::vector<int64_t> ds = strides_of(x.shape());
  const int64_t n = x.shape()[axis];
  const int64_t m = idx.numel();
  const size_t es = dtype_size(x.dtype());
  KILN_CHECK(idx.rank() == r && upd.shape() == is && upd.dtype() == x.dtype() && y.type() == x.type(),
             "{}: operands were not checked by inference", ctx.label);
  for (int d = 0; d < r; ++d) KILN_CHECK(d == axis || is[d] <= x.shape()[d], "{}: indices exceed data", ctx.label);
  if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
  const uint8_t* src = static_cast<const uint8_t*>(upd.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  dispatch_index(ctx, idx, [&](auto iz) {
    using I = decltype(iz);
    const I* ip = idx.data<I>();
    for_each_off_axis(is, ds, axis, m, [&](int64_t e, int64_t base) {
      const int64_t off = base + wrap_index(ctx, "scatter_elements index", ip[e], n) * ds[axis];
      if (combine) combine(dst + off * es, src + e * es);
      else std::memcpy(dst + off * es, src + e * es, es);
    });
  });
}

std::vector<TensorType> infer_scatter_nd(InferContext& c) {
  require_index_dtype(c, 1, "indices");
  check_updates_dtype(c);
  check_reduction(c);
  const int r = c.rank(0), q = c.rank(1);
  if (r < 1 || q < 1) c.fail("data and indices must have rank >= 1 (got {} and {})", r, q);
  const Shape& ds = c.shape(0);
  const Shape& is = c.shape(1);
  const int64_t k = is.back();
  if (k < 1 || k > r) c.fail("indices' last dim {} must be in [1, {}]", k, r);
  Shape want(is.begin(), is.end() - 1);
  want.insert(want.end(), ds.begin() + k, ds.end());
  if (c.shape(2) != want)
    c.fail("updates shape [{}] should be [{}] (indices[:-1] + data[{}:])", fmt::join(c.shape(2), ","),
           fmt::join(want, ","), k);
  return {c.type(0)};
}

void scatter_nd_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& idx = ctx.in(1);
  const Tensor& upd = ctx.in(2);
  Tensor& y = ctx.out();
  const CombineFn combine = combiner(x.dtype(), reduction_from_attrs(ctx.attrs));
  const Shape& xs = x.shape();
  const size_t k = static_cast<size_t>(idx.shape().back());
  const std::vector<int64_t> st = strides_of(xs);
  const int64_t tuples = dims_product(idx.shape(), 0, idx.shape().size() - 1);
  const int64_t slice = dims_product(xs, k, xs.size());
  const size_t es = dtype_size(x.dtype());
  KILN_CHECK(
      k >= 1 && k <= xs.size() && upd.numel() == tuples * slice && upd.dtype() == x.dtype() && y.type() == x.type(),
      "{}: operands were not checked by inference", ctx.label);
  if (x.nbytes()) std::memcpy(y.raw(), x.raw(), x.nbytes());
  const uint8_t* src = static_cast<const uint8_t*>(upd.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  dispatch_index(ctx, idx, [&](auto iz) {
    using I = decltype(iz);
    const I* ip = idx.data<I>();
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = 0;
      for (size_t j = 0; j < k; ++j) off += wrap_index(ctx, "scatter_nd index", ip[t * k + j], xs[j]) * st[j];
      uint8_t* d = dst + off * es;
      const uint8_t* s = src + t * slice * es;
      if (!combine) {
        if (slice) std::memcpy(d, s, slice * es);
        continue;
      }
      for (int64_t e = 0; e < slice; ++e) combine(d + e * es, s + e * es);
    }
  });
}

}  // namespace

void register_scatter_ops(OpRegistry& r) {
  OpDef se;
  se.name = "scatter_elements";
  se.symbolic_dims = true;  // the result is data's type; indices' dims off the axis equal data's when symbolic
  se.category = OpCategory::Compute;
  se.min_inputs = se.max_inputs = 3;
  se.attrs = {{"axis", AttrKind::Int}, {"reduction", AttrKind::String}};
  se.infer = infer_scatter_elements;
  se.reference = scatter_elements_kernel;
  se.doc = "copy of data with out[p, p[axis] = indices[p]] (reduction)= updates[p]; reduction none|add|mul|max|min";
  r.add(std::move(se));

  OpDef sn;
  sn.name = "scatter_nd";
  sn.category = OpCategory::Compute;
  sn.min_inputs = sn.max_inputs = 3;
  sn.attrs = {{"reduction", AttrKind::String}};
  sn.infer = infer_scatter_nd;
  sn.reference = scatter_nd_kernel;
  sn.doc = "copy of data with the slices addressed by indices' last-dim tuples (reduction)= updates";
  r.add(std::move(sn));
}

}  // namespace kiln::ops::index
