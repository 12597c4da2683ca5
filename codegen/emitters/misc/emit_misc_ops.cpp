#include "codegen/emitters/misc/emit_misc_ops.h"

#include <algorithm>

#include <fmt/format.h>

#include "codegen/launch_fit.h"
#include "codegen/core/emit_expr.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

constexpr unsigned kWantedBlock = 256;

unsigned grid_for(int64_t n, int block) {
  return static_cast<unsigned>(std::min<int64_t>((n + block - 1) / block, 4096));
}

std::string dload(DType t, const std::string& e) { return fmt::format("(double){}", cuda_load(t, e)); }

std::string dstore(DType t, const std::string& v) {
  return cuda_store(t, t == DType::F64 ? v : fmt::format("(float)({})", v));
}

void finish(SimpleKernel& k, const std::string& label, std::string body) {
  body += kernel_sim_entry(k.params);
  std::vector<DType> dts;
  for (const KernelParam& p : k.params) dts.push_back(p.dtype);
  k.source = finish_kernel_source("kiln_misc", label, body, dts, k.name);
}

// The DFT sum over `used` points of the line read by `xr_at(j)` / `xi_at(j)`
// (expressions in j), bin `k`, into re / im.
std::string dft_sum(const std::string& used, int64_t len, bool inverse, const std::string& xr, const std::string& xi,
                    const std::string& indent) {
  std::string b;
  b += indent + "double re = 0.0, im = 0.0;\n";
  b += indent + "long long idx = 0;  // k * j mod len\n";
  b += fmt::format("{}for (long long j = 0; j < {}; ++j) {{\n", indent, used);
  b += fmt::format("{}  const double xr = {}, xi = {};\n", indent, xr, xi);
  b += fmt::format("{}  const double a = 2.0 * 3.141592653589793 * (double)idx / (double){}LL;\n", indent, len);
  b += fmt::format("{}  const double wr = cos(a), wi = {} * sin(a);\n", indent, inverse ? "1.0" : "-1.0");
  b += indent + "  re += xr * wr - xi * wi;\n";
  b += indent + "  im += xr * wi + xi * wr;\n";
  b += indent + "  idx += k;\n";
  b += fmt::format("{0}  if (idx >= {1}LL) idx %= {1}LL;\n", indent, len);
  b += indent + "}\n";
  if (inverse) b += fmt::format("{}re /= (double){}LL;\n{}im /= (double){}LL;\n", indent, len, indent, len);
  return b;
}

// inverse + onesided (numpy's irfft, ops/signal_ops.cpp Dft::run_c2r): one
// thread per real output value, summing the used half spectrum with each bin
// but the DC and Nyquist ones counted twice (its mirror conjugate).
SimpleKernel emit_irfft(const TensorType& x, const TensorType& out, int64_t axis, int64_t len) {
  const int kBlock = static_cast<int>(block_threads(kWantedBlock));  // the one decision (codegen/launch_fit.h)
  const Shape& s = x.shape;
  const int r = static_cast<int>(s.size());
  const int64_t n = s[axis], comp = s.back(), used = std::min(n, len / 2 + 1);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= s[i];
  for (int i = static_cast<int>(axis) + 1; i < r - 1; ++i) inner *= s[i];
  const int64_t total = outer * len * inner;
  if (out.numel() != total || out.shape.back() != 1)
    fail("codegen: dft: output {} does not hold {} real values", out.str(), total);
  SimpleKernel k;
  k.params = {{out.dtype, true, "out"}, {x.dtype, false, "x"}};
  k.block = kBlock;
  k.grid = total == 0 ? 0 : grid_for(total, kBlock);
  std::string b = fmt::format("// dft: {} axis {} length {} inverse onesided (real result)\n", x.str(), axis, len);
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(k.params));
  b += grid_stride_loop("e", total);
  b += fmt::format("    const long long i = e % {0}LL, row = e / {0}LL, t = row % {1}LL, o = row / {1}LL;\n", inner,
                   len);
  auto xr = [&](const std::string& j) {
    return dload(x.dtype, fmt::format("x[((o * {}LL + {}) * {}LL + i) * {}LL]", n, j, inner, comp));
  };
  auto xi = [&](const std::string& j) {
    return comp == 2 ? dload(x.dtype, fmt::format("x[((o * {}LL + {}) * {}LL + i) * {}LL + 1]", n, j, inner, comp))
                     : std::string("0.0");
  };
  b += fmt::format("    double acc = {};\n", used > 0 ? xr("0") : "0.0");
  b += "    long long idx = 0;  // k * t mod len\n";
  b += fmt::format("    for (long long j = 1; j < {}LL; ++j) {{\n", used);
  b += "      idx += t;\n";
  b += fmt::format("      if (idx >= {0}LL) idx %= {0}LL;\n", len);
  b += fmt::format("      const double a = 2.0 * 3.141592653589793 * (double)idx / (double){}LL;\n", len);
  b += "      const double wr = cos(a), wi = sin(a);\n";
  b += fmt::format("      const double xr = {}, xi = {};\n", xr("j"), xi("j"));
  b += fmt::format(
      "      acc += 2 * j == {}LL ? xr * wr : 2.0 * (xr * wr - xi * wi);  // Nyquist: no mirror, no imaginary part\n",
      len);
  b += "    }\n";
  b += fmt::format("    out[e] = {};\n  }}\n}}\n", dstore(out.dtype, fmt::format("acc / (double){}LL", len)));
  finish(k, "irfft", b);
  return k;
}

}  // namespace

