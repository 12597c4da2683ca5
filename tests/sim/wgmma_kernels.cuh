// Test kernels for codegen/core/wgmma.cuh. Compiled twice, like
// mma_kernels.cuh: by the host compiler for the simulator
// (wgmma_kernels.cu.cpp) and by NVRTC for sm_90a (wgmma_test.cpp), so it
// includes nothing itself.
//
// Each warpgroup of the block computes D (64 x N) = A (64 x KT) B (N x KT)^T
// + C with KT / 16 wgmma.mma_async m64nNk16 in one commit group. A and B
// (16-bit bit patterns, row-major, k contiguous) are stored into dynamic
// shared memory in the K-major layout the descriptor names, written here
// from the PTX ISA's layout rules ("Shared Memory Matrix Layout"):
//   swizzle none:  element (r, k) at (r / 8) SBO + (k / 8) LBO + (r % 8) 16 + (k % 8) 2,
//                  with LBO = 16 * rows (the K halves apart), SBO = 128
//   W-byte swizzle: x = (r / 8) 8W + (r % 8) W + 2k, stored at x ^ (((x >> 7) & (W/16 - 1)) << 4),
//                  SBO = 8W; KT = W / 2 (one row of the atom), the start
//                  address advancing 32 bytes per k16 step
// Operand regions start at 1024-byte boundaries of the shared window.
// `wrong` corrupts the descriptors the product uses (1: LBO + 16 bytes,
// 2: the other swizzle width, 3: SBO + 16 bytes), so a test can see the
// result change. `skip_fence`: issue without wgmma.fence (an error).

__device__ __forceinline__ int kiln_test_swizzle_width(int swizzle) {
  return swizzle == KILN_WGMMA_SWIZZLE_128B ? 128 : swizzle == KILN_WGMMA_SWIZZLE_64B ? 64
                                                : swizzle == KILN_WGMMA_SWIZZLE_32B  ? 32
                                                                                     : 0;
}

// Byte offset of element (r, k) of an operand of `rows` rows in its region.
__device__ __forceinline__ unsigned kiln_test_kmajor_offset(int r, int k, int rows, int swizzle) {
  const int w = kiln_test_swizzle_width(swizzle);
  if (w == 0) return (r / 8) * 128 + (k / 8) * (16 * rows) + (r % 8) * 16 + (k % 8) * 2;
  const unsigned x = (r / 8) * 8 * w + (r % 8) * w + 2 * k;
  return x ^ (((x >> 7) & (w / 16 - 1)) << 4);
}

template <int N>
__device__ void kiln_test_wgmma(KILN_PTR(const unsigned short) A, KILN_PTR(const unsigned short) B,
                                KILN_PTR(const float) C, KILN_PTR(float) D, int bf16, int swizzle, int wrong,
                                int skip_fence) {
  KILN_DYNAMIC_SHARED(unsigned short, smem);
  const int w = kiln_test_swizzle_width(swizzle);
  const int KT = w == 0 ? 32 : w / 2;
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  A += wg * 64 * KT;
  B += wg * N * KT;
  C += wg * 64 * N;
  D += wg * 64 * N;
  // Regions: per warpgroup, A (64 x KT) then B (N x KT), each rounded up to 1024 bytes.
  const unsigned window = kiln_wgmma_smem_addr(smem);
  const unsigned base = (window + 1023u) & ~1023u;
  const unsigned a_bytes = ((64 * KT * 2 + 1023) / 1024) * 1024, b_bytes = ((N * KT * 2 + 1023) / 1024) * 1024;
  const unsigned a_at = base + wg * (a_bytes + b_bytes), b_at = a_at + a_bytes;
  for (int i = t; i < 64 * KT; i += 128) {
    const int r = i / KT, k = i % KT;
    smem[(a_at - window + kiln_test_kmajor_offset(r, k, 64, swizzle)) / 2] = A[i];
  }
  for (int i = t; i < N * KT; i += 128) {
    const int r = i / KT, k = i % KT;
    smem[(b_at - window + kiln_test_kmajor_offset(r, k, N, swizzle)) / 2] = B[i];
  }
  kiln_fence_proxy_async_shared();  // the stores above are generic-proxy writes; wgmma reads via the async proxy
  __syncthreads();

  float d[N / 2];
  const int g = lane >> 2, c = lane % 4;
  for (int i = 0; i < N / 2; ++i) {
    const int row = 16 * warp + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * c + (i & 1);
    d[i] = C[row * N + col];
  }
  unsigned lbo_a = w == 0 ? 16 * 64 : 16, lbo_b = w == 0 ? 16 * N : 16;
  unsigned sbo = w == 0 ? 128 : 8 * w;
  int mode = swizzle;
  if (wrong == 1) lbo_a += 16, lbo_b += 16;
  if (wrong == 2) mode = swizzle == KILN_WGMMA_SWIZZLE_128B ? KILN_WGMMA_SWIZZLE_64B : KILN_WGMMA_SWIZZLE_128B;
  if (wrong == 3) sbo += 16;
  kiln_wgmma_fence_acc(d);
  if (!skip_fence) kiln_wgmma_fence();
  for (int s = 0; s < KT / 16; ++s) {
    // The k16 step s: swizzled, 32 bytes further along the atom's rows; else two LBOs on.
    const unsigned a_start = w == 0 ? a_at + s * 2 * (16 * 64) : a_at + 32 * s;
    const unsigned b_start = w == 0 ? b_at + s * 2 * (16 * N) : b_at + 32 * s;
    const unsigned long long da = kiln_wgmma_desc(a_start, lbo_a, sbo, mode);
    const unsigned long long db = kiln_wgmma_desc(b_start, lbo_b, sbo, mode);
    if (bf16)
      kiln_wgmma_m64k16<N, true>(d, da, db, 1);
    else
      kiln_wgmma_m64k16<N, false>(d, da, db, 1);
  }
  kiln_wgmma_commit();
  kiln_wgmma_wait<0>();
  kiln_wgmma_fence_acc(d);
  for (int i = 0; i < N / 2; ++i) {
    const int row = 16 * warp + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * c + (i & 1);
    D[row * N + col] = d[i];
  }
}

__global__ void wgmma_n64(KILN_PTR(const unsigned short) A, KILN_PTR(const unsigned short) B,
                                     KILN_PTR(const float) C, KILN_PTR(float) D, int bf16, int swizzle, int wrong,
                                     int skip_fence) {
  kiln_test_wgmma<64>(A, B, C, D, bf16, swizzle, wrong, skip_fence);
}
__global__ void wgmma_n128(KILN_PTR(const unsigned short) A, KILN_PTR(const unsigned short) B,
                                      KILN_PTR(const float) C, KILN_PTR(float) D, int bf16, int swizzle, int wrong,
                                      int skip_fence) {
  kiln_test_wgmma<128>(A, B, C, D, bf16, swizzle, wrong, skip_fence);
}
__global__ void wgmma_n256(KILN_PTR(const unsigned short) A, KILN_PTR(const unsigned short) B,
                                      KILN_PTR(const float) C, KILN_PTR(float) D, int bf16, int swizzle, int wrong,
                                      int skip_fence) {
  kiln_test_wgmma<256>(A, B, C, D, bf16, swizzle, wrong, skip_fence);
}
