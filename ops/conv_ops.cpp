// conv and conv_transpose (1-D, 2-D, 3-D and beyond; groups, dilations).
//
// Attributes are always explicit (the ONNX adapter resolves auto_pad,
// output_shape and defaults): strides, dilations (one per spatial axis),
// pads (begins for every spatial axis, then ends), group, and for
// conv_transpose output_padding. Kernel sizes come from the weight's shape.
//
// Reference kernels: per image and group, conv is im2col + one GEMM
// (weights [M/g, C/g*K] x columns [C/g*K, out]) and conv_transpose is one
// GEMM (weights^T x input) + col2im. f32 and f64 go through OpenBLAS; f16
// and bf16 are widened to float and computed with the f32 path.
//
// conv {layout="nhwc"} (chosen by the layout pass, docs/ir.md "Layouts")
// takes x [N, in..., C] and w [M, k..., C/group] and gives y [N, out..., M]
// tagged {nhwc}. Its kernel is im2col by rows (one row of k*C/g values per
// output position) + one GEMM against the weights transposed, or, for
// depthwise convs (C/group == 1), direct loops over the channels.
//
// deform_conv and col2im are in deform_col2im_ops.cpp; what they share with
// conv is in conv_internal.h.

#include <algorithm>
#include <climits>
#include <cmath>

#include "ops/blas_library.h"
#include "ops/conv_internal.h"
#include "ops/symbolic_image.h"

namespace kiln::ops::nn {

// Checks shapes and attributes and computes the output shape. Used by both
// inference and the kernels (errors carry the node label).
ConvParams conv_params(const AttrMap& a, const Shape& xs, const Shape& ws, const Shape* bs, bool transpose,
                       const std::string& label) {
  ConvParams p;
  const char* op = transpose ? "conv_transpose" : "conv";
  if (xs.size() < 3)
    failf(label, "input rank {} is below 3 ({} needs batch, channel and at least one spatial axis)", xs.size(), op);
  if (ws.size() != xs.size()) failf(label, "weight rank {} does not match input rank {}", ws.size(), xs.size());
  p.nd = static_cast<int>(xs.size()) - 2;
  size_t nd = static_cast<size_t>(p.nd);
  p.group = a.get_int("group", 1);
  if (p.group < 1) failf(label, "group is {}, must be at least 1", p.group);
  p.N = xs[0];
  p.C = xs[1];
  if (p.C % p.group != 0) failf(label, "input channels {} are not divisible by group {}", p.C, p.group);
  p.Cg = p.C / p.group;
  if (!transpose) {
    p.M = ws[0];
    if (ws[1] != p.Cg)
      failf(label, "weight expects {} input channels per group but the input has {} channels in {} group(s)", ws[1],
            p.C, p.group);
    if (p.M % p.group != 0) failf(label, "output channels {} are not divisible by group {}", p.M, p.group);
    p.Mg = p.M / p.group;
  } else {
    if (ws[0] != p.C) failf(label, "weight has {} input channels (dim 0) but the input has {}", ws[0], p.C);
    p.Mg = ws[1];
    p.M = p.Mg * p.group;
  }
  p.in.assign(xs.begin() + 2, xs.end());
  p.k.assign(ws.begin() + 2, ws.end());
  for (size_t d = 0; d < nd; ++d)
    if (p.k[d] < 1) failf(label, "kernel size {} along spatial axis {} must be at least 1", p.k[d], d);
  p.strides = window_ints(a, "strides", nd, 1, label);
  p.dilations = window_ints(a, "dilations", nd, 1, label);
  p.pads = window_ints(a, "pads", 2 * nd, transpose ? INT64_MIN : 0, label);
  if (transpose) {
    p.output_padding =
        a.has("output_padding") ? window_ints(a, "output_padding", nd, 0, label) : std::vector<int64_t>(nd, 0);
  }
  p.out.resize(nd);
  for (size_t d = 0; d < nd; ++d) {
    int64_t o;
    if (!transpose) {
      o = window_out_dim(p.in[d], p.k[d], p.strides[d], p.pads[d], p.pads[d + nd], p.dilations[d]);
      if (o < 1)
        failf(label, "kernel {} (dilation {}) does not fit the input {} padded by {}+{} along spatial axis {}", p.k[d],
              p.dilations[d], p.in[d], p.pads[d], p.pads[d + nd], d);
    } else {
      if (p.in[d] < 1) failf(label, "input spatial axis {} is empty", d);
      o = conv_transpose_out_dim(p.in[d], p.k[d], p.strides[d], p.pads[d], p.pads[d + nd], p.dilations[d],
                                 p.output_padding[d]);
      if (o < 1) failf(label, "output length {} along spatial axis {} is not positive", o, d);
    }
    p.out[d] = o;
  }
  if (bs && (bs->size() != 1 || (*bs)[0] != p.M))
    failf(label, "bias has shape {} but there are {} output channels", shape_str(*bs), p.M);
  p.in_size = prod(p.in);
  p.k_size = prod(p.k);
  p.out_size = prod(p.out);
  return p;
}

// C = op(A) * op(B), row-major, through BLAS.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
          float* C, int64_t ldc) {
  blas::sgemm()(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
                1.0f, A, int(lda), B, int(ldb), 0.0f, C, int(ldc));
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* A, int64_t lda, const double* B, int64_t ldb,
          double* C, int64_t ldc) {
  blas::dgemm()(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
                1.0, A, int(lda), B, int(ldb), 0.0, C, int(ldc));
}