SimpleKernel emit_dft(const AttrMap& attrs, const TensorType& x, const TensorType& out) {
  const int kBlock = static_cast<int>(block_threads(kWantedBlock));  // the one decision (codegen/launch_fit.h)
  const Shape& s = x.shape;
  const int r = static_cast<int>(s.size());
  if (!is_float(x.dtype) || r < 2 || (s.back() != 1 && s.back() != 2) || out.dtype != x.dtype)
    fail("codegen: dft: input {} / output {}", x.str(), out.str());
  int64_t axis = attrs.require_int("axis");
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r - 1) fail("codegen: dft: axis out of range");
  const bool inverse = attrs.get_int("inverse", 0) != 0, onesided = attrs.get_int("onesided", 0) != 0;
  const int64_t n = s[axis], len = attrs.get_int("length", inverse && onesided ? 2 * (n - 1) : n);
  if (len < 1) fail("codegen: dft: length {}", len);
  if (inverse && onesided) return emit_irfft(x, out, axis, len);
  const int64_t bins = onesided ? len / 2 + 1 : len, comp = s.back();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= s[i];
  for (int i = static_cast<int>(axis) + 1; i < r - 1; ++i) inner *= s[i];
  const int64_t total = outer * bins * inner;
  if (out.numel() != total * 2) fail("codegen: dft: output {} does not hold {} bins", out.str(), total);
  SimpleKernel k;
  k.params = {{out.dtype, true, "out"}, {x.dtype, false, "x"}};
  k.block = kBlock;
  k.grid = total == 0 ? 0 : grid_for(total, kBlock);
  std::string b = fmt::format("// dft: {} axis {} length {}{}{}\n", x.str(), axis, len, inverse ? " inverse" : "",
                              onesided ? " onesided" : "");
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(k.params));
  b += grid_stride_loop("e", total);
  b += fmt::format("    const long long i = e % {0}LL, row = e / {0}LL, k = row % {1}LL, o = row / {1}LL;\n", inner,
                   bins);
  const std::string p = fmt::format("((o * {}LL + j) * {}LL + i) * {}LL", n, inner, comp);
  b += dft_sum(fmt::format("{}LL", std::min(n, len)), len, inverse, dload(x.dtype, fmt::format("x[{}]", p)),
               comp == 2 ? dload(x.dtype, fmt::format("x[{} + 1]", p)) : "0.0", "    ");
  b += fmt::format("    out[2 * e] = {};\n    out[2 * e + 1] = {};\n  }}\n}}\n", dstore(out.dtype, "re"),
                   dstore(out.dtype, "im"));
  finish(k, "dft", b);
  return k;
}

