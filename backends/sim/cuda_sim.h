// The CUDA shim: a kernel source compiled for the simulator includes this
// instead of the CUDA runtime, and the host compiler builds it as C++.
//
// __half / __nv_bfloat16 and the vector types are the CUDA toolkit's own
// headers in host mode (bit-exact conversions, round to nearest even); the
// rest (qualifiers, index variables, barriers, warp collectives, atomics,
// intrinsics) is defined here on top of sim_runtime.h.
//
// Differences from NVRTC source that codegen writes through macros:
//   KILN_PTR(T) name            `T* __restrict__ name` there, kiln::sim::Ptr<T> here
//   KILN_PTR_CAST(U, p)          reinterpret_cast<U*>(p) there, kiln::sim::ptr_cast<U>(p) here
//   KILN_PTR_ADDR(p)             the address as an integer (alignment tests of vector access)
//   KILN_DYNAMIC_SHARED(T, name) `extern __shared__ T name[]` there, a checked Ptr<T> here
// `__shared__` is thread_local: one block runs at a time per OS thread, and
// all fibers of a block share their OS thread's variables, as a block shares
// shared memory.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>

#include "backends/sim/sim_runtime.h"

#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __constant__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#undef __grid_constant__
#define __global__
#define __device__
#define __host__
#define __constant__
#define __shared__ thread_local
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__

#define KILN_SIM 1
#define KILN_PTR(T) ::kiln::sim::Ptr<T>
#define KILN_PTR_CAST(U, p) ::kiln::sim::ptr_cast<U>(p)
#define KILN_PTR_ADDR(p) ::kiln::sim::ptr_address(p)
#define KILN_DYNAMIC_SHARED(T, name) ::kiln::sim::Ptr<T> name = ::kiln::sim::detail::dynamic_shared_as<T>(#name)

#define threadIdx (::kiln::sim::detail::cur().thread_idx)
#define blockIdx (::kiln::sim::detail::cur().block_idx)
#define blockDim (::kiln::sim::detail::cur().block_dim)
#define gridDim (::kiln::sim::detail::cur().grid_dim)
#define warpSize 32
#define __syncthreads() ::kiln::sim::detail::block_barrier(__FILE__, __LINE__)
#define __syncthreads_count(p) ::kiln::sim::detail::block_barrier(__FILE__, __LINE__, (p))
#define __syncthreads_and(p) (::kiln::sim::detail::block_barrier(__FILE__, __LINE__, !(p)) == 0 ? 1 : 0)
#define __syncthreads_or(p) (::kiln::sim::detail::block_barrier(__FILE__, __LINE__, (p)) != 0 ? 1 : 0)

namespace kiln::sim::detail {

template <typename T>
Ptr<T> dynamic_shared_as(const char* name) {
  size_t bytes = 0;
  void* p = dynamic_shared(&bytes);
  return Ptr<T>(static_cast<T*>(p), static_cast<int64_t>(bytes / sizeof(T)), name);
}

template <typename T>
uint64_t to_slot(const T& v) {
  // __half2 and friends are plain bits with user-written copy operations.
  static_assert(sizeof(T) <= 8 && std::is_standard_layout_v<T>, "warp collective on a type wider than 8 bytes");
  uint64_t s = 0;
  std::memcpy(&s, static_cast<const void*>(&v), sizeof(T));
  return s;
}
template <typename T>
T from_slot(uint64_t s) {
  T v;
  std::memcpy(static_cast<void*>(&v), &s, sizeof(T));
  return v;
}

// PTX shfl.sync: the source lane per mode, or the caller's own lane when the
// source falls outside its width-sized segment.
enum class Shfl { idx, up, down, bfly };
template <typename T>
T shuffle(Shfl mode, unsigned mask, const T& var, int b, int width, const char* what) {
  if (width < 1 || width > 32 || (width & (width - 1)) != 0)
    kernel_error(fmt::format("{} with width {}: not a power of two in [1, 32]", what, width));
  WarpSlots w = warp_collective(mask, to_slot(var), what);
  const int lane = static_cast<int>(cur().lane);
  const int segmask = (32 - width) & 31;  // lanes of other segments: high bits
  const int clamp = (mode == Shfl::up) ? 0 : 31;
  const int max_lane = (lane & segmask) | (clamp & ~segmask);
  const int min_lane = lane & segmask;
  int j = lane;
  bool ok = false;
  switch (mode) {
    case Shfl::up:
      j = lane - b;
      ok = j >= max_lane;
      break;
    case Shfl::down:
      j = lane + b;
      ok = j <= max_lane;
      break;
    case Shfl::bfly:
      j = lane ^ b;
      ok = j <= max_lane;
      break;
    case Shfl::idx:
      j = min_lane | (b & 31 & ~segmask);
      ok = j <= max_lane;
      break;
  }
  if (!ok) j = lane;
  if (!(w.lanes >> j & 1u))
    kernel_error(fmt::format("{} reads lane {}, which does not take part (mask lanes {:#010x})", what, j, w.lanes));
  return from_slot<T>(w.slots[j]);
}

template <typename T>
T atomic_rmw(T* addr, auto op) {
  std::atomic_ref<T> a(*addr);
  T old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, op(old), std::memory_order_seq_cst, std::memory_order_relaxed)) {
  }
  return old;
}

}  // namespace kiln::sim::detail

