// deform_conv (ONNX DeformConv) and col2im (ONNX Col2Im, the scatter half of
// conv_transpose): the reference kernels reuse conv's parameters, GEMM and
// col2im (conv_internal.h).
#include <algorithm>
#include <cmath>

#include "ops/conv_internal.h"

namespace kiln::ops::nn {

namespace {

// col2im: x [N, C*prod(block), L] -> [N, C, image...], summing each
// column's block back into the image (the adjoint of conv's im2col).
ConvParams col2im_params(const AttrMap& a, const Shape& xs, const std::string& label) {
  ConvParams p;
  if (xs.size() != 3) failf(label, "input rank {} must be 3 (N, C*prod(block_shape), L)", xs.size());
  std::vector<int64_t> image = a.get_ints("image_shape");
  if (image.empty()) failf(label, "image_shape is empty");
  const size_t nd = image.size();
  p.nd = static_cast<int>(nd);
  p.out = window_ints(a, "image_shape", nd, 1, label);
  p.k = window_ints(a, "block_shape", nd, 1, label);
  p.strides = window_ints(a, "strides", nd, 1, label);
  p.dilations = window_ints(a, "dilations", nd, 1, label);
  p.pads = window_ints(a, "pads", 2 * nd, 0, label);
  p.k_size = prod(p.k);
  if (xs[1] % p.k_size != 0) failf(label, "input dim 1 ({}) is not a multiple of the block size {}", xs[1], p.k_size);
  p.N = xs[0];
  p.Mg = p.M = xs[1] / p.k_size;
  p.in.resize(nd);
  for (size_t d = 0; d < nd; ++d) {
    p.in[d] = window_out_dim(p.out[d], p.k[d], p.strides[d], p.pads[d], p.pads[d + nd], p.dilations[d]);
    if (p.in[d] < 1) failf(label, "block {} does not fit the padded image along axis {}", p.k[d], d);
  }
  p.in_size = prod(p.in);
  p.out_size = prod(p.out);
  if (p.in_size != xs[2])
    failf(label, "input has {} columns but the image and block shapes give {} block positions", xs[2], p.in_size);
  return p;
}

std::vector<TensorType> infer_col2im(InferContext& c) {
  if (c.dtype(0) == DType::Bool) c.unsupported("operand 0 has dtype bool, which kiln's col2im does not support");
  ConvParams p = col2im_params(c.attrs(), c.shape(0), c.label());
  Shape out = {p.N, p.M};
  out.insert(out.end(), p.out.begin(), p.out.end());
  return {TensorType(c.dtype(0), out)};
}

void col2im_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  ConvParams p = col2im_params(ctx.attrs, x.shape(), ctx.label);
  dispatch_compute(x.dtype(), [&](auto z) {
    using T = decltype(z);
    std::vector<T> xv = load_all<T>(x);
    std::vector<T> yv(static_cast<size_t>(ctx.out(0).numel()), T(0));
    for (int64_t n = 0; n < p.N; ++n)
      col2im(xv.data() + n * p.M * p.k_size * p.in_size, p, yv.data() + n * p.M * p.out_size);
    store_all(ctx.out(0), yv);
  });
}

// deform_conv (ONNX DeformConv): conv whose kernel taps sample x at
// learned fractional offsets (bilinear, zero outside), optionally scaled by a
// mask. Operands x, w, offset [N, OG*nd*K, out...], b?, mask? [N, OG*K, out...].
struct DeformParams {
  ConvParams conv;
  int64_t offset_group = 1;
};

DeformParams deform_params(const AttrMap& a, const Shape& xs, const Shape& ws, const Shape& os, const Shape* bs,
                           const Shape* ms, const std::string& label) {
  DeformParams d;
  d.conv = conv_params(a, xs, ws, bs, false, label);
  const ConvParams& p = d.conv;
  d.offset_group = a.get_int("offset_group", 1);
  if (d.offset_group < 1 || p.C % d.offset_group != 0)
    failf(label, "offset_group {} must be positive and divide the {} input channels", d.offset_group, p.C);
  Shape want = {p.N, d.offset_group * p.nd * p.k_size};
  want.insert(want.end(), p.out.begin(), p.out.end());
  if (os != want) failf(label, "offset has shape {}, expected {}", shape_str(os), shape_str(want));
  want[1] = d.offset_group * p.k_size;
  if (ms && *ms != want) failf(label, "mask has shape {}, expected {}", shape_str(*ms), shape_str(want));
  return d;
}

template <typename T>
void run_deform_conv(const DeformParams& dp, const T* x, const T* w, const T* off, const T* b, const T* mask, T* y,
                     const std::string& label) {
  const ConvParams& p = dp.conv;
  const int nd = p.nd;
  const int64_t K = p.Cg * p.k_size, cpo = p.C / dp.offset_group;
  std::fill(y, y + p.N * p.M * p.out_size, T(0));
  if (p.N == 0 || p.M == 0) return;
  check_blas_dims(label, {p.Mg, p.out_size, K});
  const std::vector<int64_t> istr = row_strides(p.in);
  std::vector<T> col(static_cast<size_t>(K * p.out_size));
  std::vector<int64_t> kidx(nd), o(nd), lo(nd);
  std::vector<double> pos(nd), frac(nd);
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t g = 0; g < p.group; ++g) {
      for (int64_t c = 0; c < p.Cg; ++c) {
        const int64_t ci = g * p.Cg + c, og = ci / cpo;
        const T* xc = x + (n * p.C + ci) * p.in_size;
        std::fill(kidx.begin(), kidx.end(), 0);
        for (int64_t kp = 0; kp < p.k_size; ++kp, next_index(kidx, p.k)) {
          T* dst = col.data() + (c * p.k_size + kp) * p.out_size;
          const T* offp = off + ((n * dp.offset_group + og) * p.k_size + kp) * nd * p.out_size;
          const T* mp = mask ? mask + ((n * dp.offset_group + og) * p.k_size + kp) * p.out_size : nullptr;
          std::fill(o.begin(), o.end(), 0);
          for (int64_t oi = 0; oi < p.out_size; ++oi, next_index(o, p.out)) {
            for (int d = 0; d < nd; ++d) {
              pos[d] = static_cast<double>(o[d] * p.strides[d] - p.pads[d] + kidx[d] * p.dilations[d]) +
                       static_cast<double>(offp[d * p.out_size + oi]);
              double f = std::floor(pos[d]);
              lo[d] = static_cast<int64_t>(f);
              frac[d] = pos[d] - f;
            }
            // Bilinear (N-linear) sample over the 2^nd corners, zero outside.
            double v = 0;
            for (int corner = 0; corner < (1 << nd); ++corner) {
              double wgt = 1;
              int64_t offi = 0;
              bool inside = true;
              for (int d = 0; d < nd && inside; ++d) {
                int hi = (corner >> (nd - 1 - d)) & 1;
                int64_t i = lo[d] + hi;
                inside = i >= 0 && i < p.in[d];
                wgt *= hi ? frac[d] : 1 - frac[d];
                offi += i * istr[d];
              }
              if (inside && wgt != 0) v += wgt * static_cast<double>(xc[offi]);
            }
            if (mp) v *= static_cast<double>(mp[oi]);
            dst[oi] = static_cast<T>(v);
          }
        }
      }
      gemm(false, false, p.Mg, p.out_size, K, w + g * p.Mg * K, K, col.data(), p.out_size,
           y + (n * p.M + g * p.Mg) * p.out_size, p.out_size);
    }
  add_bias(y, b, p.N, p.M, p.out_size);
}

