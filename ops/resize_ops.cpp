// resize: N-D nearest / linear / cubic interpolation.
//
// Attributes (the ONNX adapter fills every one):
//   sizes    full output shape (one entry per axis)
//   scales   optional per-axis scale as the model gave it; it drives the
//            coordinate transform (ONNX computes x_original from the scale,
//            which may differ from sizes/in, e.g. 0.6 for 4 -> 2). Absent:
//            scale = sizes / in.
//   mode                            nearest | linear | cubic
//   coordinate_transformation_mode  half_pixel | half_pixel_symmetric | pytorch_half_pixel |
//                                   align_corners | asymmetric | tf_half_pixel_for_nn | tf_crop_and_resize
//   nearest_mode                    round_prefer_floor | round_prefer_ceil | floor | ceil |
//                                   simple (Resize-10/Upsample: ceil on axes that shrink, floor otherwise,
//                                   as ONNX Runtime and the opset-10 tests do)
//   cubic_coeff_a, exclude_outside, extrapolation_value, roi (starts then ends, tf_crop_and_resize),
//   antialias (linear/cubic downsampling widens the filter by 1/scale)
//
// The interpolation is separable: every output element is a weighted sum
// over the product of per-axis taps (1 for nearest, 2 linear, 4 cubic),
// taps outside the input clamp to the edge (or get weight 0 and the rest
// renormalised with exclude_outside), following the ONNX reference.
#include <algorithm>
#include <array>
#include <cmath>

#include "ir/floor_div_dims.h"
#include "ops/nn_internal.h"
#include "ops/resize_plan.h"

namespace kiln::ops::nn {

namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Coord {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNN,
  TfCrop
};
enum class Round { PreferFloor, PreferCeil, Floor, Ceil, Simple };

struct ResizeParams {
  Mode mode = Mode::Nearest;
  Coord coord = Coord::HalfPixel;
  Round round = Round::PreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0;
  std::vector<int64_t> sizes;
  std::vector<float> scales, roi;  // empty when absent
};

ResizeParams resize_params(const AttrMap& a, const Shape& xs, const std::string& label) {
  ResizeParams p;
  size_t r = xs.size();
  std::string mode = a.get_string("mode", "nearest");
  if (mode == "nearest") p.mode = Mode::Nearest;
  else if (mode == "linear") p.mode = Mode::Linear;
  else if (mode == "cubic") p.mode = Mode::Cubic;
  else failf(label, "mode '{}' is not one of nearest, linear, cubic", mode);
  std::string ct = a.get_string("coordinate_transformation_mode", "half_pixel");
  if (ct == "half_pixel") p.coord = Coord::HalfPixel;
  else if (ct == "half_pixel_symmetric") p.coord = Coord::HalfPixelSymmetric;
  else if (ct == "pytorch_half_pixel") p.coord = Coord::PytorchHalfPixel;
  else if (ct == "align_corners") p.coord = Coord::AlignCorners;
  else if (ct == "asymmetric") p.coord = Coord::Asymmetric;
  else if (ct == "tf_half_pixel_for_nn") p.coord = Coord::TfHalfPixelForNN;
  else if (ct == "tf_crop_and_resize") p.coord = Coord::TfCrop;
  else failf(label, "coordinate_transformation_mode '{}' is not supported", ct);
  std::string nm = a.get_string("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") p.round = Round::PreferFloor;
  else if (nm == "round_prefer_ceil") p.round = Round::PreferCeil;
  else if (nm == "floor") p.round = Round::Floor;
  else if (nm == "ceil") p.round = Round::Ceil;
  else if (nm == "simple") p.round = Round::Simple;
  else failf(label, "nearest_mode '{}' is not one of round_prefer_floor, round_prefer_ceil, floor, ceil, simple", nm);
  p.cubic_a = a.get_float("cubic_coeff_a", -0.75f);
  int64_t eo = a.get_int("exclude_outside", 0);
  if (eo != 0 && eo != 1) failf(label, "exclude_outside is {}, must be 0 or 1", eo);
  p.exclude_outside = eo == 1;
  p.extrapolation = a.get_float("extrapolation_value", 0.0f);
  int64_t aa = a.get_int("antialias", 0);
  if (aa != 0 && aa != 1) failf(label, "antialias is {}, must be 0 or 1", aa);
  p.antialias = aa == 1;
  p.sizes = window_ints(a, "sizes", r, 0, label);
  for (size_t d = 0; d < r; ++d)
    if (xs[d] == 0 && p.sizes[d] != 0) failf(label, "cannot resize the empty axis {} to {}", d, p.sizes[d]);
  if (a.has("scales")) {
    p.scales = a.get_floats("scales");
    if (p.scales.size() != r) failf(label, "attribute 'scales' has {} entries, expected {}", p.scales.size(), r);
    for (float s : p.scales)
      if (!(s > 0) || !std::isfinite(s)) failf(label, "scale {} is not a positive finite number", s);
  }
  if (a.has("roi")) {
    p.roi = a.get_floats("roi");
    if (p.roi.size() != 2 * r) failf(label, "attribute 'roi' has {} entries, expected {}", p.roi.size(), 2 * r);
  }
  if (p.coord == Coord::TfCrop && p.roi.empty()) failf(label, "tf_crop_and_resize needs the 'roi' attribute");
  return p;
}

struct Tap {
  int64_t index;
  double weight;
};

// Per axis and output coordinate: the taps, and whether the coordinate lies
// outside the crop (tf_crop_and_resize: the output is extrapolation_value).
struct AxisPlan {
  std::vector<int64_t> begin;  // [out coord] -> first tap in taps; size out+1
  std::vector<Tap> taps;
  std::vector<uint8_t> outside;
};

std::array<double, 4> cubic_coeffs(double r, double A) {
  return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
          ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1,
          ((A * (2 - r) - 5 * A) * (2 - r) + 8 * A) * (2 - r) - 4 * A};
}

