// Warpgroup-level tensor-core building blocks for emitted kernels (sm_90a
// only: wgmma needs the arch-specific target, NVRTC -arch=sm_90a). On the GPU
// each is inline PTX; under KILN_SIM each is backends/sim/warpgroup_mma.h's
// version, which decodes the descriptors and places the accumulators as the
// PTX ISA documents (docs/codegen.md, "wgmma GEMM (sm_90a)").
//
// PTX ISA sections followed (PTX ISA 8.x, "Asynchronous Warpgroup Level
// Matrix Multiply-Accumulate Instructions"):
//   9.7.15.5.1.1.1 "Matrix Fragments for wgmma.mma_async.m64nNk16": the f32
//     accumulator D: N/2 registers per thread; thread t of the warpgroup
//     (warp w = t / 32, g = lane >> 2, c = lane % 4) holds d_i at
//       row 16 w + g + 8 ((i >> 1) & 1), col 8 (i >> 2) + 2 c + (i & 1).
//   9.7.15.5.1.2 "Shared Memory Matrix Layout" (K-major, imm-trans 0 only
//     here) and "Matrix Descriptor Format": a 64-bit descriptor with
//       bits 0-13  start address, (addr & 0x3FFFF) >> 4
//       bits 16-29 leading dimension byte offset (LBO) >> 4
//       bits 32-45 stride dimension byte offset (SBO) >> 4
//       bits 49-51 matrix base offset (0 here: swizzle atoms start at their
//                  pattern's boundary)
//       bits 62-63 swizzle: 0 none, 1 128B, 2 64B, 3 32B.
//     K-major without swizzle: 8x8 core matrices of 8 rows x 16 contiguous
//     bytes; LBO = bytes between core matrices adjacent in K, SBO = bytes
//     between core matrices adjacent in M/N. K-major with a W-byte swizzle
//     (W = 128, 64, 32): rows of W bytes (W/2 16-bit elements of K), 8 rows
//     an atom, SBO = bytes between atoms adjacent in M/N, LBO unused; the
//     16-byte chunk at address x is stored at x ^ (((x >> 7) & (W/16 - 1)) << 4).
//   9.7.15.6 wgmma.fence, 9.7.15.7 wgmma.commit_group, 9.7.15.8
//     wgmma.wait_group; "Async proxy": shared memory written by ordinary
//     stores (or cp.async) must be made visible to wgmma's reads with
//     fence.proxy.async.shared::cta before the (barrier and the) wgmma.
//
//   kiln_wgmma_desc(addr, lbo, sbo, swizzle): the descriptor (plain arithmetic)
//   kiln_wgmma_smem_addr(p): p's shared-window address (the descriptor's
//     start address; the simulator's window is the dynamic shared memory)
//   kiln_wgmma_m64n{64,128,256}k16_{f16,bf16}(d, desc_a, desc_b, scale_d):
//     D(64xN) = A(64x16) B(16xN) + (scale_d ? D : 0); A is M x K, B is N x K
//     in shared memory, both K-major; f32 accumulate. All 128 threads of the
//     warpgroup (4 consecutive warps, the first a multiple of 4) take part.
//   kiln_wgmma_fence(), kiln_wgmma_commit(), kiln_wgmma_wait<N>()
//   kiln_wgmma_fence_acc(d): keeps the compiler from moving accesses of the
//     accumulator registers across the asynchronous wgmma
//   kiln_fence_proxy_async_shared(): fence.proxy.async.shared::cta
// Guarded: several kernels may share a translation unit.
#ifndef KILN_WGMMA_CUH_
#define KILN_WGMMA_CUH_

#define KILN_WGMMA_SWIZZLE_NONE 0
#define KILN_WGMMA_SWIZZLE_128B 1
#define KILN_WGMMA_SWIZZLE_64B 2
#define KILN_WGMMA_SWIZZLE_32B 3

__device__ __forceinline__ unsigned long long kiln_wgmma_desc(unsigned addr, unsigned lbo, unsigned sbo, int swizzle) {
  return static_cast<unsigned long long>((addr & 0x3FFFFu) >> 4) |
         static_cast<unsigned long long>((lbo & 0x3FFFFu) >> 4) << 16 |
         static_cast<unsigned long long>((sbo & 0x3FFFFu) >> 4) << 32 |
         static_cast<unsigned long long>(swizzle & 3) << 62;
}

#ifdef KILN_SIM
#include "backends/sim/warpgroup_mma.h"
#else

template <typename T>
__device__ __forceinline__ unsigned kiln_wgmma_smem_addr(const T* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void kiln_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void kiln_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void kiln_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void kiln_fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
template <int R>
__device__ __forceinline__ void kiln_wgmma_fence_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// @WGMMA_MMA_ASYNC_WRAPPERS@ kiln_wgmma_m64n{64,128,256}k16_{f16,bf16}, one inline-asm wrapper per N and
// type, are written here by codegen/core/wgmma_text.cpp (all alike but for N; the plan holds them as written).

#endif  // KILN_SIM

// kiln_wgmma_m64k16<N, BF16>: the wrapper for N (64, 128 or 256) by template.
template <int N, bool BF16>
__device__ __forceinline__ void kiln_wgmma_m64k16(float (&d)[N / 2], unsigned long long desc_a,
                                                  unsigned long long desc_b, int scale_d) {
  static_assert(N == 64 || N == 128 || N == 256, "kiln_wgmma_m64k16: N is 64, 128 or 256");
  if constexpr (N == 64) {
    if constexpr (BF16) kiln_wgmma_m64n64k16_bf16(d, desc_a, desc_b, scale_d);
    else kiln_wgmma_m64n64k16_f16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 128) {
    if constexpr (BF16) kiln_wgmma_m64n128k16_bf16(d, desc_a, desc_b, scale_d);
    else kiln_wgmma_m64n128k16_f16(d, desc_a, desc_b, scale_d);
  } else {
    if constexpr (BF16) kiln_wgmma_m64n256k16_bf16(d, desc_a, desc_b, scale_d);
    else kiln_wgmma_m64n256k16_f16(d, desc_a, desc_b, scale_d);
  }
}

#endif  // KILN_WGMMA_CUH_
