// The simulator's versions of codegen/mma.cuh (included by it under KILN_SIM,
// after cuda_sim.h): mma.sync, ldmatrix and cp.async with the PTX ISA's
// semantics on the simulator's fibers.
//
// Warp-collective ops (mma, ldmatrix) exchange operands between the 32 lanes:
// each lane copies its operands into a per-lane buffer and publishes the
// buffer's address through the warp collective the shuffles use
// (warp_collective: every lane of the warp must arrive; a partial warp is an
// error, as on the GPU). Each lane then computes its own result registers
// from the other lanes' buffers, by the documented fragment layouts. A lane
// alternates between two buffers: it writes one again only two collectives
// later, after every lane has passed the collective in between, so no lane
// still reads it. Buffers are per OS thread (one block at a time runs there)
// and indexed by the thread's linear index in the block.
//
// Layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point
// type", "... for mma.m16n8k8" and "ldmatrix"), g = lane >> 2, t = lane % 4:
//   m16n8k16 f16/bf16  A (16x16): a_i (i = 0..7, register i/2, low half even i)
//                        row g + 8*((i>>1)&1), col 2t + (i&1) + 8*(i>>2)
//                      B (16x8):  b_i (i = 0..3) row 2t + (i&1) + 8*(i>>1), col g
//   m16n8k8 tf32       A (16x8):  a_i (i = 0..3) row g + 8*(i&1), col t + 4*(i>>1)
//                      B (8x8):   b_i (i = 0..1) row t + 4*i, col g
//   C/D (16x8 f32)     c_i (i = 0..3) row g + 8*(i>>1), col 2t + (i&1)
//   ldmatrix .m8n8     lane 8*m + j addresses row j of matrix m; register m of
//                      lane l holds row l>>2, cols 2(l%4), 2(l%4)+1 of matrix m
//                      (.trans: rows 2(l%4), 2(l%4)+1 of col l>>2).
// Products: f16 and bf16 inputs are exact in float (their products too);
// tf32 inputs are the f32 bit patterns with the low 13 mantissa bits
// dropped, as the tensor cores read a .b32 register holding an f32. The 16
// (or 8) products are accumulated in f32 onto C in k order.
//
// cp.async: the source is read (and bounds-checked) when the copy is issued;
// the bytes land in shared memory when the issuing thread's wait_group
// retires its group. A kernel that reads the destination before waiting (and
// a barrier, for other threads' copies) sees the old contents, as it may on
// the GPU; copies still in flight when a thread returns are dropped.
#pragma once
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "codegen/sim/sim_runtime.h"

namespace kiln::sim::detail {

inline int linear_thread() {
  const ThreadIndex& c = cur();
  return static_cast<int>(c.thread_idx.x + c.block_dim.x * (c.thread_idx.y + c.block_dim.y * c.thread_idx.z));
}

struct alignas(16) LaneBuffer {
  unsigned char bytes[48];
};
inline thread_local LaneBuffer lane_buffers[1024][2];
inline thread_local unsigned char lane_parity[1024];

// Publishes this lane's `mine` and returns every lane's (all 32 lanes take
// part); the pointers stay valid until this lane's next warp collective.
template <typename Frag>
std::array<const Frag*, 32> warp_exchange(const Frag& mine, const char* what) {
  static_assert(std::is_trivially_copyable_v<Frag> && sizeof(Frag) <= sizeof(LaneBuffer));
  const int tid = linear_thread();
  unsigned char& par = lane_parity[tid];
  par ^= 1u;
  LaneBuffer& buf = lane_buffers[tid][par];
  std::memcpy(buf.bytes, &mine, sizeof(Frag));
  WarpSlots w = warp_collective(0xffffffffu, reinterpret_cast<uintptr_t>(&buf), what);
  if (w.lanes != 0xffffffffu)
    kernel_error(fmt::format("{} needs all 32 lanes of the warp; lanes {:#010x} exist", what, w.lanes));
  std::array<const Frag*, 32> r;
  for (int l = 0; l < 32; ++l) r[l] = reinterpret_cast<const Frag*>(reinterpret_cast<const LaneBuffer*>(w.slots[l])->bytes);
  return r;
}

// IEEE binary16 bits -> float (exact).
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    const float v = static_cast<float>(man) * 0x1p-24f;  // subnormal or zero: exact
    return sign ? -v : v;
  }
  if (exp == 31)
    bits = sign | 0x7f800000u | (man << 13);
  else
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  return std::bit_cast<float>(bits);
}
inline float bf16_bits_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }
inline float tf32_bits_to_float(uint32_t x) { return std::bit_cast<float>(x & 0xffffe000u); }

inline uint16_t lo16(unsigned r) { return static_cast<uint16_t>(r & 0xffffu); }
inline uint16_t hi16(unsigned r) { return static_cast<uint16_t>(r >> 16); }

struct MmaFrag {
  unsigned a[4];
  unsigned b[2];
};

