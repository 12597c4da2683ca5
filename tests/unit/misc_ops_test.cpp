// Recurrent, signal and selection ops (RNN/GRU/LSTM, DFT, STFT, windows,
// NMS): shape errors and properties the conformance tests do not reach,
// numerics by hand or against naive loops.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/shape_utils.h"
#include "linalg_ops_test_util.h"
#include "ops/registry.h"

namespace kiln {
namespace {

using namespace kiln::testing::linalg_ops;

AttrMap rnn_attrs(int64_t hidden, const std::string& dir) {
  AttrMap a;
  a.set("hidden_size", hidden);
  a.set("direction", dir);
  return a;
}

// Running with sequence_lens L gives the same as running on the first L
// steps; later Y rows are zero; Y_h is the last valid step (forward) or step 0 (reverse).
TEST(MiscOps, RecurrentSequenceLens) {
  int64_t S = 4, B = 2, I = 3, H = 2;
  for (std::string op : {"rnn", "gru", "lstm"}) {
    int64_t G = op == "rnn" ? 1 : op == "gru" ? 3 : 4;
    Tensor x = random_tensor(DType::F32, {S, B, I}, 40, -1, 1);
    Tensor w = random_tensor(DType::F32, {2, G * H, I}, 41, -1, 1);
    Tensor r = random_tensor(DType::F32, {2, G * H, H}, 42, -1, 1);
    Tensor bias = random_tensor(DType::F32, {2, 2 * G * H}, 43, -1, 1);
    Tensor lens = Tensor::from<int>(DType::I32, {B}, {4, 2});
    std::vector<Tensor> full = run(op, {x, w, r, bias, lens}, rnn_attrs(H, "bidirectional"), 2);
    ASSERT_EQ(full[0].shape(), (Shape{S, 2, B, H}));
    // Batch entry 1 alone, truncated to 2 steps.
    Tensor x1(DType::F32, {2, 1, I});
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t i = 0; i < I; ++i) x1.set_double(s * I + i, x.get_double((s * B + 1) * I + i));
    std::vector<Tensor> part = run(op, {x1, w, r, bias}, rnn_attrs(H, "bidirectional"), 2);
    for (int64_t s = 0; s < S; ++s)
      for (int64_t d = 0; d < 2; ++d)
        for (int64_t h = 0; h < H; ++h) {
          double got = full[0].get_double(((s * 2 + d) * B + 1) * H + h);
          double want = s < 2 ? part[0].get_double((s * 2 + d) * H + h) : 0.0;
          EXPECT_NEAR(got, want, 1e-6) << op << " s=" << s << " d=" << d;
        }
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t h = 0; h < H; ++h) {
        EXPECT_NEAR(full[1].get_double((d * B + 1) * H + h), part[1].get_double(d * H + h), 1e-6) << op;
        int64_t step = d == 0 ? 1 : 0;
        EXPECT_NEAR(part[1].get_double(d * H + h), part[0].get_double((step * 2 + d) * H + h), 1e-7) << op;
      }
  }
}

TEST(MiscOps, RecurrentShapeErrors) {
  TensorType x(DType::F32, {4, 2, 3}), w(DType::F32, {1, 8, 3}), r(DType::F32, {1, 8, 2});
  EXPECT_NE(infer_error("lstm", {x, w, r}, rnn_attrs(3, "forward")).find("W (operand 1)"), std::string::npos);
  EXPECT_NE(infer_error("rnn", {x, TensorType(DType::F32, {1, 2, 3}), TensorType(DType::F32, {1, 2, 2})},
                        rnn_attrs(2, "sideways"))
                .find("direction"),
            std::string::npos);
  AttrMap bad = rnn_attrs(2, "forward");
  bad.set("activations", std::vector<std::string>{"Sigmoid", "Tanh"});
  EXPECT_NE(infer_error("lstm", {x, TensorType(DType::F32, {1, 8, 3}), TensorType(DType::F32, {1, 8, 2})}, bad)
                .find("expected 3"),
            std::string::npos);
}

