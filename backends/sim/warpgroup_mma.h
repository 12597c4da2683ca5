// The simulator's versions of codegen/core/wgmma.cuh (included by it under
// KILN_SIM, after cuda_sim.h): wgmma.mma_async m64nNk16 with f16/bf16 inputs
// and f32 accumulators, both operands in shared memory through matrix
// descriptors, K-major (imm-trans-a = imm-trans-b = 0), and the fence,
// commit and wait around it.
//
// The shared window. A descriptor holds an 18-bit shared-memory address; on
// the GPU that is the address in the block's shared window. Here the window
// is the block's dynamic shared memory (KILN_DYNAMIC_SHARED): address x is
// byte x of it, so kiln_wgmma_smem_addr of a pointer elsewhere is an error.
// The swizzle XOR is applied to these addresses, as the GPU applies it to
// its own: a kernel that aligns its tiles in the window (1024 bytes for the
// 128-byte swizzle) sees the same layout on both.
//
// Decoding (PTX ISA 8.x, "Shared Memory Matrix Layout" and "Matrix
// Descriptor Format"; codegen/core/wgmma.cuh restates them): the start
// address, LBO and SBO are the descriptor's 14-bit fields << 4; element
// (r, k) of an operand of R rows (A: 64 rows of M, B: N rows of N) and 16
// columns of K, 2 bytes each, is at
//   no swizzle:  start + (r / 8) SBO + (k / 8) LBO + (r % 8) 16 + (k % 8) 2
//   W-byte swizzle (W = 128, 64, 32): x = start + (r / 8) SBO + (r % 8) W + 2 k,
//                then x ^ (((x >> 7) & (W / 16 - 1)) << 4)
// A nonzero matrix base offset (bits 49-51) is not simulated (an error).
//
// Execution. The wgmma is a warpgroup collective: each of the 128 threads
// publishes its descriptors, scale-d and the address of its accumulator
// registers; the last thread to arrive (which runs before the others
// resume) checks that all 128 issued the same product, reads A and B from
// shared memory, computes D = A B + (scale_d ? D : 0) in f32, in k order
// (the products of f16/bf16 values are exact in f32), and writes every
// thread's registers by the m64nNk16 D layout:
//   d_i of thread t (w = t / 32, g = lane >> 2, c = lane % 4):
//   row 16 w + g + 8 ((i >> 1) & 1), col 8 (i >> 2) + 2 c + (i & 1).
// The product runs when it is issued, not asynchronously: a kernel that
// reads the accumulators or rewrites the operand tiles before
// wgmma.wait_group retires the group is racy on the GPU but not caught here.
// What is checked: a wgmma with no wgmma.fence since the thread's last
// wait_group (or the kernel's start), a partial warpgroup, threads of one
// warpgroup issuing different descriptors, operands outside the window or
// not 16-byte aligned.
#pragma once
#include <cstdint>
#include <cstring>

#include "backends/sim/sim_runtime.h"
#include "backends/sim/warp_mma.h"

