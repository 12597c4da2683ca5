// Test kernels for the simulator, written as kiln's codegen writes CUDA
// source: only the shim is included, pointer parameters go through KILN_PTR.
#include "backends/sim/cuda_sim.h"

// Each thread publishes a value, then reads its neighbour's after the barrier,
// three rounds over the same shared buffer (a missing barrier reads stale data).
__global__ void barrier_rotate(KILN_PTR(int) out) {
  __shared__ int buf[128];
  int t = threadIdx.x, n = blockDim.x;
  int v = t + 1000 * blockIdx.x;
  for (int round = 0; round < 3; ++round) {
    buf[t] = v;
    __syncthreads();
    v = buf[(t + 1) % n];
    __syncthreads();
  }
  out[blockIdx.x * n + t] = v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// design.md's feasibility kernel: one block per row of `cols` values, 256
// threads, strided loads, five xor shuffles per warp, one barrier.
__global__ void __launch_bounds__(256) row_max(KILN_PTR(const float) x, KILN_PTR(float) out, int cols) {
  __shared__ float partial[8];
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x[blockIdx.x * cols + c]);
  m = warp_max(m);
  int warp = threadIdx.x / warpSize, lane = threadIdx.x % warpSize;
  if (lane == 0) partial[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = lane < static_cast<int>(blockDim.x / warpSize) ? partial[lane] : -INFINITY;
    m = warp_max(m);
    if (lane == 0) out[blockIdx.x] = m;
  }
}

// Per warp: xor-reduced sum (every lane), down-reduced sum (lane 0), an
// inclusive scan with __shfl_up_sync, a broadcast within 8-lane segments.
__global__ void warp_ops(KILN_PTR(const int) x, KILN_PTR(int) xor_sum, KILN_PTR(int) down_sum, KILN_PTR(int) scan,
                         KILN_PTR(int) bcast) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[i];
  int s = v;
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  xor_sum[i] = s;
  int d = v;
  for (int off = 16; off > 0; off /= 2) d += __shfl_down_sync(0xffffffffu, d, off);
  if (threadIdx.x % 32 == 0) down_sum[i / 32] = d;
  int sc = v;
  for (int off = 1; off < 32; off *= 2) {
    int o = __shfl_up_sync(0xffffffffu, sc, off);
    if (threadIdx.x % 32 >= static_cast<unsigned>(off)) sc += o;
  }
  scan[i] = sc;
  bcast[i] = __shfl_sync(0xffffffffu, v, 3, 8);
}

__global__ void votes(KILN_PTR(const float) x, KILN_PTR(unsigned) ballot, KILN_PTR(int) any, KILN_PTR(int) all) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  bool p = x[i] > 0.0f;
  unsigned b = __ballot_sync(0xffffffffu, p);
  int a = __any_sync(0xffffffffu, p);
  int l = __all_sync(0xffffffffu, p);
  __syncwarp();
  if (threadIdx.x % 32 == 0) {
    ballot[i / 32] = b;
    any[i / 32] = a;
    all[i / 32] = l;
  }
}

__global__ void atomic_count(KILN_PTR(int) total, KILN_PTR(unsigned long long) wide, KILN_PTR(float) fsum,
                             KILN_PTR(int) maxv) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&total[0], t % 7 + 1);
  atomicAdd(wide, 1ull << 20);
  atomicAdd(fsum + 0, 1.0f);
  atomicMax(&maxv[0], (t * 7919) % 100003);
}

// f32 -> f16/bf16 -> f32 and the 16-bit patterns, through the toolkit's intrinsics.
__global__ void convert16(KILN_PTR(const float) x, KILN_PTR(unsigned short) h_bits, KILN_PTR(float) h_back,
                          KILN_PTR(unsigned short) b_bits, KILN_PTR(float) b_back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half h = __float2half(x[i]);
  __nv_bfloat16 b = __float2bfloat16(x[i]);
  h_bits[i] = __half_as_ushort(h);
  b_bits[i] = __bfloat16_as_ushort(b);
  h_back[i] = __half2float(__ushort_as_half(h_bits[i]));
  b_back[i] = __bfloat162float(__ushort_as_bfloat16(b_bits[i]));
}