SimpleKernel emit_stft(const AttrMap& attrs, const TensorType& x, bool has_window, const TensorType& window,
                       const TensorType& out, bool window_slot) {
  const int kBlock = static_cast<int>(block_threads(kWantedBlock));  // the one decision (codegen/launch_fit.h)
  const Shape& s = x.shape;
  if (!is_float(x.dtype) || s.size() != 3 || (s[2] != 1 && s[2] != 2) || out.dtype != x.dtype)
    fail("codegen: stft: signal {} / output {}", x.str(), out.str());
  const int64_t batch = s[0], n = s[1], comp = s[2];
  const int64_t step = attrs.require_int("frame_step"), len = attrs.require_int("frame_length");
  if (step < 1 || len < 1 || len > n) fail("codegen: stft: frame_step {} / frame_length {}", step, len);
  const bool onesided = attrs.get_int("onesided", 1) != 0;
  const int64_t frames = (n - len) / step + 1, bins = onesided ? len / 2 + 1 : len;
  const int64_t total = batch * frames * bins;
  if (out.numel() != total * 2) fail("codegen: stft: output {}", out.str());
  SimpleKernel k;
  k.params = {{out.dtype, true, "out"}, {x.dtype, false, "x"}};
  if (has_window || window_slot) k.params.push_back({has_window ? window.dtype : x.dtype, false, "win"});
  k.block = kBlock;
  k.grid = total == 0 ? 0 : grid_for(total, kBlock);
  std::string b = fmt::format("// stft: {} frame_step {} frame_length {}{}{}\n", x.str(), step, len,
                              onesided ? " onesided" : "", has_window ? " windowed" : "");
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(k.params));
  b += grid_stride_loop("e", total);
  b += fmt::format("    const long long k = e % {0}LL, row = e / {0}LL, f = row % {1}LL, bt = row / {1}LL;\n", bins,
                   frames);
  const std::string p = fmt::format("(bt * {}LL + f * {}LL + j) * {}LL", n, step, comp);
  const std::string w = has_window ? dload(window.dtype, "win[j]") : "1.0";
  b += dft_sum(fmt::format("{}LL", len), len, false, fmt::format("{} * {}", dload(x.dtype, fmt::format("x[{}]", p)), w),
               comp == 2 ? fmt::format("{} * {}", dload(x.dtype, fmt::format("x[{} + 1]", p)), w) : "0.0", "    ");
  b += fmt::format("    out[2 * e] = {};\n    out[2 * e + 1] = {};\n  }}\n}}\n", dstore(out.dtype, "re"),
                   dstore(out.dtype, "im"));
  finish(k, "stft", b);
  return k;
}

SimpleKernel emit_det(const TensorType& x, const TensorType& out) {
  const Shape& s = x.shape;
  if (!is_float(x.dtype) || s.size() < 2 || s[s.size() - 1] != s[s.size() - 2] || out.dtype != x.dtype)
    fail("codegen: det: input {} / output {}", x.str(), out.str());
  const int64_t n = s.back(), batch = out.numel();
  SimpleKernel k;
  k.params = {{out.dtype, true, "out"}, {x.dtype, false, "x"}, {DType::F64, true, "lu"}};
  k.scratch = {TensorType(DType::F64, {batch, n, n})};
  k.block = block_threads(128);  // the one decision (codegen/launch_fit.h)
  k.grid = batch == 0 ? 0 : grid_for(batch, static_cast<int>(k.block));
  const int64_t nn = n * n;
  auto M = [&](const std::string& i, const std::string& j) {
    return fmt::format("lu[base + ({}) * {}LL + ({})]", i, n, j);
  };
  std::string b = fmt::format("// det: {} (one thread per matrix, LU with partial pivoting in double)\n", x.str());
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(k.params));
  b += grid_stride_loop("m", batch);
  b += fmt::format("    const long long base = m * {}LL;\n", nn);
  b += fmt::format("    for (long long e = 0; e < {}LL; ++e) lu[base + e] = {};\n", nn, dload(x.dtype, "x[base + e]"));
  b += "    double det = 1.0;\n";
  b += fmt::format("    for (long long col = 0; col < {}LL && det != 0.0; ++col) {{\n", n);
  b += "      long long piv = col;\n";
  b += fmt::format("      for (long long i = col + 1; i < {}LL; ++i)\n", n);
  b += fmt::format("        if (fabs({}) > fabs({})) piv = i;\n", M("i", "col"), M("piv", "col"));
  b += fmt::format("      if ({} == 0.0) {{\n        det = 0.0;\n        break;\n      }}\n", M("piv", "col"));
  b += "      if (piv != col) {\n";
  b += fmt::format("        for (long long j = 0; j < {}LL; ++j) {{\n", n);
  b += fmt::format("          const double tmp = {};\n          {} = {};\n          {} = tmp;\n        }}\n",
                   M("piv", "j"), M("piv", "j"), M("col", "j"), M("col", "j"));
  b += "        det = -det;\n      }\n";
  b += fmt::format("      const double p = {};\n      det *= p;\n", M("col", "col"));
  b += fmt::format("      for (long long i = col + 1; i < {}LL; ++i) {{\n", n);
  b += fmt::format("        const double f = {} / p;\n        if (f == 0.0) continue;\n", M("i", "col"));
  b += fmt::format("        for (long long j = col + 1; j < {}LL; ++j) {} -= f * {};\n      }}\n    }}\n", n,
                   M("i", "j"), M("col", "j"));
  b += fmt::format("    out[m] = {};\n  }}\n}}\n", dstore(out.dtype, "det"));
  finish(k, "det", b);
  return k;
}