namespace kiln::sim::detail {

// The shared window: dynamic shared memory, byte for byte.
inline unsigned shared_window_address(const void* p, const char* what) {
  size_t bytes = 0;
  const unsigned char* base = static_cast<const unsigned char*>(dynamic_shared(&bytes));
  const unsigned char* q = static_cast<const unsigned char*>(p);
  if (base == nullptr || q < base || q >= base + bytes)
    kernel_error(
        fmt::format("{}: address {} is not in the block's dynamic shared memory (the simulator's shared "
                    "window for wgmma operands)",
                    what, p));
  return static_cast<unsigned>(q - base);
}
template <typename T>
unsigned wgmma_smem_addr(T* p) {
  return shared_window_address(p, "kiln_wgmma_smem_addr");
}
template <typename T>
unsigned wgmma_smem_addr(const Ptr<T>& p) {
  return shared_window_address(p.checked(), "kiln_wgmma_smem_addr");
}

inline uint16_t shared_window_u16(uint64_t addr, const char* what, const char* operand) {
  size_t bytes = 0;
  const unsigned char* base = static_cast<const unsigned char*>(dynamic_shared(&bytes));
  if (addr + 2 > bytes)
    kernel_error(fmt::format("{}: operand {} reads shared address {:#x}, past the {} bytes of dynamic shared memory",
                             what, operand, addr, bytes));
  uint16_t v;
  std::memcpy(&v, base + addr, 2);
  return v;
}

// Operand rows x 16 (k) of a K-major descriptor, as floats.
inline void wgmma_decode_operand(uint64_t desc, int rows, bool bf16, const char* what, const char* operand,
                                 float (*out)[16]) {
  const uint64_t start = (desc & 0x3FFFu) << 4, lbo = ((desc >> 16) & 0x3FFFu) << 4,
                 sbo = ((desc >> 32) & 0x3FFFu) << 4, base_offset = (desc >> 49) & 7u;
  const unsigned swizzle = static_cast<unsigned>(desc >> 62);
  if (base_offset != 0)
    kernel_error(
        fmt::format("{}: operand {}: matrix base offset {} (not simulated; kiln's kernels align their "
                    "swizzle atoms)",
                    what, operand, base_offset));
  const uint64_t width = swizzle == 1 ? 128 : swizzle == 2 ? 64 : swizzle == 3 ? 32 : 0;
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < 16; ++k) {
      uint64_t x;
      if (width == 0) {
        x = start + static_cast<uint64_t>(r / 8) * sbo + static_cast<uint64_t>(k / 8) * lbo +
            static_cast<uint64_t>(r % 8) * 16 + static_cast<uint64_t>(k % 8) * 2;
      } else {
        x = start + static_cast<uint64_t>(r / 8) * sbo + static_cast<uint64_t>(r % 8) * width +
            static_cast<uint64_t>(k) * 2;
        x ^= ((x >> 7) & (width / 16 - 1)) << 4;
      }
      const uint16_t h = shared_window_u16(x, what, operand);
      out[r][k] = bf16 ? bf16_bits_to_float(h) : half_bits_to_float(h);
    }
}

// Per-thread state of the fence / commit / wait protocol.
struct WgmmaThreadState {
  uint3 block{~0u, ~0u, ~0u};
  const void* shared = nullptr;  // the block's dynamic shared memory when the state was made
  bool fenced = false;
};
inline thread_local WgmmaThreadState wgmma_states[1024];
inline WgmmaThreadState& my_wgmma_state() {
  WgmmaThreadState& s = wgmma_states[linear_thread()];
  const uint3 b = cur().block_idx;
  size_t bytes = 0;
  const void* shared = dynamic_shared(&bytes);
  if (s.block.x != b.x || s.block.y != b.y || s.block.z != b.z || s.shared != shared) {  // another block
    s = WgmmaThreadState{};
    s.block = b;
    s.shared = shared;
  }
  return s;
}

struct WgmmaIssue {
  uint64_t desc_a, desc_b;
  int scale_d, n;
  bool bf16;
  float* d;
};

