// Pooling: max_pool (optionally with argmax indices), average_pool, lp_pool,
// their global forms, and max_unpool.
//
// Window pools carry explicit kernel_shape, strides, pads (begins then ends)
// and dilations; ceil_mode rounds the window count up (see window_out_dim).
// Padding never contributes a value: max ignores it, lp_pool treats it as 0,
// average_pool divides by the taps inside the input, or, with
// count_include_pad, by the taps inside the padded input.
//
// layout="nhwc" (max/average/lp pools and the global pools; chosen by the
// layout pass, docs/ir.md "Layouts"): x is [N, S..., C] and so is the result,
// tagged {nhwc}. The kernels then walk the windows once per image and loop over
// the channels innermost. max_pool's indices result is channels-first only.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/nn_internal.h"
#include "ops/symbolic_image.h"

namespace kiln::ops::nn {

namespace {

struct PoolParams {
  int nd = 0;
  int64_t N = 0, C = 0;
  std::vector<int64_t> in, k, out, strides, dilations, pads;
  bool ceil_mode = false;
  int64_t in_size = 0, out_size = 0;
};

PoolParams pool_params(const AttrMap& a, const Shape& xs, const std::string& label) {
  PoolParams p;
  if (xs.size() < 3)
    failf(label, "input rank {} is below 3 (pooling needs batch, channel and at least one spatial axis)", xs.size());
  p.nd = static_cast<int>(xs.size()) - 2;
  size_t nd = static_cast<size_t>(p.nd);
  p.N = xs[0];
  p.C = xs[1];
  p.in.assign(xs.begin() + 2, xs.end());
  p.k = window_ints(a, "kernel_shape", nd, 1, label);
  p.strides = window_ints(a, "strides", nd, 1, label);
  p.dilations = window_ints(a, "dilations", nd, 1, label);
  p.pads = window_ints(a, "pads", 2 * nd, 0, label);
  int64_t cm = a.get_int("ceil_mode", 0);
  if (cm != 0 && cm != 1) failf(label, "ceil_mode is {}, must be 0 or 1", cm);
  p.ceil_mode = cm == 1;
  p.out.resize(nd);
  for (size_t d = 0; d < nd; ++d) {
    int64_t o = window_out_dim(p.in[d], p.k[d], p.strides[d], p.pads[d], p.pads[d + nd], p.dilations[d], p.ceil_mode);
    if (o < 1)
      failf(label, "kernel {} (dilation {}) does not fit the input {} padded by {}+{} along spatial axis {}", p.k[d],
            p.dilations[d], p.in[d], p.pads[d], p.pads[d + nd], d);
    p.out[d] = o;
  }
  p.in_size = prod(p.in);
  p.out_size = prod(p.out);
  return p;
}

Shape pool_out_shape(const PoolParams& p) {
  Shape s = {p.N, p.C};
  s.insert(s.end(), p.out.begin(), p.out.end());
  return s;
}

// A kernel's view of x: channels-first dims, and whether it is channels-last.
struct PoolInput {
  bool nhwc;
  Shape dims;  // channels first
};
PoolInput pool_input(const KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  bool nhwc = nhwc_layout(ctx.attrs, ctx.label);
  return {nhwc, nhwc ? permute_dims(x.shape(), channels_first_perm(x.rank())) : x.shape()};
}

// Per spatial axis and output coordinate: the input coordinates the window
// reads (inside the input) and how many taps fall inside the padded input.
struct AxisTaps {
  std::vector<std::vector<int64_t>> inside;  // [out coord] -> input coords
  std::vector<int64_t> padded_count;         // [out coord] -> taps within [-pad_begin, in + pad_end)
};

std::vector<AxisTaps> axis_taps(const PoolParams& p) {
  std::vector<AxisTaps> r(p.nd);
  for (int d = 0; d < p.nd; ++d) {
    r[d].inside.resize(p.out[d]);
    r[d].padded_count.resize(p.out[d]);
    for (int64_t o = 0; o < p.out[d]; ++o) {
      int64_t start = o * p.strides[d] - p.pads[d];
      int64_t cnt = 0;
      for (int64_t k = 0; k < p.k[d]; ++k) {
        int64_t i = start + k * p.dilations[d];
        if (i >= 0 && i < p.in[d]) r[d].inside[o].push_back(i);
        if (i >= -p.pads[d] && i < p.in[d] + p.pads[d + p.nd]) ++cnt;
      }
      r[d].padded_count[o] = cnt;
    }
  }
  return r;
}

// Calls visit(out_offset, taps) for every output position of one plane,
// where taps lists the row-major spatial offsets of the input elements of
// its window; with `colmajor` also gives column-major offsets (MaxPool's
// storage_order=1 indices). Buffers are reused across positions.
template <typename F>
void for_each_window(const PoolParams& p, const std::vector<AxisTaps>& taps, F&& visit) {
  const int nd = p.nd;
  const std::vector<int64_t> istr = row_strides(p.in);
  std::vector<int64_t> o(nd, 0), t(nd, 0);
  std::vector<int64_t> offsets;
  std::vector<int64_t> tap_coords;  // nd coords per tap, for column-major indices
  for (int64_t oi = 0; oi < p.out_size; ++oi, next_index(o, p.out)) {
    offsets.clear();
    tap_coords.clear();
    bool empty = false;
    for (int d = 0; d < nd; ++d) empty |= taps[d].inside[o[d]].empty();
    if (!empty) {
      std::fill(t.begin(), t.end(), 0);
      while (true) {
        int64_t off = 0;
        for (int d = 0; d < nd; ++d) {
          int64_t c = taps[d].inside[o[d]][t[d]];
          off += c * istr[d];
          tap_coords.push_back(c);
        }
        offsets.push_back(off);
        int d = nd - 1;
        for (; d >= 0; --d) {
          if (++t[d] < static_cast<int64_t>(taps[d].inside[o[d]].size())) break;
          t[d] = 0;
        }
        if (d < 0) break;
      }
    }
    visit(oi, o, offsets, tap_coords);
  }
}

// ---- max_pool ----

std::vector<TensorType> infer_max_pool(InferContext& c) {
  DType t = c.dtype(0);
  if (t == DType::Bool) c.unsupported("operand 0 has dtype bool, which kiln's max_pool does not support");
  bool nhwc = nhwc_layout(c.attrs(), c.label());
  PoolParams p = pool_params(c.attrs(), channels_first_shape(c, 0, nhwc), c.label());
  int64_t so = c.attrs().get_int("storage_order", 0);
  if (so != 0 && so != 1) c.fail("storage_order is {}, must be 0 or 1", so);
  Shape out = pool_out_shape(p);
  if (nhwc) {
    if (c.num_outputs() > 1) c.fail("layout nhwc max_pool has no indices result (they index channels-first x)");
    return {image_result(t, out, true)};
  }
  return {TensorType(t, out), TensorType(DType::I64, out)};
}

void max_pool_nhwc_kernel(KernelContext& ctx, const PoolParams& p) {
  std::vector<AxisTaps> taps = axis_taps(p);
  dispatch_compute(ctx.in(0).dtype(), [&](auto z) {
    using T = decltype(z);
    std::vector<T> xv = load_all<T>(ctx.in(0));
    std::vector<T> yv(static_cast<size_t>(ctx.out(0).numel()));
    const T lowest =
        std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    for (int64_t n = 0; n < p.N; ++n) {
      const T* xn = xv.data() + n * p.in_size * p.C;
      for_each_window(
          p, taps,
          [&](int64_t oi, const std::vector<int64_t>&, const std::vector<int64_t>& offs, const std::vector<int64_t>&) {
            T* yr = yv.data() + (n * p.out_size + oi) * p.C;
            std::fill(yr, yr + p.C, lowest);
            for (size_t j = 0; j < offs.size(); ++j) {
              const T* xr = xn + offs[j] * p.C;
              for (int64_t c = 0; c < p.C; ++c)
                if (j == 0 || xr[c] > yr[c]) yr[c] = xr[c];
            }
          });
    }
    store_all(ctx.out(0), yv);
  });
}

void max_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  PoolInput pin = pool_input(ctx);
  PoolParams p = pool_params(ctx.attrs, pin.dims, ctx.label);
  if (pin.nhwc) return max_pool_nhwc_kernel(ctx, p);
  bool col_major = ctx.attrs.get_int("storage_order", 0) == 1;
  bool want_idx = ctx.outputs.size() > 1;
  std::vector<AxisTaps> taps = axis_taps(p);
  dispatch_compute(x.dtype(), [&](auto z) {
    using T = decltype(z);
    std::vector<T> xv = load_all<T>(x);
    std::vector<T> yv(static_cast<size_t>(ctx.out(0).numel()));
    int64_t* idx = want_idx ? ctx.out(1).data<int64_t>() : nullptr;
    const T lowest =
        std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    for (int64_t nc = 0; nc < p.N * p.C; ++nc) {
      const T* xp = xv.data() + nc * p.in_size;
      T* yp = yv.data() + nc * p.out_size;
      for_each_window(p, taps,
                      [&](int64_t oi, const std::vector<int64_t>&, const std::vector<int64_t>& offs,
                          const std::vector<int64_t>& coords) {
                        T best = lowest;
                        int64_t arg = -1;
                        for (size_t j = 0; j < offs.size(); ++j)
                          if (arg < 0 || xp[offs[j]] > best) {
                            best = xp[offs[j]];
                            arg = static_cast<int64_t>(j);
                          }
                        yp[oi] = best;
                        if (idx) {
                          int64_t flat = 0;
                          if (arg >= 0) {
                            if (!col_major) {
                              flat = offs[arg];
                            } else {  // spatial dims in column-major order (first fastest)
                              int64_t mul = 1;
                              for (int d = 0; d < p.nd; ++d) {
                                flat += coords[arg * p.nd + d] * mul;
                                mul *= p.in[d];
                              }
                            }
                          }
                          idx[nc * p.out_size + oi] = nc * p.in_size + flat;
                        }
                      });
    }
    store_all(ctx.out(0), yv);
  });
}

// ---- average_pool and lp_pool ----

std::vector<TensorType> infer_float_pool(InferContext& c) {
  if (!is_nn_float(c.dtype(0)))
    c.unsupported("operand 0 has dtype {}; kiln's {} takes f32, f64, f16 or bf16", dtype_name(c.dtype(0)), c.op());
  bool nhwc = nhwc_layout(c.attrs(), c.label());
  PoolParams p = pool_params(c.attrs(), channels_first_shape(c, 0, nhwc), c.label());
  if (c.op() == "average_pool") {
    int64_t cip = c.attrs().get_int("count_include_pad", 0);
    if (cip != 0 && cip != 1) c.fail("count_include_pad is {}, must be 0 or 1", cip);
  } else if (c.attrs().get_int("p", 2) < 1) {
    c.fail("p is {}, must be at least 1", c.attrs().get_int("p", 2));
  }
  return {image_result(c.dtype(0), pool_out_shape(p), nhwc)};
}

void float_pool_kernel(KernelContext& ctx, bool lp) {
  const Tensor& x = ctx.in(0);
  PoolInput pin = pool_input(ctx);
  PoolParams p = pool_params(ctx.attrs, pin.dims, ctx.label);
  bool include_pad = ctx.attrs.get_int("count_include_pad", 0) == 1;
  int64_t pw = ctx.attrs.get_int("p", 2);
  std::vector<AxisTaps> taps = axis_taps(p);
  dispatch_compute(x.dtype(), [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<T> xv = load_all<T>(x);
      std::vector<T> yv(static_cast<size_t>(ctx.out(0).numel()));
      // One window's value; the window's elements are xp[off * stride].
      auto value = [&](const T* xp, int64_t stride, const std::vector<int64_t>& o, const std::vector<int64_t>& offs) {
        T acc = 0;
        if (lp) {
          for (int64_t off : offs) {
            T v = std::abs(xp[off * stride]);
            acc += pw == 1 ? v : pw == 2 ? v * v : static_cast<T>(std::pow(v, static_cast<T>(pw)));
          }
          return pw == 1 ? acc : pw == 2 ? std::sqrt(acc) : static_cast<T>(std::pow(acc, T(1) / T(pw)));
        }
        for (int64_t off : offs) acc += xp[off * stride];
        int64_t count = 1;
        if (include_pad)
          for (int d = 0; d < p.nd; ++d) count *= taps[d].padded_count[o[d]];
        else count = static_cast<int64_t>(offs.size());
        return acc / static_cast<T>(count);  // an all-padding window gives 0/0 = NaN
      };
      if (pin.nhwc) {
        for (int64_t n = 0; n < p.N; ++n) {
          const T* xn = xv.data() + n * p.in_size * p.C;
          for_each_window(p, taps,
                          [&](int64_t oi, const std::vector<int64_t>& o, const std::vector<int64_t>& offs,
                              const std::vector<int64_t>&) {
                            T* yr = yv.data() + (n * p.out_size + oi) * p.C;
                            for (int64_t c = 0; c < p.C; ++c) yr[c] = value(xn + c, p.C, o, offs);
                          });
        }
      } else {
        for (int64_t nc = 0; nc < p.N * p.C; ++nc) {
          const T* xp = xv.data() + nc * p.in_size;
          T* yp = yv.data() + nc * p.out_size;
          for_each_window(p, taps,
                          [&](int64_t oi, const std::vector<int64_t>& o, const std::vector<int64_t>& offs,
                              const std::vector<int64_t>&) { yp[oi] = value(xp, 1, o, offs); });
        }
      }
      store_all(ctx.out(0), yv);
    }
  });
}

