// Signal processing: window functions, dft, stft, mel_weight_matrix.
// Everything computes in double and converts at the end. The DFT is the
// direct O(n * length) sum with a twiddle table (exact index k*n mod length),
// which is plenty for the sizes these ops see.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ops/misc_internal.h"
#include "ops/op_helpers.h"

namespace kiln::ops {

namespace {

DType attr_dtype(InferContext& c, DType dflt) {
  if (!c.attrs().has("dtype")) return dflt;
  std::string n = c.attrs().get_string("dtype", "");
  auto d = dtype_from_name(n);
  if (!d) c.fail("dtype '{}' is not a kiln dtype", n);
  return *d;
}

// hann_window / hamming_window / blackman_window {size, periodic, dtype}
enum class Window { Hann, Hamming, Blackman };

OpDef window_op(const char* name, Window w, const char* doc) {
  OpDef d;
  d.name = name;
  d.min_inputs = d.max_inputs = 0;
  d.attrs = {{"size", AttrKind::Int, true}, {"periodic", AttrKind::Int}, {"dtype", AttrKind::String}};
  d.infer = [](InferContext& c) {
    int64_t size = c.attrs().require_int("size");
    if (size < 0) c.fail("window size must be >= 0, got {}", size);
    DType t = attr_dtype(c, DType::F32);
    if (t == DType::Bool) c.unsupported("window of dtype bool");
    return std::vector<TensorType>{TensorType(t, {size})};
  };
  d.reference = [w](KernelContext& ctx) {
    int64_t size = ctx.attrs.require_int("size");
    bool periodic = ctx.attrs.get_int("periodic", 1) != 0;
    double n1 = periodic ? double(size) : double(size - 1);
    const double pi = std::numbers::pi;
    std::vector<double> v(size);
    for (int64_t n = 0; n < size; ++n) {
      double x = double(n) / n1;  // size 1 symmetric: 0/0, NaN like the ONNX reference
      switch (w) {
        case Window::Hann:
          v[n] = std::pow(std::sin(pi * x), 2);
          break;
        case Window::Hamming:
          v[n] = 25.0 / 46.0 - (1 - 25.0 / 46.0) * std::cos(2 * pi * x);
          break;
        case Window::Blackman:
          v[n] = 0.42 - 0.5 * std::cos(2 * pi * x) + 0.08 * std::cos(4 * pi * x);
          break;
      }
    }
    store_all(ctx.out(), v);
  };
  d.doc = doc;
  return d;
}

// One complex DFT of `in` (n points, zero-padded/truncated to `len`) into
// `out` (bins points), both interleaved re/im, sign -1 forward, +1 inverse.
struct Dft {
  int64_t len;
  std::vector<double> c, s;  // cos/sin(2 pi m / len)
  explicit Dft(int64_t l) : len(l), c(l), s(l) {
    for (int64_t m = 0; m < l; ++m) {
      double a = 2 * std::numbers::pi * double(m) / double(l);
      c[m] = std::cos(a);
      s[m] = std::sin(a);
    }
  }
  // x: n complex values; out: bins complex values.
  void run(const double* x, int64_t n, double* out, int64_t bins, bool inverse) const {
    int64_t used = std::min(n, len);
    double sign = inverse ? 1.0 : -1.0;
    for (int64_t k = 0; k < bins; ++k) {
      double re = 0, im = 0;
      int64_t idx = 0;  // k * j mod len
      for (int64_t j = 0; j < used; ++j) {
        double xr = x[2 * j], xi = x[2 * j + 1];
        double wr = c[idx], wi = sign * s[idx];
        re += xr * wr - xi * wi;
        im += xr * wi + xi * wr;
        idx += k;
        if (idx >= len) idx %= len;
      }
      if (inverse) {
        re /= double(len);
        im /= double(len);
      }
      out[2 * k] = re;
      out[2 * k + 1] = im;
    }
  }
  // The inverse of a one-sided spectrum (numpy's irfft): x holds n complex
  // values, of which the first len / 2 + 1 are used (zeros past n); the
  // others are their conjugates (X[len - k] = conj(X[k])), and the imaginary
  // parts of X[0] and, for an even len, X[len / 2] are ignored, so the result
  // is real: out[t] for t < len.
  void run_c2r(const double* x, int64_t n, double* out) const {
    const int64_t half = len / 2, used = std::min(n, half + 1);
    for (int64_t t = 0; t < len; ++t) {
      double acc = used > 0 ? x[0] : 0.0;
      int64_t idx = 0;  // k * t mod len
      for (int64_t k = 1; k < used; ++k) {
        idx += t;
        if (idx >= len) idx %= len;
        if (2 * k == len) acc += x[2 * k] * c[idx];  // Nyquist: no mirror, its imaginary part unused
        else acc += 2.0 * (x[2 * k] * c[idx] - x[2 * k + 1] * s[idx]);
      }
      out[t] = acc / double(len);
    }
  }
};

// ONNX's default dft_length: the axis' size, or 2 (n - 1) for an inverse of a
// one-sided spectrum (numpy's irfft default).
int64_t dft_default_length(int64_t n, bool inverse, bool onesided) { return inverse && onesided ? 2 * (n - 1) : n; }

// dft(x) {axis, length, inverse, onesided}: x is [..., 1|2]; result [..., 2],
// or [..., 1] (real) for inverse + onesided.
OpDef dft_op() {
  OpDef d;
  d.name = "dft";
  d.attrs = {{"axis", AttrKind::Int, true},
             {"length", AttrKind::Int},
             {"inverse", AttrKind::Int},
             {"onesided", AttrKind::Int}};
  d.infer = [](InferContext& c) {
    require_float(c, 0);
    const Shape& s = c.shape(0);
    int r = c.rank(0);
    if (r < 2 || (s.back() != 1 && s.back() != 2))
      c.fail("dft input must be [..., 1] (real) or [..., 2] (complex), got [{}]", fmt::join(s, ","));
    int64_t axis = c.attrs().require_int("axis");
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r - 1) c.fail("dft axis {} is out of range for rank {}", c.attrs().require_int("axis"), r);
    bool inverse = c.attrs().get_int("inverse", 0) != 0, onesided = c.attrs().get_int("onesided", 0) != 0;
    int64_t len = c.attrs().get_int("length", dft_default_length(s[axis], inverse, onesided));
    if (len < 1) c.fail("dft length must be >= 1, got {}", len);
    Shape o = s;
    // inverse + onesided is numpy's irfft: a one-sided spectrum in, len real values out.
    o[axis] = onesided && !inverse ? len / 2 + 1 : len;
    o.back() = inverse && onesided ? 1 : 2;
    return std::vector<TensorType>{TensorType(c.dtype(0), o)};
  };
  d.reference = [](KernelContext& ctx) {
    const Tensor& x = ctx.in(0);
    const Shape& s = x.shape();
    int r = x.rank();
    int64_t axis = ctx.attrs.require_int("axis");
    if (axis < 0) axis += r;
    bool inverse = ctx.attrs.get_int("inverse", 0) != 0, onesided = ctx.attrs.get_int("onesided", 0) != 0;
    int64_t n = s[axis], len = ctx.attrs.get_int("length", dft_default_length(n, inverse, onesided));
    const bool c2r = inverse && onesided;
    int64_t bins = onesided && !inverse ? len / 2 + 1 : len, comp = s.back(), out_comp = c2r ? 1 : 2;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= s[i];
    for (int i = int(axis) + 1; i < r - 1; ++i) inner *= s[i];
    std::vector<double> v = load_all<double>(x), out(outer * bins * inner * out_comp);
    Dft dft(len);
    std::vector<double> line(2 * n), res(2 * bins);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const double* p = v.data() + ((o * n + j) * inner + i) * comp;
          line[2 * j] = p[0];
          line[2 * j + 1] = comp == 2 ? p[1] : 0.0;
        }
        if (c2r) {
          dft.run_c2r(line.data(), n, res.data());
          for (int64_t t = 0; t < bins; ++t) out[(o * bins + t) * inner + i] = res[t];
          continue;
        }
        dft.run(line.data(), n, res.data(), bins, inverse);
        for (int64_t k = 0; k < bins; ++k) {
          double* q = out.data() + ((o * bins + k) * inner + i) * 2;
          q[0] = res[2 * k];
          q[1] = res[2 * k + 1];
        }
      }
    store_all(ctx.out(), out);
  };
  d.doc =
      "discrete Fourier transform along axis (zero-padded/truncated to length); complex result [..., 2]; inverse with "
      "onesided=1 takes a one-sided spectrum and gives the real signal [..., 1] (numpy's irfft)";
  return d;
}

