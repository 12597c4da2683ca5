// ONNX adapters for the nn family (see import_context.h): convolution,
// pooling, unpooling, resize/upsample, grid sampling and RoI align.
//
// kiln's nn ops always carry explicit window attributes, so the adapters
// fill ONNX defaults (strides and dilations 1, pads 0), resolve auto_pad
// (SAME_UPPER, SAME_LOWER, VALID) and ConvTranspose's output_shape into
// explicit pads, and turn Resize/Upsample's scales/sizes/roi operands into
// the final output shape. Any ONNX attribute an adapter does not know is
// rejected, never silently dropped.
#include <algorithm>
#include <cmath>
#include <set>

#include "frontend/import_context.h"
#include "ir/floor_div_dims.h"
#include "ir/symbolic_dim.h"
#include "ops/nn_shape.h"

namespace kiln::adapters {

namespace {

// Rejects ONNX attributes outside `known` (they would change the meaning).
void check_attrs(ImportContext& c, std::initializer_list<const char*> known) {
  for (const auto& [name, value] : c.attrs()) {
    bool ok = false;
    for (const char* k : known) ok |= name == k;
    if (!ok) c.unsupported("attribute '{}' is not supported by kiln's import of {}", name, c.op_type());
  }
}

// An ints attribute of n entries, or n copies of `dflt` when absent.
std::vector<int64_t> ints_or(ImportContext& c, const std::string& name, size_t n, int64_t dflt) {
  if (!c.attrs().has(name)) return std::vector<int64_t>(n, dflt);
  std::vector<int64_t> v = c.attrs().get_ints(name);
  if (v.size() != n) c.fail("attribute '{}' has {} entries, expected {}", name, v.size(), n);
  return v;
}

// Spatial dims of operand 0, which must have rank >= 3.
std::vector<int64_t> spatial_dims(ImportContext& c) {
  const Shape& s = c.input(0)->shape();
  if (s.size() < 3)
    c.fail("input rank {} is below 3 ({} needs batch, channel and at least one spatial axis)", s.size(), c.op_type());
  return {s.begin() + 2, s.end()};
}

std::string auto_pad_of(ImportContext& c) {
  std::string ap = c.attrs().get_string("auto_pad", "NOTSET");
  if (ap.empty()) ap = "NOTSET";
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID")
    c.fail("auto_pad '{}' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap);
  return ap;
}

// Explicit pads (begins, then ends) for Conv and pooling windows.
std::vector<int64_t> window_pads(ImportContext& c, const std::vector<int64_t>& in, const std::vector<int64_t>& k,
                                 const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations) {
  const size_t nd = in.size();
  std::string ap = auto_pad_of(c);
  if (ap == "NOTSET") return ints_or(c, "pads", 2 * nd, 0);
  std::vector<int64_t> pads(2 * nd, 0);
  for (size_t d = 0; d < nd; ++d) {
    if (strides[d] < 1) c.fail("stride {} along spatial axis {} must be at least 1", strides[d], d);
    ops::PadPair p = ops::same_pads(ap, in[d], k[d], strides[d], dilations[d]);
    pads[d] = p.begin;
    pads[d + nd] = p.end;
  }
  return pads;
}

// The kernel size from the weight, checked against an explicit kernel_shape.
std::vector<int64_t> conv_kernel(ImportContext& c, size_t nd) {
  const Shape& ws = c.input(1)->shape();
  if (ws.size() != nd + 2) c.fail("weight rank {} does not match input rank {}", ws.size(), nd + 2);
  std::vector<int64_t> k(ws.begin() + 2, ws.end());
  if (c.attrs().has("kernel_shape") && c.attrs().get_ints("kernel_shape") != k)
    c.fail("kernel_shape {} does not match the weight's spatial dims {}", shape_str(c.attrs().get_ints("kernel_shape")),
           shape_str(k));
  return k;
}

std::vector<Value*> operands(ImportContext& c, int n) {
  std::vector<Value*> v;
  for (int i = 0; i < n; ++i) v.push_back(c.has_input(i) ? c.input(i) : nullptr);
  while (!v.empty() && !v.back()) v.pop_back();
  return v;
}

void conv(ImportContext& c) {
  check_attrs(c, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  std::vector<int64_t> in = spatial_dims(c);
  const size_t nd = in.size();
  std::vector<int64_t> k = conv_kernel(c, nd);
  std::vector<int64_t> strides = ints_or(c, "strides", nd, 1), dil = ints_or(c, "dilations", nd, 1);
  AttrMap a;
  a.set("strides", strides);
  a.set("dilations", dil);
  a.set("pads", window_pads(c, in, k, strides, dil));
  a.set("group", c.attrs().get_int("group", 1));
  c.set_outputs({c.emit1("conv", operands(c, 3), a)});
}

void deform_conv(ImportContext& c) {
  check_attrs(c, {"dilations", "group", "kernel_shape", "offset_group", "pads", "strides"});
  std::vector<int64_t> in = spatial_dims(c);
  const size_t nd = in.size();
  conv_kernel(c, nd);
  AttrMap a;
  a.set("strides", ints_or(c, "strides", nd, 1));
  a.set("dilations", ints_or(c, "dilations", nd, 1));
  a.set("pads", ints_or(c, "pads", 2 * nd, 0));
  a.set("group", c.attrs().get_int("group", 1));
  a.set("offset_group", c.attrs().get_int("offset_group", 1));
  c.set_outputs({c.emit1("deform_conv", operands(c, 5), a)});
}

void conv_transpose(ImportContext& c) {
  check_attrs(c,
              {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"});
  std::vector<int64_t> in = spatial_dims(c);
  const size_t nd = in.size();
  std::vector<int64_t> k = conv_kernel(c, nd);
  std::vector<int64_t> strides = ints_or(c, "strides", nd, 1), dil = ints_or(c, "dilations", nd, 1);
  std::vector<int64_t> out_pad = ints_or(c, "output_padding", nd, 0);
  std::string ap = auto_pad_of(c);
  std::vector<int64_t> pads(2 * nd, 0);
  std::vector<int64_t> target;  // requested output spatial dims, if any
  if (c.attrs().has("output_shape")) {
    target = c.attrs().get_ints("output_shape");
    if (target.size() == nd + 2) target.erase(target.begin(), target.begin() + 2);
    if (target.size() != nd) c.fail("output_shape has {} entries, expected {}", target.size(), nd);
  } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    for (size_t d = 0; d < nd; ++d) target.push_back(in[d] * strides[d]);
  }
  if (!target.empty()) {
    for (size_t d = 0; d < nd; ++d) {
      ops::PadPair p = ops::conv_transpose_pads_for_output(ap, in[d], k[d], strides[d], dil[d], out_pad[d], target[d]);
      pads[d] = p.begin;
      pads[d + nd] = p.end;
    }
  } else if (ap == "NOTSET") {
    pads = ints_or(c, "pads", 2 * nd, 0);
  }
  AttrMap a;
  a.set("strides", strides);
  a.set("dilations", dil);
  a.set("pads", pads);
  a.set("output_padding", out_pad);
  a.set("group", c.attrs().get_int("group", 1));
  c.set_outputs({c.emit1("conv_transpose", operands(c, 3), a)});
}

// MaxPool, AveragePool, LpPool.
void window_pool(ImportContext& c, const std::string& op) {
  if (op == "max_pool")
    check_attrs(c, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
  else if (op == "average_pool")
    check_attrs(c, {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"});
  else check_attrs(c, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"});
  std::vector<int64_t> in = spatial_dims(c);
  const size_t nd = in.size();
  if (!c.attrs().has("kernel_shape")) c.fail("attribute 'kernel_shape' is required");
  std::vector<int64_t> k = ints_or(c, "kernel_shape", nd, 1);
  std::vector<int64_t> strides = ints_or(c, "strides", nd, 1), dil = ints_or(c, "dilations", nd, 1);
  AttrMap a;
  a.set("kernel_shape", k);
  a.set("strides", strides);
  a.set("dilations", dil);
  a.set("pads", window_pads(c, in, k, strides, dil));
  a.set("ceil_mode", c.attrs().get_int("ceil_mode", 0));
  int outputs = 1;
  if (op == "max_pool") {
    a.set("storage_order", c.attrs().get_int("storage_order", 0));
    if (c.output_used(1)) outputs = 2;
  } else if (op == "average_pool") {
    a.set("count_include_pad", c.attrs().get_int("count_include_pad", 0));
  } else {
    // LpPool-1 declared p as a float.
    const Attribute* p = c.attrs().find("p");
    int64_t pv = 2;
    if (p && attr_kind(*p) == AttrKind::Float) {
      float f = std::get<float>(*p);
      if (f != std::floor(f)) c.unsupported("p = {} is not an integer", f);
      pv = static_cast<int64_t>(f);
    } else if (p) {
      pv = c.attrs().get_int("p", 2);
    }
    a.set("p", pv);
  }
  c.set_outputs(c.emit(op, {c.input(0)}, a, outputs));
}

void global_pool(ImportContext& c, const std::string& op) {
  AttrMap a;
  if (op == "global_lp_pool") {
    check_attrs(c, {"p"});
    const Attribute* p = c.attrs().find("p");
    int64_t pv = 2;
    if (p && attr_kind(*p) == AttrKind::Float) {
      float f = std::get<float>(*p);
      if (f != std::floor(f)) c.unsupported("p = {} is not an integer", f);
      pv = static_cast<int64_t>(f);
    } else if (p) {
      pv = c.attrs().get_int("p", 2);
    }
    a.set("p", pv);
  } else {
    check_attrs(c, {});
  }
  c.set_outputs({c.emit1(op, {c.input(0)}, a)});
}

void max_unpool(ImportContext& c) {
  check_attrs(c, {"kernel_shape", "pads", "strides"});
  std::vector<int64_t> in = spatial_dims(c);
  const size_t nd = in.size();
  const Shape& xs = c.input(0)->shape();
  // The indices address MaxPool's input, whose shape the window attributes
  // give back; an output_shape operand only enlarges (pads at the end) or
  // crops the result, as ONNX Runtime does.
  if (!c.attrs().has("kernel_shape")) c.fail("attribute 'kernel_shape' is required");
  std::vector<int64_t> k = ints_or(c, "kernel_shape", nd, 1), s = ints_or(c, "strides", nd, 1),
                       pads = ints_or(c, "pads", 2 * nd, 0);
  std::vector<int64_t> index_shape = {xs[0], xs[1]};
  for (size_t d = 0; d < nd; ++d) {
    int64_t len = (in[d] - 1) * s[d] + k[d] - pads[d] - pads[d + nd];
    if (len < 1) c.fail("unpooled length {} along spatial axis {} is not positive", len, d);
    index_shape.push_back(len);
  }
  std::vector<int64_t> shape = index_shape;
  if (c.has_input(2)) shape = c.require_value(2, "output_shape").to_int_vector();
  AttrMap a;
  a.set("output_shape", shape);
  if (shape != index_shape) a.set("index_shape", index_shape);
  c.set_outputs({c.emit1("max_unpool", {c.input(0), c.input(1)}, a)});
}

// A float vector from a compile-time operand, or empty when absent/empty.
std::vector<double> float_operand(ImportContext& c, int i, const std::string& what) {
  if (!c.has_input(i)) return {};
  const Tensor& t = c.require_value(i, what);
  std::vector<double> v;
  for (int64_t j = 0; j < t.numel(); ++j) v.push_back(t.get_double(j));
  return v;
}

// Resize (opset 10, 11, 13, 18, 19) and Upsample (7, 9).
void resize(ImportContext& c) {
  const bool upsample = c.op_type() == "Upsample";
  const bool v10 = upsample || c.opset() < 11;
  const Shape& xs = c.input(0)->shape();
  const size_t r = xs.size();
  std::string mode = c.attrs().get_string("mode", "nearest");
  if (mode == "bilinear" && upsample) mode = "linear";  // Upsample-7 spelling
  if (mode != "nearest" && mode != "linear" && (v10 || mode != "cubic"))
    c.fail("mode '{}' is not supported by {} (opset {})", mode, c.op_type(), c.opset());

  AttrMap a;
  a.set("mode", mode);
  std::vector<double> scales, sizes_in, roi;
  std::vector<int64_t> sym_sizes;  // the sizes operand's values when they may be symbolic
  std::vector<int64_t> axes;
  if (v10) {
    check_attrs(c, {"mode", "scales"});
    // Upsample-7 has a scales attribute; Upsample-9 and Resize-10 an operand.
    if (upsample && c.attrs().has("scales")) {
      for (float f : c.attrs().get_floats("scales")) scales.push_back(f);
    } else {
      scales = float_operand(c, 1, "scales");
    }
    if (scales.size() != r) c.fail("scales has {} entries, expected {}", scales.size(), r);
    // The pre-opset-11 forms map output index x to x / scale and take the
    // nearest pixel by flooring, or by ceiling on axes that shrink.
    a.set("coordinate_transformation_mode", std::string("asymmetric"));
    a.set("nearest_mode", std::string("simple"));
  } else {
    check_attrs(c, {"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                    "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode"});
    a.set("antialias", c.attrs().get_int("antialias", 0));
    std::string ct = c.attrs().get_string("coordinate_transformation_mode", "half_pixel");
    a.set("coordinate_transformation_mode", ct);
    a.set("nearest_mode", c.attrs().get_string("nearest_mode", "round_prefer_floor"));
    a.set("cubic_coeff_a", c.attrs().get_float("cubic_coeff_a", -0.75f));
    a.set("exclude_outside", c.attrs().get_int("exclude_outside", 0));
    a.set("extrapolation_value", c.attrs().get_float("extrapolation_value", 0.0f));
    if (c.attrs().has("axes")) {
      for (int64_t ax : c.attrs().get_ints("axes")) {
        if (ax < -int64_t(r) || ax >= int64_t(r)) c.fail("axis {} is out of range for rank {}", ax, r);
        ax = ax < 0 ? ax + int64_t(r) : ax;
        if (std::count(axes.begin(), axes.end(), ax)) c.fail("axis {} appears twice in 'axes'", ax);
        axes.push_back(ax);
      }
    } else {
      for (size_t d = 0; d < r; ++d) axes.push_back(int64_t(d));
    }
    scales = float_operand(c, 2, "scales");
    // Sizes computed from a symbolic shape (torchvision's segmentation heads
    // resize to another tensor's H, W): the symbolic dims themselves.
    if (c.has_input(3) && has_symbolic_dims(xs)) {
      for (int64_t v : c.require_shape_value(3, "sizes").to_int_vector()) {
        sym_sizes.push_back(v);
        sizes_in.push_back(is_symbolic_dim(v) ? 1.0 : static_cast<double>(v));
      }
    } else {
      sizes_in = float_operand(c, 3, "sizes");
    }
    if (ct == "tf_crop_and_resize") {
      roi = float_operand(c, 1, "roi");
      if (roi.size() != 2 * axes.size()) c.fail("roi has {} entries, expected {}", roi.size(), 2 * axes.size());
    }
    if (scales.empty() == sizes_in.empty())
      c.fail("exactly one of scales and sizes must be given (got {} scales, {} sizes)", scales.size(), sizes_in.size());
  }

  // Full-rank scales / sizes / roi.
  std::vector<double> full_scales(r, 1.0), full_roi;
  std::vector<int64_t> sizes(xs.begin(), xs.end());
  bool have_scales = !scales.empty();
  if (v10) axes.clear();
  if (v10)
    for (size_t d = 0; d < r; ++d) axes.push_back(int64_t(d));
  if (!roi.empty()) {
    full_roi.assign(2 * r, 0.0);
    for (size_t d = r; d < 2 * r; ++d) full_roi[d] = 1.0;
    for (size_t i = 0; i < axes.size(); ++i) {
      full_roi[axes[i]] = roi[i];
      full_roi[axes[i] + r] = roi[i + axes.size()];
    }
  }
  if (have_scales) {
    if (scales.size() != axes.size()) c.fail("scales has {} entries, expected {}", scales.size(), axes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t ax = axes[i];
      double s = scales[i];
      if (!(s > 0) || !std::isfinite(s)) c.fail("scale {} for axis {} is not a positive finite number", s, ax);
      full_scales[ax] = s;
      // floor(in * scale); the roi does not enter (the ONNX reference and
      // ONNX Runtime both ignore the spec's roi factor here).
      if (is_symbolic_dim(xs[ax])) {
        // A symbolic H or W (docs/dynamic_shapes.md): floor(in * scale) is a
        // polynomial of the symbols and derived symbols (ir/floor_div_dims.h):
        // 2*H for 2, H + H.div2 for 1.5, H.div2 for 0.5.
        std::optional<int64_t> out = s > 1024 ? std::nullopt : dim_floor_scale(xs[ax], s);
        if (!out)
          c.fail(
              "scale {} along axis {} of the symbolic dim {}: kiln cannot write floor({} * {}) as a size (a scale "
              "m / 2^k with k <= 30, of a symbol or a polynomial whose division is exact)",
              s, ax, dim_str(xs[ax]), dim_str(xs[ax]), s);
        sizes[ax] = *out;
        continue;
      }
      sizes[ax] = static_cast<int64_t>(std::floor(static_cast<double>(xs[ax]) * s));
    }
  } else {
    if (sizes_in.size() != axes.size()) c.fail("sizes has {} entries, expected {}", sizes_in.size(), axes.size());
    std::string policy = c.attrs().get_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t i = 0; i < axes.size(); ++i) {
        if (sizes_in[i] < 0) c.fail("size {} for axis {} is negative", sizes_in[i], axes[i]);
        sizes[axes[i]] = sym_sizes.empty() ? static_cast<int64_t>(sizes_in[i]) : sym_sizes[i];
      }
    } else if (policy == "not_larger" || policy == "not_smaller") {
      // One scale for all listed axes; ONNX rounds in * scale half up.
      double s = policy == "not_larger" ? INFINITY : 0.0;
      for (size_t i = 0; i < axes.size(); ++i) {
        if (is_symbolic_dim(xs[axes[i]]) || !sym_sizes.empty())
          c.fail("keep_aspect_ratio_policy '{}' over the symbolic dim {}: not supported", policy, dim_str(xs[axes[i]]));
        double q = sizes_in[i] / static_cast<double>(xs[axes[i]]);
        s = policy == "not_larger" ? std::min(s, q) : std::max(s, q);
      }
      have_scales = true;
      for (int64_t ax : axes) {
        full_scales[ax] = s;
        sizes[ax] = static_cast<int64_t>(std::floor(s * static_cast<double>(xs[ax]) + 0.5));
      }
    } else {
      c.fail("keep_aspect_ratio_policy '{}' is not stretch, not_larger or not_smaller", policy);
    }
  }
  a.set("sizes", sizes);
  if (have_scales) {
    std::vector<float> fs(full_scales.begin(), full_scales.end());
    a.set("scales", fs);
  }
  if (!full_roi.empty()) a.set("roi", std::vector<float>(full_roi.begin(), full_roi.end()));
  c.set_outputs({c.emit1("resize", {c.input(0)}, a)});
}

void col2im(ImportContext& c) {
  check_attrs(c, {"dilations", "pads", "strides"});
  std::vector<int64_t> image = c.require_value(1, "image_shape").to_int_vector();
  std::vector<int64_t> block = c.require_value(2, "block_shape").to_int_vector();
  if (image.size() != block.size() || image.empty())
    c.fail("image_shape has {} entries and block_shape {}; they must match and be non-empty", image.size(),
           block.size());
  const size_t nd = image.size();
  AttrMap a;
  a.set("image_shape", image);
  a.set("block_shape", block);
  a.set("strides", ints_or(c, "strides", nd, 1));
  a.set("dilations", ints_or(c, "dilations", nd, 1));
  a.set("pads", ints_or(c, "pads", 2 * nd, 0));
  c.set_outputs({c.emit1("col2im", {c.input(0)}, a)});
}

void grid_sample(ImportContext& c) {
  check_attrs(c, {"align_corners", "mode", "padding_mode"});
  std::string mode = c.attrs().get_string("mode", c.opset() >= 20 ? "linear" : "bilinear");
  if (mode == "bilinear") mode = "linear";
  else if (mode == "bicubic") mode = "cubic";
  AttrMap a;
  a.set("mode", mode);
  a.set("padding_mode", c.attrs().get_string("padding_mode", "zeros"));
  a.set("align_corners", c.attrs().get_int("align_corners", 0));
  c.set_outputs({c.emit1("grid_sample", {c.input(0), c.input(1)}, a)});
}

void roi_align(ImportContext& c) {
  check_attrs(c, {"coordinate_transformation_mode", "mode", "output_height", "output_width", "sampling_ratio",
                  "spatial_scale"});
  AttrMap a;
  // RoiAlign-10 did not shift by half a pixel; opset 16 added the attribute.
  a.set("coordinate_transformation_mode",
        c.attrs().get_string("coordinate_transformation_mode", c.opset() >= 16 ? "half_pixel" : "output_half_pixel"));
  a.set("mode", c.attrs().get_string("mode", "avg"));
  a.set("output_height", c.attrs().get_int("output_height", 1));
  a.set("output_width", c.attrs().get_int("output_width", 1));
  a.set("sampling_ratio", c.attrs().get_int("sampling_ratio", 0));
  a.set("spatial_scale", c.attrs().get_float("spatial_scale", 1.0f));
  c.set_outputs({c.emit1("roi_align", {c.input(0), c.input(1), c.input(2)}, a)});
}

}  // namespace

void register_nn(AdapterTable& t) {
  t.add("Conv", conv);
  t.add("ConvTranspose", conv_transpose);
  t.add("DeformConv", deform_conv);
  t.add("MaxPool", [](ImportContext& c) { window_pool(c, "max_pool"); });
  t.add("AveragePool", [](ImportContext& c) { window_pool(c, "average_pool"); });
  t.add("LpPool", [](ImportContext& c) { window_pool(c, "lp_pool"); });
  t.add("GlobalAveragePool", [](ImportContext& c) { global_pool(c, "global_average_pool"); });
  t.add("GlobalMaxPool", [](ImportContext& c) { global_pool(c, "global_max_pool"); });
  t.add("GlobalLpPool", [](ImportContext& c) { global_pool(c, "global_lp_pool"); });
  t.add("MaxUnpool", max_unpool);
  t.add("Resize", resize);
  t.add("Upsample", resize);
  t.add("Col2Im", col2im);
  t.add("GridSample", grid_sample);
  t.add("RoiAlign", roi_align);
}

}  // namespace kiln::adapters
