// Vectorized memory access for the bandwidth-bound emitters (pointwise,
// fused pointwise, softmax, the normalizations; docs/codegen.md
// "Bandwidth-bound kernels").
//
// A kernel moves `width` contiguous elements of a buffer with one 16-byte
// (or 8/4-byte) load or store through kiln_vec<T, width>, a struct aligned to
// its size, so NVRTC emits ld/st.global.v4 (checked in
// tests/unit/codegen_bandwidth_test.cpp). A vector access is only valid when
// the buffer's address is a multiple of the vector's size; the arena gives
// 256-byte aligned buffers, but graph inputs/outputs and views may start
// anywhere, so every vectorizing kernel tests the addresses it vectorizes at
// run time (KILN_PTR_ADDR, one uniform branch) and takes its guarded scalar
// path otherwise.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"

namespace kiln::codegen {

// Guarded like the kernel prelude. KILN_PTR_ADDR(p): the address of p as an
// integer (the simulator's cuda_sim.h defines it for its checked pointers).
inline constexpr std::string_view kVectorPrelude = R"(#ifndef KILN_VECTOR_PRELUDE_
#define KILN_VECTOR_PRELUDE_
#ifndef KILN_SIM
#define KILN_PTR_ADDR(p) reinterpret_cast<unsigned long long>(p)
#endif
template <typename T, int N>
struct alignas(sizeof(T) * N) kiln_vec { T v[N]; };
#endif  // KILN_VECTOR_PRELUDE_
)";

// Bytes moved by one vector access of the widest buffer.
inline constexpr int kVectorBytes = 16;

// Elements per vector for buffers of `dtypes`: 16 bytes of the widest one
// (f32: 4, f16/bf16: 8, f64/i64: 2, bool/u8: 16).
int vector_width(const std::vector<DType>& dtypes);

// A C boolean expression: every buffer in `names` (with element size
// `elem_bytes[i]`) starts at a multiple of `width` elements.
std::string vector_aligned(const std::vector<std::string>& names, const std::vector<size_t>& elem_bytes, int width);

}  // namespace kiln::codegen
