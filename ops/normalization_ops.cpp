// Normalization family: statistics-based norms (batch, layer, instance, group
// normalization) here; lrn / mean_variance_normalization / lp_normalization in
// lrn_mvn_lp_ops.cpp; the losses in loss_ops.cpp. register_normalization_ops
// is the family's single entry point.
//
// Kernels compute means and variances in double with two passes (mean, then
// the mean of squared deviations), so f32 results are as exact as f32 allows.
//
// batch, instance and group normalization take layout="nhwc" (chosen by the
// layout pass, docs/ir.md "Layouts"): x is [N, S..., C], channels last, and
// the result too, tagged {nhwc}; the per-channel parameters stay [C].
#include <cmath>

#include "ops/families.h"
#include "ops/normalization_common.h"
#include "ops/symbolic_image.h"

namespace kiln::ops {

namespace {

using norm::dims_product;
using norm::dispatch_float;
using norm::FloatIn;
using norm::FloatOut;
using norm::load_params;

int axis_of(InferContext& c, int64_t axis, int rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) c.fail("axis {} is out of range for rank {}", axis, rank);
  return static_cast<int>(a);
}

void require_rank_at_least(InferContext& c, int i, int r, std::string_view what) {
  if (c.rank(i) < r) c.fail("{} has rank {}, needs at least {}", what, c.rank(i), r);
}

// Operand i must be a float vector of length n (a per-channel parameter).
void require_vector(InferContext& c, int i, int64_t n, std::string_view what, std::string_view of) {
  require_float(c, i);
  if (c.rank(i) != 1 || c.shape(i)[0] != n)
    c.fail("{} has shape {} but must be [{}] ({})", what, c.type(i).str(), n, of);
}

float epsilon_of(const AttrMap& a) { return a.get_float("epsilon", 1e-5f); }

void check_epsilon(InferContext& c) {
  float eps = epsilon_of(c.attrs());
  if (!(eps >= 0.0f) || std::isinf(eps)) c.fail("epsilon {} must be finite and non-negative", eps);
}

// ---------------------------------------------------------------- batch norm

// y = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c], c = dim 1.
OpDef batch_normalization() {
  OpDef d;
  d.name = "batch_normalization";
  // A per-channel affine map; not numpy-broadcast pointwise (params are [C]
  // against dim 1), so not an Expr. BatchNorm folding rewrites it away.
  d.category = OpCategory::Compute;
  d.min_inputs = d.max_inputs = 5;
  d.attrs = {{"epsilon", AttrKind::Float}, {"layout", AttrKind::String}};
  d.symbolic_dims = true;  // a symbolic batch and spatial dims (ops/symbolic_image.h), kept as they are
  d.infer = [](InferContext& outer) {
    return infer_symbolic_image(
        outer,
        [](InferContext& c) {
          require_float(c, 0);
          require_rank_at_least(c, 0, 2, "x");
          check_epsilon(c);
          bool nhwc = nhwc_layout(c.attrs(), c.label());
          Shape xs = channels_first_shape(c, 0, nhwc);
          int64_t ch = xs[1];
          const char* names[] = {"x", "scale", "bias", "mean", "var"};
          for (int i = 1; i < 5; ++i)
            require_vector(c, i, ch, names[i],
                           nhwc ? "the channel count, the last dim of x" : "the channel count, dim 1 of x");
          return std::vector<TensorType>{image_result(c.dtype(0), xs, nhwc)};
        },
        nullptr);
  };
  d.reference = [](KernelContext& k) {
    const Tensor& x = k.in(0);
    const bool nhwc = nhwc_layout(k.attrs, k.label);
    const Shape s = nhwc ? permute_dims(x.shape(), channels_first_perm(x.rank())) : x.shape();
    int64_t n = s[0], ch = s[1], inner = dims_product(s, 2, x.rank());
    double eps = epsilon_of(k.attrs);
    std::vector<double> scale = load_params(k.in(1)), bias = load_params(k.in(2)), mean = load_params(k.in(3)),
                        var = load_params(k.in(4));
    std::vector<double> a(ch);
    for (int64_t c = 0; c < ch; ++c) a[c] = scale[c] / std::sqrt(var[c] + eps);
    dispatch_float(x.dtype(), [&](auto z) {
      using C = decltype(z);
      FloatIn<C> in(x);
      FloatOut<C> out(k.out(0));
      const C* xp = in.data();
      C* yp = out.data();
      if (nhwc) {
        for (int64_t row = 0; row < n * inner; ++row)
          for (int64_t c = 0; c < ch; ++c) {
            int64_t i = row * ch + c;
            yp[i] = static_cast<C>((xp[i] - mean[c]) * a[c] + bias[c]);
          }
        out.commit();
        return;
      }
      for (int64_t b = 0; b < n; ++b)
        for (int64_t c = 0; c < ch; ++c) {
          int64_t base = (b * ch + c) * inner;
          const double m = mean[c], ac = a[c], bc = bias[c];
          for (int64_t j = 0; j < inner; ++j) yp[base + j] = static_cast<C>((xp[base + j] - m) * ac + bc);
        }
      out.commit();
    });
  };
  d.doc =
      "inference batch norm: (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c], channels on dim 1 "
      "(layout=\"nhwc\": on the last dim)";
  return d;
}

// ---------------------------------------------------------------- layer norm

// Checks that operand i (scale or bias) broadcasts to x's shape and varies
// only along the normalized dims [axis, rank).
void check_suffix_param(InferContext& c, int i, int axis, std::string_view what) {
  require_float(c, i);
  const Shape& xs = c.shape(0);
  const Shape& ps = c.shape(i);
  int r = static_cast<int>(xs.size());
  if (static_cast<int>(ps.size()) > r)
    c.fail("{} {} has a higher rank than x {}", what, c.type(i).str(), c.type(0).str());
  int off = r - static_cast<int>(ps.size());
  for (int j = 0; j < static_cast<int>(ps.size()); ++j) {
    int xd = off + j;
    if (ps[j] != 1 && ps[j] != xs[xd])
      c.fail("{} {} does not broadcast to x {}", what, c.type(i).str(), c.type(0).str());
    if (xd < axis && ps[j] != 1)
      c.unsupported("{} {} varies along dim {} of x, which is outside the normalized dims (axis {})", what,
                    c.type(i).str(), xd, axis);
  }
}

// Expands a scale/bias operand to one value per element of the normalized
// block x.shape[axis:] (row-major).
std::vector<double> expand_suffix_param(const Tensor& p, const Shape& xs, int axis) {
  Shape norm_shape(xs.begin() + axis, xs.end());
  Shape ps = p.shape();
  while (ps.size() > norm_shape.size()) ps.erase(ps.begin());  // leading dims are 1 (checked)
  std::vector<double> src = load_params(p);
  std::vector<int64_t> st = broadcast_strides(ps, norm_shape);
  int64_t total = shape_numel(norm_shape);
  std::vector<double> r(total);
  std::vector<int64_t> idx(norm_shape.size(), 0);
  int64_t off = 0;
  for (int64_t e = 0; e < total; ++e) {
    r[e] = src[off];
    for (int d = static_cast<int>(norm_shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < norm_shape[d]) {
        off += st[d];
        break;
      }
      off -= st[d] * (norm_shape[d] - 1);
      idx[d] = 0;
    }
  }
  return r;
}

// Normalizes each of `rows` contiguous blocks of `len` elements:
// y[j] = (x[j] - mean) * inv * scale[j] + bias[j] with scale/bias given per
// element of the block. Writes each block's mean and inv = 1/sqrt(var + eps)
// into mean_out/inv_out when given.
template <typename C>
void normalize_rows(const C* x, C* y, int64_t rows, int64_t len, double eps, const double* scale, const double* bias,
                    float* mean_out, float* inv_out) {
  for (int64_t r = 0; r < rows; ++r) {
    const C* xr = x + r * len;
    C* yr = y + r * len;
    double sum = 0;
    for (int64_t j = 0; j < len; ++j) sum += xr[j];
    double mean = sum / static_cast<double>(len);
    double sq = 0;
    for (int64_t j = 0; j < len; ++j) {
      double dv = xr[j] - mean;
      sq += dv * dv;
    }
    double inv = 1.0 / std::sqrt(sq / static_cast<double>(len) + eps);
    if (bias)
      for (int64_t j = 0; j < len; ++j) yr[j] = static_cast<C>((xr[j] - mean) * inv * scale[j] + bias[j]);
    else
      for (int64_t j = 0; j < len; ++j) yr[j] = static_cast<C>((xr[j] - mean) * inv * scale[j]);
    if (mean_out) mean_out[r] = static_cast<float>(mean);
    if (inv_out) inv_out[r] = static_cast<float>(inv);
  }
}

// Operands x, scale, bias?; results y, mean?, inv_std_dev? (f32, the ONNX
// default stash type). Normalizes over dims [axis, rank).
OpDef layer_normalization() {
  OpDef d;
  d.name = "layer_normalization";
  d.symbolic_dims = true;  // x's shape; the scale must equal its trailing dims
  d.category = OpCategory::Reduction;
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.max_outputs = 3;
  d.attrs = {{"axis", AttrKind::Int}, {"epsilon", AttrKind::Float}};
  d.infer = [](InferContext& c) {
    require_float(c, 0);
    require_rank_at_least(c, 0, 1, "x");
    check_epsilon(c);
    int r = c.rank(0);
    int axis = axis_of(c, c.attrs().get_int("axis", -1), r);
    check_suffix_param(c, 1, axis, "scale");
    if (c.has_input(2)) check_suffix_param(c, 2, axis, "bias");
    Shape stat = c.shape(0);
    for (int i = axis; i < r; ++i) stat[i] = 1;
    return std::vector<TensorType>{TensorType(c.dtype(0), c.shape(0)), TensorType(DType::F32, stat),
                                   TensorType(DType::F32, stat)};
  };
  d.reference = [](KernelContext& k) {
    const Tensor& x = k.in(0);
    int r = x.rank();
    int64_t ax = k.attrs.get_int("axis", -1);
    int axis = static_cast<int>(ax < 0 ? ax + r : ax);
    int64_t rows = dims_product(x.shape(), 0, axis), len = dims_product(x.shape(), axis, r);
    std::vector<double> scale = expand_suffix_param(k.in(1), x.shape(), axis);
    std::vector<double> bias;
    if (k.has(2)) bias = expand_suffix_param(k.in(2), x.shape(), axis);
    float* mean_out = k.outputs.size() > 1 ? k.out(1).data<float>() : nullptr;
    float* inv_out = k.outputs.size() > 2 ? k.out(2).data<float>() : nullptr;
    dispatch_float(x.dtype(), [&](auto z) {
      using C = decltype(z);
      FloatIn<C> in(x);
      FloatOut<C> out(k.out(0));
      normalize_rows(in.data(), out.data(), rows, len, epsilon_of(k.attrs), scale.data(),
                     bias.empty() ? nullptr : bias.data(), mean_out, inv_out);
      out.commit();
    });
  };
  d.doc =
      "(x - mean) / sqrt(var + epsilon) * scale + bias over dims [axis, rank); optional f32 mean and "
      "1/sqrt(var + epsilon) results";
  return d;
}

// ---------------------------------------------------- instance / group norm

// x [N, C, ...] normalized over blocks of `group` channels times the spatial
// size, then scaled per channel: y = (x - mean) * inv * scale[c] + bias[c].
template <typename C>
void group_norm_kernel(const C* x, C* y, int64_t n, int64_t ch, int64_t inner, int64_t groups, double eps,
                       const std::vector<double>& scale, const std::vector<double>& bias) {
  int64_t cpg = ch / groups, len = cpg * inner;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      int64_t base = (b * ch + g * cpg) * inner;
      const C* xr = x + base;
      C* yr = y + base;
      double sum = 0;
      for (int64_t j = 0; j < len; ++j) sum += xr[j];
      double mean = sum / static_cast<double>(len);
      double sq = 0;
      for (int64_t j = 0; j < len; ++j) {
        double dv = xr[j] - mean;
        sq += dv * dv;
      }
      double inv = 1.0 / std::sqrt(sq / static_cast<double>(len) + eps);
      for (int64_t cc = 0; cc < cpg; ++cc) {
        int64_t c = g * cpg + cc;
        double a = inv * scale[c], sh = bias[c] - mean * a;
        const C* xc = xr + cc * inner;
        C* yc = yr + cc * inner;
        for (int64_t j = 0; j < inner; ++j) yc[j] = static_cast<C>(xc[j] * a + sh);
      }
    }
}