AxisPlan plan_axis(const ResizeParams& p, size_t axis, int64_t in) {
  AxisPlan plan;
  const int64_t out = p.sizes[axis];
  const int64_t rank = static_cast<int64_t>(p.sizes.size());
  double scale, len_out;  // len_out: the resized length as ONNX's formulas see it (scale * in)
  if (!p.scales.empty()) {
    scale = static_cast<double>(p.scales[axis]);
    len_out = scale * static_cast<double>(in);
  } else {
    scale = in > 0 ? static_cast<double>(out) / static_cast<double>(in) : 1.0;
    len_out = static_cast<double>(out);
  }
  const double len_in = static_cast<double>(in);
  plan.begin.push_back(0);
  for (int64_t o = 0; o < out; ++o) {
    const double xr = static_cast<double>(o);
    double x = 0;
    switch (p.coord) {
      case Coord::HalfPixel:
        x = (xr + 0.5) / scale - 0.5;
        break;
      case Coord::HalfPixelSymmetric: {
        double adjustment = static_cast<double>(out) / len_out;
        x = len_in / 2 * (1 - adjustment) + (xr + 0.5) / scale - 0.5;
        break;
      }
      case Coord::PytorchHalfPixel:
        x = len_out > 1 ? (xr + 0.5) / scale - 0.5 : 0.0;
        break;
      case Coord::AlignCorners:
        // len_out is fractional when scales were given (5 * 1.5 = 7.5 for 7
        // elements), as in ONNX's reference and conformance data
        // (onnx/onnx#2462); ONNX Runtime divides by the integer length
        // (docs/ops.md, "Expected differences").
        x = len_out == 1 ? 0.0 : xr * (len_in - 1) / (len_out - 1);
        break;
      case Coord::Asymmetric:
        x = xr / scale;
        break;
      case Coord::TfHalfPixelForNN:
        x = (xr + 0.5) / scale;
        break;
      case Coord::TfCrop: {
        double start = p.roi[axis], end = p.roi[axis + rank];
        x = len_out > 1 ? start * (len_in - 1) + xr * (end - start) * (len_in - 1) / (len_out - 1)
                        : 0.5 * (start + end) * (len_in - 1);
        break;
      }
    }
    bool outside = p.coord == Coord::TfCrop && (x < 0 || x > len_in - 1);
    plan.outside.push_back(outside);
    auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
    size_t first = plan.taps.size();
    if (!outside) {
      if (p.mode == Mode::Nearest) {
        double f = std::floor(x);
        int64_t i = 0;
        switch (p.round) {
          case Round::PreferFloor:
            i = static_cast<int64_t>(x - f == 0.5 ? f : std::round(x));
            break;
          case Round::PreferCeil:
            i = static_cast<int64_t>(x - f == 0.5 ? f + 1 : std::round(x));
            break;
          case Round::Floor:
            i = static_cast<int64_t>(f);
            break;
          case Round::Ceil:
            i = static_cast<int64_t>(std::ceil(x));
            break;
          case Round::Simple:
            i = static_cast<int64_t>(scale < 1 ? std::ceil(x) : f);
            break;
        }
        plan.taps.push_back({clamp(i), 1.0});
      } else {
        int64_t x0 = static_cast<int64_t>(std::floor(x));
        double r = x - std::floor(x);
        std::vector<Tap> t;
        if (p.antialias && scale < 1) {
          // Downsampling with antialias: the filter is stretched by 1/scale
          // (more taps), weights normalised to sum 1 (ONNX Resize-18).
          const double A = p.cubic_a;
          const double support = p.mode == Mode::Linear ? 1.0 : 2.0;
          const int64_t start = static_cast<int64_t>(std::floor(-support / scale)) + 1;
          double sum = 0;
          for (int64_t i = start; i < 2 - start; ++i) {
            double u = std::abs(scale * (static_cast<double>(i) - r)), w;
            if (p.mode == Mode::Linear) w = std::max(0.0, 1 - u);
            else if (u <= 1) w = ((A + 2) * u - (A + 3)) * u * u + 1;
            else if (u < 2) w = ((A * u - 5 * A) * u + 8 * A) * u - 4 * A;
            else w = 0;
            t.push_back({x0 + i, w});
            sum += w;
          }
          if (sum != 0)
            for (Tap& tp : t) tp.weight /= sum;
        } else if (p.mode == Mode::Linear) {
          t = {{x0, 1 - r}, {x0 + 1, r}};
        } else {
          auto c = cubic_coeffs(r, p.cubic_a);
          t = {{x0 - 1, c[0]}, {x0, c[1]}, {x0 + 1, c[2]}, {x0 + 2, c[3]}};
        }
        if (p.exclude_outside) {
          double sum = 0;
          for (Tap& tp : t) {
            if (tp.index < 0 || tp.index >= in) tp.weight = 0;
            sum += tp.weight;
          }
          if (sum != 0)
            for (Tap& tp : t) tp.weight /= sum;
        }
        for (const Tap& tp : t)
          if (tp.weight != 0) plan.taps.push_back({clamp(tp.index), tp.weight});
        if (plan.taps.size() == first) plan.taps.push_back({clamp(x0), 0.0});
      }
    }
    plan.begin.push_back(static_cast<int64_t>(plan.taps.size()));
  }
  return plan;
}

