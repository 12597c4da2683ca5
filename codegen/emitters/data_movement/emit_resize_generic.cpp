#include "codegen/emitters/data_movement/emit_resize_generic.h"

#include <bit>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "codegen/launch_fit.h"
#include "codegen/core/size_expr.h"
#include "ir/error.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

namespace {

// An exact double literal.
std::string dlit(double v) { return fmt::format("__longlong_as_double({:#x}LL)", std::bit_cast<uint64_t>(v)); }

}  // namespace

OpKernel emit_resize_generic(const AttrMap& a, const TensorType& in, const TensorType& out) {
  const int r = in.rank();
  if (r < 1 || out.rank() != r || out.dtype != in.dtype || !is_float(in.dtype))
    unsupported("codegen: resize {} -> {}: a shape-generic resize takes a float image of the same rank", in.str(),
                out.str());
  const std::string mode = a.get_string("mode", "nearest");
  const std::string ct = a.get_string("coordinate_transformation_mode", "half_pixel");
  const std::string nm = a.get_string("nearest_mode", "round_prefer_floor");
  const std::vector<float> scales = a.get_floats("scales");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    unsupported("codegen: resize of {}: a shape-generic resize is nearest, linear or cubic, not {}", in.str(), mode);
  if (ct == "tf_crop_and_resize")
    unsupported("codegen: resize of {}: a shape-generic resize takes no tf_crop_and_resize", in.str());
  const bool exclude_outside = mode != "nearest" && a.get_int("exclude_outside", 0) != 0;
  if (mode != "nearest" && a.get_int("antialias", 0) != 0) {
    // Shrinking with antialias widens the filter by 1/scale (more taps);
    // without scales the scale is out/in per run, which may shrink.
    bool shrinks = scales.empty();
    for (float s : scales) shrinks = shrinks || s < 1;
    if (shrinks)
      unsupported("codegen: resize of {}: a shape-generic resize does not shrink with antialias{}", in.str(),
                  scales.empty() ? " (its sizes may be smaller than the input at some shapes)" : "");
  }
  const double cubic_a = static_cast<double>(a.get_float("cubic_coeff_a", -0.75f));
  const KernelSymbols syms({in.shape, out.shape});
  auto T = [&](int64_t d) { return is_symbolic_dim(d) ? syms.lit(d) : fmt::format("{}LL", d); };
  const std::vector<int64_t> ist = symbolic_strides(in.shape);
  const std::string C(cuda_compute_type(in.dtype));
  std::string b;
  b += fmt::format("  // resize {} {} ({}, {}): {} -> {}\n", mode, ct, nm, scales.empty() ? "sizes" : "scales",
                   in.str(), out.str());
  b += "  typedef long long I;\n";
  b += fmt::format(
      "  for (I o = (I)(blockIdx.x * blockDim.x + threadIdx.x); o < {}; o += (I)(gridDim.x * blockDim.x)) {{\n",
      T(dim_product(out.shape)));
  b += "    I rem = o;\n";
  for (int d = r - 1; d >= 0; --d)
    b += d ? fmt::format("    const I q{0} = rem % {1}; rem /= {1};\n", d, T(out.shape[d]))
           : fmt::format("    const I q{} = rem;\n", d);
  for (int d = 0; d < r; ++d) {
    // The source coordinate x<d> of q<d>, as plan_axis computes it.
    b += fmt::format("    const I ni{0} = {1}, no{0} = {2};\n", d, T(in.shape[d]), T(out.shape[d]));
    b += fmt::format("    const double len_in{0} = (double)ni{0};\n", d);
    if (!scales.empty()) {
      b += fmt::format("    const double scale{0} = {1}, len_out{0} = scale{0} * len_in{0};\n", d,
                       dlit(static_cast<double>(scales.at(d))));
    } else {
      b += fmt::format(
          "    const double scale{0} = ni{0} > 0 ? (double)no{0} / (double)ni{0} : 1.0, len_out{0} = (double)no{0};\n",
          d);
    }
    const std::string xr = fmt::format("(double)q{}", d);
    std::string x;
    if (ct == "half_pixel") x = fmt::format("({} + 0.5) / scale{} - 0.5", xr, d);
    else if (ct == "half_pixel_symmetric")
      x = fmt::format("len_in{0} / 2 * (1 - (double)no{0} / len_out{0}) + ({1} + 0.5) / scale{0} - 0.5", d, xr);
    else if (ct == "pytorch_half_pixel") x = fmt::format("len_out{0} > 1 ? ({1} + 0.5) / scale{0} - 0.5 : 0.0", d, xr);
    else if (ct == "align_corners")  // the fractional len_out, as the reference's plan_axis (ops/resize_ops.cpp)
      x = fmt::format("len_out{0} == 1 ? 0.0 : {1} * (len_in{0} - 1) / (len_out{0} - 1)", d, xr);
    else if (ct == "asymmetric") x = fmt::format("{} / scale{}", xr, d);
    else if (ct == "tf_half_pixel_for_nn") x = fmt::format("({} + 0.5) / scale{}", xr, d);
    else unsupported("codegen: resize: coordinate_transformation_mode '{}'", ct);
    b += fmt::format("    const double x{} = {};\n", d, x);
    b += fmt::format("    const double f{0} = floor(x{0});\n", d);
    if (mode == "nearest") {
      std::string i;
      if (nm == "round_prefer_floor") i = fmt::format("x{0} - f{0} == 0.5 ? f{0} : round(x{0})", d);
      else if (nm == "round_prefer_ceil") i = fmt::format("x{0} - f{0} == 0.5 ? f{0} + 1 : round(x{0})", d);
      else if (nm == "floor") i = fmt::format("f{}", d);
      else if (nm == "ceil") i = fmt::format("ceil(x{})", d);
      else if (nm == "simple") i = fmt::format("scale{0} < 1 ? ceil(x{0}) : f{0}", d);
      else unsupported("codegen: resize: nearest_mode '{}'", nm);
      b +=
          fmt::format("    I i{0} = (I)({1});\n    i{0} = i{0} < 0 ? 0 : i{0} > ni{0} - 1 ? ni{0} - 1 : i{0};\n", d, i);
    } else if (mode == "cubic" || exclude_outside) {
      // The raw taps (linear: {x0, 1 - r}, {x0 + 1, r}; cubic: x0 - 1 .. x0 + 2
      // with Keys' coefficients, as cubic_coeffs), with exclude_outside the
      // weights of taps outside the axis zeroed and the rest renormalised;
      // then as for linear: zero weights dropped, indices clamped, one
      // zero-weight tap at x0 when all are dropped.
      const int K = mode == "cubic" ? 4 : 2;
      b += fmt::format("    const I a{0} = (I)f{0};\n    const double r{0} = x{0} - f{0};\n", d);
      if (mode == "cubic") {
        const std::string A = dlit(cubic_a);
        b += fmt::format("    const double A{} = {};\n", d, A);
        b += fmt::format("    const I c{0}[4] = {{a{0} - 1, a{0}, a{0} + 1, a{0} + 2}};\n", d);
        b += fmt::format(
            "    double cw{0}[4] = {{((A{0} * (r{0} + 1) - 5 * A{0}) * (r{0} + 1) + 8 * A{0}) * (r{0} + 1) - 4 * A{0},\n"
            "                      ((A{0} + 2) * r{0} - (A{0} + 3)) * r{0} * r{0} + 1,\n"
            "                      ((A{0} + 2) * (1 - r{0}) - (A{0} + 3)) * (1 - r{0}) * (1 - r{0}) + 1,\n"
            "                      ((A{0} * (2 - r{0}) - 5 * A{0}) * (2 - r{0}) + 8 * A{0}) * (2 - r{0}) - 4 * A{0}}};\n",
            d);
      } else {
        b += fmt::format("    const I c{0}[2] = {{a{0}, a{0} + 1}};\n", d);
        b += fmt::format("    double cw{0}[2] = {{1 - r{0}, r{0}}};\n", d);
      }
      if (exclude_outside) {
        b += fmt::format("    double sum{} = 0;\n", d);
        b += fmt::format(
            "    for (int j = 0; j < {1}; ++j) {{\n      if (c{0}[j] < 0 || c{0}[j] >= ni{0}) cw{0}[j] = 0;\n"
            "      sum{0} += cw{0}[j];\n    }}\n",
            d, K);
        b += fmt::format("    if (sum{0} != 0)\n      for (int j = 0; j < {1}; ++j) cw{0}[j] /= sum{0};\n", d, K);
      }
      b += fmt::format("    I t{0}[{1}]; double w{0}[{1}]; int n{0} = 0;\n", d, K);
      b += fmt::format(
          "    for (int j = 0; j < {1}; ++j)\n"
          "      if (cw{0}[j] != 0) {{ t{0}[n{0}] = c{0}[j] < 0 ? 0 : c{0}[j] > ni{0} - 1 ? ni{0} - 1 : c{0}[j]; "
          "w{0}[n{0}++] = cw{0}[j]; }}\n",
          d, K);
      b += fmt::format(
          "    if (n{0} == 0) {{ t{0}[0] = a{0} < 0 ? 0 : a{0} > ni{0} - 1 ? ni{0} - 1 : a{0}; w{0}[0] = 0.0; n{0} = 1; "
          "}}\n",
          d);
    } else {
      // Taps {x0, 1 - r}, {x0 + 1, r}; zero weights dropped, indices clamped,
      // one zero-weight tap at x0 when both are dropped.
      b += fmt::format("    const I a{0} = (I)f{0};\n    const double r{0} = x{0} - f{0};\n", d);
      b += fmt::format("    I t{0}[2]; double w{0}[2]; int n{0} = 0;\n", d);
      b += fmt::format("    if (1 - r{0} != 0) {{ t{0}[n{0}] = a{0}; w{0}[n{0}++] = 1 - r{0}; }}\n", d);
      b += fmt::format("    if (r{0} != 0) {{ t{0}[n{0}] = a{0} + 1; w{0}[n{0}++] = r{0}; }}\n", d);
      b += fmt::format("    if (n{0} == 0) {{ t{0}[0] = a{0}; w{0}[0] = 0.0; n{0} = 1; }}\n", d);
      b += fmt::format(
          "    for (int j = 0; j < n{0}; ++j) t{0}[j] = t{0}[j] < 0 ? 0 : t{0}[j] > ni{0} - 1 ? ni{0} - 1 : t{0}[j];\n",
          d);
    }
  }
  if (mode == "nearest") {
    std::string off;
    for (int d = 0; d < r; ++d) off += fmt::format("{}i{} * {}", d ? " + " : "", d, T(ist[d]));
    b += fmt::format("    KILN_STORE(0, o, KILN_LOAD_X({}));\n", off);
  } else {
    b += "    double acc = 0;\n";
    std::string ind = "    ";
    for (int d = 0; d < r; ++d) {
      b += fmt::format("{0}for (int j{1} = 0; j{1} < n{1}; ++j{1}) {{\n", ind, d);
      ind += "  ";
      b += fmt::format("{}const double v{} = {} * w{}[j{}];\n", ind, d, d ? fmt::format("v{}", d - 1) : "1.0", d, d);
      b += fmt::format("{}const I p{} = {}t{}[j{}] * {};\n", ind, d, d ? fmt::format("p{} + ", d - 1) : "", d, d,
                       T(ist[d]));
    }
    b += fmt::format("{}acc += v{} * (double)KILN_LOAD_X(p{});\n", ind, r - 1, r - 1);
    for (int d = r - 1; d >= 0; --d) {
      ind.resize(ind.size() - 2);
      b += ind + "}\n";
    }
    b += fmt::format("    KILN_STORE(0, o, ({})acc);\n", C);
  }
  b += "  }\n";
  OpKernel k;
  k.block = block_threads(256);  // grid-stride: any block (codegen/launch_fit.h)
  k.grid = 1;                    // evaluated per shape
  k.grid_expr = GridAxisExpr{dim_product(out.shape), k.block, 8192};
  const std::vector<ShellBuffer> buffers = {{out.dtype, "out0", true}, {in.dtype, "in0", false}};
  finish_op_kernel(k, "kiln_resize", mode, buffers, C, "", b, nullptr, &syms);
  return k;
}

}  // namespace kiln::codegen