// ---- global pools ----

std::vector<TensorType> infer_global_pool(InferContext& c) {
  DType t = c.dtype(0);
  bool is_max = c.op() == "global_max_pool";
  if (is_max ? t == DType::Bool : !is_nn_float(t))
    c.unsupported("operand 0 has dtype {}, which kiln's {} does not support", dtype_name(t), c.op());
  if (c.rank(0) < 3)
    c.fail("input rank {} is below 3 (global pooling needs batch, channel and at least one spatial axis)", c.rank(0));
  if (c.op() == "global_lp_pool" && c.attrs().get_int("p", 2) < 1)
    c.fail("p is {}, must be at least 1", c.attrs().get_int("p", 2));
  bool nhwc = nhwc_layout(c.attrs(), c.label());
  Shape s = channels_first_shape(c, 0, nhwc);
  for (size_t d = 2; d < s.size(); ++d) s[d] = 1;
  return {image_result(t, s, nhwc)};
}

enum class GlobalKind { Average, Max, Lp };

void global_pool_kernel(KernelContext& ctx, GlobalKind kind) {
  const Tensor& x = ctx.in(0);
  const bool nhwc = nhwc_layout(ctx.attrs, ctx.label);
  const Shape xs = nhwc ? permute_dims(x.shape(), channels_first_perm(x.rank())) : x.shape();
  const int64_t C = xs[1], planes = xs[0] * C;
  int64_t spatial = 1;
  for (size_t d = 2; d < xs.size(); ++d) spatial *= xs[d];
  int64_t pw = ctx.attrs.get_int("p", 2);
  // Plane i = (n, c) holds xp[j * step], j < spatial; the result [N, C] (or
  // [N, 1.., C]) has element i at i in both layouts.
  const int64_t step = nhwc ? C : 1;
  dispatch_compute(x.dtype(), [&](auto z) {
    using T = decltype(z);
    std::vector<T> xv = load_all<T>(x);
    std::vector<T> yv(static_cast<size_t>(planes));
    for (int64_t i = 0; i < planes; ++i) {
      const T* xp = xv.data() + (nhwc ? (i / C) * spatial * C + i % C : i * spatial);
      if (kind == GlobalKind::Max) {
        T best = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                      : std::numeric_limits<T>::lowest();
        for (int64_t j = 0; j < spatial; ++j)
          if (j == 0 || xp[j * step] > best) best = xp[j * step];
        yv[i] = best;
      } else if constexpr (std::is_floating_point_v<T>) {
        T acc = 0;
        if (kind == GlobalKind::Average) {
          for (int64_t j = 0; j < spatial; ++j) acc += xp[j * step];
          yv[i] = acc / static_cast<T>(spatial);
        } else {
          for (int64_t j = 0; j < spatial; ++j)
            acc += static_cast<T>(std::pow(std::abs(xp[j * step]), static_cast<T>(pw)));
          yv[i] = static_cast<T>(std::pow(acc, T(1) / T(pw)));
        }
      }
    }
    store_all(ctx.out(0), yv);
  });
}