void check_blas_dims(const std::string& label, std::initializer_list<int64_t> dims) {
  for (int64_t d : dims)
    if (d > INT_MAX)
      throw Unsupported(fmt::format("{}: a GEMM dimension of {} exceeds what the BLAS interface takes", label, d));
}

namespace {

// Columns for one group: row (c, kernel position) holds, for each output
// position, the input element that kernel tap reads (0 in the padding).
template <typename T>
void im2col(const T* x, const ConvParams& p, T* col) {
  const int nd = p.nd;
  const std::vector<int64_t> istr = row_strides(p.in);
  const int64_t out_last = p.out[nd - 1], in_last = p.in[nd - 1], s_last = p.strides[nd - 1];
  const int64_t outer = p.out_size / out_last;
  std::vector<int64_t> kidx(nd, 0), koff(nd), o(nd, 0);
  for (int64_t c = 0; c < p.Cg; ++c) {
    const T* xc = x + c * p.in_size;
    std::fill(kidx.begin(), kidx.end(), 0);
    for (int64_t kp = 0; kp < p.k_size; ++kp, next_index(kidx, p.k)) {
      for (int d = 0; d < nd; ++d) koff[d] = kidx[d] * p.dilations[d] - p.pads[d];
      T* dst = col + (c * p.k_size + kp) * p.out_size;
      std::fill(o.begin(), o.end(), 0);
      for (int64_t oi = 0; oi < outer; ++oi) {
        bool valid = true;
        int64_t base = 0;
        for (int d = 0; d < nd - 1; ++d) {
          int64_t ix = o[d] * p.strides[d] + koff[d];
          if (ix < 0 || ix >= p.in[d]) valid = false;
          base += ix * istr[d];
        }
        T* row = dst + oi * out_last;
        if (!valid) {
          std::fill(row, row + out_last, T(0));
        } else {
          int64_t ix = koff[nd - 1];
          for (int64_t ol = 0; ol < out_last; ++ol, ix += s_last)
            row[ol] = (ix >= 0 && ix < in_last) ? xc[base + ix] : T(0);
        }
        // advance the outer (all but last) output index
        for (int d = nd - 2; d >= 0; --d) {
          if (++o[d] < p.out[d]) break;
          o[d] = 0;
        }
      }
    }
  }
}

template <typename T>
void run_conv(const ConvParams& p, const T* x, const T* w, const T* b, T* y, const std::string& label) {
  const int64_t K = p.Cg * p.k_size;
  std::fill(y, y + p.N * p.M * p.out_size, T(0));
  if (p.N == 0 || p.M == 0) return;
  if (K > 0) {
    check_blas_dims(label, {p.Mg, p.out_size, K});
    bool direct = true;  // 1x1 kernel, stride 1, no padding: the input is its own column matrix
    for (int d = 0; d < p.nd; ++d)
      direct &= p.k[d] == 1 && p.strides[d] == 1 && p.pads[d] == 0 && p.pads[d + p.nd] == 0;
    std::vector<T> col(direct ? 0 : static_cast<size_t>(K * p.out_size));
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t g = 0; g < p.group; ++g) {
        const T* xg = x + (n * p.C + g * p.Cg) * p.in_size;
        if (!direct) im2col(xg, p, col.data());
        gemm(false, false, p.Mg, p.out_size, K, w + g * p.Mg * K, K, direct ? xg : col.data(), p.out_size,
             y + (n * p.M + g * p.Mg) * p.out_size, p.out_size);
      }
  }
  add_bias(y, b, p.N, p.M, p.out_size);
}