// stft(signal, window?) {frame_step, frame_length, onesided}:
// signal [batch, n, 1|2] -> [batch, frames, bins, 2].
OpDef stft_op() {
  OpDef d;
  d.name = "stft";
  d.min_inputs = 1;
  d.max_inputs = 2;
  d.attrs = {{"frame_step", AttrKind::Int, true}, {"frame_length", AttrKind::Int, true}, {"onesided", AttrKind::Int}};
  d.infer = [](InferContext& c) {
    require_float(c, 0);
    const Shape& s = c.shape(0);
    if (s.size() != 3 || (s[2] != 1 && s[2] != 2))
      c.fail("stft signal must be [batch, length, 1|2], got [{}]", fmt::join(s, ","));
    int64_t step = c.attrs().require_int("frame_step"), len = c.attrs().require_int("frame_length");
    if (step < 1) c.fail("frame_step must be >= 1, got {}", step);
    if (len < 1 || len > s[1]) c.fail("frame_length {} must be in [1, {}]", len, s[1]);
    if (c.has_input(1)) {
      if (c.dtype(1) != c.dtype(0))
        c.fail("window is {} but signal is {}", dtype_name(c.dtype(1)), dtype_name(c.dtype(0)));
      if (c.shape(1) != Shape{len}) c.fail("window has shape [{}]; expected [{}]", fmt::join(c.shape(1), ","), len);
    }
    bool onesided = c.attrs().get_int("onesided", 1) != 0;
    int64_t frames = (s[1] - len) / step + 1;
    return std::vector<TensorType>{TensorType(c.dtype(0), {s[0], frames, onesided ? len / 2 + 1 : len, 2})};
  };
  d.reference = [](KernelContext& ctx) {
    const Tensor& x = ctx.in(0);
    int64_t batch = x.shape()[0], n = x.shape()[1], comp = x.shape()[2];
    int64_t step = ctx.attrs.require_int("frame_step"), len = ctx.attrs.require_int("frame_length");
    bool onesided = ctx.attrs.get_int("onesided", 1) != 0;
    int64_t frames = (n - len) / step + 1, bins = onesided ? len / 2 + 1 : len;
    std::vector<double> v = load_all<double>(x);
    std::vector<double> win = ctx.has(1) ? load_all<double>(ctx.in(1)) : std::vector<double>(len, 1.0);
    std::vector<double> out(batch * frames * bins * 2), frame(2 * len);
    Dft dft(len);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t f = 0; f < frames; ++f) {
        for (int64_t j = 0; j < len; ++j) {
          const double* p = v.data() + (b * n + f * step + j) * comp;
          frame[2 * j] = p[0] * win[j];
          frame[2 * j + 1] = comp == 2 ? p[1] * win[j] : 0.0;
        }
        dft.run(frame.data(), len, out.data() + (b * frames + f) * bins * 2, bins, false);
      }
    store_all(ctx.out(), out);
  };
  d.doc = "short-time Fourier transform: windowed DFT of frames frame_step apart";
  return d;
}

