#include "codegen/emitters/rnn/emit_rnn.h"

#include <algorithm>
#include <bit>
#include <cctype>

#include <fmt/format.h>

#include "codegen/launch_fit.h"
#include "codegen/core/emit_expr.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

constexpr size_t kSharedLimit = 48 * 1024;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct ActDefault {
  const char* name;
  float alpha, beta;
};
constexpr ActDefault kActs[] = {{"relu", 0, 0},
                                {"tanh", 0, 0},
                                {"sigmoid", 0, 0},
                                {"affine", 1.0f, 0.0f},
                                {"leakyrelu", 0.01f, 0},
                                {"thresholdedrelu", 1.0f, 0},
                                {"scaledtanh", 1.0f, 1.0f},
                                {"hardsigmoid", 0.2f, 0.5f},
                                {"elu", 1.0f, 0},
                                {"softsign", 0, 0},
                                {"softplus", 0, 0}};

// A device function `name`(x) computing activation `act` as the reference's
// Activation::operator() does (std::min/std::max spelled out).
std::string activation_fn(const std::string& name, const std::string& act_in, float alpha, float beta, bool f64) {
  const std::string T = f64 ? "double" : "float";
  auto lit = [&](float v) {
    return f64 ? fmt::format("(double)__uint_as_float({:#x}u)", std::bit_cast<uint32_t>(v))
               : fmt::format("__uint_as_float({:#x}u)", std::bit_cast<uint32_t>(v));
  };
  const std::string fn_tanh = f64 ? "tanh" : "tanhf", fn_exp = f64 ? "exp" : "expf",
                    fn_log1p = f64 ? "log1p" : "log1pf", fn_abs = f64 ? "fabs" : "fabsf";
  const std::string a = lit(alpha), b = lit(beta);
  const std::string act = lower(act_in);
  std::string e;
  if (act == "relu") e = fmt::format("x > ({0})0 ? x : ({0})0", T);
  else if (act == "tanh") e = fmt::format("{}(x)", fn_tanh);
  else if (act == "sigmoid") e = fmt::format("({0})1 / (({0})1 + {1}(-x))", T, fn_exp);
  else if (act == "affine") e = fmt::format("{} * x + {}", a, b);
  else if (act == "leakyrelu") e = fmt::format("x >= ({})0 ? x : {} * x", T, a);
  else if (act == "thresholdedrelu") e = fmt::format("x > {} ? x : ({})0", a, T);
  else if (act == "scaledtanh") e = fmt::format("{} * {}({} * x)", a, fn_tanh, b);
  else if (act == "hardsigmoid")
    return fmt::format(
        "__device__ __forceinline__ {0} {1}({0} x) {{\n  const {0} y = {2} * x + {3};\n"
        "  const {0} m = ({0})0 < y ? y : ({0})0;\n  return m < ({0})1 ? m : ({0})1;\n}}\n",
        T, name, a, b);
  else if (act == "elu") e = fmt::format("x >= ({0})0 ? x : {1} * ({2}(x) - ({0})1)", T, a, fn_exp);
  else if (act == "softsign") e = fmt::format("x / (({})1 + {}(x))", T, fn_abs);
  else if (act == "softplus") e = fmt::format("x > ({0})30 ? x : {1}({2}(x))", T, fn_log1p, fn_exp);
  else unsupported("codegen: recurrent op: activation '{}' is not supported", act_in);
  return fmt::format("__device__ __forceinline__ {0} {1}({0} x) {{ return {2}; }}\n", T, name, e);
}

}  // namespace

