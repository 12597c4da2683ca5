// The simulator's versions of codegen/core/mma.cuh (included by it under KILN_SIM,
// after cuda_sim.h): mma.sync, ldmatrix and cp.async with the PTX ISA's
// semantics on the simulator's fibers.
//
// Warp-collective ops (mma, ldmatrix) exchange operands between the 32 lanes:
// each lane copies its operands into a per-lane buffer and publishes the
// buffer's address through the warp collective the shuffles use
// (warp_collective: every lane of the warp must arrive; a partial warp is an
// error, as on the GPU). Each lane then computes its own result registers
// from the other lanes' buffers, by the documented fragment layouts (mma:
// the first lane to resume computes the warp's whole D once, placing every
// element by the PTX row/col formulas, and each lane takes its four). A lane
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
// (or 8) products are accumulated in f32 onto C in k order (the hardware's
// order and internal precision are not documented; results can differ from
// a GPU's in the last bits).
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

#include "backends/sim/sim_runtime.h"

namespace kiln::sim::detail {

inline int linear_thread() {
  const ThreadIndex& c = cur();
  return static_cast<int>(c.thread_idx.x + c.block_dim.x * (c.thread_idx.y + c.block_dim.y * c.thread_idx.z));
}

struct alignas(16) LaneBuffer {
  unsigned char bytes[112];  // the largest: a 4x4 mma tile's fragments (kiln_mma_tile)
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
  for (int l = 0; l < 32; ++l)
    r[l] = reinterpret_cast<const Frag*>(reinterpret_cast<const LaneBuffer*>(w.slots[l])->bytes);
  return r;
}

// IEEE binary16 bits -> float (exact).
__attribute__((always_inline)) inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    const float v = static_cast<float>(man) * 0x1p-24f;  // subnormal or zero: exact
    return sign ? -v : v;
  }
  if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
  else bits = sign | ((exp + 112u) << 23) | (man << 13);
  return std::bit_cast<float>(bits);
}
__attribute__((always_inline)) inline float bf16_bits_to_float(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}
__attribute__((always_inline)) inline float tf32_bits_to_float(uint32_t x) {
  return std::bit_cast<float>(x & 0xffffe000u);
}

__attribute__((always_inline)) inline uint16_t lo16(unsigned r) { return static_cast<uint16_t>(r & 0xffffu); }
__attribute__((always_inline)) inline uint16_t hi16(unsigned r) { return static_cast<uint16_t>(r >> 16); }

// What a lane publishes for mma: its A and B registers, its C values, and a
// count of its collectives (with the buffer's address, it names one mma).
struct MmaFrag {
  unsigned a[4];
  unsigned b[2];
  float c[4];
  unsigned seq;
};
// D of the warp's last mma, computed by the first lane to resume after the
// exchange for all 32 lanes; the others find it by the stamp.
// (No initializers: zero-initialized thread_locals need no TLS init call.)
struct WarpMmaResult {
  const void* stamp_buf;
  unsigned stamp_seq;
  float d[32][4];
};
inline thread_local WarpMmaResult warp_mma_results[32];
inline thread_local unsigned lane_mma_seq[1024];

enum class MmaKind { f16, bf16, tf32 };

