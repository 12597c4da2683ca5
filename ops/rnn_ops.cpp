// Recurrent ops: rnn, gru, lstm (ONNX semantics, opset 7-14 forms).
//
// Operands as in ONNX: X, W, R, B?, sequence_lens?, initial_h?, initial_c?
// (lstm), P? (lstm). Attributes: hidden_size, direction, layout, clip,
// activations with activation_alpha/activation_beta, input_forget (lstm),
// linear_before_reset (gru). In kiln, `activations` lists every activation of
// every direction (rnn 1, gru 2, lstm 3 per direction), and activation_alpha /
// activation_beta, when present, hold one value per listed activation
// (positional; the ONNX adapter fills in the defaults). Absent activations
// mean the ONNX defaults.
//
// The input projection X W^T of all steps is one GEMM per direction; each step
// then does one GEMM of the hidden state with R^T for the whole batch. Rows
// past a batch entry's sequence length produce zeros in Y and leave its state
// unchanged; a reverse direction runs each entry's valid steps backwards.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "ops/linalg_internal.h"
#include "ops/misc_internal.h"
#include "ops/op_helpers.h"

namespace kiln::ops {

namespace {

enum class RnnKind { Rnn, Gru, Lstm };

int gates_of(RnnKind k) { return k == RnnKind::Rnn ? 1 : k == RnnKind::Gru ? 3 : 4; }
int acts_of(RnnKind k) { return k == RnnKind::Rnn ? 1 : k == RnnKind::Gru ? 2 : 3; }

enum class Act {
  Relu,
  Tanh,
  Sigmoid,
  Affine,
  LeakyRelu,
  ThresholdedRelu,
  ScaledTanh,
  HardSigmoid,
  Elu,
  Softsign,
  Softplus
};

struct ActInfo {
  const char* name;
  Act act;
  int params;         // how many of alpha, beta it takes (0, 1: alpha, 2: both)
  float alpha, beta;  // defaults
};
constexpr ActInfo kActs[] = {
    {"Relu", Act::Relu, 0, 0, 0},
    {"Tanh", Act::Tanh, 0, 0, 0},
    {"Sigmoid", Act::Sigmoid, 0, 0, 0},
    {"Affine", Act::Affine, 2, 1.0f, 0.0f},
    {"LeakyRelu", Act::LeakyRelu, 1, 0.01f, 0},
    {"ThresholdedRelu", Act::ThresholdedRelu, 1, 1.0f, 0},
    {"ScaledTanh", Act::ScaledTanh, 2, 1.0f, 1.0f},
    {"HardSigmoid", Act::HardSigmoid, 2, 0.2f, 0.5f},
    {"Elu", Act::Elu, 1, 1.0f, 0},
    {"Softsign", Act::Softsign, 0, 0, 0},
    {"Softplus", Act::Softplus, 0, 0, 0},
};

const ActInfo* find_act(const std::string& name) {
  std::string lower;
  for (char ch : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const ActInfo& a : kActs) {
    std::string n;
    for (const char* p = a.name; *p; ++p) n += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
    if (n == lower) return &a;
  }
  return nullptr;
}

struct Activation {
  Act act;
  float alpha, beta;
  template <typename T>
  T operator()(T x) const {
    switch (act) {
      case Act::Relu:
        return x > T(0) ? x : T(0);
      case Act::Tanh:
        return std::tanh(x);
      case Act::Sigmoid:
        return T(1) / (T(1) + std::exp(-x));
      case Act::Affine:
        return T(alpha) * x + T(beta);
      case Act::LeakyRelu:
        return x >= T(0) ? x : T(alpha) * x;
      case Act::ThresholdedRelu:
        return x > T(alpha) ? x : T(0);
      case Act::ScaledTanh:
        return T(alpha) * std::tanh(T(beta) * x);
      case Act::HardSigmoid:
        return std::min(T(1), std::max(T(0), T(alpha) * x + T(beta)));
      case Act::Elu:
        return x >= T(0) ? x : T(alpha) * (std::exp(x) - T(1));
      case Act::Softsign:
        return x / (T(1) + std::fabs(x));
      case Act::Softplus:
        return x > T(30) ? x : std::log1p(std::exp(x));
    }
    return x;
  }
};

const char* const kDefaultActs[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};

int num_directions(const std::string& dir) {
  if (dir == "forward" || dir == "reverse") return 1;
  if (dir == "bidirectional") return 2;
  return 0;
}

// The activations of every direction, from the kiln attributes (positional
// alphas/betas). Throws kiln::Error with a plain message.
std::vector<Activation> activations(const AttrMap& a, RnnKind kind, int dirs) {
  int n = acts_of(kind) * dirs;
  std::vector<std::string> names;
  if (a.has("activations")) names = a.get_strings("activations");
  else
    for (int d = 0; d < dirs; ++d)
      for (int i = 0; i < acts_of(kind); ++i) names.push_back(kDefaultActs[int(kind)][i]);
  if (static_cast<int>(names.size()) != n)
    fail("activations lists {} functions; expected {} ({} per direction)", names.size(), n, acts_of(kind));
  std::vector<float> alphas = a.get_floats("activation_alpha"), betas = a.get_floats("activation_beta");
  if ((a.has("activation_alpha") && alphas.size() != names.size()) ||
      (a.has("activation_beta") && betas.size() != names.size()))
    fail("activation_alpha/activation_beta need one value per activation ({})", names.size());
  std::vector<Activation> r;
  for (size_t i = 0; i < names.size(); ++i) {
    const ActInfo* info = find_act(names[i]);
    if (!info) unsupported("activation '{}' is not supported", names[i]);
    r.push_back({info->act, alphas.empty() ? info->alpha : alphas[i], betas.empty() ? info->beta : betas[i]});
  }
  return r;
}

std::vector<AttrSpec> rnn_attrs(RnnKind kind) {
  std::vector<AttrSpec> s = {{"hidden_size", AttrKind::Int, true},
                             {"direction", AttrKind::String},
                             {"layout", AttrKind::Int},
                             {"clip", AttrKind::Float},
                             {"activations", AttrKind::Strings},
                             {"activation_alpha", AttrKind::Floats},
                             {"activation_beta", AttrKind::Floats}};
  if (kind == RnnKind::Lstm) s.push_back({"input_forget", AttrKind::Int});
  if (kind == RnnKind::Gru) s.push_back({"linear_before_reset", AttrKind::Int});
  return s;
}

struct RnnDims {
  int64_t S, B, I, H;
  int D;
  bool layout1;
};

std::vector<TensorType> rnn_infer(InferContext& c, RnnKind kind) {
  const AttrMap& a = c.attrs();
  require_float(c, 0);
  for (int i : {1, 2, 3, 5, 6, 7})
    if (c.has_input(i) && c.dtype(i) != c.dtype(0))
      c.fail("operand {} is {} but X is {}", i, dtype_name(c.dtype(i)), dtype_name(c.dtype(0)));
  int64_t H = a.require_int("hidden_size");
  if (H < 1) c.fail("hidden_size must be >= 1, got {}", H);
  std::string dir = a.get_string("direction", "forward");
  int D = num_directions(dir);
  if (!D) c.fail("direction '{}' is not forward, reverse or bidirectional", dir);
  int64_t layout = a.get_int("layout", 0);
  if (layout != 0 && layout != 1) c.fail("layout must be 0 or 1, got {}", layout);
  if (a.has("clip") && !(a.get_float("clip", 0) > 0)) c.fail("clip must be positive");
  if (kind == RnnKind::Lstm && (a.get_int("input_forget", 0) & ~int64_t(1))) c.fail("input_forget must be 0 or 1");
  if (kind == RnnKind::Gru && (a.get_int("linear_before_reset", 0) & ~int64_t(1)))
    c.fail("linear_before_reset must be 0 or 1");
  try {
    activations(a, kind, D);
  } catch (const Unsupported& e) {
    c.unsupported("{}", e.what());
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  if (c.rank(0) != 3) c.fail("X must be 3-D, got rank {}", c.rank(0));
  int64_t S = layout ? c.shape(0)[1] : c.shape(0)[0], B = layout ? c.shape(0)[0] : c.shape(0)[1], I = c.shape(0)[2];
  int64_t G = gates_of(kind);
  auto expect = [&](int i, Shape want, const char* what) {
    if (c.has_input(i) && c.shape(i) != want)
      c.fail("{} (operand {}) has shape [{}]; expected [{}]", what, i, fmt::join(c.shape(i), ","),
             fmt::join(want, ","));
  };
  expect(1, {D, G * H, I}, "W");
  expect(2, {D, G * H, H}, "R");
  expect(3, {D, 2 * G * H}, "B");
  if (c.has_input(4)) {
    if (c.dtype(4) != DType::I32) c.fail("sequence_lens must be i32, got {}", dtype_name(c.dtype(4)));
    expect(4, {B}, "sequence_lens");
  }
  Shape state = layout ? Shape{B, D, H} : Shape{D, B, H};
  expect(5, state, "initial_h");
  if (kind == RnnKind::Lstm) {
    expect(6, state, "initial_c");
    expect(7, {D, 3 * H}, "P");
  } else if (c.num_inputs() > 6) {
    c.fail("{} takes at most 6 operands", c.op());
  }
  DType t = c.dtype(0);
  std::vector<TensorType> r{TensorType(t, layout ? Shape{B, S, D, H} : Shape{S, D, B, H}), TensorType(t, state)};
  if (kind == RnnKind::Lstm) r.push_back(TensorType(t, state));
  return r;
}

inline void gemm_t(bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                   float beta, float* C, int64_t ldc) {
  linalg::gemm_f32(false, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
inline void gemm_t(bool tb, int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B, int64_t ldb,
                   double beta, double* C, int64_t ldc) {
  linalg::gemm_f64(false, tb, M, N, K, 1.0, A, lda, B, ldb, beta, C, ldc);
}

template <typename T>
void rnn_run(KernelContext& ctx, RnnKind kind) {
  const AttrMap& a = ctx.attrs;
  const Tensor& xt = ctx.in(0);
  bool layout1 = a.get_int("layout", 0) == 1;
  std::string dir = a.get_string("direction", "forward");
  int D = num_directions(dir);
  int64_t H = a.require_int("hidden_size");
  int64_t S = layout1 ? xt.shape()[1] : xt.shape()[0], B = layout1 ? xt.shape()[0] : xt.shape()[1], I = xt.shape()[2];
  int64_t G = gates_of(kind), GH = G * H;
  std::vector<Activation> acts = activations(a, kind, D);
  bool has_clip = a.has("clip");
  T clip = T(a.get_float("clip", 0));
  bool input_forget = a.get_int("input_forget", 0) != 0;
  bool lbr = a.get_int("linear_before_reset", 0) != 0;

  // X as [S, B, I].
  std::vector<T> xin = load_all<T>(xt), X(S * B * I);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(xin.begin() + (layout1 ? (b * S + s) : (s * B + b)) * I, I, X.begin() + (s * B + b) * I);
  std::vector<T> W = load_all<T>(ctx.in(1)), R = load_all<T>(ctx.in(2));
  std::vector<T> Bv = ctx.has(3) ? load_all<T>(ctx.in(3)) : std::vector<T>(D * 2 * GH, T(0));
  std::vector<int64_t> lens(B, S);
  if (ctx.has(4)) {
    lens = load_all<int64_t>(ctx.in(4));
    for (int64_t l : lens)
      if (l < 0 || l > S) fail("{}: sequence_lens value {} is outside [0, {}]", ctx.label, l, S);
  }
  // States in [D, B, H] order.
  auto load_state = [&](int i) {
    std::vector<T> r(D * B * H, T(0));
    if (!ctx.has(i)) return r;
    std::vector<T> v = load_all<T>(ctx.in(i));
    for (int d = 0; d < D; ++d)
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(v.begin() + (layout1 ? (b * D + d) : (d * B + b)) * H, H, r.begin() + (d * B + b) * H);
    return r;
  };
  std::vector<T> h0 = load_state(5), c0 = kind == RnnKind::Lstm ? load_state(6) : std::vector<T>();
  std::vector<T> P = kind == RnnKind::Lstm && ctx.has(7) ? load_all<T>(ctx.in(7)) : std::vector<T>(D * 3 * H, T(0));

  std::vector<T> Y(S * D * B * H, T(0)), Yh(D * B * H), Yc(D * B * H);
  std::vector<T> xw(S * B * GH), hr(B * GH), h(B * H), cst(B * H), hn(B * H), rh(B * H), rhr(B * H);
  auto cl = [&](T v) { return has_clip ? std::clamp(v, -clip, clip) : v; };
  for (int d = 0; d < D; ++d) {
    bool reverse = dir == "reverse" || d == 1;
    const T* Wd = W.data() + d * GH * I;
    const T* Rd = R.data() + d * GH * H;
    const T* wb = Bv.data() + d * 2 * GH;
    const T* rb = wb + GH;
    const T* pd = P.data() + d * 3 * H;
    const Activation* f = &acts[d * acts_of(kind)];
    // xw[s, b, :] = X[s, b] W^T + Wb (+ Rb, except GRU's hidden gate with linear_before_reset)
    gemm_t(true, S * B, GH, I, X.data(), I, Wd, I, T(0), xw.data(), GH);
    for (int64_t r = 0; r < S * B; ++r)
      for (int64_t j = 0; j < GH; ++j) {
        bool rb_later = kind == RnnKind::Gru && j >= 2 * H;  // GRU hidden gate adds Rbh with the recurrence
        xw[r * GH + j] += wb[j] + (rb_later ? T(0) : rb[j]);
      }
    std::copy_n(h0.begin() + d * B * H, B * H, h.begin());
    if (kind == RnnKind::Lstm) std::copy_n(c0.begin() + d * B * H, B * H, cst.begin());
    for (int64_t t = 0; t < S; ++t) {
      // hr = h R^T for every gate (GRU: z and r only; the hidden gate needs r first).
      int64_t ng = kind == RnnKind::Gru ? 2 * H : GH;
      gemm_t(true, B, ng, H, h.data(), H, Rd, H, T(0), hr.data(), GH);
      if (kind == RnnKind::Gru && lbr) gemm_t(true, B, H, H, h.data(), H, Rd + 2 * H * H, H, T(0), rhr.data(), H);
      std::vector<bool> active(B);
      for (int64_t b = 0; b < B; ++b) active[b] = t < lens[b];
      if (kind == RnnKind::Gru) {
        // r first, then (r * h) R_h^T (default) for the candidate.
        for (int64_t b = 0; b < B; ++b) {
          if (!active[b]) continue;
          int64_t time = reverse ? lens[b] - 1 - t : t;
          const T* x = xw.data() + (time * B + b) * GH;
          for (int64_t j = 0; j < H; ++j) rh[b * H + j] = f[0](cl(x[H + j] + hr[b * GH + H + j]));
        }
        if (!lbr) {
          std::vector<T> rhv(B * H);
          for (int64_t i = 0; i < B * H; ++i) rhv[i] = rh[i] * h[i];
          gemm_t(true, B, H, H, rhv.data(), H, Rd + 2 * H * H, H, T(0), rhr.data(), H);
        }
      }
      for (int64_t b = 0; b < B; ++b) {
        if (!active[b]) continue;
        int64_t time = reverse ? lens[b] - 1 - t : t;
        const T* x = xw.data() + (time * B + b) * GH;
        const T* g = hr.data() + b * GH;
        T* hb = h.data() + b * H;
        T* out = hn.data() + b * H;
        if (kind == RnnKind::Rnn) {
          for (int64_t j = 0; j < H; ++j) out[j] = f[0](cl(x[j] + g[j]));
        } else if (kind == RnnKind::Gru) {
          for (int64_t j = 0; j < H; ++j) {
            T z = f[0](cl(x[j] + g[j]));
            T r = rh[b * H + j];
            T pre = lbr ? x[2 * H + j] + r * (rhr[b * H + j] + rb[2 * H + j])
                        : x[2 * H + j] + rhr[b * H + j] + rb[2 * H + j];
            T cand = f[1](cl(pre));
            out[j] = (T(1) - z) * cand + z * hb[j];
          }
        } else {
          T* cb = cst.data() + b * H;
          for (int64_t j = 0; j < H; ++j) {
            T ig = f[0](cl(x[j] + g[j] + pd[j] * cb[j]));
            T fg = input_forget ? T(1) - ig : f[0](cl(x[2 * H + j] + g[2 * H + j] + pd[2 * H + j] * cb[j]));
            T cand = f[1](cl(x[3 * H + j] + g[3 * H + j]));
            T cn = fg * cb[j] + ig * cand;
            T og = f[0](cl(x[H + j] + g[H + j] + pd[H + j] * cn));
            cb[j] = cn;
            out[j] = og * f[2](cn);
          }
        }
        std::copy_n(out, H, hb);
        std::copy_n(out, H, Y.begin() + ((time * D + d) * B + b) * H);
      }
    }
    std::copy_n(h.begin(), B * H, Yh.begin() + d * B * H);
    if (kind == RnnKind::Lstm) std::copy_n(cst.begin(), B * H, Yc.begin() + d * B * H);
  }
  // Results in the requested layout.
  if (layout1) {
    std::vector<T> y(Y.size());
    for (int64_t s = 0; s < S; ++s)
      for (int d = 0; d < D; ++d)
        for (int64_t b = 0; b < B; ++b)
          std::copy_n(Y.begin() + ((s * D + d) * B + b) * H, H, y.begin() + ((b * S + s) * D + d) * H);
    Y.swap(y);
  }
  auto state_out = [&](const std::vector<T>& st) {
    if (!layout1) return st;
    std::vector<T> r(st.size());
    for (int d = 0; d < D; ++d)
      for (int64_t b = 0; b < B; ++b) std::copy_n(st.begin() + (d * B + b) * H, H, r.begin() + (b * D + d) * H);
    return r;
  };
  if (ctx.outputs.size() > 0) store_all(ctx.out(0), Y);
  if (ctx.outputs.size() > 1) store_all(ctx.out(1), state_out(Yh));
  if (ctx.outputs.size() > 2) store_all(ctx.out(2), state_out(Yc));
}

OpDef rnn_family_op(const char* name, RnnKind kind, const char* doc) {
  OpDef d;
  d.name = name;
  d.min_inputs = 3;
  d.max_inputs = kind == RnnKind::Lstm ? 8 : 6;
  d.min_outputs = 1;
  d.max_outputs = kind == RnnKind::Lstm ? 3 : 2;
  d.attrs = rnn_attrs(kind);
  // The sequence and batch dims are copied into the results (a tagger
  // exported with a dynamic batch and number of frames); the input and
  // hidden sizes must match the weights, so a symbolic one fails there.
  d.symbolic_dims = true;
  d.infer = [kind](InferContext& c) { return rnn_infer(c, kind); };
  d.reference = [kind](KernelContext& ctx) {
    if (ctx.in(0).dtype() == DType::F64) rnn_run<double>(ctx, kind);
    else rnn_run<float>(ctx, kind);
  };
  d.doc = doc;
  return d;
}

}  // namespace

void register_rnn_ops(OpRegistry& r) {
  r.add(rnn_family_op("rnn", RnnKind::Rnn, "Elman RNN over a sequence; results Y, Y_h"));
  r.add(rnn_family_op("gru", RnnKind::Gru, "GRU over a sequence (gates z, r, h); results Y, Y_h"));
  r.add(rnn_family_op("lstm", RnnKind::Lstm,
                      "LSTM over a sequence (gates i, o, f, c; peepholes P); results Y, Y_h, Y_c"));
}

// ONNX activation lists as kiln wants them: every direction's functions, and
// one alpha/beta per function (ONNX lists only those of functions that take them).
void normalize_rnn_activations(const std::string& op, int dirs, AttrMap& attrs) {
  RnnKind kind = op == "lstm" ? RnnKind::Lstm : op == "gru" ? RnnKind::Gru : RnnKind::Rnn;
  int per = acts_of(kind);
  std::vector<std::string> names;
  if (attrs.has("activations")) names = attrs.get_strings("activations");
  else
    for (int d = 0; d < dirs; ++d)
      for (int i = 0; i < per; ++i) names.push_back(kDefaultActs[int(kind)][i]);
  if (dirs == 2 && static_cast<int>(names.size()) == per) names.insert(names.end(), names.begin(), names.end());
  if (static_cast<int>(names.size()) != per * dirs)
    fail("activations lists {} functions; expected {} ({} per direction)", names.size(), per * dirs, per);
  std::vector<float> alphas = attrs.get_floats("activation_alpha"), betas = attrs.get_floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<float> pa, pb;
  for (std::string& n : names) {
    const ActInfo* info = find_act(n);
    if (!info) unsupported("activation '{}' is not supported", n);
    n = info->name;
    pa.push_back(info->params >= 1 && ai < alphas.size() ? alphas[ai++] : info->alpha);
    pb.push_back(info->params >= 2 && bi < betas.size() ? betas[bi++] : info->beta);
  }
  if (ai != alphas.size() || bi != betas.size())
    fail("activation_alpha/activation_beta have more values than the activations take");
  attrs.set("activations", names);
  attrs.set("activation_alpha", pa);
  attrs.set("activation_beta", pb);
}

}  // namespace kiln::ops