// ---- Warp collectives ----
template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
  return ::kiln::sim::detail::shuffle(::kiln::sim::detail::Shfl::idx, mask, var, src_lane, width, "__shfl_sync");
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ::kiln::sim::detail::shuffle(::kiln::sim::detail::Shfl::up, mask, var, static_cast<int>(delta), width,
                                      "__shfl_up_sync");
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ::kiln::sim::detail::shuffle(::kiln::sim::detail::Shfl::down, mask, var, static_cast<int>(delta), width,
                                      "__shfl_down_sync");
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  return ::kiln::sim::detail::shuffle(::kiln::sim::detail::Shfl::bfly, mask, var, lane_mask, width, "__shfl_xor_sync");
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  auto w = ::kiln::sim::detail::warp_collective(mask, pred != 0, "__ballot_sync");
  unsigned r = 0;
  for (int l = 0; l < 32; ++l)
    if ((w.lanes >> l & 1u) && w.slots[l]) r |= 1u << l;
  return r;
}
inline int __any_sync(unsigned mask, int pred) {
  auto w = ::kiln::sim::detail::warp_collective(mask, pred != 0, "__any_sync");
  for (int l = 0; l < 32; ++l)
    if ((w.lanes >> l & 1u) && w.slots[l]) return 1;
  return 0;
}
inline int __all_sync(unsigned mask, int pred) {
  auto w = ::kiln::sim::detail::warp_collective(mask, pred != 0, "__all_sync");
  for (int l = 0; l < 32; ++l)
    if ((w.lanes >> l & 1u) && !w.slots[l]) return 0;
  return 1;
}
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::kiln::sim::detail::warp_collective(mask, 0, "__syncwarp"); }
inline unsigned __activemask() { return ::kiln::sim::detail::active_mask(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// ---- Atomics (atomic across blocks on different OS threads) ----
#define KILN_SIM_ATOMIC_ADDSUB(T)                                               \
  inline T atomicAdd(T* a, T v) { return std::atomic_ref<T>(*a).fetch_add(v); } \
  inline T atomicExch(T* a, T v) { return std::atomic_ref<T>(*a).exchange(v); }
KILN_SIM_ATOMIC_ADDSUB(int)
KILN_SIM_ATOMIC_ADDSUB(unsigned)
KILN_SIM_ATOMIC_ADDSUB(unsigned long long)
KILN_SIM_ATOMIC_ADDSUB(float)
#undef KILN_SIM_ATOMIC_ADDSUB
inline double atomicAdd(double* a, double v) { return std::atomic_ref<double>(*a).fetch_add(v); }
inline int atomicSub(int* a, int v) { return std::atomic_ref<int>(*a).fetch_sub(v); }
inline unsigned atomicSub(unsigned* a, unsigned v) { return std::atomic_ref<unsigned>(*a).fetch_sub(v); }
#define KILN_SIM_ATOMIC_INT(T)                                                     \
  inline T atomicMax(T* a, T v) {                                                  \
    return ::kiln::sim::detail::atomic_rmw(a, [v](T o) { return o < v ? v : o; }); \
  }                                                                                \
  inline T atomicMin(T* a, T v) {                                                  \
    return ::kiln::sim::detail::atomic_rmw(a, [v](T o) { return v < o ? v : o; }); \
  }                                                                                \
  inline T atomicCAS(T* a, T cmp, T v) {                                           \
    std::atomic_ref<T>(*a).compare_exchange_strong(cmp, v);                        \
    return cmp;                                                                    \
  }                                                                                \
  inline T atomicAnd(T* a, T v) { return std::atomic_ref<T>(*a).fetch_and(v); }    \
  inline T atomicOr(T* a, T v) { return std::atomic_ref<T>(*a).fetch_or(v); }      \
  inline T atomicXor(T* a, T v) { return std::atomic_ref<T>(*a).fetch_xor(v); }
KILN_SIM_ATOMIC_INT(int)
KILN_SIM_ATOMIC_INT(unsigned)
KILN_SIM_ATOMIC_INT(unsigned long long)
#undef KILN_SIM_ATOMIC_INT
inline long long atomicMax(long long* a, long long v) {
  return ::kiln::sim::detail::atomic_rmw(a, [v](long long o) { return o < v ? v : o; });
}
inline long long atomicMin(long long* a, long long v) {
  return ::kiln::sim::detail::atomic_rmw(a, [v](long long o) { return v < o ? v : o; });
}
inline unsigned atomicInc(unsigned* a, unsigned v) {
  return ::kiln::sim::detail::atomic_rmw(a, [v](unsigned o) { return o >= v ? 0u : o + 1; });
}
inline unsigned atomicDec(unsigned* a, unsigned v) {
  return ::kiln::sim::detail::atomic_rmw(a, [v](unsigned o) { return (o == 0 || o > v) ? v : o - 1; });
}
// The same on checked pointers: atomicAdd(out + i, v).
template <typename T, typename... A>
auto atomicAdd(::kiln::sim::Ptr<T> p, A... v) {
  return atomicAdd(p.checked(), v...);
}
template <typename T, typename... A>
auto atomicSub(::kiln::sim::Ptr<T> p, A... v) {
  return atomicSub(p.checked(), v...);
}
template <typename T, typename... A>
auto atomicExch(::kiln::sim::Ptr<T> p, A... v) {
  return atomicExch(p.checked(), v...);
}
template <typename T, typename... A>
auto atomicMax(::kiln::sim::Ptr<T> p, A... v) {
  return atomicMax(p.checked(), v...);
}
template <typename T, typename... A>
auto atomicMin(::kiln::sim::Ptr<T> p, A... v) {
  return atomicMin(p.checked(), v...);
}
template <typename T, typename... A>
auto atomicCAS(::kiln::sim::Ptr<T> p, A... v) {
  return atomicCAS(p.checked(), v...);
}

// ---- Math intrinsics: the precise host functions ----
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline float __saturatef(float x) { return x != x ? 0.0f : fminf(fmaxf(x, 0.0f), 1.0f); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline long long __double_as_longlong(double x) { return std::bit_cast<long long>(x); }
inline double __longlong_as_double(long long x) { return std::bit_cast<double>(x); }
inline int __float2int_rn(float x) { return static_cast<int>(nearbyintf(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(floorf(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(ceilf(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __popcll(unsigned long long x) { return std::popcount(x); }
inline int __clz(int x) { return std::countl_zero(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return std::countl_zero(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return x == 0 ? 0 : std::countr_zero(static_cast<unsigned>(x)) + 1; }
inline int __ffsll(long long x) { return x == 0 ? 0 : std::countr_zero(static_cast<unsigned long long>(x)) + 1; }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
template <typename T>
T __ldg(const T* p) {
  return *p;
}
// CUDA's device min/max overloads.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a < b ? b : a; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a < b ? b : a; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a < b ? b : a; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
// The mixed forms CUDA declares (crt/math_functions.hpp): the wider/unsigned type wins.
inline unsigned min(int a, unsigned b) { return min(static_cast<unsigned>(a), b); }
inline unsigned min(unsigned a, int b) { return min(a, static_cast<unsigned>(b)); }
inline unsigned max(int a, unsigned b) { return max(static_cast<unsigned>(a), b); }
inline unsigned max(unsigned a, int b) { return max(a, static_cast<unsigned>(b)); }
inline double min(float a, double b) { return fmin(a, b); }
inline double min(double a, float b) { return fmin(a, b); }
inline double max(float a, double b) { return fmax(a, b); }
inline double max(double a, float b) { return fmax(a, b); }