SimpleKernel emit_range(DType dtype, const TensorType& out, std::optional<int64_t> start_value,
                        std::optional<int64_t> delta_value) {
  const int kBlock = static_cast<int>(block_threads(kWantedBlock));  // the one decision (codegen/launch_fit.h)
  if (out.dtype != dtype || out.rank() != 1 || dtype == DType::Bool ||
      !(dtype == DType::F32 || dtype == DType::F64 || is_int(dtype)))
    unsupported("codegen: range: {} operands giving {} (f32, f64 and integers only)", dtype_name(dtype), out.str());
  if ((start_value || delta_value) && dtype != DType::I64)
    unsupported("codegen: range: a symbolic start or delta needs i64 operands, not {}", dtype_name(dtype));
  const int64_t n = out.shape[0];
  std::vector<Shape> shapes{out.shape};
  if (start_value) shapes.push_back(Shape{*start_value});
  if (delta_value) shapes.push_back(Shape{*delta_value});
  const KernelSymbols syms(shapes);
  const bool generic = !syms.empty();
  SimpleKernel k;
  k.params = {{dtype, true, "out"}, {dtype, false, "start"}, {dtype, false, "limit"}, {dtype, false, "delta"}};
  k.block = kBlock;
  std::string b = fmt::format("// range: {} = start + i * delta\n", out.str());
  if (!generic) {
    k.grid = n == 0 ? 0 : grid_for(n, kBlock);
    b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(k.params));
    b += grid_stride_loop("i", n);
  } else {
    // Shape-generic: the length (and a symbolic start or delta) from `ks`;
    // 64-bit indices; the grid follows the length up to grid_for's cap.
    b += KernelSymbols::struct_text();
    b += fmt::format("extern \"C\" __global__ void @NAME@({}, kiln_syms ks) {{\n", kernel_param_list(k.params));
    b += fmt::format("  const long long n = {};\n", syms.lit(n));
    b += "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
         "i += (long long)gridDim.x * blockDim.x) {\n";
    k.grid = 1;  // evaluated per shape (nonzero: a launch)
    k.symbols = syms.names();
    k.grid_expr = GridAxisExpr{n, kBlock, 4096};
  }
  const std::string start = start_value ? syms.lit(*start_value) : std::string("start[0]");
  const std::string delta = delta_value ? syms.lit(*delta_value) : std::string("delta[0]");
  if (is_float(dtype))
    b += fmt::format("    out[i] = {};\n",
                     dstore(dtype, dload(dtype, "start[0]") + " + (double)i * " + dload(dtype, "delta[0]")));
  else  // wrapping in 64 bits gives the right low bits for every integer type
    b += fmt::format("    out[i] = ({})((unsigned long long){} + (unsigned long long)i * (unsigned long long){});\n",
                     cuda_storage_type(dtype), start, delta);
  b += "  }\n}\n";
  b += kernel_sim_entry(k.params, generic);
  std::vector<DType> dts;
  for (const KernelParam& p : k.params) dts.push_back(p.dtype);
  k.source = finish_kernel_source("kiln_misc", "range", b, dts, k.name);
  return k;
}

