// Element types kiln knows, their sizes and names, and the 16-bit float
// conversions every backend shares.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  F64,
  I8,
  I16,
  I32,
  I64,
  U8,
  U16,
  U32,
  U64,
  Bool,
};
inline constexpr int kNumDTypes = 13;

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "f32", "bf16", "i64", "bool", ...
std::optional<DType> dtype_from_name(std::string_view name);
bool is_float(DType t);
bool is_signed_int(DType t);
bool is_unsigned_int(DType t);
inline bool is_int(DType t) { return is_signed_int(t) || is_unsigned_int(t); }

// IEEE binary16 and bfloat16 <-> float, round to nearest even; NaN stays NaN.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

// Visit with the C++ storage type of a dtype. F16/BF16 are stored as uint16_t
// bit patterns; Bool as uint8_t (0 or 1).
template <typename F>
decltype(auto) dispatch_storage(DType t, F&& f) {
  switch (t) {
    case DType::F32:
      return f(float{});
    case DType::F64:
      return f(double{});
    case DType::F16:
      return f(uint16_t{});
    case DType::BF16:
      return f(uint16_t{});
    case DType::I8:
      return f(int8_t{});
    case DType::I16:
      return f(int16_t{});
    case DType::I32:
      return f(int32_t{});
    case DType::I64:
      return f(int64_t{});
    case DType::U8:
      return f(uint8_t{});
    case DType::U16:
      return f(uint16_t{});
    case DType::U32:
      return f(uint32_t{});
    case DType::U64:
      return f(uint64_t{});
    case DType::Bool:
      return f(uint8_t{});
  }
  return f(float{});
}

}  // namespace kiln
