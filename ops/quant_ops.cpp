// Quantized linear algebra: matmul_integer, qlinear_matmul, conv_integer,
// qlinear_conv, dynamic_quantize_linear. Integer products accumulate exactly
// (int64) after zero points are subtracted; requantization follows the ONNX
// reference: multiplier = x_scale * w_scale / y_scale in the scales' type, product in
// double, round half to even, add the output zero point, saturate.
#include <algorithm>
#include <cmath>

#include "ops/families.h"
#include "ops/linalg_internal.h"
#include "ops/op_helpers.h"

namespace kiln::ops {

namespace {

using namespace linalg;

void require_8bit(InferContext& c, int i, std::string_view what) {
  if (c.dtype(i) != DType::U8 && c.dtype(i) != DType::I8)
    c.unsupported("{} (operand {}) is {}; kiln's {} takes u8 or i8", what, i, dtype_name(c.dtype(i)), c.op());
}

// A zero point or scale: one value for the tensor, or one per row/column/channel.
// `n` is the per-axis count allowed besides a single value.
void check_param(InferContext& c, int i, std::string_view what, int64_t n, std::string_view axis_name,
                 std::optional<DType> dtype) {
  if (!c.has_input(i)) return;
  if (dtype && c.dtype(i) != *dtype)
    c.fail("{} (operand {}) is {} but should be {}", what, i, dtype_name(c.dtype(i)), dtype_name(*dtype));
  int64_t numel = shape_numel(c.shape(i));
  if (numel == 1 && c.rank(i) <= 1) return;
  if (c.rank(i) == 1 && numel == n) return;
  if (c.rank(i) == 1 || numel == 1)
    c.fail("{} (operand {}) has {} elements; expected 1 or {} (one per {})", what, i, numel, n, axis_name);
  c.unsupported("{} (operand {}) of shape [{}]: kiln takes a scalar or a 1-D tensor with one value per {}", what, i,
                fmt::join(c.shape(i), ","), axis_name);
}

// Values of a scalar-or-vector parameter; `at(i)` broadcasts a single value.
struct Param {
  std::vector<double> v;
  double at(int64_t i) const { return v.size() == 1 ? v[0] : v[i]; }
};
Param param(const KernelContext& ctx, int i, double dflt = 0) {
  Param p;
  if (ctx.has(i)) p.v = load_all<double>(ctx.in(i));
  else p.v = {dflt};
  return p;
}
std::vector<float> float_param(const KernelContext& ctx, int i) { return load_all<float>(ctx.in(i)); }
float fat(const std::vector<float>& v, int64_t i) { return v.size() == 1 ? v[0] : v[i]; }

// Quantized result: rint(acc * multiplier + zero point) saturated to dtype.
int64_t requantize(double v, DType dt) {
  double r = std::nearbyint(v);  // default rounding mode: half to even
  double lo = dt == DType::U8 ? 0 : -128, hi = dt == DType::U8 ? 255 : 127;
  if (std::isnan(r)) return 0;  // NaN scales: no defined value; keep the cast defined
  return static_cast<int64_t>(std::clamp(r, lo, hi));
}

// Integer batched matmul of (A - a_zp[row]) and (B - b_zp[col]) into int64.
std::vector<int64_t> int_matmul(const Tensor& a, const Tensor& b, const Param& azp, const Param& bzp,
                                const MatmulDims& m) {
  std::vector<int64_t> av = load_all<int64_t>(a), bv = load_all<int64_t>(b);
  for (size_t i = 0; i < av.size(); ++i) av[i] -= static_cast<int64_t>(azp.at((int64_t(i) / m.K) % m.M));
  for (size_t i = 0; i < bv.size(); ++i) bv[i] -= static_cast<int64_t>(bzp.at(int64_t(i) % m.N));
  std::vector<int64_t> ao, bo;
  matmul_batch_offsets(a.shape(), b.shape(), m, ao, bo);
  std::vector<int64_t> acc(ao.size() * m.M * m.N, 0);
  for (size_t i = 0; i < ao.size(); ++i)
    gemm_int_acc(m.M, m.N, m.K, av.data() + ao[i], bv.data() + bo[i], acc.data() + i * m.M * m.N);
  return acc;
}

OpDef matmul_integer_op() {
  OpDef d;
  d.name = "matmul_integer";
  d.min_inputs = 2;
  d.max_inputs = 4;
  d.infer = [](InferContext& c) {
    require_8bit(c, 0, "A");
    require_8bit(c, 1, "B");
    MatmulDims m = infer_matmul_dims(c, 0, 1);
    check_param(c, 2, "a_zero_point", m.a_vec ? 1 : m.M, "row of A", c.dtype(0));
    check_param(c, 3, "b_zero_point", m.b_vec ? 1 : m.N, "column of B", c.dtype(1));
    return std::vector<TensorType>{TensorType(DType::I32, m.out)};
  };
  d.reference = [](KernelContext& ctx) {
    MatmulDims m = matmul_dims(ctx.in(0).shape(), ctx.in(1).shape());
    std::vector<int64_t> acc = int_matmul(ctx.in(0), ctx.in(1), param(ctx, 2), param(ctx, 3), m);
    int32_t* y = ctx.out().data<int32_t>();
    for (size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<int32_t>(static_cast<uint32_t>(acc[i]));
  };
  d.doc =
      "(A - a_zero_point) x (B - b_zero_point) in int32, numpy matmul shapes; zero points per tensor, per row of A, per column of B";
  return d;
}

// qlinear_matmul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp)
OpDef qlinear_matmul_op() {
  OpDef d;
  d.name = "qlinear_matmul";
  d.min_inputs = d.max_inputs = 8;
  d.infer = [](InferContext& c) {
    require_8bit(c, 0, "a");
    require_8bit(c, 3, "b");
    require_8bit(c, 7, "y_zero_point");
    MatmulDims m = infer_matmul_dims(c, 0, 3);
    int64_t rows = m.a_vec ? 1 : m.M, cols = m.b_vec ? 1 : m.N;
    // The scales share one type (T1 of QLinearMatMul-21): f32, f16 or bf16.
    DType st = c.dtype(1);
    if (st != DType::F32 && st != DType::F16 && st != DType::BF16)
      c.unsupported("a_scale (operand 1) is {}; kiln's {} takes f32, f16 or bf16 scales", dtype_name(st), c.op());
    check_param(c, 1, "a_scale", rows, "row of a", st);
    check_param(c, 2, "a_zero_point", rows, "row of a", c.dtype(0));
    check_param(c, 4, "b_scale", cols, "column of b", st);
    check_param(c, 5, "b_zero_point", cols, "column of b", c.dtype(3));
    check_param(c, 6, "y_scale", rows, "row of y", st);
    check_param(c, 7, "y_zero_point", rows, "row of y", std::nullopt);
    return std::vector<TensorType>{TensorType(c.dtype(7), m.out)};
  };
  d.reference = [](KernelContext& ctx) {
    MatmulDims m = matmul_dims(ctx.in(0).shape(), ctx.in(3).shape());
    std::vector<int64_t> acc = int_matmul(ctx.in(0), ctx.in(3), param(ctx, 2), param(ctx, 5), m);
    std::vector<float> as = float_param(ctx, 1), bs = float_param(ctx, 4), ys = float_param(ctx, 6);
    Param yzp = param(ctx, 7);
    Tensor& out = ctx.out();
    // The multiplier in the scales' type, rounded after each step (numpy's
    // f16 * f16 is f16); exact in float before that rounding.
    const DType st = ctx.in(1).dtype();
    auto round = [st](float v) {
      if (st == DType::F16) return half_to_float(float_to_half(v));
      if (st == DType::BF16) return bf16_to_float(float_to_bf16(v));
      return v;
    };
    std::vector<int64_t> r(acc.size());
    for (size_t i = 0; i < acc.size(); ++i) {
      int64_t row = (int64_t(i) / m.N) % m.M, col = int64_t(i) % m.N;
      float mult = round(round(fat(as, row) * fat(bs, col)) / fat(ys, row));
      r[i] = requantize(double(acc[i]) * double(mult) + yzp.at(row), out.dtype());
    }
    store_all(out, r);
  };
  d.doc = "quantized matmul: requantize((a - a_zp)(b - b_zp) * a_scale * b_scale / y_scale) + y_zp";
  return d;
}

// ---- integer convolution ------------------------------------------------------

struct ConvGeom {
  int64_t N, C, M, group;
  Shape in, kernel, out;                          // spatial dims
  std::vector<int64_t> strides, dilations, pads;  // pads: begins then ends
};

ConvGeom conv_geom(const Shape& x, const Shape& w, const AttrMap& a) {
  ConvGeom g;
  size_t nd = x.size() - 2;
  g.N = x[0];
  g.C = x[1];
  g.M = w[0];
  g.group = a.get_int("group", 1);
  g.in.assign(x.begin() + 2, x.end());
  g.kernel.assign(w.begin() + 2, w.end());
  g.strides = a.get_ints("strides", std::vector<int64_t>(nd, 1));
  g.dilations = a.get_ints("dilations", std::vector<int64_t>(nd, 1));
  g.pads = a.get_ints("pads", std::vector<int64_t>(2 * nd, 0));
  return g;
}

// Validates the geometry and computes output spatial dims; errors go to c.
ConvGeom infer_conv_geom(InferContext& c, int ix, int iw) {
  const Shape &x = c.shape(ix), &w = c.shape(iw);
  if (x.size() < 3) c.fail("conv input must be [N, C, spatial...], got rank {}", x.size());
  if (w.size() != x.size()) c.fail("conv weight rank {} does not match input rank {}", w.size(), x.size());
  ConvGeom g = conv_geom(x, w, c.attrs());
  size_t nd = x.size() - 2;
  if (g.strides.size() != nd || g.dilations.size() != nd || g.pads.size() != 2 * nd)
    c.fail("conv strides/dilations need {} values and pads {} (got {}, {}, {})", nd, 2 * nd, g.strides.size(),
           g.dilations.size(), g.pads.size());
  if (g.group < 1 || g.C % g.group != 0 || g.M % g.group != 0)
    c.fail("group {} must divide input channels {} and output channels {}", g.group, g.C, g.M);
  if (w[1] * g.group != g.C)
    c.fail("weight has {} input channels per group but input has {} channels in {} groups", w[1], g.C, g.group);
  for (size_t i = 0; i < nd; ++i) {
    if (g.strides[i] < 1 || g.dilations[i] < 1) c.fail("strides and dilations must be >= 1");
    if (g.pads[i] < 0 || g.pads[i + nd] < 0) c.fail("pads must be >= 0");
    int64_t span = (g.kernel[i] - 1) * g.dilations[i] + 1;
    int64_t avail = g.in[i] + g.pads[i] + g.pads[i + nd];
    if (g.kernel[i] < 1 || avail < span)
      c.fail("kernel extent {} exceeds padded input {} in spatial dim {}", span, avail, i);
    g.out.push_back((avail - span) / g.strides[i] + 1);
  }
  return g;
}

Shape conv_out_shape(const ConvGeom& g) {
  Shape s{g.N, g.M};
  s.insert(s.end(), g.out.begin(), g.out.end());
  return s;
}

// acc[N, M, out...] = sum over (c, k) of (x - x_zp)[n, c, o*s + k*d - pb] * (w - w_zp[m])[m, c, k]
// with zero outside the input, by im2col per image and group, then an integer GEMM.
std::vector<int64_t> int_conv(const Tensor& x, const Tensor& w, const Param& xzp, const Param& wzp, ConvGeom g) {
  size_t nd = g.in.size();
  // Output dims and the geometry come from the attributes; recompute the outputs.
  g.out.clear();
  for (size_t i = 0; i < nd; ++i)
    g.out.push_back((g.in[i] + g.pads[i] + g.pads[i + nd] - ((g.kernel[i] - 1) * g.dilations[i] + 1)) / g.strides[i] +
                    1);
  int64_t in_sp = shape_numel(g.in), k_sp = shape_numel(g.kernel), out_sp = shape_numel(g.out);
  int64_t cg = g.C / g.group, mg = g.M / g.group, rows = cg * k_sp;
  std::vector<int64_t> xv = load_all<int64_t>(x), wv = load_all<int64_t>(w);
  int64_t x0 = static_cast<int64_t>(xzp.at(0));
  for (int64_t& v : xv) v -= x0;
  for (int64_t m = 0; m < g.M; ++m)
    for (int64_t i = 0; i < rows; ++i) wv[m * rows + i] -= static_cast<int64_t>(wzp.at(m));
  std::vector<int64_t> acc(g.N * g.M * out_sp, 0), col(rows * out_sp);
  std::vector<int64_t> in_st = strides_of(g.in);
  std::vector<int64_t> kidx(nd), oidx(nd);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gr = 0; gr < g.group; ++gr) {
      // col[(c, k), o]
      for (int64_t cc = 0; cc < cg; ++cc) {
        const int64_t* xc = xv.data() + (n * g.C + gr * cg + cc) * in_sp;
        std::fill(kidx.begin(), kidx.end(), 0);
        for (int64_t k = 0; k < k_sp; ++k) {
          int64_t* dst = col.data() + (cc * k_sp + k) * out_sp;
          std::fill(oidx.begin(), oidx.end(), 0);
          for (int64_t o = 0; o < out_sp; ++o) {
            int64_t off = 0;
            bool inside = true;
            for (size_t i = 0; i < nd; ++i) {
              int64_t p = oidx[i] * g.strides[i] + kidx[i] * g.dilations[i] - g.pads[i];
              if (p < 0 || p >= g.in[i]) {
                inside = false;
                break;
              }
              off += p * in_st[i];
            }
            dst[o] = inside ? xc[off] : 0;
            for (size_t i = nd; i-- > 0;) {
              if (++oidx[i] < g.out[i]) break;
              oidx[i] = 0;
            }
          }
          for (size_t i = nd; i-- > 0;) {
            if (++kidx[i] < g.kernel[i]) break;
            kidx[i] = 0;
          }
        }
      }
      gemm_int_acc(mg, out_sp, rows, wv.data() + gr * mg * rows, col.data(), acc.data() + (n * g.M + gr * mg) * out_sp);
    }
  return acc;
}

const std::vector<AttrSpec> kConvAttrs = {
    {"strides", AttrKind::Ints}, {"pads", AttrKind::Ints}, {"dilations", AttrKind::Ints}, {"group", AttrKind::Int}};

// conv_integer(x, w, x_zero_point?, w_zero_point?)
OpDef conv_integer_op() {
  OpDef d;
  d.name = "conv_integer";
  d.min_inputs = 2;
  d.max_inputs = 4;
  d.attrs = kConvAttrs;
  d.infer = [](InferContext& c) {
    require_8bit(c, 0, "x");
    require_8bit(c, 1, "w");
    ConvGeom g = infer_conv_geom(c, 0, 1);
    check_param(c, 2, "x_zero_point", 1, "tensor", c.dtype(0));
    check_param(c, 3, "w_zero_point", g.M, "output channel", c.dtype(1));
    return std::vector<TensorType>{TensorType(DType::I32, conv_out_shape(g))};
  };
  d.reference = [](KernelContext& ctx) {
    ConvGeom g = conv_geom(ctx.in(0).shape(), ctx.in(1).shape(), ctx.attrs);
    std::vector<int64_t> acc = int_conv(ctx.in(0), ctx.in(1), param(ctx, 2), param(ctx, 3), g);
    int32_t* y = ctx.out().data<int32_t>();
    for (size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<int32_t>(static_cast<uint32_t>(acc[i]));
  };
  d.doc = "integer convolution of (x - x_zero_point) and (w - w_zero_point[m]) in int32; explicit pads";
  return d;
}

// qlinear_conv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B?)
OpDef qlinear_conv_op() {
  OpDef d;
  d.name = "qlinear_conv";
  d.min_inputs = 8;
  d.max_inputs = 9;
  d.attrs = kConvAttrs;
  d.infer = [](InferContext& c) {
    require_8bit(c, 0, "x");
    require_8bit(c, 3, "w");
    require_8bit(c, 7, "y_zero_point");
    ConvGeom g = infer_conv_geom(c, 0, 3);
    check_param(c, 1, "x_scale", 1, "tensor", DType::F32);
    check_param(c, 2, "x_zero_point", 1, "tensor", c.dtype(0));
    check_param(c, 4, "w_scale", g.M, "output channel", DType::F32);
    check_param(c, 5, "w_zero_point", g.M, "output channel", c.dtype(3));
    check_param(c, 6, "y_scale", 1, "tensor", DType::F32);
    check_param(c, 7, "y_zero_point", 1, "tensor", std::nullopt);
    if (c.has_input(8)) {
      if (c.dtype(8) != DType::I32) c.fail("bias B is {} but should be i32", dtype_name(c.dtype(8)));
      if (c.shape(8) != Shape{g.M}) c.fail("bias B has shape [{}]; expected [{}]", fmt::join(c.shape(8), ","), g.M);
    }
    return std::vector<TensorType>{TensorType(c.dtype(7), conv_out_shape(g))};
  };
  d.reference = [](KernelContext& ctx) {
    ConvGeom g = conv_geom(ctx.in(0).shape(), ctx.in(3).shape(), ctx.attrs);
    std::vector<int64_t> acc = int_conv(ctx.in(0), ctx.in(3), param(ctx, 2), param(ctx, 5), g);
    std::vector<float> xs = float_param(ctx, 1), ws = float_param(ctx, 4), ys = float_param(ctx, 6);
    Param yzp = param(ctx, 7);
    std::vector<int64_t> bias = ctx.has(8) ? load_all<int64_t>(ctx.in(8)) : std::vector<int64_t>(g.M, 0);
    Tensor& out = ctx.out();
    int64_t sp = acc.size() / std::max<int64_t>(1, g.N * g.M);
    std::vector<int64_t> r(acc.size());
    for (size_t i = 0; i < acc.size(); ++i) {
      int64_t m = (int64_t(i) / std::max<int64_t>(1, sp)) % g.M;
      float mult = xs[0] * fat(ws, m) / ys[0];
      int32_t a = static_cast<int32_t>(static_cast<uint32_t>(acc[i] + bias[m]));
      r[i] = requantize(double(a) * double(mult) + yzp.at(0), out.dtype());
    }
    store_all(out, r);
  };
  d.doc = "quantized convolution: requantize((conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale[m] / y_scale) + y_zp";
  return d;
}

// dynamic_quantize_linear(x) -> (y u8, y_scale f32, y_zero_point u8)
OpDef dynamic_quantize_linear_op() {
  OpDef d;
  d.name = "dynamic_quantize_linear";
  d.min_outputs = 1;
  d.max_outputs = 3;
  d.infer = [](InferContext& c) {
    if (c.dtype(0) != DType::F32)
      c.unsupported("x is {}; kiln's dynamic_quantize_linear takes f32", dtype_name(c.dtype(0)));
    return std::vector<TensorType>{TensorType(DType::U8, c.shape(0)), TensorType(DType::F32, {}),
                                   TensorType(DType::U8, {})};
  };
  d.reference = [](KernelContext& ctx) {
    const Tensor& x = ctx.in(0);
    const float* xv = x.data<float>();
    // f32 arithmetic throughout, as the ONNX reference does.
    float mx = 0, mn = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      mx = std::max(mx, xv[i]);
      mn = std::min(mn, xv[i]);
    }
    float scale = (mx == mn ? 1.0f : (mx - mn)) / 255.0f;
    float zp = std::nearbyint(std::clamp(0.0f - mn / scale, 0.0f, 255.0f));
    if (std::isnan(zp)) zp = 0;  // infinite inputs
    uint8_t* y = ctx.out(0).data<uint8_t>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      float q = std::nearbyint(xv[i] / scale) + zp;
      y[i] = std::isnan(q) ? uint8_t(0) : static_cast<uint8_t>(std::clamp(q, 0.0f, 255.0f));
    }
    if (ctx.outputs.size() > 1) ctx.out(1).data<float>()[0] = scale;
    if (ctx.outputs.size() > 2) ctx.out(2).data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  };
  d.doc = "u8 quantization of x over [min(x, 0), max(x, 0)]; results y, y_scale, y_zero_point";
  return d;
}

}  // namespace

void register_quant_ops(OpRegistry& r) {
  r.add(matmul_integer_op());
  r.add(qlinear_matmul_op());
  r.add(conv_integer_op());
  r.add(qlinear_conv_op());
  r.add(dynamic_quantize_linear_op());
}

}  // namespace kiln::ops
