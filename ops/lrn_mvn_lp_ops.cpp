// Normalization family, part 2: local response normalization, mean-variance
// normalization over chosen axes, and Lp normalization along one axis.
#include <algorithm>
#include <cmath>

#include "ops/normalization_common.h"

namespace kiln::ops {

namespace {

using norm::dims_product;
using norm::dispatch_float;
using norm::FloatIn;
using norm::FloatOut;

// ----------------------------------------------------------------------- lrn

// x [N, C, ...]: y = x / (bias + alpha / size * sum of x^2 over the channel
// window [c - floor((size-1)/2), c + ceil((size-1)/2)])^beta.
OpDef lrn() {
  OpDef d;
  d.name = "lrn";
  d.category = OpCategory::Reduction;
  d.attrs = {{"size", AttrKind::Int, true},
             {"alpha", AttrKind::Float, true},
             {"beta", AttrKind::Float, true},
             {"bias", AttrKind::Float, true}};
  d.infer = [](InferContext& c) {
    require_float(c, 0);
    if (c.rank(0) < 2) c.fail("x has rank {}, needs at least 2 (N, C, ...)", c.rank(0));
    int64_t size = c.attrs().require_int("size");
    if (size < 1) c.fail("size {} must be at least 1", size);
    return same_as_input0(c);
  };
  d.reference = [](KernelContext& k) {
    const Tensor& x = k.in(0);
    const Shape& s = x.shape();
    int64_t n = s[0], ch = s[1], inner = dims_product(s, 2, x.rank());
    int64_t size = k.attrs.require_int("size");
    double alpha = k.attrs.get_float("alpha", 0), beta = k.attrs.get_float("beta", 0),
           bias = k.attrs.get_float("bias", 0);
    int64_t before = (size - 1) / 2, after = size / 2;  // floor and ceil of (size-1)/2
    double coef = alpha / static_cast<double>(size);
    dispatch_float(x.dtype(), [&](auto z) {
      using C = decltype(z);
      FloatIn<C> in(x);
      FloatOut<C> out(k.out(0));
      const C* xp = in.data();
      C* yp = out.data();
      std::vector<double> sq(inner);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t c = 0; c < ch; ++c) {
          std::fill(sq.begin(), sq.end(), 0.0);
          int64_t lo = std::max<int64_t>(0, c - before), hi = std::min<int64_t>(ch - 1, c + after);
          for (int64_t cc = lo; cc <= hi; ++cc) {
            const C* xc = xp + (b * ch + cc) * inner;
            for (int64_t j = 0; j < inner; ++j) sq[j] += static_cast<double>(xc[j]) * xc[j];
          }
          const C* xc = xp + (b * ch + c) * inner;
          C* yc = yp + (b * ch + c) * inner;
          for (int64_t j = 0; j < inner; ++j) yc[j] = static_cast<C>(xc[j] / std::pow(bias + coef * sq[j], beta));
        }
      out.commit();
    });
  };
  d.doc = "local response normalization across channels (dim 1)";
  return d;
}

// -------------------------------------------------- mean_variance_normalization

// Distinct, in-range, sorted axes; errors name the op.
std::vector<int> check_axes(InferContext& c, const std::vector<int64_t>& axes, int rank) {
  std::vector<int> r;
  for (int64_t a : axes) {
    int64_t v = a < 0 ? a + rank : a;
    if (v < 0 || v >= rank) c.fail("axis {} is out of range for rank {}", a, rank);
    if (std::find(r.begin(), r.end(), static_cast<int>(v)) != r.end()) c.fail("axis {} is listed twice", a);
    r.push_back(static_cast<int>(v));
  }
  std::sort(r.begin(), r.end());
  return r;
}

// For each element (row-major), the index of its group: the element's
// coordinates on the kept (non-reduced) dims, row-major. Also the count.
std::vector<int64_t> group_ids(const Shape& s, const std::vector<bool>& reduced, int64_t* num_groups) {
  int r = static_cast<int>(s.size());
  std::vector<int64_t> gst(r, 0);
  int64_t acc = 1;
  for (int d = r - 1; d >= 0; --d)
    if (!reduced[d]) {
      gst[d] = acc;
      acc *= s[d];
    }
  *num_groups = acc;
  int64_t total = shape_numel(s);
  std::vector<int64_t> ids(total);
  std::vector<int64_t> idx(r, 0);
  int64_t g = 0;
  for (int64_t e = 0; e < total; ++e) {
    ids[e] = g;
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[d] < s[d]) {
        g += gst[d];
        break;
      }
      g -= gst[d] * (s[d] - 1);
      idx[d] = 0;
    }
  }
  return ids;
}

