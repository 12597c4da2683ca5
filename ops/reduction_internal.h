// Shared pieces of the reduction family's files (reduction_ops.cpp is the
// entry; it calls the other files' registration functions).
#pragma once
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/op_helpers.h"

namespace kiln::ops {

void register_reduce_ops(OpRegistry& r);    // reduction_ops.cpp: reduce_* from ReductionSpec
void register_arg_topk_ops(OpRegistry& r);  // reduction_select_ops.cpp: argmax, argmin, topk
void register_scan_ops(OpRegistry& r);      // reduction_select_ops.cpp: cumsum, cumprod
void register_softmax_ops(OpRegistry& r);   // softmax_ops.cpp: softmax, log_softmax, hardmax

// A tensor seen as [outer, n, inner] around one axis.
struct AxisGeometry {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisGeometry axis_geometry(const Shape& s, int axis) {
  AxisGeometry g;
  for (int d = 0; d < axis; ++d) g.outer *= s[d];
  g.n = s[axis];
  for (size_t d = axis + 1; d < s.size(); ++d) g.inner *= s[d];
  return g;
}

// Reads the `axis` attribute of a single-axis op, checks it lies in
// [-rank, rank) and returns it normalized.
inline int axis_attr(InferContext& c, const char* name, int64_t dflt) {
  int64_t a = c.attrs().get_int(name, dflt);
  int r = c.rank(0);
  if (a < -r || a >= r) c.fail("attribute '{}' = {} is out of range for rank {}", name, a, r);
  return static_cast<int>(a < 0 ? a + r : a);
}

// A 0/1 attribute.
inline bool flag_attr(InferContext& c, const char* name, int64_t dflt) {
  int64_t v = c.attrs().get_int(name, dflt);
  if (v != 0 && v != 1) c.fail("attribute '{}' must be 0 or 1, got {}", name, v);
  return v != 0;
}

// The accumulation type for exact integer work: uint64_t for unsigned
// dtypes (so u64 compares correctly), int64_t for signed ints and bool.
template <typename F>
decltype(auto) dispatch_int_accum(DType t, F&& f) {
  if (is_unsigned_int(t)) return f(uint64_t{});
  return f(int64_t{});
}

// Calls f(const T* p) with x's elements as numbers: the tensor's own storage
// where it is a plain C++ number type (every dtype but f16/bf16), else a
// float copy. Kernels then read without a converted copy of large tensors.
template <typename F>
void with_numeric_data(const Tensor& x, F&& f) {
  if (x.dtype() == DType::F16 || x.dtype() == DType::BF16) {
    std::vector<float> v = load_all<float>(x);
    f(static_cast<const float*>(v.data()));
    return;
  }
  dispatch_storage(x.dtype(), [&](auto z) { f(x.data<decltype(z)>()); });
}

// Lowest / highest value of a dtype, as accumulation type T (infinities for floats).
template <typename T>
T dtype_lowest(DType t) {
  if constexpr (std::is_floating_point_v<T>) {
    return -std::numeric_limits<T>::infinity();
  } else {
    return dispatch_storage(t, [&](auto z) -> T {
      using S = decltype(z);
      if (t == DType::Bool) return T(0);
      return static_cast<T>(std::numeric_limits<S>::lowest());
    });
  }
}
template <typename T>
T dtype_highest(DType t) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::numeric_limits<T>::infinity();
  } else {
    return dispatch_storage(t, [&](auto z) -> T {
      using S = decltype(z);
      if (t == DType::Bool) return T(1);
      return static_cast<T>(std::numeric_limits<S>::max());
    });
  }
}

// NaN test that compiles for integer types too.
template <typename T>
inline bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// Converts a double result into an integer dtype without undefined
// behaviour: NaN becomes 0 and out-of-range values saturate.
template <typename I>
I saturate_to_int(double v) {
  if (std::isnan(v)) return I(0);
  if (v <= static_cast<double>(std::numeric_limits<I>::lowest())) return std::numeric_limits<I>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

}  // namespace kiln::ops
