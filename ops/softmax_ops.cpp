// softmax, log_softmax and hardmax along one axis (opset >= 13 semantics;
// the ONNX adapter turns the older flatten-to-2D form into reshape -> op ->
// reshape). Softmax is computed stably: exp(x - max) / sum(exp(x - max)).
#include "ops/reduction_internal.h"
#include "ops/reduction_spec.h"

namespace kiln::ops {

namespace {

enum class SoftmaxKind { Softmax, LogSoftmax };

// x viewed as [outer, n, inner]; the n elements of a line are `inner` apart.
// All `inner` lines of one outer index are processed together so every pass
// reads memory sequentially. T is float for f32/f16/bf16, double for f64;
// sums accumulate in double.
//
// On f16 data, softmax rounds exp(x - max), and the line's sum of them, to f16
// before dividing, as ONNX's reference does (numpy computes each f16 op in
// float and rounds its result; onnx 1.23's f16 attention tests are generated
// that way): f16 softmax gives ONNX's bits, not a more exact value 1-2 ulp
// away. Other dtypes keep one rounding at the end.
template <typename T>
void softmax_kernel(const T* v, T* r, const Shape& shape, int axis, SoftmaxKind kind, bool round_f16 = false) {
  auto rnd = [&](T x) { return round_f16 ? static_cast<T>(half_to_float(float_to_half(static_cast<float>(x)))) : x; };
  AxisGeometry g = axis_geometry(shape, axis);
  std::vector<T> mx(g.inner);
  std::vector<double> sum(g.inner);
  for (int64_t b = 0; b < g.outer; ++b) {
    const T* base = v + b * g.n * g.inner;
    T* rb = r + b * g.n * g.inner;
    std::fill(mx.begin(), mx.end(), -std::numeric_limits<T>::infinity());
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.inner; ++i) mx[i] = reduce_combine(ReduceCombiner::Max, mx[i], base[j * g.inner + i]);
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.inner; ++i) {
        T e = rnd(std::exp(rnd(base[j * g.inner + i] - mx[i])));
        rb[j * g.inner + i] = e;
        sum[i] += e;
      }
    if (kind == SoftmaxKind::Softmax && round_f16) {
      for (int64_t i = 0; i < g.inner; ++i) sum[i] = rnd(static_cast<T>(sum[i]));
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t i = 0; i < g.inner; ++i) rb[j * g.inner + i] = static_cast<T>(rb[j * g.inner + i] / sum[i]);
    } else if (kind == SoftmaxKind::Softmax) {
      for (int64_t i = 0; i < g.inner; ++i) sum[i] = 1.0 / sum[i];
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t i = 0; i < g.inner; ++i) rb[j * g.inner + i] = static_cast<T>(rb[j * g.inner + i] * sum[i]);
    } else {
      for (int64_t i = 0; i < g.inner; ++i) sum[i] = std::log(sum[i]);
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t i = 0; i < g.inner; ++i)
          rb[j * g.inner + i] = static_cast<T>(static_cast<double>(base[j * g.inner + i] - mx[i]) - sum[i]);
    }
  }
}

// 1 at the first maximum of each line (a NaN counts as the maximum, as in
// argmax), 0 elsewhere.
template <typename T>
void hardmax_kernel(const T* v, T* r, const Shape& shape, int axis) {
  AxisGeometry g = axis_geometry(shape, axis);
  std::fill(r, r + g.outer * g.n * g.inner, T(0));
  if (g.n == 0) return;
  std::vector<int64_t> best(g.inner);
  for (int64_t b = 0; b < g.outer; ++b) {
    const T* base = v + b * g.n * g.inner;
    std::fill(best.begin(), best.end(), 0);
    for (int64_t j = 1; j < g.n; ++j)
      for (int64_t i = 0; i < g.inner; ++i) {
        T cur = base[best[i] * g.inner + i], val = base[j * g.inner + i];
        bool better = std::isnan(val) ? !std::isnan(cur) : (!std::isnan(cur) && val > cur);
        if (better) best[i] = j;
      }
    for (int64_t i = 0; i < g.inner; ++i) r[(b * g.n + best[i]) * g.inner + i] = T(1);
  }
}

// Runs kernel(in, out) with T = float (f32, f16, bf16) or double (f64),
// in place on f32/f64 tensors and through float copies for f16/bf16.
template <typename K>
void run_float_kernel(const Tensor& x, Tensor& out, K&& kernel) {
  if (x.dtype() == DType::F64) return kernel(x.data<double>(), out.data<double>());
  if (x.dtype() == DType::F32) return kernel(x.data<float>(), out.data<float>());
  std::vector<float> v = load_all<float>(x), r(v.size());
  kernel(static_cast<const float*>(v.data()), r.data());
  store_all(out, r);
}

OpDef axis_op(std::string name, std::string doc) {
  OpDef d;
  d.name = std::move(name);
  d.category = OpCategory::Reduction;
  d.attrs = {{"axis", AttrKind::Int}};
  d.symbolic_dims = true;  // the result has the operand's shape
  d.infer = [](InferContext& c) {
    require_float(c, 0);
    if (c.rank(0) == 0) c.fail("operand 0 is a scalar; {} needs rank >= 1", c.op());
    axis_attr(c, "axis", -1);
    return same_as_input0(c);
  };
  d.doc = std::move(doc);
  return d;
}

int kernel_axis(const KernelContext& k, const Tensor& x) {
  int64_t a = k.attrs.get_int("axis", -1);
  return static_cast<int>(a < 0 ? a + x.rank() : a);
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  for (SoftmaxKind kind : {SoftmaxKind::Softmax, SoftmaxKind::LogSoftmax}) {
    bool soft = kind == SoftmaxKind::Softmax;
    OpDef d = axis_op(soft ? "softmax" : "log_softmax", soft ? "exp(x - max) / sum(exp(x - max)) along axis"
                                                             : "x - max - log(sum(exp(x - max))) along axis");
    d.reference = [kind](KernelContext& k) {
      const Tensor& x = k.in(0);
      int axis = kernel_axis(k, x);
      const bool f16 = x.dtype() == DType::F16 && kind == SoftmaxKind::Softmax;
      run_float_kernel(x, k.out(),
                       [&](const auto* in, auto* out) { softmax_kernel(in, out, x.shape(), axis, kind, f16); });
    };
    r.add(std::move(d));
  }
  OpDef h = axis_op("hardmax", "1 at the first maximum along axis, 0 elsewhere");
  h.reference = [](KernelContext& k) {
    const Tensor& x = k.in(0);
    int axis = kernel_axis(k, x);
    run_float_kernel(x, k.out(), [&](const auto* in, auto* out) { hardmax_kernel(in, out, x.shape(), axis); });
  };
  r.add(std::move(h));
}

}  // namespace kiln::ops