// y = (x - mean) / (sqrt(var) + 1e-9), statistics over `axes` (as ONNX's
// MeanVarianceNormalization function body: epsilon added to the std).
OpDef mean_variance_normalization() {
  OpDef d;
  d.name = "mean_variance_normalization";
  d.category = OpCategory::Reduction;
  d.attrs = {{"axes", AttrKind::Ints, true}};
  d.infer = [](InferContext& c) {
    require_float(c, 0);
    check_axes(c, c.attrs().get_ints("axes"), c.rank(0));
    return same_as_input0(c);
  };
  d.reference = [](KernelContext& k) {
    const Tensor& x = k.in(0);
    int r = x.rank();
    std::vector<bool> reduced(r, false);
    for (int64_t a : k.attrs.get_ints("axes")) reduced[a < 0 ? a + r : a] = true;
    int64_t ng = 0;
    std::vector<int64_t> ids = group_ids(x.shape(), reduced, &ng);
    int64_t total = x.numel();
    int64_t per_group = ng ? total / ng : 0;
    dispatch_float(x.dtype(), [&](auto z) {
      using C = decltype(z);
      FloatIn<C> in(x);
      FloatOut<C> out(k.out(0));
      const C* xp = in.data();
      C* yp = out.data();
      std::vector<double> mean(ng, 0.0), sq(ng, 0.0);
      for (int64_t e = 0; e < total; ++e) mean[ids[e]] += xp[e];
      for (double& m : mean) m /= static_cast<double>(per_group);
      for (int64_t e = 0; e < total; ++e) {
        double dv = xp[e] - mean[ids[e]];
        sq[ids[e]] += dv * dv;
      }
      std::vector<double> denom(ng);
      for (int64_t g = 0; g < ng; ++g) denom[g] = std::sqrt(sq[g] / static_cast<double>(per_group)) + 1e-9;
      for (int64_t e = 0; e < total; ++e) yp[e] = static_cast<C>((xp[e] - mean[ids[e]]) / denom[ids[e]]);
      out.commit();
    });
  };
  d.doc = "(x - mean) / (sqrt(var) + 1e-9) with statistics over `axes`";
  return d;
}

// ----------------------------------------------------------- lp_normalization

// y = x / ||x||_p along `axis`, p in {1, 2}; a slice whose norm is 0 gives 0
// (onnx 1.23's definition: where(norm == 0, 0, x / norm), not 0 / 0 = NaN).
OpDef lp_normalization() {
  OpDef d;
  d.name = "lp_normalization";
  d.category = OpCategory::Reduction;
  d.attrs = {{"axis", AttrKind::Int, true}, {"p", AttrKind::Int, true}};
  d.infer = [](InferContext& c) {
    require_float(c, 0);
    int r = c.rank(0);
    int64_t a = c.attrs().require_int("axis");
    if (a < -r || a >= r || r == 0) c.fail("axis {} is out of range for rank {}", a, r);
    int64_t p = c.attrs().require_int("p");
    if (p != 1 && p != 2) c.fail("p = {}: only 1 and 2 are defined", p);
    return same_as_input0(c);
  };
  d.reference = [](KernelContext& k) {
    const Tensor& x = k.in(0);
    int r = x.rank();
    int64_t a = k.attrs.require_int("axis");
    int axis = static_cast<int>(a < 0 ? a + r : a);
    int64_t p = k.attrs.require_int("p");
    int64_t outer = dims_product(x.shape(), 0, axis), len = x.shape()[axis],
            inner = dims_product(x.shape(), axis + 1, r);
    dispatch_float(x.dtype(), [&](auto z) {
      using C = decltype(z);
      FloatIn<C> in(x);
      FloatOut<C> out(k.out(0));
      const C* xp = in.data();
      C* yp = out.data();
      std::vector<double> acc(inner);
      for (int64_t o = 0; o < outer; ++o) {
        std::fill(acc.begin(), acc.end(), 0.0);
        const C* xo = xp + o * len * inner;
        C* yo = yp + o * len * inner;
        for (int64_t l = 0; l < len; ++l)
          for (int64_t j = 0; j < inner; ++j) {
            double v = xo[l * inner + j];
            acc[j] += p == 1 ? std::fabs(v) : v * v;
          }
        if (p == 2)
          for (double& v : acc) v = std::sqrt(v);
        for (int64_t l = 0; l < len; ++l)
          for (int64_t j = 0; j < inner; ++j)
            yo[l * inner + j] = acc[j] == 0.0 ? C(0) : static_cast<C>(xo[l * inner + j] / acc[j]);
      }
      out.commit();
    });
  };
  d.doc = "x / ||x||_p along axis (p = 1 or 2); 0 where the norm is 0";
  return d;
}

}  // namespace

void register_lrn_mvn_lp_ops(OpRegistry& r) {
  r.add(lrn());
  r.add(mean_variance_normalization());
  r.add(lp_normalization());
}

}  // namespace kiln::ops