// Symbolic dims (a symbolic H or W, docs/dynamic_shapes.md): with `scales`
// (the model gave scales), an axis whose input dim is symbolic resizes to
// the same dim or to it times the integer scale the ONNX adapter wrote into
// `sizes`; without them `sizes` came from the model's sizes operand (another
// tensor's symbolic H, W) and is the result as it is. The other checks run
// with every symbol at a stand-in value (specialisation evaluates `sizes`).
std::vector<TensorType> infer_symbolic_resize(InferContext& c,
                                              const std::function<std::vector<TensorType>(InferContext&)>& infer) {
  const Shape& xs = c.shape(0);
  const std::vector<int64_t> sizes = c.attrs().get_ints("sizes");
  if (!has_symbolic_dims(xs) && !has_symbolic_dims(sizes)) return infer(c);
  if (sizes.size() != xs.size()) c.fail("attribute 'sizes' has {} entries, expected {}", sizes.size(), xs.size());
  const std::vector<float> scales = c.attrs().get_floats("scales");
  constexpr int64_t kStandIn = 50021;
  SymbolBindings b;
  for (const Shape* s : {&xs, &sizes})
    for (const std::string& sym : shape_symbols(*s)) b[sym] = kStandIn;
  for (size_t d = 0; d < xs.size() && !scales.empty(); ++d) {
    if (!is_symbolic_dim(xs[d]) && !is_symbolic_dim(sizes[d])) continue;
    const std::optional<int64_t> scaled =
        scales.size() == xs.size() ? dim_floor_scale(xs[d], static_cast<double>(scales[d])) : std::nullopt;
    if (!is_symbolic_dim(xs[d]) || (sizes[d] != xs[d] && sizes[d] != scaled))
      c.unsupported("resize of {} to [{}]: along axis {} a symbolic size must be floor(the input's size * scale)",
                    c.type(0).str(), dims_str(sizes), d);
  }
  Graph scratch;
  std::vector<Value*> ins = {scratch.add_input("x", TensorType(c.dtype(0), eval_shape(xs, b)))};
  AttrMap a = c.attrs();
  a.set("sizes", eval_shape(sizes, b));
  InferContext sub(c.op(), ins, a, c.num_outputs(), c.label());
  infer(sub);
  return {TensorType(c.dtype(0), sizes)};
}

std::vector<TensorType> infer_resize(InferContext& c) {
  ResizeParams p = resize_params(c.attrs(), c.shape(0), c.label());
  DType t = c.dtype(0);
  if (p.mode != Mode::Nearest && !is_nn_float(t))
    c.unsupported("{} resize of dtype {}: kiln interpolates only f32, f64, f16 and bf16",
                  p.mode == Mode::Linear ? "linear" : "cubic", dtype_name(t));
  return {TensorType(t, p.sizes)};
}

