// Tensors in and out of the CLI: NumPy .npy files (`kiln run --inputs /
// --outputs`), seeded random inputs, and a fingerprint to compare runs.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "ir/tensor.h"

namespace kiln {

// .npy version 1/2, C order, little-endian; dtypes f2 f4 f8 i1 i2 i4 i8 u1 u2
// u4 u8 b1 (bf16 has no NumPy type: unsupported). Throws kiln::Error naming
// the file.
Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);

// "name:file.npy,name2:file2.npy" -> name -> path.
std::map<std::string, std::string> parse_inputs_flag(const std::string& flag);

// Deterministic pseudo-random values so `kiln run` needs no data files.
Tensor random_tensor(const TensorType& t, uint64_t seed);
// FNV-1a over the bytes.
uint64_t tensor_checksum(const Tensor& t);

}  // namespace kiln