// m16n8k16, f16 (bf16 = false) or bf16 inputs.
inline void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4], bool bf16,
                         const char* what) {
  MmaFrag mine;
  std::memcpy(mine.a, a, sizeof mine.a);
  std::memcpy(mine.b, b, sizeof mine.b);
  const float c0[4] = {c[0], c[1], c[2], c[3]};  // d may alias c
  const std::array<const MmaFrag*, 32> f = warp_exchange(mine, what);
  auto cvt = [bf16](uint16_t h) { return bf16 ? bf16_bits_to_float(h) : half_bits_to_float(h); };
  // A(row, col): lane 4*(row%8) + (col%8)/2, element i = (col&1) | (row/8)<<1 | (col/8)<<2.
  auto A = [&](int row, int col) {
    const int i = (col & 1) | (row / 8) << 1 | (col / 8) << 2;
    const unsigned r = f[4 * (row % 8) + (col % 8) / 2]->a[i >> 1];
    return cvt((i & 1) ? hi16(r) : lo16(r));
  };
  // B(row, col): lane 4*col + (row%8)/2, element i = (row&1) | (row/8)<<1.
  auto B = [&](int row, int col) {
    const int i = (row & 1) | (row / 8) << 1;
    const unsigned r = f[4 * col + (row % 8) / 2]->b[i >> 1];
    return cvt((i & 1) ? hi16(r) : lo16(r));
  };
  const int lane = static_cast<int>(cur().lane), g = lane >> 2, t = lane & 3;
  float arow[2][16], bcol[2][16];
  for (int k = 0; k < 16; ++k) {
    arow[0][k] = A(g, k);
    arow[1][k] = A(g + 8, k);
    bcol[0][k] = B(k, 2 * t);
    bcol[1][k] = B(k, 2 * t + 1);
  }
  for (int i = 0; i < 4; ++i) {
    float acc = c0[i];
    for (int k = 0; k < 16; ++k) acc = fmaf(arow[i >> 1][k], bcol[i & 1][k], acc);
    d[i] = acc;
  }
}

inline void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4]) {
  MmaFrag mine;
  std::memcpy(mine.a, a, sizeof mine.a);
  std::memcpy(mine.b, b, sizeof mine.b);
  const float c0[4] = {c[0], c[1], c[2], c[3]};
  const std::array<const MmaFrag*, 32> f = warp_exchange(mine, "mma.m16n8k8.tf32");
  // A(row, col): lane 4*(row%8) + col%4, element i = (row/8) | (col/4)<<1.
  auto A = [&](int row, int col) { return tf32_bits_to_float(f[4 * (row % 8) + col % 4]->a[(row / 8) | (col / 4) << 1]); };
  // B(row, col): lane 4*col + row%4, element row/4.
  auto B = [&](int row, int col) { return tf32_bits_to_float(f[4 * col + row % 4]->b[row / 4]); };
  const int lane = static_cast<int>(cur().lane), g = lane >> 2, t = lane & 3;
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
    float acc = c0[i];
    for (int k = 0; k < 8; ++k) acc = fmaf(A(row, k), B(k, col), acc);
    d[i] = acc;
  }
}

// The checked address of `bytes` bytes at p (shared memory: a raw pointer into
// a __shared__ array, or a KILN_DYNAMIC_SHARED / argument Ptr).
template <typename T>
const unsigned char* checked_bytes(T* p, size_t, const char*) {
  return reinterpret_cast<const unsigned char*>(p);
}
template <typename T>
const unsigned char* checked_bytes(const Ptr<T>& p, size_t bytes, const char*) {
  const int64_t n = static_cast<int64_t>((bytes + sizeof(T) - 1) / sizeof(T));
  (p + (n - 1)).checked();
  return reinterpret_cast<const unsigned char*>(p.checked());
}
inline void check_aligned16(const void* p, const char* what, const char* operand) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
    kernel_error(fmt::format("{}: {} address {} is not 16-byte aligned", what, operand, p));
}

template <int N, bool Trans, typename P>
void ldmatrix(unsigned (&r)[N], const P& row, const char* what) {
  struct Row {
    uint16_t e[8];
  };
  Row mine{};
  const int lane = static_cast<int>(cur().lane);
  if (lane < 8 * N) {  // .x1/.x2 use the addresses of lanes 0-7 / 0-15 only
    const unsigned char* src = checked_bytes(row, 16, what);
    check_aligned16(src, what, "row");
    std::memcpy(mine.e, src, 16);
  }
  const std::array<const Row*, 32> rows = warp_exchange(mine, what);
  const int g = lane >> 2, t = lane & 3;
  for (int m = 0; m < N; ++m) {
    uint16_t lo, hi;
    if (Trans) {
      lo = rows[8 * m + 2 * t]->e[g];
      hi = rows[8 * m + 2 * t + 1]->e[g];
    } else {
      lo = rows[8 * m + g]->e[2 * t];
      hi = rows[8 * m + g]->e[2 * t + 1];
    }
    r[m] = static_cast<unsigned>(lo) | static_cast<unsigned>(hi) << 16;
  }
}

