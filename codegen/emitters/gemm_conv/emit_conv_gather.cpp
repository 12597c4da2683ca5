#include "codegen/emitters/gemm_conv/emit_conv_gather.h"

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "ir/error.h"
#include "ir/shape_utils.h"

namespace kiln::codegen {

namespace {

std::vector<int64_t> ints(const AttrMap& a, const char* name, size_t n, int64_t dflt) {
  std::vector<int64_t> v = a.has(name) ? a.get_ints(name) : std::vector<int64_t>(n, dflt);
  if (v.size() != n) fail("codegen: attribute {} has {} entries, expected {}", name, v.size(), n);
  return v;
}

// Statements that split `var` (a long long) into coordinates <prefix>0.. over
// `dims`, row-major.
std::string split_coords(const std::string& var, const std::string& prefix, const std::vector<int64_t>& dims,
                         const std::string& ind) {
  std::string s = fmt::format("{}long long {}rem = {};\n", ind, prefix, var);
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d)
    s += fmt::format("{0}const long long {1}{2} = {1}rem % {3}LL; {1}rem /= {3}LL;\n", ind, prefix, d, dims[d]);
  return s + fmt::format("{}(void){}rem;\n", ind, prefix);
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

OneLaunchKernel emit_col2im(const AttrMap& a, const std::vector<TensorType>& ops_, const TensorType& out) {
  const TensorType& x = ops_.at(0);
  const std::vector<int64_t> image = a.get_ints("image_shape");
  const size_t nd = image.size();
  const std::vector<int64_t> k = ints(a, "block_shape", nd, 1), st = ints(a, "strides", nd, 1),
                             dil = ints(a, "dilations", nd, 1), pads = ints(a, "pads", 2 * nd, 0);
  if (x.rank() != 3 || nd == 0 || x.dtype == DType::Bool) fail("codegen: col2im: input {} does not fit", x.str());
  std::vector<int64_t> in(nd);
  for (size_t d = 0; d < nd; ++d) in[d] = (image[d] + pads[d] + pads[d + nd] - dil[d] * (k[d] - 1) - 1) / st[d] + 1;
  const int64_t k_size = product(k), in_size = product(in), out_size = product(image);
  if (in_size != x.shape[2] || x.shape[1] % k_size != 0) fail("codegen: col2im: input {} does not fit", x.str());
  const int64_t M = x.shape[1] / k_size;
  const DType t = x.dtype;
  const std::string acc_t = t == DType::F64 ? "double" : is_float(t) ? "float" : "long long";
  std::string b;
  b += fmt::format("    const long long nm = i / {0}LL, yi = i % {0}LL;\n", out_size);
  b += split_coords("yi", "y", image, "    ");
  b += fmt::format("    {} acc = 0;\n", acc_t);
  b += fmt::format("    const long long base = nm * {}LL;\n", k_size * in_size);  // (n*M + m) * k_size * in_size
  b += fmt::format("    for (long long kp = 0; kp < {}LL; ++kp) {{\n", k_size);
  b += split_coords("kp", "k", k, "      ");
  std::string off;
  int64_t stride = in_size;
  for (size_t d = 0; d < nd; ++d) {
    stride /= in[d];
    b += fmt::format("      const long long s{0} = y{0} + {1}LL - k{0} * {2}LL;\n", d, pads[d], dil[d]);
    b += fmt::format("      if (s{0} < 0 || s{0} % {1}LL != 0 || s{0} / {1}LL >= {2}LL) continue;\n", d, st[d], in[d]);
    off += fmt::format(" + (s{} / {}LL) * {}LL", d, st[d], stride);
  }
  b += fmt::format("      acc += ({})({});\n", acc_t,
                   cuda_load(t, fmt::format("in0[base + kp * {}LL{}]", in_size, off)));
  b += "    }\n";
  b += fmt::format("    out[i] = {};\n", cuda_store(t, "acc"));
  (void)M;
  const std::string T(cuda_storage_type(t));
  return make_simple_kernel("convg", "col2im", {{T, "out"}, {"const " + T, "in0"}}, "", b, out.numel(), {t});
}

OneLaunchKernel emit_deform_conv(const AttrMap& a, const std::vector<TensorType>& ops_, const TensorType& out) {
  if (ops_.size() < 3) fail("codegen: deform_conv: needs x, w, offset");
  const TensorType& x = ops_[0];
  const TensorType& w = ops_[1];
  const TensorType& of = ops_[2];
  const bool has_b = ops_.size() > 3, has_m = ops_.size() > 4;
  const int nd = x.rank() - 2;
  if (nd < 1 || w.rank() != x.rank() || !is_float(x.dtype) || out.rank() != x.rank())
    fail("codegen: deform_conv: operands {} {} do not fit", x.str(), w.str());
  for (const TensorType& o : ops_)
    if (o.dtype != x.dtype) fail("codegen: deform_conv: mixed dtypes");
  const std::vector<int64_t> st = ints(a, "strides", nd, 1), dil = ints(a, "dilations", nd, 1),
                             pads = ints(a, "pads", 2 * nd, 0);
  const int64_t group = a.get_int("group", 1), og_n = a.get_int("offset_group", 1);
  const int64_t N = x.shape[0], C = x.shape[1], M = w.shape[0], Cg = C / group, Mg = M / group;
  std::vector<int64_t> in(x.shape.begin() + 2, x.shape.end()), k(w.shape.begin() + 2, w.shape.end()),
      os(out.shape.begin() + 2, out.shape.end());
  const int64_t in_size = product(in), k_size = product(k), out_size = product(os), cpo = C / og_n;
  if (w.shape[1] != Cg || of.shape[1] != og_n * nd * k_size || out.shape[1] != M || out.shape[0] != N)
    fail("codegen: deform_conv: operands {} {} {} do not fit", x.str(), w.str(), of.str());
  const DType t = x.dtype;
  const std::string ct = t == DType::F64 ? "double" : "float";  // the reference's T
  auto ld = [&](const std::string& e) { return fmt::format("(double){}", cuda_load(t, e)); };
  std::string b;
  b +=
      fmt::format("    const long long oi = i % {0}LL, nm = i / {0}LL, m = nm % {1}LL, n = nm / {1}LL;\n", out_size, M);
  b += split_coords("oi", "o", os, "    ");
  b += fmt::format("    const long long g = m / {}LL;\n", Mg);
  b += "    double acc = 0;\n";
  b += fmt::format("    for (long long c = 0; c < {}LL; ++c) {{\n", Cg);
  b += fmt::format("      const long long ci = g * {}LL + c, og = ci / {}LL;\n", Cg, cpo);
  b += fmt::format("      const long long xc = (n * {}LL + ci) * {}LL;\n", C, in_size);
  b += fmt::format("      for (long long kp = 0; kp < {}LL; ++kp) {{\n", k_size);
  b += split_coords("kp", "k", k, "        ");
  b += fmt::format("        const long long ob = ((n * {}LL + og) * {}LL + kp) * {}LL;\n", og_n, k_size, nd * out_size);
  for (int d = 0; d < nd; ++d) {
    b += fmt::format("        const double pos{0} = (double)(o{0} * {1}LL - {2}LL + k{0} * {3}LL) + {4};\n", d, st[d],
                     pads[d], dil[d], ld(fmt::format("in2[ob + {}LL + oi]", d * out_size)));
    b += fmt::format("        const double fl{0} = floor(pos{0});\n", d);
    b += fmt::format(
        "        const long long lo{0} = (long long)fl{0};\n        const double fr{0} = pos{0} - fl{0};\n", d);
  }
  b += "        double v = 0;\n";
  b += fmt::format("        for (int corner = 0; corner < {}; ++corner) {{\n", 1 << nd);
  b += "          double wgt = 1;\n          long long offi = 0;\n          bool inside = true;\n";
  int64_t stride = in_size;
  for (int d = 0; d < nd; ++d) {
    stride /= in[d];
    b += "          if (inside) {\n";
    b += fmt::format("            const int hi = (corner >> {}) & 1;\n", nd - 1 - d);
    b += fmt::format("            const long long ix = lo{} + hi;\n", d);
    b += fmt::format("            inside = ix >= 0 && ix < {}LL;\n", in[d]);
    b += fmt::format("            wgt *= hi ? fr{0} : 1 - fr{0};\n", d);
    b += fmt::format("            offi += ix * {}LL;\n          }}\n", stride);
  }
  b += fmt::format("          if (inside && wgt != 0) v += wgt * {};\n        }}\n", ld("in0[xc + offi]"));
  if (has_m)
    b += fmt::format("        v *= {};\n",
                     ld(fmt::format("in4[((n * {}LL + og) * {}LL + kp) * {}LL + oi]", og_n, k_size, out_size)));
  b += fmt::format("        const {} col = ({})v;\n", ct, ct);
  b +=
      fmt::format("        acc += {} * (double)col;\n", ld(fmt::format("in1[(m * {}LL + c) * {}LL + kp]", Cg, k_size)));
  b += "      }\n    }\n";
  b += fmt::format("    {} y = ({})acc;\n", ct, ct);
  if (has_b) b += fmt::format("    y += ({}){};\n", ct, ld("in3[m]"));
  b += fmt::format("    out[i] = {};\n", cuda_store(t, "y"));
  const std::string T(cuda_storage_type(t));
  std::vector<LaunchParam> params = {{T, "out"}, {"const " + T, "in0"}, {"const " + T, "in1"}, {"const " + T, "in2"}};
  if (has_b) params.push_back({"const " + T, "in3"});
  if (has_m) params.push_back({"const " + T, "in4"});
  return make_simple_kernel("convg", "deform_conv", params, "", b, out.numel(), {t});
}

}  // namespace

bool conv_gather_supported(const std::string& op) { return op == "col2im" || op == "deform_conv"; }

OneLaunchKernel emit_conv_gather_op(const std::string& op, const AttrMap& attrs,
                                    const std::vector<TensorType>& operands, const TensorType& out) {
  if (op == "col2im") return emit_col2im(attrs, operands, out);
  if (op == "deform_conv") return emit_deform_conv(attrs, operands, out);
  fail("codegen: op '{}' is not col2im or deform_conv", op);
}

}  // namespace kiln::codegen
