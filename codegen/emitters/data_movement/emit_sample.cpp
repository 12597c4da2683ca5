#include "codegen/emitters/data_movement/emit_sample.h"

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

constexpr const char* kHelpers = R"(#ifndef KILN_SAMPLE_HELPERS_
#define KILN_SAMPLE_HELPERS_
// std::nan("") as the reference produces it.
__device__ inline double kiln_sample_qnan() {
  unsigned long long b = 0x7ff8000000000000ull; double f; memcpy(&f, &b, 8); return f;
}
__device__ inline bool kiln_sample_finite(double x) { return x - x == 0.0; }
// ops/sample_ops.cpp's gs_reflect.
__device__ inline double kiln_gs_reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const long long n = (long long)(dx / range);
    const double r = dx - (double)n * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const long long n = (long long)(dx / range);
    const double r = dx - (double)n * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}
#endif
)";

std::string load(DType t, const std::string& e) { return fmt::format("(double){}", cuda_load(t, e)); }

std::string store(DType t, const std::string& v) {
  return cuda_store(t, t == DType::F64 ? v : fmt::format("(float)({})", v));
}

OneLaunchKernel emit_grid_sample(const AttrMap& a, const std::vector<TensorType>& ops_, const TensorType& out) {
  const std::string mode = a.get_string("mode", "linear"), pad = a.get_string("padding_mode", "zeros");
  const bool align = a.get_int("align_corners", 0) == 1;
  if (mode != "linear" && mode != "nearest" && mode != "cubic") fail("codegen: grid_sample: mode '{}'", mode);
  if (pad != "zeros" && pad != "border" && pad != "reflection") fail("codegen: grid_sample: padding_mode '{}'", pad);
  const TensorType& x = ops_.at(0);
  const TensorType& g = ops_.at(1);
  const int r = x.rank() - 2;
  if (r < 1 || g.rank() != r + 2 || g.shape.back() != r || out.rank() != r + 2 || !is_float(x.dtype) ||
      !is_float(g.dtype))
    fail("codegen: grid_sample: operands {} {} do not fit", x.str(), g.str());
  std::vector<int64_t> in(x.shape.begin() + 2, x.shape.end()), os(out.shape.begin() + 2, out.shape.end());
  int64_t in_size = 1, out_size = 1;
  for (int64_t v : in) in_size *= v;
  for (int64_t v : os) out_size *= v;
  const int64_t C = x.shape[1];
  std::string b;
  b += fmt::format("    const long long oi = i % {0}LL, nc = i / {0}LL, n = nc / {1}LL;\n", out_size, C);
  b += fmt::format("    const long long gbase = (n * {}LL + oi) * {};\n", out_size, r);
  b += "    bool finite = true;\n";
  const int ntaps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  for (int d = 0; d < r; ++d) {
    const double len = static_cast<double>(in[d]);
    const double lo = align ? 0.0 : -0.5, hi = align ? len - 1.0 : len - 0.5;
    b += fmt::format("    long long ti{0}[{1}]; double tw{0}[{1}];\n", d, ntaps);
    b += fmt::format("    {{\n      const double v = {};\n", load(g.dtype, fmt::format("in1[gbase + {}]", r - 1 - d)));
    b += fmt::format("      const double len = {:.17g};\n", len);
    b += align ? "      double fd = (v + 1) / 2 * (len - 1);\n" : "      double fd = ((v + 1) * len - 1) / 2;\n";
    if (mode == "nearest") b += "      fd = rint(fd);\n";
    b += fmt::format("      if (fd < {0:.17g} || fd > {1:.17g}) {{\n", lo, hi);
    if (pad == "border") b += "        fd = fd < 0.0 ? 0.0 : (len - 1 < fd ? len - 1 : fd);\n";
    else if (pad == "reflection") b += fmt::format("        fd = kiln_gs_reflect(fd, {:.17g}, {:.17g});\n", lo, hi);
    b += "      }\n";
    b += "      finite = finite && kiln_sample_finite(fd);\n";
    b += "      if (kiln_sample_finite(fd)) {\n";
    if (mode == "nearest") {
      b += fmt::format("        ti{0}[0] = (long long)fd; tw{0}[0] = 1.0;\n", d);
    } else if (mode == "linear") {
      b += "        const long long i0 = (long long)floor(fd);\n";
      b += fmt::format("        ti{0}[0] = i0; tw{0}[0] = (double)(i0 + 1) - fd;\n", d);
      b += fmt::format("        ti{0}[1] = i0 + 1; tw{0}[1] = fd - (double)i0;\n", d);
    } else {
      b += "        const long long i0 = (long long)floor(fd) - 1;\n";
      b += "        const double A = -0.75, t = fabs(fd - (double)i0 - 1);\n";
      b += fmt::format("        ti{0}[0] = i0; ti{0}[1] = i0 + 1; ti{0}[2] = i0 + 2; ti{0}[3] = i0 + 3;\n", d);
      b += fmt::format("        tw{}[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;\n", d);
      b += fmt::format("        tw{}[1] = ((A + 2) * t - (A + 3)) * t * t + 1;\n", d);
      b += fmt::format("        tw{}[2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;\n", d);
      b += fmt::format("        tw{}[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;\n", d);
    }
    b += "      }\n    }\n";
  }
  b += fmt::format("    if (!finite) {{ out[i] = {}; continue; }}\n",
                   store(x.dtype, pad == "zeros" ? "0.0" : "kiln_sample_qnan()"));
  b += fmt::format("    const long long img = nc * {}LL;\n", in_size);
  b += "    double acc = 0;\n";
  std::string ind = "    ";
  int64_t stride = in_size;
  for (int d = 0; d < r; ++d) {
    stride /= in[d];
    const double lo = align ? 0.0 : -0.5, hi = align ? static_cast<double>(in[d]) - 1.0 : in[d] - 0.5;
    b += fmt::format("{0}for (int j{1} = 0; j{1} < {2}; ++j{1}) {{\n", ind, d, ntaps);
    ind += "  ";
    b += fmt::format("{}const double w{} = {} * tw{}[j{}];\n", ind, d, d ? fmt::format("w{}", d - 1) : "1.0", d, d);
    b += fmt::format("{}long long x{} = ti{}[j{}];\n", ind, d, d, d);
    if (pad == "zeros")
      b += fmt::format("{}const bool z{} = {}x{} < 0 || x{} >= {}LL;\n", ind, d, d ? fmt::format("z{} || ", d - 1) : "",
                       d, d, in[d]);
    else if (pad == "reflection")
      b += fmt::format("{}x{} = (long long)kiln_gs_reflect((double)x{}, {:.17g}, {:.17g});\n", ind, d, d, lo, hi);
    b += fmt::format("{0}x{1} = x{1} < 0 ? 0 : x{1} > {2}LL ? {2}LL : x{1};\n", ind, d, in[d] - 1);
    b += fmt::format("{}const long long f{} = {}x{} * {}LL;\n", ind, d, d ? fmt::format("f{} + ", d - 1) : "", d,
                     stride);
  }
  const std::string v = load(x.dtype, fmt::format("in0[img + f{}]", r - 1));
  if (pad == "zeros") b += fmt::format("{}if (!z{}) acc += w{} * {};\n", ind, r - 1, r - 1, v);
  else b += fmt::format("{}acc += w{} * {};\n", ind, r - 1, v);
  for (int d = r - 1; d >= 0; --d) {
    ind.resize(ind.size() - 2);
    b += ind + "}\n";
  }
  b += fmt::format("    out[i] = {};\n", store(x.dtype, "acc"));
  const std::string T(cuda_storage_type(x.dtype)), G(cuda_storage_type(g.dtype));
  return make_simple_kernel("sample", "grid_sample", {{T, "out"}, {"const " + T, "in0"}, {"const " + G, "in1"}},
                            kHelpers, b, out.numel(), {x.dtype, g.dtype});
}