// ---- cp.async ----
struct PendingCopy {
  unsigned char* dst;
  unsigned char data[16];
  unsigned group;
};
struct CopyQueue {
  uint3 block{~0u, ~0u, ~0u};  // the block whose thread filled the queue
  unsigned open_group = 0;     // groups < open_group are committed
  std::vector<PendingCopy> copies;
};
inline thread_local CopyQueue copy_queues[1024];

inline CopyQueue& my_copy_queue() {
  CopyQueue& q = copy_queues[linear_thread()];
  const uint3 b = cur().block_idx;
  if (q.block.x != b.x || q.block.y != b.y || q.block.z != b.z) {  // left over from a returned thread
    q.block = b;
    q.open_group = 0;
    q.copies.clear();
  }
  return q;
}

template <typename D, typename S>
void cp_async16(const D& dst, const S& src, int src_bytes) {
  static const char* what = "cp.async.cg.shared.global";
  if (src_bytes < 0 || src_bytes > 16) kernel_error(fmt::format("{}: src-size {} not in [0, 16]", what, src_bytes));
  PendingCopy c;
  c.dst = const_cast<unsigned char*>(checked_bytes(dst, 16, what));
  check_aligned16(c.dst, what, "shared");
  std::memset(c.data, 0, sizeof c.data);
  if (src_bytes > 0) {
    const unsigned char* s = checked_bytes(src, static_cast<size_t>(src_bytes), what);
    check_aligned16(s, what, "global");
    std::memcpy(c.data, s, static_cast<size_t>(src_bytes));
  }
  CopyQueue& q = my_copy_queue();
  c.group = q.open_group;
  q.copies.push_back(c);
}

inline void cp_async_commit() { ++my_copy_queue().open_group; }

// Lands every copy of the committed groups but the `n` most recent.
inline void cp_async_wait(int n) {
  CopyQueue& q = my_copy_queue();
  const unsigned limit = q.open_group >= static_cast<unsigned>(n) ? q.open_group - static_cast<unsigned>(n) : 0u;
  size_t kept = 0;
  for (size_t i = 0; i < q.copies.size(); ++i) {
    PendingCopy& c = q.copies[i];
    if (c.group < limit)
      std::memcpy(c.dst, c.data, 16);
    else
      q.copies[kept++] = c;
  }
  q.copies.resize(kept);
}

}  // namespace kiln::sim::detail

// ---- The device functions of codegen/mma.cuh ----
inline void kiln_mma_m16n8k16_f16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4]) {
  ::kiln::sim::detail::mma_m16n8k16(d, a, b, c, false, "mma.m16n8k16.f16");
}
inline void kiln_mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4]) {
  ::kiln::sim::detail::mma_m16n8k16(d, a, b, c, true, "mma.m16n8k16.bf16");
}
inline void kiln_mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4]) {
  ::kiln::sim::detail::mma_m16n8k8_tf32(d, a, b, c);
}
// cvt.rna.tf32.f32: round to nearest, ties away from zero, at 10 mantissa
// bits; NaN and infinity pass through.
inline unsigned kiln_f32_to_tf32(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return u;
  return (u + 0x1000u) & 0xffffe000u;
}
template <typename P>
void kiln_ldmatrix_x4(unsigned (&r)[4], const P& row) {
  ::kiln::sim::detail::ldmatrix<4, false>(r, row, "ldmatrix.m8n8.x4");
}
template <typename P>
void kiln_ldmatrix_x4_trans(unsigned (&r)[4], const P& row) {
  ::kiln::sim::detail::ldmatrix<4, true>(r, row, "ldmatrix.m8n8.x4.trans");
}
template <typename P>
void kiln_ldmatrix_x2(unsigned (&r)[2], const P& row) {
  ::kiln::sim::detail::ldmatrix<2, false>(r, row, "ldmatrix.m8n8.x2");
}
template <typename P>
void kiln_ldmatrix_x2_trans(unsigned (&r)[2], const P& row) {
  ::kiln::sim::detail::ldmatrix<2, true>(r, row, "ldmatrix.m8n8.x2.trans");
}
template <typename D, typename S>
void kiln_cp_async16(const D& dst, const S& src) {
  ::kiln::sim::detail::cp_async16(dst, src, 16);
}
template <typename D, typename S>
void kiln_cp_async16_zfill(const D& dst, const S& src, int src_bytes) {
  ::kiln::sim::detail::cp_async16(dst, src, src_bytes);
}
inline void kiln_cp_async_commit() { ::kiln::sim::detail::cp_async_commit(); }
template <int N>
void kiln_cp_async_wait() {
  ::kiln::sim::detail::cp_async_wait(N);
}