std::vector<SimpleKernel> emit_dynamic_quantize_linear(const TensorType& x, const std::vector<TensorType>& results) {
  const int kBlock = static_cast<int>(block_threads(kWantedBlock));  // the one decision (codegen/launch_fit.h)
  if (x.dtype != DType::F32) unsupported("codegen: dynamic_quantize_linear: x is {} (f32 only)", dtype_name(x.dtype));
  const DType want[] = {DType::U8, DType::F32, DType::U8};
  const char* names[] = {"y", "y_scale", "y_zero_point"};
  if (results.empty() || results.size() > 3) fail("codegen: dynamic_quantize_linear: {} results", results.size());
  std::vector<KernelParam> params;
  for (size_t r = 0; r < results.size(); ++r) {
    if (results[r].dtype != want[r]) fail("codegen: dynamic_quantize_linear: result {} is {}", r, results[r].str());
    params.push_back({want[r], true, names[r]});
  }
  params.push_back({DType::F32, false, "x"});
  params.push_back({DType::F32, true, "sz"});  // scratch: scale, zero point
  const int64_t n = x.numel();
  // Partial min/max blocks: about 8 elements per thread, at most one block per
  // thread of the folding block.
  const int64_t parts = std::clamp<int64_t>((n + kBlock * 8 - 1) / (kBlock * 8), 1, kBlock);
  SimpleKernel part, mm, q;
  part.params = mm.params = q.params = params;
  part.scratch = {TensorType(DType::F32, {2 + 2 * parts})};  // scale, zero point, partial maxima, partial minima
  part.block = mm.block = kBlock;
  part.grid = static_cast<unsigned>(parts);
  mm.grid = 1;
  // The block's fold of (mx, mn) into thread 0's (mx, mn).
  std::string fold = fmt::format("  __shared__ float smx[{0}], smn[{0}];\n", kBlock);
  fold += "  smx[threadIdx.x] = mx;\n  smn[threadIdx.x] = mn;\n  __syncthreads();\n";
  fold += fmt::format("  for (int s = {}; s > 0; s >>= 1) {{\n", kBlock / 2);
  fold += "    if (threadIdx.x < s) {\n";
  fold +=
      "      const float a = smx[threadIdx.x], c = smx[threadIdx.x + s];\n      smx[threadIdx.x] = a < c ? c : a;\n";
  fold +=
      "      const float u = smn[threadIdx.x], w = smn[threadIdx.x + s];\n      smn[threadIdx.x] = w < u ? w : u;\n";
  fold += "    }\n    __syncthreads();\n  }\n";
  fold += "  if (threadIdx.x != 0) return;\n  mx = smx[0];\n  mn = smn[0];\n";
  std::string b = fmt::format("// dynamic_quantize_linear: partial min/max of {} ({} blocks)\n", x.str(), parts);
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(params));
  b += "  float mx = 0.0f, mn = 0.0f;  // std::max / std::min from 0, as the reference (NaN never taken)\n";
  b += grid_stride_loop("e", n);
  b += "    const float v = x[e];\n    mx = mx < v ? v : mx;\n    mn = v < mn ? v : mn;\n  }\n";
  b += fold;
  b += fmt::format("  sz[2 + blockIdx.x] = mx;\n  sz[{} + blockIdx.x] = mn;\n}}\n", 2 + parts);
  finish(part, "dql_partial", b);

  b = fmt::format("// dynamic_quantize_linear: scale and zero point of {} from {} partial min/max\n", x.str(), parts);
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(params));
  b += fmt::format(
      "  float mx = threadIdx.x < {0} ? sz[2 + threadIdx.x] : 0.0f, mn = threadIdx.x < {0} ? sz[{1} + "
      "threadIdx.x] : 0.0f;\n",
      parts, 2 + parts);
  b += fold;
  b += "  const float scale = (mx == mn ? 1.0f : (mx - mn)) / 255.0f;\n";
  b += "  float zc = 0.0f - mn / scale;\n  zc = zc < 0.0f ? 0.0f : (255.0f < zc ? 255.0f : zc);\n";
  b += "  float zp = rintf(zc);\n  if (zp != zp) zp = 0.0f;  // infinite inputs\n";
  b += "  sz[0] = scale;\n  sz[1] = zp;\n";
  if (results.size() > 1) b += "  y_scale[0] = scale;\n";
  if (results.size() > 2) b += "  y_zero_point[0] = (unsigned char)zp;\n";
  b += "}\n";
  finish(mm, "dql_scale", b);

  q.block = kBlock;
  q.grid = n == 0 ? 0 : grid_for(n, kBlock);
  b = fmt::format("// dynamic_quantize_linear: quantize {} with the scale and zero point of the first kernel\n",
                  x.str());
  b += fmt::format("extern \"C\" __global__ void @NAME@({}) {{\n", kernel_param_list(params));
  b += "  const float scale = sz[0], zp = sz[1];\n";
  b += grid_stride_loop("e", n);
  b += "    const float v = rintf(x[e] / scale) + zp;\n";
  b += "    y[e] = v != v ? (unsigned char)0 : (unsigned char)(v < 0.0f ? 0.0f : (255.0f < v ? 255.0f : v));\n";
  b += "  }\n}\n";
  finish(q, "dql_quantize", b);
  return {part, mm, q};
}

}  // namespace kiln::codegen