template <typename T>
void run_conv_transpose(const ConvParams& p, const T* x, const T* w, const T* b, T* y, const std::string& label) {
  const int64_t rows = p.Mg * p.k_size;
  std::fill(y, y + p.N * p.M * p.out_size, T(0));
  if (p.N == 0 || p.M == 0) return;
  if (p.Cg > 0) {
    check_blas_dims(label, {rows, p.in_size, p.Cg});
    std::vector<T> col(static_cast<size_t>(rows * p.in_size));
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t g = 0; g < p.group; ++g) {
        const T* xg = x + (n * p.C + g * p.Cg) * p.in_size;
        // weight group g: [Cg, Mg*K]; columns = W_g^T x X_g: [Mg*K, in]
        gemm(true, false, rows, p.in_size, p.Cg, w + g * p.Cg * rows, rows, xg, p.in_size, col.data(), p.in_size);
        col2im(col.data(), p, y + (n * p.M + g * p.Mg) * p.out_size);
      }
  }
  add_bias(y, b, p.N, p.M, p.out_size);
}

// Channels-last conv: x [N, in..., C], w [M, k..., Cg], y [N, out..., M].
// For each output position, `taps` lists per kernel position the input
// position it reads, or -1 in the padding.
void conv_taps(const ConvParams& p, std::vector<int64_t>& taps) {
  const int nd = p.nd;
  const std::vector<int64_t> istr = row_strides(p.in);
  taps.assign(static_cast<size_t>(p.out_size * p.k_size), -1);
  std::vector<int64_t> o(nd, 0), kidx(nd, 0);
  for (int64_t oi = 0; oi < p.out_size; ++oi, next_index(o, p.out)) {
    std::fill(kidx.begin(), kidx.end(), 0);
    for (int64_t kp = 0; kp < p.k_size; ++kp, next_index(kidx, p.k)) {
      int64_t off = 0;
      bool valid = true;
      for (int d = 0; d < nd && valid; ++d) {
        int64_t ix = o[d] * p.strides[d] - p.pads[d] + kidx[d] * p.dilations[d];
        valid = ix >= 0 && ix < p.in[d];
        off += ix * istr[d];
      }
      if (valid) taps[oi * p.k_size + kp] = off;
    }
  }
}

