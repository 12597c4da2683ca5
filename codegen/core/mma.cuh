// Warp-level tensor-core building blocks for emitted kernels (sm_80+):
// mma.sync fragment products, ldmatrix fragment loads from shared memory and
// cp.async 16-byte global->shared copies. On the GPU each is one inline-PTX
// instruction; under KILN_SIM each is backends/sim/warp_mma.h's version, which
// follows the PTX ISA fragment layouts element for element (docs/codegen.md,
// "Tensor-core GEMM", lists them).
//
// Fragments are 32-bit registers: two 16-bit elements per register (the lower
// index in the low half) for f16/bf16, one tf32 (an f32 bit pattern) per
// register for tf32. Accumulators are 4 floats.
//
//   kiln_mma_m16n8k16_f16 / _bf16 (d, a[4], b[2], c): D(16x8) = A(16x16) B(16x8) + C, f32 accumulate
//   kiln_mma_m16n8k8_tf32 (d, a[4], b[2], c):        D(16x8) = A(16x8)  B(8x8)  + C
//   kiln_mma_tile_f16 / _bf16<MI, NI>(acc, a[MI][4], b[NI][2]): acc[mi][ni] += A_mi B_ni
//   kiln_ldmatrix_x4 / _x2 (r, row) and the _trans forms: lane 8*i+j gives the
//     address of row j of 8x8 matrix i (16 contiguous bytes, 16-byte aligned)
//   kiln_cp_async16(dst, src), kiln_cp_async16_zfill(dst, src, src_bytes),
//     kiln_cp_async_commit(), kiln_cp_async_wait<N>() (wait_group N)
//   kiln_f32_to_tf32(x): cvt.rna.tf32.f32 (nearest, ties away) as a register
// `d` may be `c` (accumulate in place). Guarded: several kernels may share a
// translation unit.
#ifndef KILN_MMA_CUH_
#define KILN_MMA_CUH_
#ifdef KILN_SIM
#include "backends/sim/warp_mma.h"
#else

__device__ __forceinline__ void kiln_mma_m16n8k16_f16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                                      const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}

__device__ __forceinline__ void kiln_mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                                       const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}

__device__ __forceinline__ void kiln_mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                                      const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
}

// acc[mi][ni] += A_mi B_ni for every mi < MI, ni < NI (MI, NI <= 4): MI x NI
// m16n8k16 products (one warp exchange in the simulator).
template <int MI, int NI>
__device__ __forceinline__ void kiln_mma_tile_f16(float (&acc)[MI][NI][4], const unsigned (&a)[MI][4],
                                                  const unsigned (&b)[NI][2]) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) kiln_mma_m16n8k16_f16(acc[mi][ni], a[mi], b[ni], acc[mi][ni]);
}
template <int MI, int NI>
__device__ __forceinline__ void kiln_mma_tile_bf16(float (&acc)[MI][NI][4], const unsigned (&a)[MI][4],
                                                   const unsigned (&b)[NI][2]) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) kiln_mma_m16n8k16_bf16(acc[mi][ni], a[mi], b[ni], acc[mi][ni]);
}

__device__ __forceinline__ unsigned kiln_f32_to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ unsigned kiln_smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

template <typename T>
__device__ __forceinline__ void kiln_ldmatrix_x4(unsigned (&r)[4], const T* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(kiln_smem_addr(row)));
}
template <typename T>
__device__ __forceinline__ void kiln_ldmatrix_x4_trans(unsigned (&r)[4], const T* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(kiln_smem_addr(row)));
}
template <typename T>
__device__ __forceinline__ void kiln_ldmatrix_x2(unsigned (&r)[2], const T* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(kiln_smem_addr(row)));
}
template <typename T>
__device__ __forceinline__ void kiln_ldmatrix_x2_trans(unsigned (&r)[2], const T* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(kiln_smem_addr(row)));
}

// 16 bytes global -> shared, bypassing L1 (.cg). Both addresses 16-byte aligned.
template <typename T>
__device__ __forceinline__ void kiln_cp_async16(T* dst, const T* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(kiln_smem_addr(dst)), "l"(src));
}
// The same reading only the first `src_bytes` (0..16) bytes of src and
// zero-filling the rest; with 0 nothing is read (src need not be valid data).
template <typename T>
__device__ __forceinline__ void kiln_cp_async16_zfill(T* dst, const T* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(kiln_smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void kiln_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's most recent committed groups are in
// flight. A memory clobber: the compiler must not move shared-memory reads of
// the landed data above the wait.
template <int N>
__device__ __forceinline__ void kiln_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#endif  // KILN_SIM
#endif  // KILN_MMA_CUH_
