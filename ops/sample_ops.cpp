// grid_sample and roi_align: sampling a 2-D image at computed locations.
//
// grid_sample {mode: linear|nearest|cubic, padding_mode: zeros|border|reflection,
// align_corners}: x [N,C,D1..Dr], grid [N,O1..Or,r] holding coordinates in
// [-1, 1], innermost axis first ((x, y) for images); result [N,C,O1..Or].
// Follows ONNX GridSample (opsets 16 and 20) as ONNX Runtime implements it:
// nearest rounds half to even, cubic (4-D only) uses Keys' A = -0.75.
//
// roi_align {mode: avg|max, output_height, output_width, sampling_ratio,
// spatial_scale, coordinate_transformation_mode: half_pixel|output_half_pixel}:
// x [N,C,H,W], rois [R,4] (x1,y1,x2,y2), batch_indices [R] i64;
// result [R,C,oh,ow]. Bilinear samples per bin as ONNX Runtime does (its
// max mode takes the max of the weighted corner values).
#include <algorithm>
#include <array>
#include <cmath>

#include "ops/nn_internal.h"

namespace kiln::ops::nn {

namespace {

// ---- grid_sample ----

enum class GsMode { Linear, Nearest, Cubic };
enum class GsPad { Zeros, Border, Reflection };

struct GsParams {
  GsMode mode = GsMode::Linear;
  GsPad pad = GsPad::Zeros;
  bool align = false;
};

GsParams gs_params(const AttrMap& a, const std::string& label) {
  GsParams p;
  std::string m = a.get_string("mode", "linear");
  if (m == "linear") p.mode = GsMode::Linear;
  else if (m == "nearest") p.mode = GsMode::Nearest;
  else if (m == "cubic") p.mode = GsMode::Cubic;
  else failf(label, "mode '{}' is not one of linear, nearest, cubic", m);
  std::string pm = a.get_string("padding_mode", "zeros");
  if (pm == "zeros") p.pad = GsPad::Zeros;
  else if (pm == "border") p.pad = GsPad::Border;
  else if (pm == "reflection") p.pad = GsPad::Reflection;
  else failf(label, "padding_mode '{}' is not one of zeros, border, reflection", pm);
  int64_t ac = a.get_int("align_corners", 0);
  if (ac != 0 && ac != 1) failf(label, "align_corners is {}, must be 0 or 1", ac);
  p.align = ac == 1;
  return p;
}

std::vector<TensorType> infer_grid_sample(InferContext& c) {
  GsParams p = gs_params(c.attrs(), c.label());
  for (int i = 0; i < 2; ++i)
    if (!is_nn_float(c.dtype(i)))
      c.unsupported("operand {} has dtype {}; kiln's grid_sample takes f32, f64, f16 or bf16", i,
                    dtype_name(c.dtype(i)));
  const Shape& xs = c.shape(0);
  const Shape& gs = c.shape(1);
  if (xs.size() < 3) c.fail("input rank {} is below 3 (N, C and spatial axes)", xs.size());
  const int64_t r = static_cast<int64_t>(xs.size()) - 2;
  if (p.mode == GsMode::Cubic && r != 2) c.fail("cubic mode needs a 4-D input, got rank {}", xs.size());
  if (static_cast<int64_t>(gs.size()) != r + 2 || gs.back() != r || gs[0] != xs[0])
    c.fail("grid has shape {}; expected [{},<{} output dims>,{}]", shape_str(gs), xs[0], r, r);
  for (int64_t d = 0; d < r; ++d)
    if (xs[d + 2] < 1) c.fail("input spatial axis {} is empty", d);
  Shape out = {xs[0], xs[1]};
  out.insert(out.end(), gs.begin() + 1, gs.end() - 1);
  return {TensorType(c.dtype(0), out)};
}

double gs_reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    double dx = lo - x;
    int64_t n = static_cast<int64_t>(dx / range);
    double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    int64_t n = static_cast<int64_t>(dx / range);
    double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

std::array<double, 4> gs_cubic(double t) {
  const double A = -0.75;
  t = std::abs(t);
  return {((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A, ((A + 2) * t - (A + 3)) * t * t + 1,
          ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1,
          ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A};
}

void grid_sample_kernel(KernelContext& ctx) {
  GsParams p = gs_params(ctx.attrs, ctx.label);
  const Tensor& xt = ctx.in(0);
  const Shape& xs = xt.shape();
  const Shape& gsh = ctx.in(1).shape();
  const int r = static_cast<int>(xs.size()) - 2;
  const int64_t N = xs[0], C = xs[1];
  const std::vector<int64_t> in(xs.begin() + 2, xs.end()), out(gsh.begin() + 1, gsh.end() - 1);
  const std::vector<int64_t> istr = row_strides(in);
  const int64_t in_size = prod(in), out_size = prod(out);
  std::vector<double> x = load_all<double>(xt), g = load_all<double>(ctx.in(1));
  std::vector<double> y(static_cast<size_t>(ctx.out(0).numel()));
  // Per spatial axis: the range a sample may lie in, and the taps of one
  // sample (input coordinate, weight); the grid lists coordinates innermost
  // axis first (x, y, z).
  std::vector<double> lo(r), hi(r), f(r);
  for (int d = 0; d < r; ++d) {
    lo[d] = p.align ? 0.0 : -0.5;
    hi[d] = p.align ? in[d] - 1.0 : in[d] - 0.5;
  }
  std::vector<std::vector<std::pair<int64_t, double>>> taps(r);
  std::vector<int64_t> t(r);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oi = 0; oi < out_size; ++oi) {
      const double* gp = g.data() + (n * out_size + oi) * r;
      bool finite = true;
      for (int d = 0; d < r; ++d) {
        double v = gp[r - 1 - d];
        double len = static_cast<double>(in[d]);
        double fd = p.align ? (v + 1) / 2 * (len - 1) : ((v + 1) * len - 1) / 2;
        if (p.mode == GsMode::Nearest) fd = std::nearbyint(fd);
        if (fd < lo[d] || fd > hi[d]) {
          if (p.pad == GsPad::Border) fd = std::clamp(fd, 0.0, len - 1);
          else if (p.pad == GsPad::Reflection) fd = gs_reflect(fd, lo[d], hi[d]);
        }
        finite &= std::isfinite(fd);
        f[d] = fd;
      }
      for (int d = 0; d < r && finite; ++d) {
        taps[d].clear();
        if (p.mode == GsMode::Nearest) {
          taps[d].push_back({static_cast<int64_t>(f[d]), 1.0});
        } else if (p.mode == GsMode::Linear) {
          int64_t i0 = static_cast<int64_t>(std::floor(f[d]));
          taps[d].push_back({i0, i0 + 1 - f[d]});
          taps[d].push_back({i0 + 1, f[d] - i0});
        } else {
          int64_t i0 = static_cast<int64_t>(std::floor(f[d])) - 1;
          auto w = gs_cubic(f[d] - i0 - 1);
          for (int j = 0; j < 4; ++j) taps[d].push_back({i0 + j, w[j]});
        }
      }
      for (int64_t c = 0; c < C; ++c) {
        double& dst = y[(n * C + c) * out_size + oi];
        if (!finite) {
          dst = p.pad == GsPad::Zeros ? 0.0 : std::nan("");
          continue;
        }
        const double* img = x.data() + (n * C + c) * in_size;
        double acc = 0;
        std::fill(t.begin(), t.end(), 0);
        while (true) {
          double w = 1;
          int64_t off = 0;
          bool zero = false;
          for (int d = 0; d < r; ++d) {
            auto [idx, wd] = taps[d][t[d]];
            w *= wd;
            if (p.pad == GsPad::Zeros) {
              zero |= idx < 0 || idx >= in[d];
            } else if (p.pad == GsPad::Reflection) {
              idx = static_cast<int64_t>(gs_reflect(static_cast<double>(idx), lo[d], hi[d]));
            }
            off += std::clamp<int64_t>(idx, 0, in[d] - 1) * istr[d];
          }
          if (!zero) acc += w * img[off];
          int d = r - 1;
          for (; d >= 0; --d) {
            if (++t[d] < static_cast<int64_t>(taps[d].size())) break;
            t[d] = 0;
          }
          if (d < 0) break;
        }
        dst = acc;
      }
    }
  store_all(ctx.out(0), y);
}

// ---- roi_align ----

struct RoiParams {
  bool max_mode = false;
  bool half_pixel = true;
  int64_t oh = 1, ow = 1, sampling_ratio = 0;
  double spatial_scale = 1.0;
};

RoiParams roi_params(const AttrMap& a, const std::string& label) {
  RoiParams p;
  std::string m = a.get_string("mode", "avg");
  if (m != "avg" && m != "max") failf(label, "mode '{}' is not avg or max", m);
  p.max_mode = m == "max";
  std::string ct = a.get_string("coordinate_transformation_mode", "half_pixel");
  if (ct != "half_pixel" && ct != "output_half_pixel")
    failf(label, "coordinate_transformation_mode '{}' is not half_pixel or output_half_pixel", ct);
  p.half_pixel = ct == "half_pixel";
  p.oh = a.get_int("output_height", 1);
  p.ow = a.get_int("output_width", 1);
  if (p.oh < 1 || p.ow < 1) failf(label, "output size {}x{} must be positive", p.oh, p.ow);
  p.sampling_ratio = a.get_int("sampling_ratio", 0);
  if (p.sampling_ratio < 0) failf(label, "sampling_ratio is {}, must be >= 0", p.sampling_ratio);
  p.spatial_scale = a.get_float("spatial_scale", 1.0f);
  return p;
}

std::vector<TensorType> infer_roi_align(InferContext& c) {
  RoiParams p = roi_params(c.attrs(), c.label());
  for (int i = 0; i < 2; ++i)
    if (!is_nn_float(c.dtype(i)))
      c.unsupported("operand {} has dtype {}; kiln's roi_align takes f32, f64, f16 or bf16", i, dtype_name(c.dtype(i)));
  if (c.dtype(2) != DType::I64 && c.dtype(2) != DType::I32)
    c.fail("batch_indices (operand 2) must be i64 or i32, got {}", dtype_name(c.dtype(2)));
  if (c.rank(0) != 4) c.fail("input rank {} must be 4 (N,C,H,W)", c.rank(0));
  // The roi count may be symbolic (the proposals a detector keeps); the
  // image is what the sampling reads, so its dims must be numbers.
  if (has_symbolic_dims(c.shape(0)))
    c.unsupported("the image {} has symbolic dims: kiln's roi_align needs a fixed image", c.type(0).str());
  if (c.shape(0)[2] < 1 || c.shape(0)[3] < 1) c.fail("input image {} is empty", shape_str(c.shape(0)));
  const Shape& rs = c.shape(1);
  if (rs.size() != 2 || rs[1] != 4) c.fail("rois have shape [{}]; expected [R,4]", dims_str(rs));
  if (c.shape(2) != Shape{rs[0]})
    c.fail("batch_indices have shape [{}]; expected [{}]", dims_str(c.shape(2)), dim_str(rs[0]));
  return {TensorType(c.dtype(0), {rs[0], c.shape(0)[1], p.oh, p.ow})};
}

void roi_align_kernel(KernelContext& ctx) {
  RoiParams p = roi_params(ctx.attrs, ctx.label);
  const Shape& xs = ctx.in(0).shape();
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  std::vector<double> x = load_all<double>(ctx.in(0)), rois = load_all<double>(ctx.in(1));
  std::vector<int64_t> bidx = ctx.in(2).to_int_vector();
  const int64_t R = static_cast<int64_t>(bidx.size());
  std::vector<double> y(static_cast<size_t>(ctx.out(0).numel()));
  const double off = p.half_pixel ? 0.5 : 0.0;
  struct Sample {
    int64_t pos[4];
    double w[4];
  };
  std::vector<Sample> samples;
  for (int64_t r = 0; r < R; ++r) {
    int64_t b = bidx[r];
    if (b < 0 || b >= N) failf(ctx.label, "batch index {} of roi {} is outside [0, {})", b, r, N);
    const double* roi = rois.data() + r * 4;
    double sw = roi[0] * p.spatial_scale - off, sh = roi[1] * p.spatial_scale - off;
    double rw = roi[2] * p.spatial_scale - off - sw, rh = roi[3] * p.spatial_scale - off - sh;
    if (!p.half_pixel) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    double bh = rh / static_cast<double>(p.oh), bw = rw / static_cast<double>(p.ow);
    int64_t gh = p.sampling_ratio > 0 ? p.sampling_ratio : static_cast<int64_t>(std::ceil(rh / p.oh));
    int64_t gw = p.sampling_ratio > 0 ? p.sampling_ratio : static_cast<int64_t>(std::ceil(rw / p.ow));
    gh = std::max<int64_t>(gh, 0);
    gw = std::max<int64_t>(gw, 0);
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t ph = 0; ph < p.oh; ++ph)
      for (int64_t pw = 0; pw < p.ow; ++pw) {
        // The bilinear samples of this bin (shared by all channels).
        samples.clear();
        for (int64_t iy = 0; iy < gh; ++iy)
          for (int64_t ix = 0; ix < gw; ++ix) {
            double yy = sh + ph * bh + (iy + 0.5) * bh / static_cast<double>(gh);
            double xx = sw + pw * bw + (ix + 0.5) * bw / static_cast<double>(gw);
            Sample s{{0, 0, 0, 0}, {0, 0, 0, 0}};
            if (!(yy < -1.0 || yy > H || xx < -1.0 || xx > W)) {
              yy = std::max(yy, 0.0);
              xx = std::max(xx, 0.0);
              int64_t yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xx), yh, xh;
              if (yl >= H - 1) yh = yl = H - 1, yy = static_cast<double>(yl);
              else yh = yl + 1;
              if (xl >= W - 1) xh = xl = W - 1, xx = static_cast<double>(xl);
              else xh = xl + 1;
              double ly = yy - yl, lx = xx - xl, hy = 1 - ly, hx = 1 - lx;
              s = Sample{{yl * W + xl, yl * W + xh, yh * W + xl, yh * W + xh}, {hy * hx, hy * lx, ly * hx, ly * lx}};
            }
            samples.push_back(s);
          }
        for (int64_t c = 0; c < C; ++c) {
          const double* img = x.data() + (b * C + c) * H * W;
          double acc = 0;
          bool first = true;
          for (const Sample& s : samples) {
            if (p.max_mode) {
              double v = std::max(
                  {s.w[0] * img[s.pos[0]], s.w[1] * img[s.pos[1]], s.w[2] * img[s.pos[2]], s.w[3] * img[s.pos[3]]});
              acc = first ? v : std::max(acc, v);
              first = false;
            } else {
              acc += s.w[0] * img[s.pos[0]] + s.w[1] * img[s.pos[1]] + s.w[2] * img[s.pos[2]] + s.w[3] * img[s.pos[3]];
            }
          }
          y[((r * C + c) * p.oh + ph) * p.ow + pw] = p.max_mode ? acc : acc / count;
        }
      }
  }
  store_all(ctx.out(0), y);
}

}  // namespace