template <typename T>
void run_conv_nhwc(const ConvParams& p, const T* x, const T* w, const T* b, T* y, const std::string& label) {
  const int64_t K = p.Cg * p.k_size;
  std::fill(y, y + p.N * p.out_size * p.M, T(0));
  if (p.N == 0 || p.M == 0 || K == 0) {
    // no products: only the bias
  } else if (p.Cg == 1) {
    // Depthwise (with channel multiplier Mg): y[n, o, g*Mg + j] += x[n, tap, g] * w[g*Mg + j, kp].
    std::vector<int64_t> taps;
    conv_taps(p, taps);
    std::vector<T> wt(static_cast<size_t>(p.k_size * p.M));  // [kp][m], contiguous over the channels
    for (int64_t m = 0; m < p.M; ++m)
      for (int64_t kp = 0; kp < p.k_size; ++kp) wt[kp * p.M + m] = w[m * p.k_size + kp];
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t oi = 0; oi < p.out_size; ++oi) {
        T* yr = y + (n * p.out_size + oi) * p.M;
        for (int64_t kp = 0; kp < p.k_size; ++kp) {
          int64_t t = taps[oi * p.k_size + kp];
          if (t < 0) continue;
          const T* xr = x + (n * p.in_size + t) * p.C;
          const T* wr = wt.data() + kp * p.M;
          if (p.Mg == 1) {
            for (int64_t c = 0; c < p.C; ++c) yr[c] += xr[c] * wr[c];
          } else {
            for (int64_t g = 0; g < p.group; ++g)
              for (int64_t j = 0; j < p.Mg; ++j) yr[g * p.Mg + j] += xr[g] * wr[g * p.Mg + j];
          }
        }
      }
  } else {
    check_blas_dims(label, {p.out_size, p.Mg, K, p.C, p.M});
    bool direct = true;  // 1x1 kernel, stride 1, no padding: the input rows are the column rows
    for (int d = 0; d < p.nd; ++d)
      direct &= p.k[d] == 1 && p.strides[d] == 1 && p.pads[d] == 0 && p.pads[d + p.nd] == 0;
    std::vector<int64_t> taps;
    if (!direct) conv_taps(p, taps);
    std::vector<T> col(direct ? 0 : static_cast<size_t>(p.out_size * K));
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t g = 0; g < p.group; ++g) {
        const T* xg = x + n * p.in_size * p.C + g * p.Cg;
        if (!direct) {
          for (int64_t oi = 0; oi < p.out_size; ++oi)
            for (int64_t kp = 0; kp < p.k_size; ++kp) {
              int64_t t = taps[oi * p.k_size + kp];
              T* dst = col.data() + oi * K + kp * p.Cg;
              if (t < 0) std::fill(dst, dst + p.Cg, T(0));
              else std::copy(xg + t * p.C, xg + t * p.C + p.Cg, dst);
            }
        }
        // y_g [out, Mg] (row stride M) = columns [out, K] x w_g^T, w_g [Mg, K].
        gemm(false, true, p.out_size, p.Mg, K, direct ? xg : col.data(), direct ? p.C : K, w + g * p.Mg * K, K,
             y + n * p.out_size * p.M + g * p.Mg, p.M);
      }
  }
  if (b)
    for (int64_t i = 0; i < p.N * p.out_size; ++i)
      for (int64_t m = 0; m < p.M; ++m) y[i * p.M + m] += b[m];
}

std::vector<TensorType> infer_conv(InferContext& c, bool transpose) {
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) {
      if (i < 2) c.fail("operand {} is missing", i);
      continue;
    }
    if (!is_nn_float(c.dtype(i)))
      c.unsupported("operand {} has dtype {}; kiln's {} takes f32, f64, f16 or bf16", i, dtype_name(c.dtype(i)),
                    c.op());
  }
  require_same_dtype(c);
  const Shape* bs = c.has_input(2) ? &c.shape(2) : nullptr;
  bool nhwc = !transpose && nhwc_layout(c.attrs(), c.label());
  ConvParams p = conv_params(c.attrs(), channels_first_shape(c, 0, nhwc), channels_first_shape(c, 1, nhwc), bs,
                             transpose, c.label());
  Shape out = {p.N, p.M};
  out.insert(out.end(), p.out.begin(), p.out.end());
  return {image_result(c.dtype(0), out, nhwc)};
}

void conv_kernel(KernelContext& ctx, bool transpose) {
  const Tensor& x = ctx.in(0);
  const Tensor& w = ctx.in(1);
  const Tensor* b = ctx.has(2) ? &ctx.in(2) : nullptr;
  const bool nhwc = !transpose && nhwc_layout(ctx.attrs, ctx.label);
  const Shape xs = nhwc ? permute_dims(x.shape(), channels_first_perm(x.rank())) : x.shape();
  const Shape ws = nhwc ? permute_dims(w.shape(), channels_first_perm(w.rank())) : w.shape();
  ConvParams p = conv_params(ctx.attrs, xs, ws, b ? &b->shape() : nullptr, transpose, ctx.label);
  Tensor& y = ctx.out(0);
  auto run = [&](auto* xp, auto* wp, auto* bp, auto* yp) {
    if (transpose) run_conv_transpose(p, xp, wp, bp, yp, ctx.label);
    else if (nhwc) run_conv_nhwc(p, xp, wp, bp, yp, ctx.label);
    else run_conv(p, xp, wp, bp, yp, ctx.label);
  };
  switch (x.dtype()) {
    case DType::F32:
      run(x.data<float>(), w.data<float>(), b ? b->data<float>() : nullptr, y.data<float>());
      break;
    case DType::F64:
      run(x.data<double>(), w.data<double>(), b ? b->data<double>() : nullptr, y.data<double>());
      break;
    default: {  // f16, bf16: widen to float
      std::vector<float> xf = load_all<float>(x), wf = load_all<float>(w), bf;
      if (b) bf = load_all<float>(*b);
      std::vector<float> yf(static_cast<size_t>(y.numel()));
      run(static_cast<const float*>(xf.data()), static_cast<const float*>(wf.data()),
          b ? static_cast<const float*>(bf.data()) : nullptr, yf.data());
      store_all(y, yf);
    }
  }
}

