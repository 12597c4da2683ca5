// Gathers: read elements (or slices) of `data` at positions given by an index
// operand. Negative indices count from the end; anything outside
// [-size, size) is a kiln::Error naming the node.
//
//   gather {axis}(data, indices):
//     out[o, j..., i] = data[o, indices[j...], i]
//     shape data[:axis] + indices + data[axis+1:]
//   gather_elements {axis}(data, indices):
//     out[p] = data[p with p[axis] replaced by indices[p]], shape of indices
//   gather_nd {batch_dims}(data, indices):
//     indices[..., m] holds an m-tuple indexing data's dims b..b+m-1 after b
//     leading batch dims; out = indices[:-1] + data[b+m:]
#include "ops/index_common.h"

namespace kiln::ops::index {

namespace {

std::vector<TensorType> infer_gather(InferContext& c) {
  require_index_dtype(c, 1, "indices");
  if (c.rank(0) < 1) c.fail("data must have rank >= 1, got a scalar");
  int axis = 0;
  try {
    axis = normalize_axis(c.attrs().get_int("axis", 0), c.rank(0));
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  const Shape& d = c.shape(0);
  Shape out(d.begin(), d.begin() + axis);
  out.insert(out.end(), c.shape(1).begin(), c.shape(1).end());
  out.insert(out.end(), d.begin() + axis + 1, d.end());
  return {TensorType(c.dtype(0), out)};
}

void gather_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& idx = ctx.in(1);
  Tensor& y = ctx.out();
  int axis = normalize_axis(ctx.attrs.get_int("axis", 0), x.rank());
  const int64_t outer = dims_product(x.shape(), 0, axis);
  const int64_t n = x.shape()[axis];
  const size_t es = dtype_size(x.dtype());
  const size_t row = static_cast<size_t>(dims_product(x.shape(), axis + 1, x.shape().size())) * es;
  const int64_t m = idx.numel();
  KILN_CHECK(y.nbytes() == static_cast<size_t>(outer * m) * row, "{}: result {} does not fit", ctx.label,
             y.type().str());
  // Indices are checked once, then every output row is one copy.
  std::vector<int64_t> w(m);
  dispatch_index(ctx, idx, [&](auto z) {
    using I = decltype(z);
    const I* ip = idx.data<I>();
    for (int64_t j = 0; j < m; ++j) w[j] = wrap_index(ctx, "gather index", ip[j], n);
  });
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  if (row == 0) return;
  if (row == es) {  // single elements: fixed-size copies
    dispatch_bytes(es, [&](auto z) {
      using E = decltype(z);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < m; ++j) copy_elem<E>(dst, o * m + j, src, o * n + w[j]);
    });
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    const uint8_t* s = src + static_cast<size_t>(o * n) * row;
    uint8_t* d = dst + static_cast<size_t>(o * m) * row;
    for (int64_t j = 0; j < m; ++j)
      std::memcpy(d + static_cast<size_t>(j) * row, s + static_cast<size_t>(w[j]) * row, row);
  }
}

std::vector<TensorType> infer_gather_elements(InferContext& c) {
  require_index_dtype(c, 1, "indices");
  if (c.rank(0) < 1) c.fail("data must have rank >= 1, got a scalar");
  if (c.rank(1) != c.rank(0)) c.fail("indices rank {} differs from data rank {}", c.rank(1), c.rank(0));
  int axis = 0;
  try {
    axis = normalize_axis(c.attrs().get_int("axis", 0), c.rank(0));
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  for (int d = 0; d < c.rank(0); ++d) {
    const int64_t id = c.shape(1)[d], dd = c.shape(0)[d];
    if (d == axis || id == dd) continue;
    // A symbolic dim is within the data's only where it is the same dim (an
    // HF encoder's [batch, seq] positions into a [batch, 128] buffer).
    if (is_symbolic_dim(id) || is_symbolic_dim(dd))
      c.unsupported(
          "indices dim {} is {} and data's is {}: kiln takes a symbolic dim off the axis only when both "
          "operands have it",
          d, dim_str(id), dim_str(dd));
    if (id > dd) c.fail("indices dim {} is {} but data's is only {}", d, id, dd);
  }
  return {TensorType(c.dtype(0), c.shape(1))};
}

void gather_elements_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& idx = ctx.in(1);
  Tensor& y = ctx.out();
  const int r = x.rank();
  const int axis = normalize_axis(ctx.attrs.get_int("axis", 0), r);
  const Shape& is = idx.shape();
  const std::vector<int64_t> ds = strides_of(x.shape());
  const int64_t n = x.shape()[axis];
  const int64_t m = idx.numel();
  KILN_CHECK(idx.rank() == r && y.numel() == m, "{}: operands were not checked by inference", ctx.label);
  for (int d = 0; d < r; ++d) KILN_CHECK(d == axis || is[d] <= x.shape()[d], "{}: indices exceed data", ctx.label);
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  dispatch_bytes(dtype_size(x.dtype()), [&](auto ez) {
    using E = decltype(ez);
    dispatch_index(ctx, idx, [&](auto iz) {
      using I = decltype(iz);
      const I* ip = idx.data<I>();
      for_each_off_axis(is, ds, axis, m, [&](int64_t e, int64_t base) {
        int64_t w = wrap_index(ctx, "gather_elements index", ip[e], n);
        copy_elem<E>(dst, e, src, base + w * ds[axis]);
      });
    });
  });
}

std::vector<TensorType> infer_gather_nd(InferContext& c) {
  require_index_dtype(c, 1, "indices");
  const int64_t b = c.attrs().get_int("batch_dims", 0);
  const int r = c.rank(0), q = c.rank(1);
  if (r < 1 || q < 1) c.fail("data and indices must have rank >= 1 (got {} and {})", r, q);
  if (b < 0 || b >= std::min(q, r)) c.fail("batch_dims {} must be in [0, {})", b, std::min(q, r));
  const Shape& ds = c.shape(0);
  const Shape& is = c.shape(1);
  for (int64_t i = 0; i < b; ++i)
    if (ds[i] != is[i]) c.fail("batch dim {} is {} in data but {} in indices", i, ds[i], is[i]);
  const int64_t m = is.back();
  // The tuple length says which dims are indexed, so it must be a number; the
  // other dims (NonZero's count of tuples, say) are only copied.
  if (is_symbolic_dim(m)) c.unsupported("indices' last dim is {}: the index tuple length must be fixed", dim_str(m));
  if (m < 1 || m > r - b) c.fail("indices' last dim {} must be in [1, {}]", m, r - b);
  Shape out(is.begin(), is.end() - 1);
  out.insert(out.end(), ds.begin() + b + m, ds.end());
  return {TensorType(c.dtype(0), out)};
}

void gather_nd_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& idx = ctx.in(1);
  Tensor& y = ctx.out();
  const size_t b = static_cast<size_t>(ctx.attrs.get_int("batch_dims", 0));
  const Shape& xs = x.shape();
  const Shape& is = idx.shape();
  const size_t m = static_cast<size_t>(is.back());
  KILN_CHECK(b < is.size() && m >= 1 && b + m <= xs.size(), "{}: operands were not checked by inference", ctx.label);
  const std::vector<int64_t> st = strides_of(xs);
  const int64_t batches = dims_product(xs, 0, b);
  const int64_t batch_elems = dims_product(xs, b, xs.size());
  const int64_t tuples = dims_product(is, b, is.size() - 1);
  const size_t es = dtype_size(x.dtype());
  const size_t slice = static_cast<size_t>(dims_product(xs, b + m, xs.size())) * es;
  KILN_CHECK(y.nbytes() == static_cast<size_t>(batches * tuples) * slice, "{}: result {} does not fit", ctx.label,
             y.type().str());
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  dispatch_index(ctx, idx, [&](auto iz) {
    using I = decltype(iz);
    const I* ip = idx.data<I>();
    for (int64_t bi = 0; bi < batches; ++bi) {
      for (int64_t t = 0; t < tuples; ++t) {
        const int64_t k = bi * tuples + t;
        int64_t off = bi * batch_elems;
        for (size_t j = 0; j < m; ++j) off += wrap_index(ctx, "gather_nd index", ip[k * m + j], xs[b + j]) * st[b + j];
        if (slice) std::memcpy(dst + static_cast<size_t>(k) * slice, src + static_cast<size_t>(off) * es, slice);
      }
    }
  });
}

}  // namespace