// ---- max_unpool ----

std::vector<TensorType> infer_max_unpool(InferContext& c) {
  if (!is_nn_float(c.dtype(0)))
    c.unsupported("operand 0 has dtype {}; kiln's max_unpool takes f32, f64, f16 or bf16", dtype_name(c.dtype(0)));
  if (c.dtype(1) != DType::I64) c.fail("indices (operand 1) must be i64, got {}", dtype_name(c.dtype(1)));
  if (c.shape(1) != c.shape(0))
    c.fail("indices shape {} differs from the input shape {}", shape_str(c.shape(1)), shape_str(c.shape(0)));
  if (c.rank(0) < 3) c.fail("input rank {} is below 3", c.rank(0));
  std::vector<int64_t> os = window_ints(c.attrs(), "output_shape", c.shape(0).size(), 0, c.label());
  if (os[0] != c.shape(0)[0] || os[1] != c.shape(0)[1])
    c.fail("output_shape {} must keep the input's batch and channel dims {}x{}", shape_str(os), c.shape(0)[0],
           c.shape(0)[1]);
  if (c.attrs().has("index_shape")) {
    std::vector<int64_t> is = window_ints(c.attrs(), "index_shape", os.size(), 0, c.label());
    if (is[0] != os[0] || is[1] != os[1])
      c.fail("index_shape {} must keep the batch and channel dims of output_shape {}", shape_str(is), shape_str(os));
  }
  return {TensorType(c.dtype(0), os)};
}