// The same for channels-last x [N, inner..., C]: group g of image b reads
// x[(b * inner + j) * ch + g * cpg + cc].
template <typename C>
void group_norm_nhwc_kernel(const C* x, C* y, int64_t n, int64_t ch, int64_t inner, int64_t groups, double eps,
                            const std::vector<double>& scale, const std::vector<double>& bias) {
  int64_t cpg = ch / groups;
  double len = static_cast<double>(cpg * inner);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t base = b * inner * ch + g * cpg;
      double sum = 0;
      for (int64_t j = 0; j < inner; ++j)
        for (int64_t cc = 0; cc < cpg; ++cc) sum += x[base + j * ch + cc];
      double mean = sum / len;
      double sq = 0;
      for (int64_t j = 0; j < inner; ++j)
        for (int64_t cc = 0; cc < cpg; ++cc) {
          double dv = x[base + j * ch + cc] - mean;
          sq += dv * dv;
        }
      double inv = 1.0 / std::sqrt(sq / len + eps);
      for (int64_t cc = 0; cc < cpg; ++cc) {
        int64_t c = g * cpg + cc;
        double a = inv * scale[c], sh = bias[c] - mean * a;
        for (int64_t j = 0; j < inner; ++j) {
          int64_t i = base + j * ch + cc;
          y[i] = static_cast<C>(x[i] * a + sh);
        }
      }
    }
}

