// Tensors in and out of the CLI: NumPy .npy files (`kiln run --inputs /
// --outputs`, tools/kiln/run_inputs.h), seeded random inputs, and a
// fingerprint to compare runs.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "ir/tensor.h"

namespace kiln {

// .npy version 1/2, C order, little-endian; dtypes f2 f4 f8 i1 i2 i4 i8 u1 u2
// u4 u8 b1 (bf16 has no NumPy type: unsupported). Throws kiln::Error naming
// the file.
Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);

// Closed interval of values for random inputs (--input-range).
struct ValueRange {
  double lo = 0, hi = 0;
};

// Deterministic pseudo-random values so `kiln run` needs no data files:
// uniform in `range`, by default [-1, 1] for floating types and the integers
// 0..9 for integer types (integers: lo + floor(u * (hi - lo + 1))); bool 0/1
// whatever the range.
Tensor random_tensor(const TensorType& t, uint64_t seed, std::optional<ValueRange> range = {});
// FNV-1a over the bytes.
uint64_t tensor_checksum(const Tensor& t);

}  // namespace kiln