void max_unpool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& ind = ctx.in(1);
  Tensor& y = ctx.out(0);
  const int64_t* ip = ind.data<int64_t>();
  const Shape& os = y.shape();
  const Shape is = ctx.attrs.has("index_shape") ? ctx.attrs.get_ints("index_shape") : os;
  const int64_t n = shape_numel(is);
  const std::vector<int64_t> ostr = row_strides(os);
  // Flat indices address a tensor of index_shape (MaxPool's input); each
  // lands at the same coordinates of the output.
  std::vector<int64_t> dst(static_cast<size_t>(ind.numel()));
  for (int64_t i = 0; i < ind.numel(); ++i) {
    int64_t v = ip[i];
    if (v < 0 || v >= n)
      failf(ctx.label, "index {} at position {} is outside the {} elements of shape {}", v, i, n, shape_str(is));
    int64_t off = 0;
    for (int d = static_cast<int>(is.size()) - 1; d >= 0; --d) {
      int64_t coord = v % is[d];
      v /= is[d];
      if (coord >= os[d])
        failf(ctx.label, "index {} at position {} lands outside the output shape {}", ip[i], i, shape_str(os));
      off += coord * ostr[d];
    }
    dst[i] = off;
  }
  // The output is zero-filled; scatter the values (later duplicates win).
  for (int64_t i = 0; i < x.numel(); ++i) copy_element(x, i, y, dst[i]);
}