void register_sample_ops(OpRegistry& r) {
  OpDef gs;
  gs.name = "grid_sample";
  gs.category = OpCategory::Compute;
  gs.min_inputs = gs.max_inputs = 2;
  gs.attrs = {{"mode", AttrKind::String}, {"padding_mode", AttrKind::String}, {"align_corners", AttrKind::Int}};
  gs.infer = infer_grid_sample;
  gs.reference = grid_sample_kernel;
  gs.doc = "samples x [N,C,D1..Dr] at grid [N,O1..Or,r] locations in [-1,1] (linear/nearest/cubic)";
  r.add(std::move(gs));

  OpDef ra;
  ra.name = "roi_align";
  ra.symbolic_dims = true;  // the roi count is copied; the image must be fixed
  ra.category = OpCategory::Compute;
  ra.min_inputs = ra.max_inputs = 3;
  ra.attrs = {{"mode", AttrKind::String},         {"output_height", AttrKind::Int},
              {"output_width", AttrKind::Int},    {"sampling_ratio", AttrKind::Int},
              {"spatial_scale", AttrKind::Float}, {"coordinate_transformation_mode", AttrKind::String}};
  ra.infer = infer_roi_align;
  ra.reference = roi_align_kernel;
  ra.doc = "RoI align: bilinear-sampled avg/max over output_height x output_width bins of each roi";
  r.add(std::move(ra));
}

}  // namespace kiln::ops::nn