#pragma GCC push_options
#pragma GCC optimize("O2")
// D = A B + C for the whole warp from the 32 lanes' fragments, each element
// placed by the PTX ISA's row/col formulas (see the top of this file).
inline void mma_warp_compute(const std::array<const MmaFrag*, 32>& f, MmaKind kind, float (&d)[32][4]) {
  const int kdim = kind == MmaKind::tf32 ? 8 : 16;
  float A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int groupID = lane >> 2, threadID_in_group = lane % 4;
    const MmaFrag& x = *f[lane];
    if (kind == MmaKind::tf32) {
      for (int i = 0; i < 4; ++i) {
        const int row = (i == 0 || i == 2) ? groupID : groupID + 8;
        const int col = i < 2 ? threadID_in_group : threadID_in_group + 4;
        A[row][col] = tf32_bits_to_float(x.a[i]);
      }
      for (int i = 0; i < 2; ++i)
        B[i == 0 ? threadID_in_group : threadID_in_group + 4][groupID] = tf32_bits_to_float(x.b[i]);
    } else {
      auto cvt = [kind](uint16_t h) { return kind == MmaKind::bf16 ? bf16_bits_to_float(h) : half_bits_to_float(h); };
      for (int i = 0; i < 8; ++i) {  // a_i: register i/2, low half for even i
        const int row = (i < 2 || (i >= 4 && i < 6)) ? groupID : groupID + 8;
        const int col = threadID_in_group * 2 + (i & 0x1) + (i >= 4 ? 8 : 0);
        A[row][col] = cvt((i & 1) ? hi16(x.a[i / 2]) : lo16(x.a[i / 2]));
      }
      for (int i = 0; i < 4; ++i) {
        const int row = threadID_in_group * 2 + (i & 0x1) + (i >= 2 ? 8 : 0);
        B[row][groupID] = cvt((i & 1) ? hi16(x.b[i / 2]) : lo16(x.b[i / 2]));
      }
    }
    for (int i = 0; i < 4; ++i) C[i < 2 ? groupID : groupID + 8][threadID_in_group * 2 + (i & 0x1)] = x.c[i];
  }
  // The products are exact in f32 (f16, tf32; bf16 within the f32 range), so
  // acc + a * b rounds once per step, as an FMA would.
  float D[16][8];
  for (int r = 0; r < 16; ++r) {
    float acc[8];
    for (int n = 0; n < 8; ++n) acc[n] = C[r][n];
    for (int k = 0; k < kdim; ++k)
      for (int n = 0; n < 8; ++n) acc[n] += A[r][k] * B[k][n];
    for (int n = 0; n < 8; ++n) D[r][n] = acc[n];
  }
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) d[lane][i] = D[i < 2 ? (lane >> 2) : (lane >> 2) + 8][(lane % 4) * 2 + (i & 0x1)];
}
#pragma GCC pop_options

inline void mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4], MmaKind kind,
                const char* what) {
  const int tid = linear_thread();
  MmaFrag mine;
  std::memcpy(mine.a, a, sizeof mine.a);
  std::memcpy(mine.b, b, sizeof mine.b);
  std::memcpy(mine.c, c, sizeof mine.c);
  mine.seq = ++lane_mma_seq[tid];
  const std::array<const MmaFrag*, 32> f = warp_exchange(mine, what);
  WarpMmaResult& r = warp_mma_results[tid / 32];
  if (r.stamp_buf != f[0] || r.stamp_seq != f[0]->seq) {
    mma_warp_compute(f, kind, r.d);
    r.stamp_buf = f[0];
    r.stamp_seq = f[0]->seq;
  }
  const int lane = static_cast<int>(cur().lane);
  for (int i = 0; i < 4; ++i) d[i] = r.d[lane][i];
}

// kiln_mma_tile: MI x NI m16n8k16 products in one exchange. The first lane
// to resume decodes the MI A and NI B fragments (by the formulas above) into
// the warp's cache; each lane then accumulates its own 4 x MI x NI values,
// in k order onto its accumulators, exactly as MI x NI separate mmas would.
template <int MI, int NI>
struct TileFrag {
  unsigned a[MI][4];
  unsigned b[NI][2];
  unsigned seq;
};
struct WarpTileCache {
  const void* stamp_buf;
  unsigned stamp_seq;
  float A[4][16][16];  // [mi][row][k]
  float Bt[4][8][16];  // [ni][col][k]
};
inline thread_local WarpTileCache warp_tile_cache[32];

#pragma GCC push_options
#pragma GCC optimize("O2")
template <int MI, int NI>
void mma_tile_decode(const std::array<const TileFrag<MI, NI>*, 32>& f, bool bf16, WarpTileCache& w) {
  auto cvt = [bf16](uint16_t h) { return bf16 ? bf16_bits_to_float(h) : half_bits_to_float(h); };
  for (int lane = 0; lane < 32; ++lane) {
    const int groupID = lane >> 2, threadID_in_group = lane % 4;
    const TileFrag<MI, NI>& x = *f[lane];
    for (int mi = 0; mi < MI; ++mi)
      for (int i = 0; i < 8; ++i) {
        const int row = (i < 2 || (i >= 4 && i < 6)) ? groupID : groupID + 8;
        const int col = threadID_in_group * 2 + (i & 0x1) + (i >= 4 ? 8 : 0);
        w.A[mi][row][col] = cvt((i & 1) ? hi16(x.a[mi][i / 2]) : lo16(x.a[mi][i / 2]));
      }
    for (int ni = 0; ni < NI; ++ni)
      for (int i = 0; i < 4; ++i) {
        const int row = threadID_in_group * 2 + (i & 0x1) + (i >= 2 ? 8 : 0);
        w.Bt[ni][groupID][row] = cvt((i & 1) ? hi16(x.b[ni][i / 2]) : lo16(x.b[ni][i / 2]));
      }
  }
}