std::vector<AttrSpec> window_attrs(std::vector<AttrSpec> extra) {
  std::vector<AttrSpec> a = {{"kernel_shape", AttrKind::Ints, true}, {"strides", AttrKind::Ints, true},
                             {"pads", AttrKind::Ints, true},         {"dilations", AttrKind::Ints, true},
                             {"ceil_mode", AttrKind::Int},           {"layout", AttrKind::String}};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// The window pools' output length over a symbolic input length (infer_symbolic_image).
SpatialOut pool_spatial_out(InferContext& c) {
  const AttrMap& a = c.attrs();
  return [a, label = c.label()](int axis, int64_t in, std::string& why) -> std::optional<int64_t> {
    const size_t nd = a.get_ints("kernel_shape").size();
    const std::vector<int64_t> k = window_ints(a, "kernel_shape", nd, 1, label);
    const std::vector<int64_t> strides = window_ints(a, "strides", nd, 1, label);
    const std::vector<int64_t> dil = window_ints(a, "dilations", nd, 1, label);
    const std::vector<int64_t> pads = window_ints(a, "pads", 2 * nd, 0, label);
    return symbolic_window_out_dim(in, k[axis], strides[axis], pads[axis], pads[axis + nd], dil[axis],
                                   a.get_int("ceil_mode", 0) == 1, why);
  };
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  OpDef mp;
  mp.name = "max_pool";
  mp.category = OpCategory::Reduction;
  mp.max_outputs = 2;
  mp.attrs = window_attrs({{"storage_order", AttrKind::Int}});
  mp.symbolic_dims = true;  // a symbolic batch and spatial dims (ops/symbolic_image.h)
  mp.infer = [](InferContext& c) { return infer_symbolic_image(c, infer_max_pool, pool_spatial_out(c)); };
  mp.reference = max_pool_kernel;
  mp.doc =
      "max over N-D windows (padding ignored); optional 2nd result: i64 flat index of the max in x "
      "(storage_order=1: spatial dims column-major)";
  r.add(std::move(mp));

  OpDef ap;
  ap.name = "average_pool";
  ap.category = OpCategory::Reduction;
  ap.attrs = window_attrs({{"count_include_pad", AttrKind::Int}});
  ap.symbolic_dims = true;  // a symbolic batch and spatial dims (ops/symbolic_image.h)
  ap.infer = [](InferContext& c) { return infer_symbolic_image(c, infer_float_pool, pool_spatial_out(c)); };
  ap.reference = [](KernelContext& ctx) { float_pool_kernel(ctx, false); };
  ap.doc = "mean over N-D windows; divides by taps inside x, or inside the padded x with count_include_pad=1";
  r.add(std::move(ap));

  OpDef lp;
  lp.name = "lp_pool";
  lp.category = OpCategory::Reduction;
  lp.attrs = window_attrs({{"p", AttrKind::Int}});
  lp.symbolic_dims = true;  // a symbolic batch and spatial dims (ops/symbolic_image.h)
  lp.infer = [](InferContext& c) { return infer_symbolic_image(c, infer_float_pool, pool_spatial_out(c)); };
  lp.reference = [](KernelContext& ctx) { float_pool_kernel(ctx, true); };
  lp.doc = "(sum |x|^p)^(1/p) over N-D windows (padding counts as 0), p defaults to 2";
  r.add(std::move(lp));

  struct G {
    const char* name;
    GlobalKind kind;
    const char* doc;
  };
  for (G g : {G{"global_average_pool", GlobalKind::Average, "mean over all spatial axes (kept as size 1)"},
              G{"global_max_pool", GlobalKind::Max, "max over all spatial axes (kept as size 1)"},
              G{"global_lp_pool", GlobalKind::Lp, "(sum |x|^p)^(1/p) over all spatial axes (kept as size 1)"}}) {
    OpDef d;
    d.name = g.name;
    d.category = OpCategory::Reduction;
    d.attrs = {{"layout", AttrKind::String}};
    if (g.kind == GlobalKind::Lp) d.attrs.push_back({"p", AttrKind::Int});
    d.symbolic_dims = true;  // a symbolic batch and spatial dims (ops/symbolic_image.h): results of 1
    d.infer = [](InferContext& c) { return infer_symbolic_image(c, infer_global_pool, nullptr); };
    GlobalKind kind = g.kind;
    d.reference = [kind](KernelContext& ctx) { global_pool_kernel(ctx, kind); };
    d.doc = g.doc;
    r.add(std::move(d));
  }

  OpDef mu;
  mu.name = "max_unpool";
  mu.category = OpCategory::Compute;
  mu.min_inputs = mu.max_inputs = 2;
  mu.attrs = {{"output_shape", AttrKind::Ints, true}, {"index_shape", AttrKind::Ints}};
  mu.infer = infer_max_unpool;
  mu.reference = max_unpool_kernel;
  mu.doc =
      "zeros of output_shape with x scattered to the positions given by indices (operand 1), flat indices into "
      "index_shape (default: output_shape) placed at the same coordinates of the output";
  r.add(std::move(mu));
}

}  // namespace kiln::ops::nn