void resize_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out(0);
  const Shape& xs = x.shape();
  ResizeParams p = resize_params(ctx.attrs, xs, ctx.label);
  const size_t r = xs.size();
  if (y.numel() == 0) return;
  std::vector<AxisPlan> plans;
  for (size_t d = 0; d < r; ++d) plans.push_back(plan_axis(p, d, xs[d]));
  const std::vector<int64_t> istr = row_strides(xs);
  std::vector<int64_t> o(r, 0), t(r, 0);
  if (p.mode == Mode::Nearest) {
    // A pure gather (any dtype); outside the crop gets extrapolation_value.
    for (int64_t oi = 0; oi < y.numel(); ++oi, next_index(o, p.sizes)) {
      bool outside = false;
      int64_t off = 0;
      for (size_t d = 0; d < r; ++d) {
        outside |= plans[d].outside[o[d]] != 0;
        if (!outside) off += plans[d].taps[plans[d].begin[o[d]]].index * istr[d];
      }
      if (outside) y.set_double(oi, p.extrapolation);
      else copy_element(x, off, y, oi);
    }
    return;
  }
  dispatch_compute(x.dtype(), [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<T> xv = load_all<T>(x);
      std::vector<T> yv(static_cast<size_t>(y.numel()));
      for (int64_t oi = 0; oi < y.numel(); ++oi, next_index(o, p.sizes)) {
        bool outside = false;
        for (size_t d = 0; d < r; ++d) outside |= plans[d].outside[o[d]] != 0;
        if (outside) {
          yv[oi] = static_cast<T>(p.extrapolation);
          continue;
        }
        // Sum over the product of the axes' taps.
        double acc = 0;
        std::fill(t.begin(), t.end(), 0);
        while (true) {
          int64_t off = 0;
          double w = 1;
          for (size_t d = 0; d < r; ++d) {
            const Tap& tp = plans[d].taps[plans[d].begin[o[d]] + t[d]];
            off += tp.index * istr[d];
            w *= tp.weight;
          }
          acc += w * static_cast<double>(xv[off]);
          int d = static_cast<int>(r) - 1;
          for (; d >= 0; --d) {
            if (++t[d] < plans[d].begin[o[d] + 1] - plans[d].begin[o[d]]) break;
            t[d] = 0;
          }
          if (d < 0) break;
        }
        yv[oi] = static_cast<T>(acc);
      }
      store_all(y, yv);
    }
  });
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  OpDef d;
  d.name = "resize";
  d.category = OpCategory::Compute;
  d.keeps_layout = true;
  d.attrs = {{"sizes", AttrKind::Ints, true},    {"scales", AttrKind::Floats},
             {"mode", AttrKind::String},         {"coordinate_transformation_mode", AttrKind::String},
             {"nearest_mode", AttrKind::String}, {"cubic_coeff_a", AttrKind::Float},
             {"exclude_outside", AttrKind::Int}, {"extrapolation_value", AttrKind::Float},
             {"roi", AttrKind::Floats},          {"antialias", AttrKind::Int}};
  d.symbolic_dims = true;  // a symbolic dim resized by an integer scale (infer_symbolic_resize)
  d.infer = [](InferContext& c) { return infer_symbolic_resize(c, infer_resize); };
  d.reference = resize_kernel;
  d.doc =
      "N-D nearest/linear/cubic resize to `sizes`, ONNX coordinate transforms; `scales` (when the model gave "
      "them) drive the coordinate mapping";
  r.add(std::move(d));
}

}  // namespace kiln::ops::nn

// The plan as resize_kernel uses it, for code generators (ops/resize_plan.h).
namespace kiln::ops {

ResizePlan resize_plan(const AttrMap& attrs, const Shape& in, const std::string& label) {
  nn::ResizeParams p = nn::resize_params(attrs, in, label);
  ResizePlan plan;
  plan.nearest = p.mode == nn::Mode::Nearest;
  plan.extrapolation = p.extrapolation;
  for (size_t d = 0; d < in.size(); ++d) {
    nn::AxisPlan ap = nn::plan_axis(p, d, in[d]);
    ResizeAxisTaps t;
    t.begin = std::move(ap.begin);
    t.outside = std::move(ap.outside);
    for (const nn::Tap& tp : ap.taps) {
      t.index.push_back(tp.index);
      t.weight.push_back(tp.weight);
    }
    plan.axes.push_back(std::move(t));
  }
  return plan;
}

}  // namespace kiln::ops