#pragma GCC push_options
#pragma GCC optimize("O2")
inline void wgmma_compute(const uint64_t* slots, const char* what) {
  const WgmmaIssue& first = *reinterpret_cast<const WgmmaIssue*>(slots[0]);
  for (int t = 1; t < 128; ++t) {
    const WgmmaIssue& o = *reinterpret_cast<const WgmmaIssue*>(slots[t]);
    if (o.desc_a != first.desc_a || o.desc_b != first.desc_b || o.scale_d != first.scale_d || o.n != first.n ||
        o.bf16 != first.bf16)
      kernel_error(
          fmt::format("{}: thread {} of the warpgroup issued descriptors {:#018x}, {:#018x} (scale-d {}) "
                      "while thread 0 issued {:#018x}, {:#018x} (scale-d {})",
                      what, t, o.desc_a, o.desc_b, o.scale_d, first.desc_a, first.desc_b, first.scale_d));
  }
  const int n = first.n;
  static thread_local float A[64][16], B[256][16], D[64][256];
  wgmma_decode_operand(first.desc_a, 64, first.bf16, what, "A", A);
  wgmma_decode_operand(first.desc_b, n, first.bf16, what, "B", B);
  auto place = [](int t, int i, int& row, int& col) {
    const int w = t / 32, lane = t % 32, g = lane >> 2, c = lane % 4;
    row = 16 * w + g + 8 * ((i >> 1) & 1);
    col = 8 * (i >> 2) + 2 * c + (i & 1);
  };
  for (int t = 0; t < 128; ++t) {
    const WgmmaIssue& o = *reinterpret_cast<const WgmmaIssue*>(slots[t]);
    for (int i = 0; i < n / 2; ++i) {
      int row, col;
      place(t, i, row, col);
      D[row][col] = first.scale_d ? o.d[i] : 0.0f;
    }
  }
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < n; ++c) {
      float acc = D[r][c];
      for (int k = 0; k < 16; ++k) acc += A[r][k] * B[c][k];
      D[r][c] = acc;
    }
  for (int t = 0; t < 128; ++t) {
    const WgmmaIssue& o = *reinterpret_cast<const WgmmaIssue*>(slots[t]);
    for (int i = 0; i < n / 2; ++i) {
      int row, col;
      place(t, i, row, col);
      o.d[i] = D[row][col];
    }
  }
}
#pragma GCC pop_options

template <int N>
void wgmma(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d, bool bf16, const char* what) {
  if (!my_wgmma_state().fenced)
    kernel_error(
        fmt::format("{} without a wgmma.fence since this thread's last wgmma.wait_group (PTX: the fence "
                    "must precede the first wgmma.mma_async touching its registers)",
                    what));
  WgmmaIssue mine{desc_a, desc_b, scale_d, N, bf16, d};
  const WarpGroupSlots s = warpgroup_collective(reinterpret_cast<uintptr_t>(&mine), what);
  if (s.last) wgmma_compute(s.slots, what);
}

}  // namespace kiln::sim::detail

// ---- The device functions of codegen/core/wgmma.cuh ----
template <typename P>
unsigned kiln_wgmma_smem_addr(const P& p) {
  return ::kiln::sim::detail::wgmma_smem_addr(p);
}
inline void kiln_wgmma_fence() { ::kiln::sim::detail::my_wgmma_state().fenced = true; }
inline void kiln_wgmma_commit() { (void)::kiln::sim::detail::my_wgmma_state(); }
template <int N>
void kiln_wgmma_wait() {
  ::kiln::sim::detail::my_wgmma_state().fenced = false;
}
inline void kiln_fence_proxy_async_shared() {}
template <int R>
void kiln_wgmma_fence_acc(float (&)[R]) {}

#define KILN_SIM_WGMMA_WRAPPER(N, T, BF16)                                                                        \
  inline void kiln_wgmma_m64n##N##k16_##T(float(&d)[N / 2], unsigned long long desc_a, unsigned long long desc_b, \
                                          int scale_d) {                                                          \
    ::kiln::sim::detail::wgmma<N>(d, desc_a, desc_b, scale_d, BF16, "wgmma.mma_async.m64n" #N "k16." #T);         \
  }
KILN_SIM_WGMMA_WRAPPER(64, f16, false)
KILN_SIM_WGMMA_WRAPPER(64, bf16, true)
KILN_SIM_WGMMA_WRAPPER(128, f16, false)
KILN_SIM_WGMMA_WRAPPER(128, bf16, true)
KILN_SIM_WGMMA_WRAPPER(256, f16, false)
KILN_SIM_WGMMA_WRAPPER(256, bf16, true)
#undef KILN_SIM_WGMMA_WRAPPER
