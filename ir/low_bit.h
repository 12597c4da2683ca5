// ONNX's low-bit element types on the host: one element's conversions to and
// from float (the reference backend, constant folding, tensor I/O) and the
// packing ONNX files use.
//
// kiln keeps one element per byte in memory (as ml_dtypes' numpy arrays do):
// a low-bit float as its code in the low bits, i4/i2 as a sign-extended
// int8_t, u4/u2 as a uint8_t. Sub-byte types are packed only in ONNX files
// (TensorProto raw_data and int32_data): element 2k in the low nibble of
// byte k (int4, uint4, float4e2m1), four 2-bit elements per byte from the low
// bits up (int2, uint2).
//
// The float conversions are those of ir/low_bit_codec.cuh, the text every
// generated kernel carries too.
#pragma once
#include <cstdint>
#include <utility>

#include "ir/dtype.h"

namespace kiln {

// ONNX Cast's round_mode (opset 24+; only float8e8m0 targets use it).
enum class E8M0Round : int { Up = 0, Down = 1, Nearest = 2 };

// Bits one element takes in an ONNX file: 8, 4 or 2.
int low_bit_width(DType t);

// A low-bit float code -> float (exact).
float low_bit_to_float(DType t, uint8_t code);
// float -> the code of a low-bit float dtype (ONNX Cast's rules).
uint8_t float_to_low_bit(DType t, float x, bool saturate = true, E8M0Round round = E8M0Round::Up);
// The code of a value the low-bit float dtype holds exactly (a value a cast
// already rounded; Inf and NaN where the type has them).
inline uint8_t low_bit_code_of(DType t, float exact) { return float_to_low_bit(t, exact, false, E8M0Round::Down); }
// A double rounded to what a low-bit float dtype holds, as one rounding
// (the double goes to float with round-to-odd first).
double round_to_low_bit(DType t, double v, bool saturate = true, E8M0Round round = E8M0Round::Up);

// An integer wrapped to i4/u4/i2/u2 (two's complement, as numpy's astype).
int64_t wrap_low_bit_int(DType t, int64_t v);
// A floating value converted to i4/u4/i2/u2 as ml_dtypes' astype does:
// truncated, then wrapped; NaN, Inf and values beyond int64 give 0.
int64_t float_to_low_bit_int(DType t, double v);
// The value range of i4/u4/i2/u2.
std::pair<int64_t, int64_t> low_bit_int_range(DType t);

// Packs n one-per-byte elements of a sub-byte dtype into ONNX's packed form
// ((n * width + 7) / 8 bytes); unpacks the other way (sign-extending i4/i2).
void pack_low_bit(DType t, const uint8_t* elems, int64_t n, uint8_t* packed);
void unpack_low_bit(DType t, const uint8_t* packed, int64_t n, uint8_t* elems);
inline int64_t packed_low_bit_bytes(DType t, int64_t n) { return (n * low_bit_width(t) + 7) / 8; }

}  // namespace kiln