// Writes one element past the end from the last thread.
__global__ void oob_write(KILN_PTR(float) out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = 1.0f;
  if (i == n - 1) out[i + 1] = 2.0f;
}

// Half the block skips the barrier and returns.
__global__ void divergent_barrier(KILN_PTR(int) out) {
  if (threadIdx.x < 16) {
    __syncthreads();
    out[threadIdx.x] = 1;
  }
}

// Two halves of the block reach different barriers.
__global__ void split_barriers(KILN_PTR(int) out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

// Lanes 16..31 leave while lanes 0..15 shuffle with the full mask.
__global__ void divergent_shuffle(KILN_PTR(int) out) {
  int v = threadIdx.x;
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_down_sync(0xffffffffu, v, 1);
}

// Dynamic shared memory, 2-D blocks and float4 casts of a checked pointer.
__global__ void transpose_tile(KILN_PTR(const float) in, KILN_PTR(float) out, int n) {
  KILN_DYNAMIC_SHARED(float, tile);
  int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
  tile[threadIdx.y * 17 + threadIdx.x] = in[y * n + x];
  __syncthreads();
  int ox = blockIdx.y * 16 + threadIdx.x, oy = blockIdx.x * 16 + threadIdx.y;
  out[oy * n + ox] = tile[threadIdx.x * 17 + threadIdx.y];
}

__global__ void scale4(KILN_PTR(float) data, float s, int n4) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n4) return;
  KILN_PTR(float4) v = KILN_PTR_CAST(float4, data);
  float4 a = v[i];
  v[i] = make_float4(a.x * s, a.y * s, a.z * s, a.w * s);
}

// Lane 0 of each warp waits at the block barrier while lanes 1..31 wait in a
// full-mask shuffle for it: neither can complete.
__global__ void deadlock(KILN_PTR(int) out) {
  int v = threadIdx.x;
  if (threadIdx.x % 32 == 0) __syncthreads();
  else v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

// f16 row sums: half loads, float accumulation, a reduction that shuffles
// __half2 and __nv_bfloat16 values directly, __syncthreads_count/and/or.
// 48 threads: the second warp has 16 lanes, so the full mask names 16.
__global__ void half_ops(KILN_PTR(const __half) x, KILN_PTR(__half) hsum, KILN_PTR(__nv_bfloat16) bmax,
                         KILN_PTR(int) counts) {
  __shared__ __half stage[48];
  int t = threadIdx.x;
  __half h = x[t];
  stage[t] = __hadd(h, __float2half(1.0f));
  int c = __syncthreads_count(__half2float(h) > 0.0f);
  int all = __syncthreads_and(__half2float(h) > -100.0f);
  int any = __syncthreads_or(__half2float(h) > 100.0f);
  __half2 pair = __halves2half2(stage[t], stage[(t + 1) % 48]);
  int width = t < 32 ? 32 : 16;
  for (int off = width / 2; off > 0; off /= 2) pair = __hadd2(pair, __shfl_xor_sync(0xffffffffu, pair, off, width));
  __nv_bfloat16 b = __float2bfloat16(__half2float(h));
  for (int off = width / 2; off > 0; off /= 2) b = __hmax(b, __shfl_down_sync(0xffffffffu, b, off, width));
  if (t % 32 == 0) {
    hsum[t / 32] = __low2half(pair);
    bmax[t / 32] = b;
  }
  if (t == 0) {
    counts[0] = c;
    counts[1] = all;
    counts[2] = any;
    counts[3] = min(t - 1, 5u) == 5u;  // CUDA's mixed min: -1 becomes unsigned
  }
}