template <int MI, int NI>
void mma_tile_lane(float (&acc)[MI][NI][4], const WarpTileCache& w, int lane) {
  const int g = lane >> 2, t = lane & 3;
  for (int mi = 0; mi < MI; ++mi)
    for (int ni = 0; ni < NI; ++ni) {
      // c0..c3: (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1); four independent sums, each in k order.
      const float *a0 = w.A[mi][g], *a1 = w.A[mi][g + 8], *b0 = w.Bt[ni][2 * t], *b1 = w.Bt[ni][2 * t + 1];
      float v0 = acc[mi][ni][0], v1 = acc[mi][ni][1], v2 = acc[mi][ni][2], v3 = acc[mi][ni][3];
      for (int k = 0; k < 16; ++k) {
        v0 += a0[k] * b0[k];
        v1 += a0[k] * b1[k];
        v2 += a1[k] * b0[k];
        v3 += a1[k] * b1[k];
      }
      acc[mi][ni][0] = v0;
      acc[mi][ni][1] = v1;
      acc[mi][ni][2] = v2;
      acc[mi][ni][3] = v3;
    }
}
#pragma GCC pop_options

template <int MI, int NI>
void mma_tile(float (&acc)[MI][NI][4], const unsigned (&a)[MI][4], const unsigned (&b)[NI][2], bool bf16,
              const char* what) {
  static_assert(MI >= 1 && MI <= 4 && NI >= 1 && NI <= 4, "kiln_mma_tile: at most 4 x 4 products");
  const int tid = linear_thread();
  TileFrag<MI, NI> mine;
  std::memcpy(mine.a, a, sizeof mine.a);
  std::memcpy(mine.b, b, sizeof mine.b);
  mine.seq = ++lane_mma_seq[tid];
  const std::array<const TileFrag<MI, NI>*, 32> f = warp_exchange(mine, what);
  WarpTileCache& w = warp_tile_cache[tid / 32];
  if (w.stamp_buf != f[0] || w.stamp_seq != f[0]->seq) {
    mma_tile_decode<MI, NI>(f, bf16, w);
    w.stamp_buf = f[0];
    w.stamp_seq = f[0]->seq;
  }
  mma_tile_lane<MI, NI>(acc, w, static_cast<int>(cur().lane));
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
    if (c.group < limit) std::memcpy(c.dst, c.data, 16);
    else q.copies[kept++] = c;
  }
  q.copies.resize(kept);
}

}  // namespace kiln::sim::detail

// ---- The device functions of codegen/core/mma.cuh ----
inline void kiln_mma_m16n8k16_f16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4]) {
  ::kiln::sim::detail::mma(d, a, b, c, ::kiln::sim::detail::MmaKind::f16, "mma.m16n8k16.f16");
}
inline void kiln_mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4]) {
  ::kiln::sim::detail::mma(d, a, b, c, ::kiln::sim::detail::MmaKind::bf16, "mma.m16n8k16.bf16");
}
inline void kiln_mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4]) {
  ::kiln::sim::detail::mma(d, a, b, c, ::kiln::sim::detail::MmaKind::tf32, "mma.m16n8k8.tf32");
}
template <int MI, int NI>
void kiln_mma_tile_f16(float (&acc)[MI][NI][4], const unsigned (&a)[MI][4], const unsigned (&b)[NI][2]) {
  ::kiln::sim::detail::mma_tile<MI, NI>(acc, a, b, false, "mma.m16n8k16.f16 tile");
}
template <int MI, int NI>
void kiln_mma_tile_bf16(float (&acc)[MI][NI][4], const unsigned (&a)[MI][4], const unsigned (&b)[NI][2]) {
  ::kiln::sim::detail::mma_tile<MI, NI>(acc, a, b, true, "mma.m16n8k16.bf16 tile");
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