TEST(MiscOps, DftRoundTripsAndDelta) {
  Tensor x = random_tensor(DType::F64, {2, 7, 2}, 50);
  AttrMap f;
  f.set("axis", int64_t(1));
  Tensor X = run("dft", {x}, f)[0];
  AttrMap inv = f;
  inv.set("inverse", int64_t(1));
  Tensor back = run("dft", {X}, inv)[0];
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(back.get_double(i), x.get_double(i), 1e-12);
  // A real delta transforms to all ones; onesided keeps n/2 + 1 bins; length zero-pads.
  Tensor delta = Tensor::from<float>(DType::F32, {1, 4, 1}, {1, 0, 0, 0});
  AttrMap o = f;
  o.set("onesided", int64_t(1));
  o.set("length", int64_t(8));
  Tensor d = run("dft", {delta}, o)[0];
  ASSERT_EQ(d.shape(), (Shape{1, 5, 2}));
  for (int k = 0; k < 5; ++k) {
    EXPECT_NEAR(d.get_double(2 * k), 1.0, 1e-6);
    EXPECT_NEAR(d.get_double(2 * k + 1), 0.0, 1e-6);
  }
}

TEST(MiscOps, DftInverseOfOneSidedSpectrumIsIrfft) {
  // A real signal of even (8) and odd (7) length: its one-sided spectrum
  // (len/2 + 1 bins) through inverse + onesided gives the signal back, real
  // ([..., 1]); the default length is 2 (bins - 1), the even one.
  for (int64_t len : {8, 7}) {
    Tensor x = random_tensor(DType::F64, {3, len, 1}, 60 + len);
    AttrMap f;
    f.set("axis", int64_t(1));
    f.set("onesided", int64_t(1));
    Tensor X = run("dft", {x}, f)[0];
    ASSERT_EQ(X.shape(), (Shape{3, len / 2 + 1, 2}));
    AttrMap inv = f;
    inv.set("inverse", int64_t(1));
    if (len % 2) inv.set("length", len);
    Tensor back = run("dft", {X}, inv)[0];
    ASSERT_EQ(back.shape(), (Shape{3, len, 1})) << len;
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(back.get_double(i), x.get_double(i), 1e-12) << len << " " << i;
  }
  // The imaginary parts of the DC and Nyquist bins are ignored (a real
  // signal's are zero): bins [1+5i, 0, 2+7i] of length 4 give
  // (1 + 2 (-1)^t) / 4 ... with DC 1 and Nyquist 2: t=0: 3/4, t=1: -1/4.
  Tensor spec = Tensor::from<double>(DType::F32, {3, 2}, {1, 5, 0, 0, 2, 7});
  AttrMap a;
  a.set("axis", int64_t(0));
  a.set("inverse", int64_t(1));
  a.set("onesided", int64_t(1));
  Tensor y = run("dft", {spec}, a)[0];
  ASSERT_EQ(y.shape(), (Shape{4, 1}));
  const double want[] = {0.75, -0.25, 0.75, -0.25};
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(y.get_double(t), want[t], 1e-7) << t;
}

TEST(MiscOps, NmsNeedsKnownInputs) {
  AttrMap a;
  a.set("max_output_boxes_per_class", int64_t(3));
  std::string e =
      infer_error("non_max_suppression", {TensorType(DType::F32, {1, 4, 4}), TensorType(DType::F32, {1, 1, 4})}, a);
  EXPECT_NE(e.find("must be known at compile time"), std::string::npos) << e;
}