// mel_weight_matrix {num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
// upper_edge_hertz, dtype}: [dft_length/2 + 1, num_mel_bins], the ONNX
// reference's triangular filters.
OpDef mel_weight_matrix_op() {
  OpDef d;
  d.name = "mel_weight_matrix";
  d.min_inputs = d.max_inputs = 0;
  d.attrs = {{"num_mel_bins", AttrKind::Int, true},       {"dft_length", AttrKind::Int, true},
             {"sample_rate", AttrKind::Int, true},        {"lower_edge_hertz", AttrKind::Float, true},
             {"upper_edge_hertz", AttrKind::Float, true}, {"dtype", AttrKind::String}};
  d.infer = [](InferContext& c) {
    const AttrMap& a = c.attrs();
    int64_t bins = a.require_int("num_mel_bins"), len = a.require_int("dft_length"),
            rate = a.require_int("sample_rate");
    float lo = a.get_float("lower_edge_hertz", 0), hi = a.get_float("upper_edge_hertz", 0);
    if (bins < 1 || len < 1 || rate < 1) c.fail("num_mel_bins, dft_length and sample_rate must be >= 1");
    if (!(lo >= 0 && lo < hi))
      c.fail("edges must satisfy 0 <= lower_edge_hertz < upper_edge_hertz (got {}, {})", lo, hi);
    DType t = attr_dtype(c, DType::F32);
    if (t == DType::Bool) c.unsupported("mel_weight_matrix of dtype bool");
    return std::vector<TensorType>{TensorType(t, {len / 2 + 1, bins})};
  };
  d.reference = [](KernelContext& ctx) {
    const AttrMap& a = ctx.attrs;
    int64_t bins = a.require_int("num_mel_bins"), len = a.require_int("dft_length"),
            rate = a.require_int("sample_rate");
    double lo = a.get_float("lower_edge_hertz", 0), hi = a.get_float("upper_edge_hertz", 0);
    int64_t spec = len / 2 + 1;
    double lo_mel = 2595 * std::log1p(lo / 700) / std::log(10.0), hi_mel = 2595 * std::log1p(hi / 700) / std::log(10.0);
    double step = (hi_mel - lo_mel) / double(bins + 2);
    std::vector<int64_t> fb(bins + 2);
    for (int64_t i = 0; i < bins + 2; ++i) {
      double hz = 700 * std::expm1((double(i) * step + lo_mel) / 2595 * std::log(10.0));
      fb[i] = static_cast<int64_t>(std::floor(double(len + 1) * hz / double(rate)));
      if (fb[i] < 0 || fb[i] >= spec)
        fail("{}: mel filter edge {} falls outside the {} spectrum bins", ctx.label, fb[i], spec);
    }
    std::vector<double> out(spec * bins, 0.0);
    for (int64_t i = 0; i < bins; ++i) {
      int64_t l = fb[i], c = fb[i + 1], h = fb[i + 2];
      if (c == l) out[c * bins + i] = 1;
      else
        for (int64_t j = l; j <= c; ++j) out[j * bins + i] = double(j - l) / double(c - l);
      if (h > c)
        for (int64_t j = c; j < h; ++j) out[j * bins + i] = double(h - j) / double(h - c);
    }
    store_all(ctx.out(), out);
  };
  d.doc = "triangular mel filter bank [dft_length/2+1, num_mel_bins]";
  return d;
}

}  // namespace

void register_signal_ops(OpRegistry& r) {
  r.add(window_op("hann_window", Window::Hann, "Hann window sin^2(pi n / N) (N = size, or size-1 when not periodic)"));
  r.add(window_op("hamming_window", Window::Hamming, "Hamming window 25/46 - 21/46 cos(2 pi n / N)"));
  r.add(
      window_op("blackman_window", Window::Blackman, "Blackman window 0.42 - 0.5 cos(2 pi n/N) + 0.08 cos(4 pi n/N)"));
  r.add(dft_op());
  r.add(stft_op());
  r.add(mel_weight_matrix_op());
}

}  // namespace kiln::ops