void register_gather_ops(OpRegistry& r) {
  OpDef g;
  g.name = "gather";
  g.symbolic_dims = true;  // dims are moved, never computed
  g.category = OpCategory::Injective;
  g.min_inputs = g.max_inputs = 2;
  g.attrs = {{"axis", AttrKind::Int}};
  g.infer = infer_gather;
  g.reference = gather_kernel;
  g.doc = "out[o, j..., i] = data[o, indices[j...], i] along `axis` (negative indices count from the end)";
  r.add(std::move(g));

  OpDef ge;
  ge.name = "gather_elements";
  ge.symbolic_dims = true;  // the result is the indices' shape; dims are compared, never computed
  ge.category = OpCategory::Injective;
  ge.min_inputs = ge.max_inputs = 2;
  ge.attrs = {{"axis", AttrKind::Int}};
  ge.infer = infer_gather_elements;
  ge.reference = gather_elements_kernel;
  ge.doc = "out[p] = data[p with p[axis] = indices[p]]; result has the shape of indices";
  r.add(std::move(ge));

  OpDef gn;
  gn.name = "gather_nd";
  gn.symbolic_dims = true;  // dims are copied and compared, never computed; the tuple length must be fixed
  gn.category = OpCategory::Injective;
  gn.min_inputs = gn.max_inputs = 2;
  gn.attrs = {{"batch_dims", AttrKind::Int}};
  gn.infer = infer_gather_nd;
  gn.reference = gather_nd_kernel;
  gn.doc = "slices of data addressed by the index tuples in indices' last dim, after batch_dims shared leading dims";
  r.add(std::move(gn));
}

}  // namespace kiln::ops::index