TEST(MiscOps, WindowsByHand) {
  auto win = [](const std::string& op, int64_t n, int64_t periodic) {
    AttrMap a;
    a.set("size", n);
    a.set("periodic", periodic);
    return run(op, {}, a)[0];
  };
  expect_near(win("hann_window", 4, 1), {0, 0.5, 1, 0.5}, 1e-7);
  expect_near(win("hann_window", 5, 0), {0, 0.5, 1, 0.5, 0}, 1e-7);
  expect_near(win("hamming_window", 2, 1), {4.0 / 46, 1.0}, 1e-7);
  expect_near(win("blackman_window", 3, 0), {0, 1, 0}, 1e-7);
  AttrMap d;
  d.set("size", int64_t(3));
  d.set("dtype", std::string("f64"));
  EXPECT_EQ(run("hann_window", {}, d)[0].dtype(), DType::F64);
}

TEST(MiscOps, StftIsDftOfWindowedFrames) {
  Tensor sig = random_tensor(DType::F32, {1, 10, 1}, 70);
  Tensor win = Tensor::from<float>(DType::F32, {4}, {0.5f, 1.0f, 1.0f, 0.5f});
  AttrMap a;
  a.set("frame_step", int64_t(3));
  a.set("frame_length", int64_t(4));
  Tensor s = run("stft", {sig, win}, a)[0];
  ASSERT_EQ(s.shape(), (Shape{1, 3, 3, 2}));
  for (int64_t f = 0; f < 3; ++f) {
    Tensor frame(DType::F32, {1, 4, 1});
    for (int j = 0; j < 4; ++j) frame.set_double(j, sig.get_double(f * 3 + j) * win.get_double(j));
    AttrMap da;
    da.set("axis", int64_t(1));
    da.set("onesided", int64_t(1));
    Tensor d = run("dft", {frame}, da)[0];
    for (int64_t k = 0; k < 6; ++k) EXPECT_NEAR(s.get_double(f * 6 + k), d.get_double(k), 1e-6);
  }
}

