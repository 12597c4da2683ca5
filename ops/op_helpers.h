// Small helpers for writing op definitions: common inference shapes and
// typed loops for reference kernels.
#pragma once
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include "ir/op_registry.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"

namespace kiln::ops {

// Result has operand 0's type.
inline std::vector<TensorType> same_as_input0(InferContext& c) { return {c.type(0)}; }

// Result: broadcast of all present operands' shapes, with `dtype` (or
// operand 0's dtype when nullopt).
std::vector<TensorType> broadcast_result(InferContext& c, std::optional<DType> dtype = std::nullopt);

// Symbolic dims for ops whose results are [N, ...] for an operand 0 of
// [N, ...] with N independent of everything else (conv, pooling, batch
// normalization): when operand 0's dim 0 is the only symbolic dim, `infer`
// runs with it set to 1 and to 2, must give results whose dim 0 is that value
// with all else equal, and the results get the symbolic dim back. Any other
// symbolic dim, or results that do not follow N, are kiln::Unsupported
// naming the operand and dim. Without symbolic dims it is `infer` itself.
std::vector<TensorType> infer_symbolic_batch(InferContext& c,
                                             const std::function<std::vector<TensorType>(InferContext&)>& infer);

// Runs `infer` on a scratch graph holding operands of c's types and the
// constants' data, so inference reads what it would read, with operand 0's
// type (unless it is a constant) rewritten by `retype_operand0`: inference at
// stand-in values of symbolic dims (infer_symbolic_batch, and
// infer_symbolic_image in ops/symbolic_image.h).
std::vector<TensorType> infer_with_operand0_as(InferContext& c, const std::function<void(TensorType&)>& retype_operand0,
                                               const std::function<std::vector<TensorType>(InferContext&)>& infer);

// Requires every present operand to share one dtype; error names the operands.
void require_same_dtype(InferContext& c);
// Requires operand i's dtype to be one of `allowed`.
void require_dtype(InferContext& c, int i, std::initializer_list<DType> allowed);
void require_float(InferContext& c, int i);

// The `layout` attribute of ops that take channels-last images (conv, the
// pools, batch/instance/group normalization, and transpose into channels-last;
// see docs/ir.md, "Layouts"): "nhwc" means operand 0 and the image results
// hold their dims channels-last ([N, S..., C]) and results are tagged {nhwc};
// absent means channels-first. Throws kiln::Error naming `label` for any other
// value.
bool nhwc_layout(const AttrMap& a, const std::string& label);
// For such an op's inference: operand i's dims in channels-first order
// (permuted back when the op is channels-last; then rank must be >= 3).
Shape channels_first_shape(InferContext& c, int i, bool nhwc);
// A channels-first result shape as the op gives it: permuted to channels-last
// and tagged {nhwc} when the op is channels-last.
TensorType image_result(DType dtype, const Shape& channels_first, bool nhwc);

// Calls f(T{}) with T the *computation* type for reference kernels:
// float for f32/f16/bf16 (read and written through float), double for f64,
// int64_t for every integer and bool dtype. Use with load/store below.
template <typename F>
decltype(auto) dispatch_compute(DType t, F&& f) {
  if (t == DType::F64) return f(double{});
  if (is_float(t)) return f(float{});
  return f(int64_t{});
}

// Reads a whole tensor into a vector of the computation type T, and writes one back.
template <typename T>
std::vector<T> load_all(const Tensor& t) {
  std::vector<T> r(t.numel());
  dispatch_storage(t.dtype(), [&](auto z) {
    using S = decltype(z);
    const S* p = t.data<S>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype() == DType::F16) r[i] = static_cast<T>(half_to_float(static_cast<uint16_t>(p[i])));
      else if (t.dtype() == DType::BF16) r[i] = static_cast<T>(bf16_to_float(static_cast<uint16_t>(p[i])));
      else r[i] = static_cast<T>(p[i]);
    }
  });
  return r;
}

template <typename T>
void store_all(Tensor& t, const std::vector<T>& v) {
  dispatch_storage(t.dtype(), [&](auto z) {
    using S = decltype(z);
    S* p = t.data<S>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype() == DType::F16) p[i] = float_to_half(static_cast<float>(v[i]));
      else if (t.dtype() == DType::BF16) p[i] = float_to_bf16(static_cast<float>(v[i]));
      else if (t.dtype() == DType::Bool) p[i] = v[i] != 0;
      else p[i] = static_cast<S>(v[i]);
    }
  });
}

// Copies elements of any dtype without conversion (for data movement ops).
// elem_size-generic: moves `dtype_size` bytes per element.
inline void copy_element(const Tensor& src, int64_t si, Tensor& dst, int64_t di) {
  size_t es = dtype_size(src.dtype());
  std::memcpy(static_cast<uint8_t*>(dst.raw()) + di * es, static_cast<const uint8_t*>(src.raw()) + si * es, es);
}

}  // namespace kiln::ops