// The output length along spatial axis `axis` for a symbolic input length
// (infer_symbolic_image): the weight's kernel and the explicit attributes.
SpatialOut conv_spatial_out(InferContext& c, bool transpose) {
  const bool nhwc = !transpose && c.attrs().get_string("layout", "nchw") == "nhwc";
  const Shape ws = c.has_input(1) ? channels_first_shape(c, 1, nhwc) : Shape{};
  const AttrMap& a = c.attrs();
  return [ws, transpose, a, label = c.label()](int axis, int64_t in, std::string& why) -> std::optional<int64_t> {
    const size_t nd = ws.size() - 2;
    const int64_t k = ws[2 + axis];
    const std::vector<int64_t> strides = window_ints(a, "strides", nd, 1, label);
    const std::vector<int64_t> dil = window_ints(a, "dilations", nd, 1, label);
    const std::vector<int64_t> pads = window_ints(a, "pads", 2 * nd, transpose ? INT64_MIN : 0, label);
    if (!transpose)
      return symbolic_window_out_dim(in, k, strides[axis], pads[axis], pads[axis + nd], dil[axis], false, why);
    const std::vector<int64_t> op =
        a.has("output_padding") ? window_ints(a, "output_padding", nd, 0, label) : std::vector<int64_t>(nd, 0);
    // stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - pads: a polynomial.
    const int64_t rest = op[axis] + effective_kernel(k, dil[axis]) - pads[axis] - pads[axis + nd];
    return value_add(value_mul(value_add(in, -1), strides[axis]), rest);
  };
}

}  // namespace

std::vector<AttrSpec> conv_attrs(bool transpose) {
  std::vector<AttrSpec> a = {{"strides", AttrKind::Ints, true},
                             {"pads", AttrKind::Ints, true},
                             {"dilations", AttrKind::Ints, true},
                             {"group", AttrKind::Int},
                             {"tf32", AttrKind::Int}};  // set by the precision pass: may use TF32 math
  if (transpose) a.push_back({"output_padding", AttrKind::Ints});
  return a;
}

void register_conv_ops(OpRegistry& r) {
  OpDef conv;
  conv.name = "conv";
  conv.category = OpCategory::Compute;
  conv.min_inputs = 2;
  conv.max_inputs = 3;
  conv.attrs = conv_attrs(false);
  conv.attrs.push_back({"layout", AttrKind::String});
  conv.symbolic_dims = true;  // a symbolic batch and spatial dims (ops/symbolic_image.h)
  conv.infer = [](InferContext& c) {
    return infer_symbolic_image(
        c, [](InferContext& s) { return infer_conv(s, false); }, conv_spatial_out(c, false));
  };
  conv.reference = [](KernelContext& ctx) { conv_kernel(ctx, false); };
  conv.doc =
      "N-D convolution of x [N,C,...] with w [M,C/group,k...] (+ bias [M]); explicit strides/pads/dilations; "
      "layout=\"nhwc\": x [N,...,C], w [M,k...,C/group], y [N,...,M]";
  r.add(std::move(conv));

  OpDef convt;
  convt.name = "conv_transpose";
  convt.category = OpCategory::Compute;
  convt.min_inputs = 2;
  convt.max_inputs = 3;
  convt.attrs = conv_attrs(true);
  convt.symbolic_dims = true;  // a symbolic batch and spatial dims (ops/symbolic_image.h)
  convt.infer = [](InferContext& c) {
    return infer_symbolic_image(
        c, [](InferContext& s) { return infer_conv(s, true); }, conv_spatial_out(c, true));
  };
  convt.reference = [](KernelContext& ctx) { conv_kernel(ctx, true); };
  convt.doc =
      "N-D transposed convolution of x [N,C,...] with w [C,M/group,k...] (+ bias [M]); out = s*(in-1) + "
      "output_padding + (k-1)*d + 1 - pad_begin - pad_end (negative pads extend the output with zeros)";
  r.add(std::move(convt));

  r.add(deform_conv_def());
  r.add(col2im_def());
}

}  // namespace kiln::ops::nn