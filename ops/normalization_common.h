// Shared by the normalization family's files (normalization_ops.cpp,
// lrn_mvn_lp_ops.cpp, loss_ops.cpp): registration entry points and typed
// float I/O for reference kernels.
//
// Kernels work in a computation type C: float for f32/f16/bf16, double for
// f64. f32/f64 tensors are read and written in place; f16/bf16 go through a
// float buffer. Statistics (means, variances, sums) accumulate in double.
#pragma once
#include <type_traits>
#include <vector>

#include "ops/op_helpers.h"

namespace kiln::ops {

void register_norm_stat_ops(OpRegistry& r);   // normalization_ops.cpp: batch/layer/instance/group norm
void register_lrn_mvn_lp_ops(OpRegistry& r);  // lrn_mvn_lp_ops.cpp: lrn, mean_variance_normalization, lp_normalization
void register_loss_ops(OpRegistry& r);        // loss_ops.cpp: nll_loss, softmax_cross_entropy_loss

namespace norm {

// Calls f(C{}) with the computation type of a floating dtype.
template <typename F>
decltype(auto) dispatch_float(DType t, F&& f) {
  if (t == DType::F64) return f(double{});
  return f(float{});
}

// Read-only view of a float tensor as C values.
template <typename C>
class FloatIn {
 public:
  explicit FloatIn(const Tensor& t) {
    if ((std::is_same_v<C, float> && t.dtype() == DType::F32) ||
        (std::is_same_v<C, double> && t.dtype() == DType::F64)) {
      p_ = t.data<C>();
    } else {
      buf_ = load_all<C>(t);
      p_ = buf_.data();
    }
  }
  const C* data() const { return p_; }
  C operator[](int64_t i) const { return p_[i]; }

 private:
  const C* p_ = nullptr;
  std::vector<C> buf_;
};

// Writable view of a float result as C values; commit() stores it.
template <typename C>
class FloatOut {
 public:
  explicit FloatOut(Tensor& t) : t_(t) {
    direct_ =
        (std::is_same_v<C, float> && t.dtype() == DType::F32) || (std::is_same_v<C, double> && t.dtype() == DType::F64);
    if (direct_) {
      p_ = t.data<C>();
    } else {
      buf_.resize(t.numel());
      p_ = buf_.data();
    }
  }
  C* data() { return p_; }
  void commit() {
    if (!direct_) store_all(t_, buf_);
  }

 private:
  Tensor& t_;
  bool direct_ = false;
  C* p_ = nullptr;
  std::vector<C> buf_;
};

// A small float operand (scale, bias, statistics) read as doubles.
inline std::vector<double> load_params(const Tensor& t) { return load_all<double>(t); }

// Product of dims [from, to).
inline int64_t dims_product(const Shape& s, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; ++i) p *= s[i];
  return p;
}

}  // namespace norm
}  // namespace kiln::ops