RnnKernel emit_rnn_op(const std::string& op, const AttrMap& attrs, const std::vector<TensorType>& operands,
                      const std::vector<bool>& present, const std::vector<TensorType>& results) {
  const int kind = op == "rnn" ? 0 : op == "gru" ? 1 : op == "lstm" ? 2 : -1;
  if (kind < 0) fail("codegen: '{}' is not rnn, gru or lstm", op);
  const int G = kind == 0 ? 1 : kind == 1 ? 3 : 4, NA = kind == 0 ? 1 : kind == 1 ? 2 : 3;
  if (operands.size() < 3 || present.size() != operands.size() || !present[0] || !present[1] || !present[2])
    fail("codegen: {}: X, W and R are required", op);
  if (results.empty() || results.size() > static_cast<size_t>(kind == 2 ? 3 : 2))
    fail("codegen: {}: {} results", op, results.size());
  auto has = [&](size_t i) { return i < operands.size() && present[i]; };
  const TensorType& X = operands[0];
  const DType dt = X.dtype;
  if (!is_float(dt) || X.shape.size() != 3) fail("codegen: {}: X {} must be a 3-D float tensor", op, X.str());
  const int64_t H = attrs.require_int("hidden_size");
  const std::string dir = attrs.get_string("direction", "forward");
  const int D = dir == "bidirectional" ? 2 : (dir == "forward" || dir == "reverse") ? 1 : 0;
  if (!D) fail("codegen: {}: direction '{}'", op, dir);
  const bool layout1 = attrs.get_int("layout", 0) == 1;
  const int64_t S = layout1 ? X.shape[1] : X.shape[0], B = layout1 ? X.shape[0] : X.shape[1], I = X.shape[2];
  const bool has_clip = attrs.has("clip");
  const float clip = attrs.get_float("clip", 0);
  const bool input_forget = attrs.get_int("input_forget", 0) != 0;
  const bool lbr = attrs.get_int("linear_before_reset", 0) != 0;
  if (operands[1].shape != Shape{D, G * H, I} || operands[2].shape != Shape{D, G * H, H})
    fail("codegen: {}: W {} / R {} do not match the attributes", op, operands[1].str(), operands[2].str());

  // Activations: the listed ones (the adapter fills in every direction's and
  // the positional alphas/betas) or the defaults.
  std::vector<std::string> names;
  if (attrs.has("activations")) {
    names = attrs.get_strings("activations");
  } else {
    const char* defs[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    for (int d = 0; d < D; ++d)
      for (int i = 0; i < NA; ++i) names.push_back(defs[kind][i]);
  }
  if (static_cast<int>(names.size()) != NA * D)
    fail("codegen: {}: {} activations, expected {}", op, names.size(), NA * D);
  std::vector<float> alphas = attrs.get_floats("activation_alpha"), betas = attrs.get_floats("activation_beta");
  const bool f64 = dt == DType::F64;
  const std::string T = f64 ? "double" : "float";
  std::string helpers;
  for (size_t a = 0; a < names.size(); ++a) {
    const ActDefault* def = nullptr;
    for (const ActDefault& x : kActs)
      if (lower(names[a]) == x.name) def = &x;
    if (!def) unsupported("codegen: {}: activation '{}' is not supported", op, names[a]);
    const float al = a < alphas.size() ? alphas[a] : def->alpha, be = a < betas.size() ? betas[a] : def->beta;
    helpers += activation_fn(fmt::format("@NAME@_f{}", a), names[a], al, be, f64);
  }
  const std::string clip_lit = f64 ? fmt::format("(double)__uint_as_float({:#x}u)", std::bit_cast<uint32_t>(clip))
                                   : fmt::format("__uint_as_float({:#x}u)", std::bit_cast<uint32_t>(clip));
  // std::clamp(v, -clip, clip) spelled out (NaN passes through).
  if (has_clip)
    helpers += fmt::format(
        "__device__ __forceinline__ {0} @NAME@_cl({0} v) {{ const {0} c = {1}; "
        "return v < -c ? -c : (c < v ? c : v); }}\n",
        T, clip_lit);
  else helpers += fmt::format("__device__ __forceinline__ {0} @NAME@_cl({0} v) {{ return v; }}\n", T);

  const size_t es = f64 ? 8 : 4;
  const size_t smem = es * static_cast<size_t>(2 * H + (kind == 2 ? H : 0) + (kind == 1 && !lbr ? H : 0));
  if (smem > kSharedLimit)
    unsupported("codegen: {}: hidden size {} needs {} bytes of shared memory (limit {})", op, H, smem, kSharedLimit);

  RnnKernel k;
  const char* res_names[] = {"Y", "Y_h", "Y_c"};
  for (size_t r = 0; r < results.size(); ++r) {
    if (results[r].dtype != dt) fail("codegen: {}: result {} is {}", op, r, results[r].str());
    k.params.push_back({dt, true, res_names[r]});
  }
  const char* in_names[] = {"X", "W", "R", "Bias", "seq_lens", "init_h", "init_c", "P"};
  for (size_t i = 0; i < operands.size(); ++i) {
    const DType pd = has(i) ? operands[i].dtype : (i == 4 ? DType::I32 : dt);
    if (has(i) && i != 4 && pd != dt)
      fail("codegen: {}: operand {} is {} but X is {}", op, i, dtype_name(pd), dtype_name(dt));
    if (i == 4 && has(i) && pd != DType::I32) fail("codegen: {}: sequence_lens must be i32", op);
    k.params.push_back({pd, false, in_names[std::min<size_t>(i, 7)]});
  }
  const int64_t GH = G * H;
  // The one decision (codegen/launch_fit.h): the loops over H stride by nt.
  const int nt = static_cast<int>(
      block_threads(static_cast<unsigned>(std::min<int64_t>(256, std::max<int64_t>(32, (H + 31) / 32 * 32)))));
  k.block = static_cast<unsigned>(nt);
  k.grid = static_cast<unsigned>(D * B);

  auto ld = [&](const std::string& e) { return fmt::format("({}){}", T, cuda_load(dt, e)); };
  auto st = [&](const std::string& v) { return cuda_store(dt, f64 ? v : fmt::format("(float)({})", v)); };
  // State / Y offsets (layout 0: Y [S,D,B,H], states [D,B,H]; layout 1: Y [B,S,D,H], states [B,D,H]).
  const std::string state_off =
      layout1 ? fmt::format("((long long)b * {} + d) * {}", D, H) : fmt::format("((long long)d * {} + b) * {}", B, H);
  auto y_off = [&](const std::string& time) {
    return layout1 ? fmt::format("(((long long)b * {} + {}) * {} + d) * {}", S, time, D, H)
                   : fmt::format("(((long long){} * {} + d) * {} + b) * {}", time, D, B, H);
  };
  const std::string x_off = layout1 ? fmt::format("((long long)b * {} + time) * {}", S, I)
                                    : fmt::format("((long long)time * {} + b) * {}", B, I);

  std::string b;
  b += fmt::format("// {}: X {} hidden {} direction {} layout {}{}{}{}\n", op, X.str(), H, dir, layout1 ? 1 : 0,
                   has_clip ? fmt::format(" clip {}", clip) : "", input_forget ? " input_forget" : "",
                   lbr ? " linear_before_reset" : "");
  b += helpers;
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(k.params));
  b += fmt::format("  __shared__ {} hs[{}];\n", T, 2 * H);
  if (kind == 2) b += fmt::format("  __shared__ {} cs[{}];\n", T, H);
  if (kind == 1 && !lbr) b += fmt::format("  __shared__ {} rhs[{}];\n", T, H);
  b += fmt::format("  const int d = blockIdx.x / {}, b = blockIdx.x % {};\n", B, B);
  b += fmt::format("  const bool reverse = {};\n", dir == "reverse"         ? "true"
                                                   : dir == "bidirectional" ? "d == 1"
                                                                            : "false");
  if (has(4)) b += fmt::format("  int len = seq_lens[b];\n  len = len < 0 ? 0 : (len > {0} ? {0} : len);\n", S);
  else b += fmt::format("  const int len = {};\n", S);
  b += fmt::format("  const long long so = {};\n", state_off);
  b += fmt::format("  for (int j = threadIdx.x; j < {}; j += {}) {{\n", H, nt);
  b += fmt::format("    hs[j] = {};\n", has(5) ? ld("init_h[so + j]") : "(" + T + ")0");
  if (kind == 2) b += fmt::format("    cs[j] = {};\n", has(6) ? ld("init_c[so + j]") : "(" + T + ")0");
  b += "  }\n";
  // Zeros for the steps past this entry's length.
  b += fmt::format("  for (int time = len; time < {}; ++time)\n", S);
  b += fmt::format("    for (int j = threadIdx.x; j < {}; j += {}) Y[{} + j] = {};\n", H, nt, y_off("time"),
                   st("(" + T + ")0"));
  b += "  int cur = 0;\n";
  b += "  for (int t = 0; t < len; ++t) {\n";
  b += "    __syncthreads();  // hs[cur] complete\n";
  b += "    const int time = reverse ? len - 1 - t : t;\n";
  b += fmt::format("    const long long xo = {};\n", x_off);
  b += fmt::format("    const {} * hc = hs + cur * {};\n", T, H);
  b += fmt::format("    {} * hn = hs + (1 - cur) * {};\n", T, H);
  // xw(g, j): x_t . W[d, g*H + j] + biases; hr(g, j): h . R[d, g*H + j].
  const std::string wbase = fmt::format("(long long)d * {}", GH * I), rbase = fmt::format("(long long)d * {}", GH * H),
                    bbase = fmt::format("(long long)d * {}", 2 * GH);
  auto xw = [&](int g, bool with_rb, const std::string& var) {
    std::string s = fmt::format("      {} {} = 0;\n", T, var);
    s += fmt::format("      for (int i = 0; i < {}; ++i) {} += {} * {};\n", I, var, ld("X[xo + i]"),
                     ld(fmt::format("W[{} + ({}LL + j) * {} + i]", wbase, g * H, I)));
    if (has(3)) {
      if (with_rb)
        s += fmt::format("      {} += {} + {};\n", var, ld(fmt::format("Bias[{} + {} + j]", bbase, g * H)),
                         ld(fmt::format("Bias[{} + {} + j]", bbase, GH + g * H)));
      else s += fmt::format("      {} += {} + ({})0;\n", var, ld(fmt::format("Bias[{} + {} + j]", bbase, g * H)), T);
    }
    return s;
  };
  auto hr = [&](int g, const std::string& vec, const std::string& var) {
    std::string s = fmt::format("      {} {} = 0;\n", T, var);
    s += fmt::format("      for (int k = 0; k < {}; ++k) {} += {}[k] * {};\n", H, var, vec,
                     ld(fmt::format("R[{} + ({}LL + j) * {} + k]", rbase, g * H, H)));
    return s;
  };
  auto rb = [&](int g) { return has(3) ? ld(fmt::format("Bias[{} + {} + j]", bbase, GH + g * H)) : "(" + T + ")0"; };
  auto pp = [&](int g) {
    return has(7) ? ld(fmt::format("P[(long long)d * {} + {} + j]", 3 * H, g * H)) : "(" + T + ")0";
  };
  const std::string cl = "@NAME@_cl";
  // Activation a of this direction: @NAME@_f<d*NA + a>; d is a runtime value
  // in a bidirectional node, so pick with a conditional.
  auto act = [&](int a, const std::string& x) {
    if (D == 1) return fmt::format("@NAME@_f{}({})", a, x);
    return fmt::format("(d == 0 ? @NAME@_f{}({}) : @NAME@_f{}({}))", a, x, NA + a, x);
  };
  if (kind == 0) {
    b += fmt::format("    for (int j = threadIdx.x; j < {}; j += {}) {{\n", H, nt);
    b += xw(0, true, "xg") + hr(0, "hc", "hg");
    b += fmt::format("      const {} v = {};\n", T, act(0, cl + "(xg + hg)"));
    b += "      hn[j] = v;\n";
    b += fmt::format("      Y[{} + j] = {};\n    }}\n", y_off("time"), st("v"));
  } else if (kind == 1) {
    if (!lbr) {
      // r first: r * h must be complete before the candidate reads it.
      b += fmt::format("    for (int j = threadIdx.x; j < {}; j += {}) {{\n", H, nt);
      b += xw(1, true, "xr") + hr(1, "hc", "hgr");
      b += fmt::format("      rhs[j] = {} * hc[j];\n    }}\n", act(0, cl + "(xr + hgr)"));
      b += "    __syncthreads();\n";
    }
    b += fmt::format("    for (int j = threadIdx.x; j < {}; j += {}) {{\n", H, nt);
    b += xw(0, true, "xz") + hr(0, "hc", "hgz");
    b += fmt::format("      const {} z = {};\n", T, act(0, cl + "(xz + hgz)"));
    b += xw(2, false, "xh");
    if (lbr) {
      b += xw(1, true, "xr") + hr(1, "hc", "hgr");
      b += fmt::format("      const {} r = {};\n", T, act(0, cl + "(xr + hgr)"));
      b += hr(2, "hc", "hgh");
      b += fmt::format("      const {} pre = xh + r * (hgh + {});\n", T, rb(2));
    } else {
      b += hr(2, "rhs", "hgh");
      b += fmt::format("      const {} pre = xh + hgh + {};\n", T, rb(2));
    }
    b += fmt::format("      const {} cand = {};\n", T, act(1, cl + "(pre)"));
    b += fmt::format("      const {0} v = (({0})1 - z) * cand + z * hc[j];\n", T);
    b += "      hn[j] = v;\n";
    b += fmt::format("      Y[{} + j] = {};\n    }}\n", y_off("time"), st("v"));
  } else {
    // Gates i, o, f, c (ONNX order); peepholes P = [p_i, p_o, p_f].
    b += fmt::format("    for (int j = threadIdx.x; j < {}; j += {}) {{\n", H, nt);
    b += fmt::format("      const {} c = cs[j];\n", T);
    b += xw(0, true, "xi") + hr(0, "hc", "hgi");
    b += fmt::format("      const {} ig = {};\n", T, act(0, cl + "(xi + hgi + " + pp(0) + " * c)"));
    if (input_forget) {
      b += fmt::format("      const {0} fg = ({0})1 - ig;\n", T);
    } else {
      b += xw(2, true, "xf") + hr(2, "hc", "hgf");
      b += fmt::format("      const {} fg = {};\n", T, act(0, cl + "(xf + hgf + " + pp(2) + " * c)"));
    }
    b += xw(3, true, "xc") + hr(3, "hc", "hgc");
    b += fmt::format("      const {} cand = {};\n", T, act(1, cl + "(xc + hgc)"));
    b += fmt::format("      const {} cn = fg * c + ig * cand;\n", T);
    b += xw(1, true, "xo_") + hr(1, "hc", "hgo");
    b += fmt::format("      const {} og = {};\n", T, act(0, cl + "(xo_ + hgo + " + pp(1) + " * cn)"));
    b += "      cs[j] = cn;\n";
    b += fmt::format("      const {} v = og * {};\n", T, act(2, "cn"));
    b += "      hn[j] = v;\n";
    b += fmt::format("      Y[{} + j] = {};\n    }}\n", y_off("time"), st("v"));
  }
  b += "    cur = 1 - cur;\n  }\n";
  b += "  __syncthreads();\n";
  if (results.size() > 1 || kind == 2) {
    b += fmt::format("  for (int j = threadIdx.x; j < {}; j += {}) {{\n", H, nt);
    if (results.size() > 1) b += fmt::format("    Y_h[so + j] = {};\n", st(fmt::format("hs[cur * {} + j]", H)));
    if (results.size() > 2) b += fmt::format("    Y_c[so + j] = {};\n", st("cs[j]"));
    b += "  }\n";
  }
  b += "}\n";
  b += kernel_sim_entry(k.params);
  std::vector<DType> dts;
  for (const KernelParam& p : k.params) dts.push_back(p.dtype);
  if (S * B * H == 0 && results.size() == 1) k.grid = 0;
  if (B == 0 || H == 0) k.grid = 0;
  k.source = finish_kernel_source("kiln_rnn", op, b, dts, k.name);
  return k;
}

}  // namespace kiln::codegen
