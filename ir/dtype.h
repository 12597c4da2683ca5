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
  // ONNX's low-bit types: storage types, one element per byte in kiln
  // (ir/low_bit.h): cast, (de)quantization and data movement take them, the
  // arithmetic ops do not.
  F8E4M3FN,
  F8E4M3FNUZ,
  F8E5M2,
  F8E5M2FNUZ,
  F8E8M0,
  F4E2M1,
  I4,
  U4,
  I2,
  U2,
  // ONNX's STRING: each element a UTF-8 std::string owned by the tensor
  // (Tensor::strings()). Runs on the CPU path only (reference backend): the
  // ops that take it say so (OpDef::takes_strings), kernels, plans and the
  // simulator never see it.
  String,
};
inline constexpr int kNumDTypes = 24;

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // "f32", "bf16", "i64", "bool", ...
std::optional<DType> dtype_from_name(std::string_view name);
bool is_float(DType t);
bool is_signed_int(DType t);
bool is_unsigned_int(DType t);
inline bool is_int(DType t) { return is_signed_int(t) || is_unsigned_int(t); }
// The low-bit types, outside is_float / is_int on purpose: an op takes them
// only where it says so.
bool is_low_bit(DType t);
bool is_low_bit_float(DType t);  // f8*, f4e2m1
bool is_low_bit_int(DType t);    // i4, u4, i2, u2
inline bool is_string(DType t) { return t == DType::String; }
// Values of this dtype are computed on as floating point (expressions, the
// reference's lanes): the floats and the low-bit floats.
inline bool computes_as_float(DType t) { return is_float(t) || is_low_bit_float(t); }

// IEEE binary16 and bfloat16 <-> float, round to nearest even; NaN stays NaN.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

// Thrown by dispatch_storage for a string tensor: strings have no numeric
// storage type, and a numeric kernel reaching one is a kiln bug.
[[noreturn]] void fail_no_numeric_storage(DType t);

// Visit with the C++ storage type of a dtype. F16/BF16 are stored as uint16_t
// bit patterns; Bool as uint8_t (0 or 1). Not for String (kiln::Error).
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
    case DType::F8E4M3FN:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2:
    case DType::F8E5M2FNUZ:
    case DType::F8E8M0:
    case DType::F4E2M1:
    case DType::U4:
    case DType::U2:
      return f(uint8_t{});
    case DType::I4:
    case DType::I2:
      return f(int8_t{});
    case DType::String:
      fail_no_numeric_storage(t);
  }
  return f(float{});
}

}  // namespace kiln