TEST(MiscOps, NmsSelectsByScoreAndIou) {
  // Boxes 0 and 1 overlap with IoU 0.81 (> 0.5); box 2 is apart. Scores 0.9, 0.95, 0.3.
  Tensor boxes = Tensor::from<float>(DType::F32, {1, 3, 4}, {0, 0, 10, 10, 1, 1, 10, 10, 20, 20, 30, 30});
  Tensor scores = Tensor::from<float>(DType::F32, {1, 1, 3}, {0.9f, 0.95f, 0.3f});
  AttrMap a;
  a.set("max_output_boxes_per_class", int64_t(10));
  a.set("iou_threshold", 0.5f);
  Tensor y = run("non_max_suppression", {boxes, scores}, a)[0];
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  std::vector<int64_t> want = {0, 0, 1, 0, 0, 2};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.get_int(i), want[i]);
  a.set("score_threshold", 0.5f);
  EXPECT_EQ(run("non_max_suppression", {boxes, scores}, a)[0].shape(), (Shape{1, 3}));
  a.set("iou_threshold", 0.9f);
  EXPECT_EQ(run("non_max_suppression", {boxes, scores}, a)[0].shape(), (Shape{2, 3}));
  // Center-point form of the same boxes selects the same.
  Tensor cb = Tensor::from<float>(DType::F32, {1, 3, 4}, {5, 5, 10, 10, 5.5, 5.5, 9, 9, 25, 25, 10, 10});
  AttrMap c;
  c.set("max_output_boxes_per_class", int64_t(10));
  c.set("iou_threshold", 0.5f);
  c.set("center_point_box", int64_t(1));
  Tensor yc = run("non_max_suppression", {cb, scores}, c)[0];
  ASSERT_EQ(yc.shape(), (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(yc.get_int(i), want[i]);
}

// One LSTM step with H = I = 1 written out: peepholes, clip and input_forget.
TEST(MiscOps, LstmStepByHand) {
  double x = 3, h0 = 0.5, c0 = -0.25;
  double w[4] = {0.5, -1, 2, 1}, r[4] = {1, 0.5, -0.5, 2}, wb[4] = {0.1, 0.2, 0.3, 0.4}, rb[4] = {0, -0.1, 0.1, 0};
  double p[3] = {0.3, -0.2, 0.6};  // i, o, f
  for (int forget = 0; forget < 2; ++forget) {
    auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
    auto clip = [](double v) { return std::clamp(v, -1.0, 1.0); };
    auto pre = [&](int g) { return w[g] * x + r[g] * h0 + wb[g] + rb[g]; };
    double i = sig(clip(pre(0) + p[0] * c0));
    double f = forget ? 1 - i : sig(clip(pre(2) + p[2] * c0));
    double cand = std::tanh(clip(pre(3)));
    double c = f * c0 + i * cand;
    double o = sig(clip(pre(1) + p[1] * c));
    double h = o * std::tanh(c);
    AttrMap a = rnn_attrs(1, "forward");
    a.set("clip", 1.0f);
    a.set("input_forget", int64_t(forget));
    Tensor X = Tensor::from<double>(DType::F64, {1, 1, 1}, {x});
    Tensor W = Tensor::from<double>(DType::F64, {1, 4, 1}, {w[0], w[1], w[2], w[3]});
    Tensor R = Tensor::from<double>(DType::F64, {1, 4, 1}, {r[0], r[1], r[2], r[3]});
    Tensor B = Tensor::from<double>(DType::F64, {1, 8}, {wb[0], wb[1], wb[2], wb[3], rb[0], rb[1], rb[2], rb[3]});
    Tensor L = Tensor::from<int>(DType::I32, {1}, {1});
    Tensor H0 = Tensor::from<double>(DType::F64, {1, 1, 1}, {h0}),
           C0 = Tensor::from<double>(DType::F64, {1, 1, 1}, {c0});
    Tensor P = Tensor::from<double>(DType::F64, {1, 3}, {p[0], p[1], p[2]});
    std::vector<Tensor> y = run("lstm", {X, W, R, B, L, H0, C0, P}, a, 3);
    EXPECT_NEAR(y[0].get_double(0), h, 1e-12) << forget;
    EXPECT_NEAR(y[1].get_double(0), h, 1e-12) << forget;
    EXPECT_NEAR(y[2].get_double(0), c, 1e-12) << forget;
  }
}

// layout = 1 is layout = 0 with batch and sequence (and state batch/direction) swapped.
TEST(MiscOps, RecurrentLayoutOneIsATranspose) {
  int64_t S = 3, B = 2, I = 2, H = 3;
  Tensor x = random_tensor(DType::F32, {S, B, I}, 80, -1, 1), h0 = random_tensor(DType::F32, {2, B, H}, 81, -1, 1);
  Tensor w = random_tensor(DType::F32, {2, 3 * H, I}, 82, -1, 1),
         r = random_tensor(DType::F32, {2, 3 * H, H}, 83, -1, 1);
  Tensor xt(DType::F32, {B, S, I}), h0t(DType::F32, {B, 2, H});
  for (int64_t s = 0; s < S; ++s)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < I; ++i) xt.set_double((b * S + s) * I + i, x.get_double((s * B + b) * I + i));
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) h0t.set_double((b * 2 + d) * H + h, h0.get_double((d * B + b) * H + h));
  AttrMap a = rnn_attrs(H, "bidirectional");
  a.set("linear_before_reset", int64_t(1));
  std::vector<Tensor> y0 = run("gru", {x, w, r, Tensor(), Tensor(), h0}, a, 2);
  a.set("layout", int64_t(1));
  std::vector<Tensor> y1 = run("gru", {xt, w, r, Tensor(), Tensor(), h0t}, a, 2);
  ASSERT_EQ(y1[0].shape(), (Shape{B, S, 2, H}));
  ASSERT_EQ(y1[1].shape(), (Shape{B, 2, H}));
  for (int64_t s = 0; s < S; ++s)
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          EXPECT_EQ(y1[0].get_double(((b * S + s) * 2 + d) * H + h), y0[0].get_double(((s * 2 + d) * B + b) * H + h));
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        EXPECT_EQ(y1[1].get_double((b * 2 + d) * H + h), y0[1].get_double((d * B + b) * H + h));
}

}  // namespace
}  // namespace kiln
