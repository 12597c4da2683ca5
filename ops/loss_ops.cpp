// Normalization family, part 3: the classification losses, following the
// ONNX reference implementation exactly:
//   input [N, C, d1..dk] (log-probabilities for nll_loss, raw scores for
//   softmax_cross_entropy_loss, which takes log_softmax over dim 1 first),
//   target [N, d1..dk] (i32/i64 class indices), optional weight [C].
//   loss[n, d] = -weight[t] * logp[n, t, d] with t = target[n, d], and 0 where
//   t == ignore_index (if the attribute is present).
//   reduction "none": that tensor; "sum": its sum; "mean": its sum divided by
//   the sum of weight[t] over non-ignored elements (the element count when
//   there is no weight), so all-ignored gives 0/0 = NaN as in the reference.
// A target outside [0, C) that is not ignore_index is an error at run time.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/normalization_common.h"

namespace kiln::ops {

namespace {

using norm::dims_product;
using norm::dispatch_float;
using norm::FloatIn;
using norm::FloatOut;

enum class Reduction { None, Sum, Mean };

Reduction reduction_of(const AttrMap& a) {
  std::string r = a.get_string("reduction", "mean");
  if (r == "none") return Reduction::None;
  if (r == "sum") return Reduction::Sum;
  return Reduction::Mean;
}

// Operands input, target, weight?; results loss and (sce only) log_prob.
std::vector<TensorType> infer_loss(InferContext& c, bool is_sce) {
  require_float(c, 0);
  std::string red = c.attrs().get_string("reduction", "");
  if (red != "none" && red != "sum" && red != "mean") c.fail("reduction '{}' is not one of none, sum, mean", red);
  const Shape& xs = c.shape(0);
  if (xs.size() < 2) c.fail("input {} needs rank at least 2 (N, C, ...)", c.type(0).str());
  if (c.dtype(1) != DType::I32 && c.dtype(1) != DType::I64)
    c.fail("target is {}; it must be i32 or i64", dtype_name(c.dtype(1)));
  Shape ts = xs;
  ts.erase(ts.begin() + 1);
  if (c.shape(1) != ts)
    c.fail("target {} must have the input's shape without dim 1, [{}]", c.type(1).str(), fmt::join(ts, ","));
  if (c.has_input(2)) {
    require_float(c, 2);
    if (c.rank(2) != 1 || c.shape(2)[0] != xs[1])
      c.fail("weight {} must be [{}] (the class count, dim 1 of input)", c.type(2).str(), xs[1]);
  }
  if (!is_sce && c.num_outputs() > 1) c.fail("nll_loss has one result");
  Shape ls = reduction_of(c.attrs()) == Reduction::None ? ts : Shape{};
  std::vector<TensorType> r{TensorType(c.dtype(0), ls)};
  if (is_sce) r.push_back(TensorType(c.dtype(0), xs));
  return r;
}

// log_softmax over dim 1 of x viewed as [n, ch, inner], in double.
template <typename C>
void log_softmax_dim1(const C* x, double* out, int64_t n, int64_t ch, int64_t inner) {
  std::vector<double> mx(inner), sum(inner);
  for (int64_t b = 0; b < n; ++b) {
    const C* xb = x + b * ch * inner;
    double* ob = out + b * ch * inner;
    std::fill(mx.begin(), mx.end(), -std::numeric_limits<double>::infinity());
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t c = 0; c < ch; ++c)
      for (int64_t j = 0; j < inner; ++j) mx[j] = std::max(mx[j], static_cast<double>(xb[c * inner + j]));
    for (int64_t c = 0; c < ch; ++c)
      for (int64_t j = 0; j < inner; ++j) sum[j] += std::exp(xb[c * inner + j] - mx[j]);
    for (int64_t j = 0; j < inner; ++j) sum[j] = mx[j] + std::log(sum[j]);  // log-sum-exp
    for (int64_t c = 0; c < ch; ++c)
      for (int64_t j = 0; j < inner; ++j) ob[c * inner + j] = xb[c * inner + j] - sum[j];
  }
}

// The shared loss: logp [n, ch, inner] as doubles.
void loss_kernel(KernelContext& k, const double* logp, int64_t n, int64_t ch, int64_t inner) {
  const Tensor& target = k.in(1);
  std::vector<int64_t> t = target.to_int_vector();
  std::vector<double> weight;
  if (k.has(2)) weight = norm::load_params(k.in(2));
  const Attribute* ii_attr = k.attrs.find("ignore_index");
  bool has_ii = ii_attr != nullptr;
  int64_t ii = has_ii ? k.attrs.require_int("ignore_index") : 0;
  Reduction red = reduction_of(k.attrs);

  std::vector<double> loss(n * inner);
  double sum = 0, wsum = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < inner; ++j) {
      int64_t e = b * inner + j;
      int64_t cls = t[e];
      if (has_ii && cls == ii) {
        loss[e] = 0;
        continue;
      }
      if (cls < 0 || cls >= ch)
        throw Error(fmt::format("{}: target {} at flat index {} is outside [0, {}) and is not ignore_index{}", k.label,
                                cls, e, ch, has_ii ? fmt::format(" ({})", ii) : std::string(" (none set)")));
      double w = weight.empty() ? 1.0 : weight[cls];
      loss[e] = -w * logp[(b * ch + cls) * inner + j];
      sum += loss[e];
      wsum += w;
    }
  Tensor& out = k.out(0);
  if (red == Reduction::None) store_all(out, loss);
  else out.set_double(0, red == Reduction::Sum ? sum : sum / wsum);
}

OpDef nll_loss() {
  OpDef d;
  d.name = "nll_loss";
  d.category = OpCategory::Compute;
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.attrs = {{"reduction", AttrKind::String, true}, {"ignore_index", AttrKind::Int}};
  d.infer = [](InferContext& c) { return infer_loss(c, false); };
  d.reference = [](KernelContext& k) {
    const Tensor& x = k.in(0);
    int64_t n = x.shape()[0], ch = x.shape()[1], inner = dims_product(x.shape(), 2, x.rank());
    std::vector<double> logp = load_all<double>(x);
    loss_kernel(k, logp.data(), n, ch, inner);
  };
  d.doc =
      "negative log-likelihood loss of log-probabilities input [N,C,...] at class target [N,...]; optional "
      "weight [C] and ignore_index; reduction none/sum/mean (weighted mean)";
  return d;
}

OpDef softmax_cross_entropy_loss() {
  OpDef d;
  d.name = "softmax_cross_entropy_loss";
  d.category = OpCategory::Compute;
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.max_outputs = 2;
  d.attrs = {{"reduction", AttrKind::String, true}, {"ignore_index", AttrKind::Int}};
  d.infer = [](InferContext& c) { return infer_loss(c, true); };
  d.reference = [](KernelContext& k) {
    const Tensor& x = k.in(0);
    int64_t n = x.shape()[0], ch = x.shape()[1], inner = dims_product(x.shape(), 2, x.rank());
    std::vector<double> logp(x.numel());
    dispatch_float(x.dtype(), [&](auto z) {
      using C = decltype(z);
      FloatIn<C> in(x);
      log_softmax_dim1(in.data(), logp.data(), n, ch, inner);
    });
    loss_kernel(k, logp.data(), n, ch, inner);
    if (k.outputs.size() > 1) store_all(k.out(1), logp);
  };
  d.doc = "nll_loss of log_softmax(scores) over dim 1; optional second result: the log-probabilities";
  return d;
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  r.add(nll_loss());
  r.add(softmax_cross_entropy_loss());
}

}  // namespace kiln::ops