OneLaunchKernel emit_roi_align(const AttrMap& a, const std::vector<TensorType>& ops_, const TensorType& out) {
  const std::string mode = a.get_string("mode", "avg"),
                    ct = a.get_string("coordinate_transformation_mode", "half_pixel");
  if (mode != "avg" && mode != "max") fail("codegen: roi_align: mode '{}'", mode);
  if (ct != "half_pixel" && ct != "output_half_pixel")
    fail("codegen: roi_align: coordinate_transformation_mode '{}'", ct);
  const bool max_mode = mode == "max", half_pixel = ct == "half_pixel";
  const int64_t oh = a.get_int("output_height", 1), ow = a.get_int("output_width", 1);
  const int64_t sr = a.get_int("sampling_ratio", 0);
  const double scale = a.get_float("spatial_scale", 1.0f);
  const TensorType& x = ops_.at(0);
  const TensorType& rois = ops_.at(1);
  const TensorType& bi = ops_.at(2);
  if (x.rank() != 4 || rois.rank() != 2 || !is_float(x.dtype) || !is_float(rois.dtype) ||
      (bi.dtype != DType::I32 && bi.dtype != DType::I64) || oh < 1 || ow < 1)
    fail("codegen: roi_align: operands {} {} {} do not fit", x.str(), rois.str(), bi.str());
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  std::string b;
  b += fmt::format("    const long long pw = i % {0}LL, ph = (i / {0}LL) % {1}LL, rc = i / {2}LL;\n", ow, oh, oh * ow);
  b += fmt::format("    const long long c = rc % {0}LL, r = rc / {0}LL;\n", C);
  b += "    const long long bidx = (long long)in2[r];\n";
  b += fmt::format("    if (bidx < 0 || bidx >= {}LL) {{ out[i] = {}; continue; }}\n", N, store(x.dtype, "0.0"));
  b += fmt::format("    const double scale = {:.17g}, off = {};\n", scale, half_pixel ? "0.5" : "0.0");
  for (int j = 0; j < 4; ++j)
    b += fmt::format("    const double roi{} = {};\n", j, load(rois.dtype, fmt::format("in1[r * 4 + {}]", j)));
  b += "    const double sw = roi0 * scale - off, sh = roi1 * scale - off;\n";
  b += "    double rw = roi2 * scale - off - sw, rh = roi3 * scale - off - sh;\n";
  if (!half_pixel) b += "    rw = rw < 1.0 ? 1.0 : rw;\n    rh = rh < 1.0 ? 1.0 : rh;\n";
  b += fmt::format("    const double bh = rh / (double){}LL, bw = rw / (double){}LL;\n", oh, ow);
  if (sr > 0) {
    b += fmt::format("    const long long gh = {0}LL, gw = {0}LL;\n", sr);
  } else {
    b += fmt::format("    long long gh = (long long)ceil(rh / {}LL), gw = (long long)ceil(rw / {}LL);\n", oh, ow);
    b += "    gh = gh < 0 ? 0 : gh;\n    gw = gw < 0 ? 0 : gw;\n";
  }
  if (!max_mode) b += "    const double count = (double)(gh * gw > 1 ? gh * gw : 1);\n";
  b += fmt::format("    const long long img = (bidx * {}LL + c) * {}LL;\n", C, H * W);
  b += max_mode ? "    double acc = 0;\n    bool first = true;\n" : "    double acc = 0;\n";
  b += "    for (long long iy = 0; iy < gh; ++iy)\n      for (long long ix = 0; ix < gw; ++ix) {\n";
  b += "        double yy = sh + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;\n";
  b += "        double xx = sw + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;\n";
  b += "        long long p0 = 0, p1 = 0, p2 = 0, p3 = 0;\n        double w0 = 0, w1 = 0, w2 = 0, w3 = 0;\n";
  b += fmt::format("        if (!(yy < -1.0 || yy > {0:.17g} || xx < -1.0 || xx > {1:.17g})) {{\n", double(H),
                   double(W));
  b += "          yy = yy < 0.0 ? 0.0 : yy;\n          xx = xx < 0.0 ? 0.0 : xx;\n";
  b += "          long long yl = (long long)yy, xl = (long long)xx, yh, xh;\n";
  b += fmt::format("          if (yl >= {0}LL) {{ yh = yl = {0}LL; yy = (double)yl; }} else yh = yl + 1;\n", H - 1);
  b += fmt::format("          if (xl >= {0}LL) {{ xh = xl = {0}LL; xx = (double)xl; }} else xh = xl + 1;\n", W - 1);
  b += "          const double ly = yy - yl, lx = xx - xl, hy = 1 - ly, hx = 1 - lx;\n";
  b += fmt::format(
      "          p0 = yl * {0}LL + xl; p1 = yl * {0}LL + xh; p2 = yh * {0}LL + xl; p3 = yh * {0}LL + xh;\n", W);
  b += "          w0 = hy * hx; w1 = hy * lx; w2 = ly * hx; w3 = ly * lx;\n        }\n";
  for (int j = 0; j < 4; ++j)
    b += fmt::format("        const double v{0} = w{0} * {1};\n", j, load(x.dtype, fmt::format("in0[img + p{}]", j)));
  if (max_mode) {
    // std::max({...}) keeps the first largest; std::max(a, b) is a < b ? b : a.
    b +=
        "        double m = v0;\n        if (m < v1) m = v1;\n        if (m < v2) m = v2;\n        if (m < v3) m = v3;\n";
    b += "        acc = first ? m : (acc < m ? m : acc);\n        first = false;\n";
  } else {
    b += "        acc += v0 + v1 + v2 + v3;\n";
  }
  b += "      }\n";
  b += fmt::format("    out[i] = {};\n", store(x.dtype, max_mode ? "acc" : "acc / count"));
  const std::string T(cuda_storage_type(x.dtype)), R(cuda_storage_type(rois.dtype));
  const std::string I = bi.dtype == DType::I32 ? "int" : "long long";
  return make_simple_kernel("sample", "roi_align",
                            {{T, "out"}, {"const " + T, "in0"}, {"const " + R, "in1"}, {"const " + I, "in2"}}, kHelpers,
                            b, out.numel(), {x.dtype, rois.dtype});
}

}  // namespace

bool sample_supported(const std::string& op) { return op == "grid_sample" || op == "roi_align"; }

OneLaunchKernel emit_sample_op(const std::string& op, const AttrMap& attrs, const std::vector<TensorType>& operands,
                               const TensorType& out) {
  if (op == "grid_sample") return emit_grid_sample(attrs, operands, out);
  if (op == "roi_align") return emit_roi_align(attrs, operands, out);
  fail("codegen: op '{}' is not a sampling op", op);
}

}  // namespace kiln::codegen