void run_group_norm(KernelContext& k, int64_t groups) {
  const Tensor& x = k.in(0);
  const bool nhwc = nhwc_layout(k.attrs, k.label);
  const Shape s = nhwc ? permute_dims(x.shape(), channels_first_perm(x.rank())) : x.shape();
  int64_t n = s[0], ch = s[1], inner = dims_product(s, 2, x.rank());
  std::vector<double> scale = load_params(k.in(1)), bias = load_params(k.in(2));
  dispatch_float(x.dtype(), [&](auto z) {
    using C = decltype(z);
    FloatIn<C> in(x);
    FloatOut<C> out(k.out(0));
    if (nhwc) group_norm_nhwc_kernel(in.data(), out.data(), n, ch, inner, groups, epsilon_of(k.attrs), scale, bias);
    else group_norm_kernel(in.data(), out.data(), n, ch, inner, groups, epsilon_of(k.attrs), scale, bias);
    out.commit();
  });
}

// Operands x [N, C, ...] (layout nhwc: [N, ..., C]), scale [C], bias [C].
// Also returns the channel count.
std::vector<TensorType> infer_channel_norm(InferContext& c, int64_t* channels = nullptr) {
  require_float(c, 0);
  require_rank_at_least(c, 0, 2, "x");
  check_epsilon(c);
  bool nhwc = nhwc_layout(c.attrs(), c.label());
  Shape xs = channels_first_shape(c, 0, nhwc);
  int64_t ch = xs[1];
  const char* of = nhwc ? "the channel count, the last dim of x" : "the channel count, dim 1 of x";
  require_vector(c, 1, ch, "scale", of);
  require_vector(c, 2, ch, "bias", of);
  if (channels) *channels = ch;
  return {image_result(c.dtype(0), xs, nhwc)};
}

