// The index family: ops that pick, place or mask elements by index.
//
//   gather, gather_elements, gather_nd        (index_gather.cpp)
//   scatter_elements, scatter_nd              (index_scatter.cpp)
//   nonzero, compress, unique                 (index_select.cpp; shapes depend on data)
//   one_hot, trilu, eye_like, reverse_sequence (index_layout.cpp)
//
// Kernels move elements as raw bytes (every dtype, f16/bf16/bool included,
// without conversion) with strides computed once per call, accept i32 and i64
// index operands, and turn an out-of-range index into a kiln::Error naming
// the node. This file holds the family's entry point and the shared helpers
// declared in index_common.h.
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/families.h"
#include "ops/index_common.h"

namespace kiln::ops {

namespace index {

void require_index_dtype(InferContext& c, int i, std::string_view what) {
  DType d = c.dtype(i);
  if (d != DType::I32 && d != DType::I64) c.fail("{} (operand {}) must be i32 or i64, got {}", what, i, dtype_name(d));
}

void index_out_of_range(const KernelContext& ctx, std::string_view what, int64_t index, int64_t size) {
  throw Error(fmt::format("{}: {} {} is out of range [{}, {})", ctx.label, what, index, -size, size));
}

Reduction parse_reduction(const InferContext& c, const std::string& s) {
  if (s == "none") return Reduction::None;
  if (s == "add") return Reduction::Add;
  if (s == "mul") return Reduction::Mul;
  if (s == "max") return Reduction::Max;
  if (s == "min") return Reduction::Min;
  c.unsupported("reduction '{}' is not supported (none, add, mul, max, min)", s);
}

Reduction reduction_from_attrs(const AttrMap& a) {
  std::string s = a.get_string("reduction", "none");
  if (s == "add") return Reduction::Add;
  if (s == "mul") return Reduction::Mul;
  if (s == "max") return Reduction::Max;
  if (s == "min") return Reduction::Min;
  return Reduction::None;  // inference has rejected anything else
}

namespace {

// Combines two values of arithmetic type T.
template <typename T>
T combine_value(T a, T b, Reduction r) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (r) {
      case Reduction::Add:
        return a + b;
      case Reduction::Mul:
        return a * b;
      case Reduction::Max:
        return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : (b > a ? b : a);
      case Reduction::Min:
        return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : (b < a ? b : a);
      case Reduction::None:
        return b;
    }
  } else {
    // Wrapping arithmetic: signed overflow is done in the unsigned type.
    using U = std::make_unsigned_t<T>;
    switch (r) {
      case Reduction::Add:
        return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case Reduction::Mul:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case Reduction::Max:
        return b > a ? b : a;
      case Reduction::Min:
        return b < a ? b : a;
      case Reduction::None:
        return b;
    }
  }
  return b;
}

template <typename T, Reduction R>
void combine_plain(uint8_t* dst, const uint8_t* src) {
  T a, b;
  std::memcpy(&a, dst, sizeof(T));
  std::memcpy(&b, src, sizeof(T));
  a = combine_value<T>(a, b, R);
  std::memcpy(dst, &a, sizeof(T));
}

template <bool kBf16, Reduction R>
void combine_half(uint8_t* dst, const uint8_t* src) {
  uint16_t a, b;
  std::memcpy(&a, dst, 2);
  std::memcpy(&b, src, 2);
  float fa = kBf16 ? bf16_to_float(a) : half_to_float(a);
  float fb = kBf16 ? bf16_to_float(b) : half_to_float(b);
  float fr = combine_value<float>(fa, fb, R);
  a = kBf16 ? float_to_bf16(fr) : float_to_half(fr);
  std::memcpy(dst, &a, 2);
}

template <Reduction R>
void combine_bool(uint8_t* dst, const uint8_t* src) {
  bool a = *dst != 0, b = *src != 0;
  bool r = (R == Reduction::Add || R == Reduction::Max) ? (a || b) : (a && b);
  *dst = r ? 1 : 0;
}

template <Reduction R>
CombineFn combiner_for(DType t) {
  switch (t) {
    case DType::F32:
      return combine_plain<float, R>;
    case DType::F64:
      return combine_plain<double, R>;
    case DType::F16:
      return combine_half<false, R>;
    case DType::BF16:
      return combine_half<true, R>;
    case DType::I8:
      return combine_plain<int8_t, R>;
    case DType::I16:
      return combine_plain<int16_t, R>;
    case DType::I32:
      return combine_plain<int32_t, R>;
    case DType::I64:
      return combine_plain<int64_t, R>;
    case DType::U8:
      return combine_plain<uint8_t, R>;
    case DType::U16:
      return combine_plain<uint16_t, R>;
    case DType::U32:
      return combine_plain<uint32_t, R>;
    case DType::U64:
      return combine_plain<uint64_t, R>;
    case DType::Bool:
      return combine_bool<R>;
    default:
      return nullptr;  // low-bit types: inference refuses a reduction on them
  }
  return nullptr;
}

}  // namespace

CombineFn combiner(DType dtype, Reduction r) {
  switch (r) {
    case Reduction::Add:
      return combiner_for<Reduction::Add>(dtype);
    case Reduction::Mul:
      return combiner_for<Reduction::Mul>(dtype);
    case Reduction::Max:
      return combiner_for<Reduction::Max>(dtype);
    case Reduction::Min:
      return combiner_for<Reduction::Min>(dtype);
    case Reduction::None:
      break;
  }
  return nullptr;  // plain copy; callers memcpy
}

}  // namespace index

void register_index_ops(OpRegistry& r) {
  index::register_gather_ops(r);
  index::register_scatter_ops(r);
  index::register_select_ops(r);
  index::register_layout_ops(r);
}

}  // namespace kiln::ops