std::vector<TensorType> infer_deform_conv(InferContext& c) {
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) {
      if (i < 3) c.fail("operand {} is missing", i);
      continue;
    }
    if (!is_nn_float(c.dtype(i)))
      c.unsupported("operand {} has dtype {}; kiln's deform_conv takes f32, f64, f16 or bf16", i,
                    dtype_name(c.dtype(i)));
  }
  require_same_dtype(c);
  DeformParams d = deform_params(c.attrs(), c.shape(0), c.shape(1), c.shape(2), c.has_input(3) ? &c.shape(3) : nullptr,
                                 c.has_input(4) ? &c.shape(4) : nullptr, c.label());
  Shape out = {d.conv.N, d.conv.M};
  out.insert(out.end(), d.conv.out.begin(), d.conv.out.end());
  return {TensorType(c.dtype(0), out)};
}

void deform_conv_kernel(KernelContext& ctx) {
  const Tensor *b = ctx.has(3) ? &ctx.in(3) : nullptr, *m = ctx.has(4) ? &ctx.in(4) : nullptr;
  DeformParams d = deform_params(ctx.attrs, ctx.in(0).shape(), ctx.in(1).shape(), ctx.in(2).shape(),
                                 b ? &b->shape() : nullptr, m ? &m->shape() : nullptr, ctx.label);
  auto run = [&](auto z) {
    using T = decltype(z);
    std::vector<T> x = load_all<T>(ctx.in(0)), w = load_all<T>(ctx.in(1)), off = load_all<T>(ctx.in(2)), bv, mv;
    if (b) bv = load_all<T>(*b);
    if (m) mv = load_all<T>(*m);
    std::vector<T> y(static_cast<size_t>(ctx.out(0).numel()));
    run_deform_conv<T>(d, x.data(), w.data(), off.data(), b ? bv.data() : nullptr, m ? mv.data() : nullptr, y.data(),
                       ctx.label);
    store_all(ctx.out(0), y);
  };
  if (ctx.in(0).dtype() == DType::F64) run(double{});
  else run(float{});
}

}  // namespace

OpDef deform_conv_def() {
  OpDef dc;
  dc.name = "deform_conv";
  dc.category = OpCategory::Compute;
  dc.min_inputs = 3;
  dc.max_inputs = 5;
  dc.attrs = conv_attrs(false);
  dc.attrs.push_back({"offset_group", AttrKind::Int});
  dc.infer = infer_deform_conv;
  dc.reference = deform_conv_kernel;
  dc.doc =
      "deformable conv: x, w, offset [N,OG*nd*K,out...], b?, mask? [N,OG*K,out...]; taps sample x bilinearly at "
      "their offsets (zero outside)";
  return dc;
}

OpDef col2im_def() {
  OpDef c2i;
  c2i.name = "col2im";
  c2i.category = OpCategory::Compute;
  c2i.attrs = {{"image_shape", AttrKind::Ints, true},
               {"block_shape", AttrKind::Ints, true},
               {"strides", AttrKind::Ints, true},
               {"pads", AttrKind::Ints, true},
               {"dilations", AttrKind::Ints, true}};
  c2i.infer = infer_col2im;
  c2i.reference = col2im_kernel;
  c2i.doc = "sums columns x [N, C*prod(block_shape), L] back into images [N, C, image_shape...] (ONNX Col2Im)";
  return c2i;
}

}  // namespace kiln::ops::nn
