// Shared pieces of the index family (index_*.cpp): index operand access,
// bounds-checked index wrapping, and the element combiners of scatter
// reductions. Internal to ops/; register_index_ops (index_ops.cpp) is the
// family's only entry point.
#pragma once
#include <cstring>
#include <string>
#include <string_view>

#include "ops/op_helpers.h"

namespace kiln::ops::index {

void register_gather_ops(OpRegistry& r);   // index_gather.cpp: gather, gather_elements, gather_nd
void register_scatter_ops(OpRegistry& r);  // index_scatter.cpp: scatter_elements, scatter_nd
void register_select_ops(OpRegistry& r);   // index_select.cpp: nonzero, compress, unique
void register_layout_ops(OpRegistry& r);   // index_layout.cpp: one_hot, trilu, eye_like, reverse_sequence

// Index operands are i32 or i64 (ONNX allows both for Gather*/Scatter*).
void require_index_dtype(InferContext& c, int i, std::string_view what);

// Calls f(I{}) with I = int32_t or int64_t, the storage type of an index tensor.
template <typename F>
decltype(auto) dispatch_index(const KernelContext& ctx, const Tensor& t, F&& f) {
  if (t.dtype() == DType::I32) return f(int32_t{});
  if (t.dtype() == DType::I64) return f(int64_t{});
  throw Error(fmt::format("{}: index operand has dtype {}; i32 or i64 expected", ctx.label, dtype_name(t.dtype())));
}

[[noreturn]] void index_out_of_range(const KernelContext& ctx, std::string_view what, int64_t index, int64_t size);

// Maps an index in [-size, size) to [0, size); anything else is a kiln::Error
// naming the node (never an out-of-bounds access).
inline int64_t wrap_index(const KernelContext& ctx, std::string_view what, int64_t i, int64_t size) {
  int64_t w = i < 0 ? i + size : i;
  if (w < 0 || w >= size) index_out_of_range(ctx, what, i, size);
  return w;
}

// Scatter reductions: how an update combines with the element already there.
enum class Reduction { None, Add, Mul, Max, Min };
// Parses "none" / "add" / "mul" / "max" / "min"; other values are Unsupported.
Reduction parse_reduction(const InferContext& c, const std::string& s);
Reduction reduction_from_attrs(const AttrMap& a);

// dst = combine(dst, src) for one element of `dtype`, both given as raw bytes.
// Arithmetic is done in the dtype (integers wrap, f16/bf16 through float,
// bool: add/max = or, mul/min = and); max/min propagate NaN.
using CombineFn = void (*)(uint8_t* dst, const uint8_t* src);
CombineFn combiner(DType dtype, Reduction r);

// Calls f(E{}) with E an unsigned integer as wide as one element of `elem_size`
// bytes (1, 2, 4 or 8: every kiln dtype), for fixed-size element copies.
template <typename F>
decltype(auto) dispatch_bytes(size_t elem_size, F&& f) {
  switch (elem_size) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    default:
      return f(uint64_t{});
  }
}

// Copies element `si` of `src` to element `di` of `dst`, E-sized elements.
template <typename E>
inline void copy_elem(uint8_t* dst, int64_t di, const uint8_t* src, int64_t si) {
  std::memcpy(dst + di * sizeof(E), src + si * sizeof(E), sizeof(E));
}

// Walks every element of an index tensor of shape `is` in row-major order,
// calling f(e, base) where base is the offset, in a tensor with strides `ds`,
// of the same coordinates with the `axis` coordinate left out: the element
// GatherElements/ScatterElements address is base + index * ds[axis].
template <typename F>
void for_each_off_axis(const Shape& is, const std::vector<int64_t>& ds, int axis, int64_t count, F&& f) {
  const int r = static_cast<int>(is.size());
  std::vector<int64_t> coord(r, 0);
  int64_t base = 0;
  for (int64_t e = 0; e < count; ++e) {
    f(e, base);
    for (int d = r - 1; d >= 0; --d) {
      if (++coord[d] < is[d]) {
        if (d != axis) base += ds[d];
        break;
      }
      if (d != axis) base -= (is[d] - 1) * ds[d];
      coord[d] = 0;
    }
  }
}

// Product of dims [from, to).
inline int64_t dims_product(const Shape& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < s.size(); ++i) n *= s[i];
  return n;
}

}  // namespace kiln::ops::index