OpDef instance_normalization() {
  OpDef d;
  d.name = "instance_normalization";
  d.category = OpCategory::Reduction;
  d.min_inputs = d.max_inputs = 3;
  d.attrs = {{"epsilon", AttrKind::Float}, {"layout", AttrKind::String}};
  d.symbolic_dims = true;  // a symbolic batch and spatial dims (ops/symbolic_image.h), kept as they are
  d.infer = [](InferContext& outer) {
    return infer_symbolic_image(
        outer, [](InferContext& c) { return infer_channel_norm(c); }, nullptr);
  };
  d.reference = [](KernelContext& k) { run_group_norm(k, k.in(1).numel()); };
  d.doc = "per (sample, channel) normalization over the spatial dims, then * scale[c] + bias[c]";
  return d;
}

OpDef group_normalization() {
  OpDef d;
  d.name = "group_normalization";
  d.category = OpCategory::Reduction;
  d.min_inputs = d.max_inputs = 3;
  d.attrs = {{"epsilon", AttrKind::Float}, {"num_groups", AttrKind::Int, true}, {"layout", AttrKind::String}};
  d.symbolic_dims = true;  // a symbolic batch and spatial dims (ops/symbolic_image.h), kept as they are
  d.infer = [](InferContext& outer) {
    return infer_symbolic_image(
        outer,
        [](InferContext& c) {
          int64_t ch = 0;
          std::vector<TensorType> r = infer_channel_norm(c, &ch);
          int64_t g = c.attrs().require_int("num_groups");
          if (g <= 0) c.fail("num_groups {} must be positive", g);
          if (ch % g != 0) c.fail("channel count {} is not divisible by num_groups {}", ch, g);
          return r;
        },
        nullptr);
  };
  d.reference = [](KernelContext& k) { run_group_norm(k, k.attrs.require_int("num_groups")); };
  d.doc = "normalization over groups of C/num_groups channels and the spatial dims, then * scale[c] + bias[c]";
  return d;
}

}  // namespace

void register_norm_stat_ops(OpRegistry& r) {
  r.add(batch_normalization());
  r.add(layer_normalization());
  r.add(instance_normalization());
  r.add(group_normalization());
}

void register_normalization_ops(OpRegistry& r) {
  register_norm_stat_ops(r);
  register_lrn_mvn_lp_ops(r);
  register_loss_ops(r);
}

}  // namespace kiln::ops
