#include "codegen/emitters/attention/emit_attention_tc.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_expr.h"
#include "codegen/emitters/gemm_conv/emit_gemm_tc.h"
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

// Launch heuristic constants (docs/codegen.md).
constexpr int kTargetBlocks = 132;          // SMs of an H100: below this many blocks, fewer warps per block
constexpr size_t kSharedLimit = 48 * 1024;  // static shared memory without the opt-in attribute

// Shared memory (bytes) of the two pipeline stages, stage 1 also holding the
// Q tile before the first K/V tile is loaded there.
size_t tc_shared_bytes(int bq, int bk, int64_t d, int64_t dv) {
  const int64_t stage = bk * ((d + 8) + (dv + 8));
  return static_cast<size_t>(2 * (stage + std::max<int64_t>(stage, bq * (d + 8))));
}

// Replaces every @KEY@ of `text` by vars[KEY] (a key missing is a bug here).
std::string substitute(std::string_view text, const std::map<std::string, std::string>& vars) {
  std::string out;
  for (size_t pos = 0;;) {
    const size_t at = text.find('@', pos);
    if (at == std::string_view::npos) return out.append(text.substr(pos));
    const size_t end = text.find('@', at + 1);
    KILN_CHECK(end != std::string_view::npos, "codegen: unterminated @KEY@ in the attention template");
    auto it = vars.find(std::string(text.substr(at + 1, end - at - 1)));
    KILN_CHECK(it != vars.end(), "codegen: unknown key {} in the attention template", text.substr(at, end - at + 1));
    out.append(text.substr(pos, at - pos));
    out += it->second;
    pos = end + 1;
  }
}

// The most blocks the keys of one query tile are split among.
constexpr int kMaxKvSplits = 64;
// Warps of this kernel one SM holds by its register file: ptxas gives it
// 160-200 registers a thread (codegen_attention_test prints them), 2 warps per
// sub-partition.
constexpr int kAttentionWarpsPerSm = 8;

// The estimated time (us) of the kernel with the keys of each of `tiles`
// query tiles split in `splits` parts of `per_split` key tiles, by the first-
// order terms of kiln's performance model (perf/perf_model.cpp) on an H100 --
// the terms the GEMM tile chooser uses (gemm_tiles.h, TileCostModel): per
// wave of resident blocks, the k-loop's latency (two stages: each key tile
// waits a round trip) and a prologue/epilogue round trip; the DRAM bytes over
// the SMs that have a block; the busiest SM's tensor work; a split adds the
// combine's tail (a ticket, then the partial states, read through as many SMs
// as there are tiles). `bytes`: q, k, v, mask and the result; `out_bytes`:
// the result; `state_bytes`: the workspace one split writes.
double split_cost_us(int64_t tiles, int64_t splits, int64_t per_split, int warps, int bq, int bk, int64_t dims,
                     size_t smem, double bytes, double out_bytes, double state_bytes) {
  const TileCostModel& c = kTileCost;
  const double blocks = double(tiles) * double(splits);
  const int by_regs = std::max(1, kAttentionWarpsPerSm / warps);
  const int by_smem = std::max<int>(1, static_cast<int>(228 * 1024 / (smem + 1024)));
  const double slots = c.sms * std::min(by_regs, by_smem);
  const double waves = std::ceil(blocks / slots);
  const double latency = waves * (double(per_split) * c.latency_us + 2 * c.latency_us);
  const double busiest = std::ceil(blocks / c.sms);
  const double resident_warps = std::min(busiest, slots / c.sms) * warps;
  const double compute = busiest * 2.0 * bq * double(per_split) * bk * double(dims) /
                         (c.sm_flops_per_us * std::min(1.0, resident_warps / 4));
  const double ws = splits > 1 ? double(splits) * state_bytes : 0;
  const double memory = (bytes + ws) / c.bytes_per_us / std::min(1.0, blocks / c.sms);
  double t = std::max({latency, compute, memory});
  if (splits > 1) t += std::max(2 * c.latency_us, (ws + out_bytes) / c.bytes_per_us / std::min(1.0, tiles / c.sms));
  return t;
}

// The kernel. @NAME@ stays for finish_kernel_source; the epilogue's code
// replaces @EPILOGUE_CODE@ after substitution (it is not template text).
constexpr std::string_view kKernel =
    R"(__device__ __forceinline__ float @NAME@_max(float a, float v) { return (v != v) ? v : (v > a ? v : a); }
// Two floats -> one register of two @T@ (lo in the low half), round to nearest even.
__device__ __forceinline__ unsigned @NAME@_pack(float lo, float hi) {
#ifdef KILN_SIM
  return (unsigned)@AS_USHORT@(@CVT@(lo)) | ((unsigned)@AS_USHORT@(@CVT@(hi)) << 16);
#else
  unsigned r;
  asm("cvt.rn.@PTX_T@x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#endif
}
extern "C" __global__ void __launch_bounds__(@THREADS@, 1) @NAME@(@PARAMS@) {
  constexpr int BQ = @BQ@, BK = @BK@, D = @D@, DV = @DV@, SQ = @SQ@, SK = @SK@, THREADS = @THREADS@;
  constexpr int LDK = D + 8, LDV = DV + 8;  // rows padded by 16 bytes: ldmatrix without bank conflicts
  constexpr int STAGE = BK * (LDK + LDV);   // a K tile [BK][LDK], then a V tile [BK][LDV]
  constexpr int NQT = (SQ + BQ - 1) / BQ;
  constexpr int KS = D / 16;                           // k-steps of S = Q K^T
  constexpr int SC = @SC@, SNC = BK / 8 / SC;          // S: 8-key n-tiles per mma call, calls
  constexpr int OC = @OC@, ONC = DV / 8 / OC;          // O: 8-dim n-tiles per mma call, calls
  __shared__ __align__(16) @T@ smem[@SMEM@];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane >> 2, t = lane & 3;
@SPLIT_HEAD@  const int bh = @BLK@ / NQT, q0 = (@BLK@ % NQT) * BQ;
  const int nq = min(BQ, SQ - q0);
  const int kend = @KEND@;  // keys any row of the block can see
  const int ntiles = (kend + BK - 1) / BK;
@SPLIT_RANGE@@MASK_BASE@  const auto qg = @QP@ + (long long)bh * SQ * D;
  const auto kg = @KP@ + (long long)bh * SK * D;
  const auto vg = @VP@ + (long long)bh * SK * DV;

  // K and V rows k0.. -> stage s, 16 bytes per cp.async, zero-filled past SK
  // (a zero V row times p = 0 adds nothing; garbage could be NaN).
  auto load_kv = [&](int s, int k0) {
    @T@* ks = smem + s * STAGE;
    @T@* vs = ks + BK * LDK;
    for (int c = tid; c < BK * (D / 8); c += THREADS) {
      const int r = c / (D / 8), cc = (c % (D / 8)) * 8;
      const bool ok = k0 + r < SK;
      kiln_cp_async16_zfill(ks + r * LDK + cc, kg + (ok ? (long long)(k0 + r) * D + cc : 0), ok ? 16 : 0);
    }
    for (int c = tid; c < BK * (DV / 8); c += THREADS) {
      const int r = c / (DV / 8), cc = (c % (DV / 8)) * 8;
      const bool ok = k0 + r < SK;
      kiln_cp_async16_zfill(vs + r * LDV + cc, vg + (ok ? (long long)(k0 + r) * DV + cc : 0), ok ? 16 : 0);
    }
  };

  // Prologue: the Q tile into stage 1's space (free until tile 1 goes
  // there), K/V tile 0 into stage 0; then each warp's Q fragments.
  {
    @T@* qs = smem + STAGE;
    for (int c = tid; c < BQ * (D / 8); c += THREADS) {
      const int r = c / (D / 8), cc = (c % (D / 8)) * 8;
      const bool ok = r < nq;
      kiln_cp_async16_zfill(qs + r * LDK + cc, qg + (ok ? (long long)(q0 + r) * D + cc : 0), ok ? 16 : 0);
    }
    @FIRST_LOAD@
    kiln_cp_async_commit();
  }
  unsigned qf[KS][1][4];
  kiln_cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int kk = 0; kk < KS; ++kk)
    kiln_ldmatrix_x4(qf[kk][0], smem + STAGE + (warp * 16 + lane % 16) * LDK + kk * 16 + (lane / 16) * 8);

  // This lane's rows: row0 = q0 + 16 warp + g (accumulator elements 0, 1)
  // and row0 + 8 (elements 2, 3).
  const int row0 = q0 + warp * 16 + g;
  float m[2] = {-@INF@, -@INF@}, l[2] = {0.0f, 0.0f};
  float o[ONC][1][OC][4];
#pragma unroll
  for (int a = 0; a < ONC; ++a)
#pragma unroll
    for (int n = 0; n < OC; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[a][0][n][i] = 0.0f;

  for (int it = @IT0@; it < @IT1@; ++it) {
    const int k0 = it * BK;
    kiln_cp_async_wait<0>();  // tile it has landed (this thread's copies) ...
    __syncthreads();          // ... everyone's; and nobody reads the other stage (or Q) any more
    if (it + 1 < @IT1@) load_kv(@NEXT_STAGE@, k0 + BK);
    kiln_cp_async_commit();
    const @T@* ks = smem + @THIS_STAGE@ * STAGE;
    const @T@* vs = ks + BK * LDK;

    // S = Q K^T: K rows are B's columns (B stored [n][k]).
    float s[SNC][1][SC][4];
#pragma unroll
    for (int a = 0; a < SNC; ++a)
#pragma unroll
      for (int n = 0; n < SC; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) s[a][0][n][i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk)
#pragma unroll
      for (int a = 0; a < SNC; ++a) {
        unsigned bf[SC][2];
#pragma unroll
        for (int nj = 0; nj < SC / 2; ++nj) {
          unsigned r[4];  // matrices (keys 0-7, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 0-7), (keys 8-15, d 8-15)
          kiln_ldmatrix_x4(r, ks + (a * SC * 8 + nj * 16 + lane % 8 + (lane / 16) * 8) * LDK + kk * 16 +
                                  ((lane / 8) % 2) * 8);
          bf[2 * nj][0] = r[0];
          bf[2 * nj][1] = r[1];
          bf[2 * nj + 1][0] = r[2];
          bf[2 * nj + 1][1] = r[3];
        }
        @MMA@<1, SC>(s[a], qf[kk], bf);
      }

    // Scores (scale, mask, -inf for causal-hidden keys and keys past SK) and
    // the tile's row max over the quad.
    float mx[2] = {-@INF@, -@INF@};
#pragma unroll
    for (int a = 0; a < SNC; ++a)
#pragma unroll
      for (int n = 0; n < SC; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int row = row0 + 8 * (i >> 1), col = k0 + (a * SC + n) * 8 + 2 * t + (i & 1);
          float x = s[a][0][n][i] * @SCALE@;
          (void)row;
@MASK_ADD@          if (col >= SK@CAUSAL_TEST@) x = -@INF@;
          s[a][0][n][i] = x;
          mx[i >> 1] = @NAME@_max(mx[i >> 1], x);
        }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = @NAME@_max(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = @NAME@_max(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      // Online softmax; while every score so far is -inf, alpha is 1 and p 0.
      const float mt = @NAME@_max(m[r], mx[r]);
      alpha[r] = mt == -@INF@ ? 1.0f : expf(m[r] - mt);
      l[r] *= alpha[r];
      m[r] = mt;
    }
#pragma unroll
    for (int a = 0; a < ONC; ++a)
#pragma unroll
      for (int n = 0; n < OC; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) o[a][0][n][i] *= alpha[i >> 1];
#pragma unroll
    for (int a = 0; a < SNC; ++a)
#pragma unroll
      for (int n = 0; n < SC; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float p = m[i >> 1] == -@INF@ ? 0.0f : expf(s[a][0][n][i] - m[i >> 1]);
          l[i >> 1] += p;  // this lane's share of the row sum (f32 p, as FlashAttention-2)
          s[a][0][n][i] = p;
        }

    // O += P V, 16 keys at a time: the accumulators of key tiles 2kk and
    // 2kk + 1 are P's A fragment (rows g / g + 8, keys 2t, 2t + 1 / 8 + 2t ...).
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const float(&p0)[4] = s[(2 * kk) / SC][0][(2 * kk) % SC];
      const float(&p1)[4] = s[(2 * kk + 1) / SC][0][(2 * kk + 1) % SC];
      const unsigned pa[1][4] = {{@NAME@_pack(p0[0], p0[1]), @NAME@_pack(p0[2], p0[3]), @NAME@_pack(p1[0], p1[1]),
                                  @NAME@_pack(p1[2], p1[3])}};
#pragma unroll
      for (int a = 0; a < ONC; ++a) {
        unsigned bf[OC][2];
#pragma unroll
        for (int nj = 0; nj < OC / 2; ++nj) {
          unsigned r[4];  // V [key][dv], transposed: (keys 0-7 | 8-15) x (dv 0-7 | 8-15)
          kiln_ldmatrix_x4_trans(r, vs + (kk * 16 + lane % 8 + ((lane / 8) % 2) * 8) * LDV + a * OC * 8 + nj * 16 +
                                        (lane / 16) * 8);
          bf[2 * nj][0] = r[0];
          bf[2 * nj][1] = r[1];
          bf[2 * nj + 1][0] = r[2];
          bf[2 * nj + 1][1] = r[3];
        }
        @MMA@<1, OC>(o[a], pa, bf);
      }
    }
  }
  kiln_cp_async_wait<0>();  // the last (empty) group

@FINISH@)";

// The end of the one-block kernel: o / l per element into the epilogue.
constexpr std::string_view kFinish =
    R"(  // The row sums over the quad; then o / l, or NaN / 0 for a row without a
  // finite max (a NaN score, every key hidden, a +inf score).
  float inv[2];
  bool bad[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    bad[r] = !(m[r] - m[r] == 0.0f);
    inv[r] = 1.0f / l[r];
  }
#pragma unroll
  for (int a = 0; a < ONC; ++a)
#pragma unroll
    for (int n = 0; n < OC; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = row0 + 8 * (i >> 1), d = (a * OC + n) * 8 + 2 * t + (i & 1);
        if (row >= SQ) continue;
        const float val = bad[i >> 1] ? @BAD_VALUE@ : o[a][0][n][i] * inv[i >> 1];
        const long long lin = ((long long)bh * SQ + row) * DV + d;
@EPILOGUE_CODE@
      }
}
)";

// The end of a split-KV block: its partial state to the workspace; the last
// block of the tile combines.
constexpr std::string_view kSplitFinish =
    R"(  // Split-KV: this block's partial state of its rows -- the row max m, the
  // row sum l (over the quad) and the unnormalized output o -- goes to the
  // workspace, ws[split][bh * SQ + row][2 + DV] = {m, l, o[0..DV)}.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    const int row = row0 + 8 * r;
    if (t == 0 && row < SQ) {
      ws[((long long)ks_ * ROWS + (long long)bh * SQ + row) * RS] = m[r];
      ws[((long long)ks_ * ROWS + (long long)bh * SQ + row) * RS + 1] = l[r];
    }
  }
#pragma unroll
  for (int a = 0; a < ONC; ++a)
#pragma unroll
    for (int n = 0; n < OC; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = row0 + 8 * (i >> 1), d = (a * OC + n) * 8 + 2 * t + (i & 1);
        if (row < SQ) ws[((long long)ks_ * ROWS + (long long)bh * SQ + row) * RS + 2 + d] = o[a][0][n][i];
      }
  // The last of the tile's splits to finish combines them (the GEMM's folded
  // split-K, codegen/emitters/gemm_conv/emit_gemm_mma.cpp): no block waits
  // for another, and the sum runs in split order whichever block is last.
  __threadfence();  // this thread's partial state reaches device scope ...
  __syncthreads();  // ... and every thread's, before the block takes its ticket
  unsigned last_ = 0u;
  if (tid == 0) last_ = atomicAdd(tickets + tile_, 1u) == KV_SPLITS - 1 ? 1u : 0u;
  if (!__syncthreads_or(last_)) return;
  __threadfence();  // the other splits published theirs before taking their tickets
  if (tid == 0) tickets[tile_] = 0u;  // the counters clean themselves for the next launch
  for (int e = tid; e < nq * DV; e += THREADS) {
    const int row = q0 + e / DV, d = e % DV;
    const long long r_ = (long long)bh * SQ + row;
    // The rows' max over the splits (NaN sticks: a NaN score makes the row NaN,
    // as in the one-block kernel); then each split's share rescaled to it.
    float mall = -@INF@;
    for (int s = 0; s < KV_SPLITS; ++s) mall = @NAME@_max(mall, @LDCG@(ws + ((long long)s * ROWS + r_) * RS));
    const bool bad = !(mall - mall == 0.0f);
    float lsum = 0.0f, osum = 0.0f;
    if (!bad)
      for (int s = 0; s < KV_SPLITS; ++s) {
        const long long p = ((long long)s * ROWS + r_) * RS;
        const float ms = @LDCG@(ws + p);
        const float w = ms == -@INF@ ? 0.0f : expf(ms - mall);  // a split that saw no key adds nothing
        lsum += w * @LDCG@(ws + p + 1);
        osum += w * @LDCG@(ws + p + 2 + d);
      }
    const float val = bad ? @BAD_VALUE@ : osum * (1.0f / lsum);
    const long long lin = r_ * DV + d;
@EPILOGUE_CODE@
  }
}
)";

}  // namespace

bool attention_tc_applies(const TensorType& q, const TensorType& k, const TensorType& v) {
  if (q.dtype != DType::F16 && q.dtype != DType::BF16) return false;
  if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4) return false;
  const int64_t D = q.shape[3], Dv = v.shape[3];
  auto head_ok = [](int64_t d) { return d % 16 == 0 && d >= 16 && d <= 128; };
  return head_ok(D) && head_ok(Dv) && k.shape[2] > 0 && q.shape[0] * q.shape[1] * q.shape[2] > 0;
}

AttentionKernel emit_attention_tc(const TensorType& q, const TensorType& k, const TensorType& v, bool has_mask,
                                  const std::vector<int64_t>& ms, const AttrMap& attrs, const AttentionEpilogue& epi) {
  KILN_CHECK(attention_tc_applies(q, k, v), "codegen: attention: tensor-core kernel for q {} k {} v {}", q.str(),
             k.str(), v.str());
  const int64_t B = q.shape[0], H = q.shape[1], Sq = q.shape[2], D = q.shape[3], Sk = k.shape[2], Dv = v.shape[3];
  const bool bf16 = q.dtype == DType::BF16;
  const float scale = attrs.get_float("scale", 1.0f);
  const bool causal = attrs.get_int("causal", 0) != 0;
  const bool nan_to_zero = attrs.get_int("nan_to_zero", 0) != 0;

  // Tiling (docs/codegen.md): 4 warps (64 queries) per block, halved while
  // the grid would not fill an H100 or a warp would have no rows; BK = 64
  // keys (fewer for short sequences), halved until the two stages fit.
  int warps = 4;
  auto blocks = [&](int w) { return B * H * ((Sq + 16 * w - 1) / (16 * w)); };
  while (warps > 1 && (blocks(warps) < kTargetBlocks || 16 * (warps / 2) >= Sq)) warps /= 2;
  const int bq = 16 * warps;
  int bk = 16;
  while (bk < 64 && bk < Sk) bk *= 2;
  while (bk > 16 && tc_shared_bytes(bq, bk, D, Dv) > kSharedLimit) bk /= 2;
  if (tc_shared_bytes(bq, bk, D, Dv) > kSharedLimit)  // not reached for D, Dv <= 128
    unsupported("codegen: attention: D={} Dv={} need more than 48 KiB of shared memory", D, Dv);
  const int64_t nqt = (Sq + bq - 1) / bq;

  // Split-KV (flash-decoding): where few query tiles face many key tiles (a
  // decode step: one query against a long past), the keys of each tile are
  // divided among blocks if the cost terms above put that faster -- the
  // smallest such split on a tie. Each split keeps at least one key tile.
  const int64_t key_tiles = (Sk + bk - 1) / bk, tiles = B * H * nqt;
  const size_t smem_bytes = tc_shared_bytes(bq, bk, D, Dv);
  const double io_bytes = 2.0 * double(B * H) * (double(Sq) * double(D + Dv) + double(Sk) * double(D + Dv)) +
                          (has_mask ? 2.0 * double(B * H) * double(Sq) * double(Sk) : 0.0);
  const double out_bytes = 2.0 * double(B * H * Sq) * double(Dv);
  const double state_bytes = 4.0 * double(B * H * Sq) * double(Dv + 2);
  int64_t splits = 1, per_split = key_tiles;
  double best = split_cost_us(tiles, 1, key_tiles, warps, bq, bk, D + Dv, smem_bytes, io_bytes, out_bytes, state_bytes);
  for (int64_t s = 2; s <= std::min<int64_t>(kMaxKvSplits, key_tiles); ++s) {
    const int64_t per = (key_tiles + s - 1) / s;
    if ((key_tiles + per - 1) / per != s) continue;  // the same split as a smaller s
    const double cost =
        split_cost_us(tiles, s, per, warps, bq, bk, D + Dv, smem_bytes, io_bytes, out_bytes, state_bytes);
    if (cost < best) best = cost, splits = s, per_split = per;
  }
  if (tiles * splits > INT32_MAX) splits = 1, per_split = key_tiles;
  const bool split = splits > 1;

  AttentionKernel kk;
  kk.bq = bq;
  kk.bk = bk;
  kk.tpr = 0;
  kk.warps = warps;
  kk.tensor_cores = true;
  kk.block = static_cast<unsigned>(32 * warps);
  kk.grid = static_cast<unsigned>(tiles * splits);
  kk.shared_bytes = smem_bytes;
  kk.kv_splits = static_cast<int>(splits);
  if (split) {
    kk.workspace_f32 = splits * B * H * Sq * (Dv + 2);
    kk.tile_counters = tiles;
  }
  if (deciding_only()) return kk;  // the launch is decided; the rest is text (codegen/core/deciding_only.h)

  const std::string INF = "__uint_as_float(0x7f800000u)";
  std::string mask_base, mask_add;
  if (has_mask) {
    mask_base = fmt::format("  const long long mb = (long long)(bh / {}) * {} + (long long)(bh % {}) * {};\n", H, ms[0],
                            H, ms[1]);
    mask_add = fmt::format(
        "          if (row < SQ && col < SK) x += {};\n",
        cuda_load(q.dtype, fmt::format("{}[mb + (long long)row * {} + (long long)col * {}]", epi.mask, ms[2], ms[3])));
  }
  const int n_s = bk / 8, n_o = static_cast<int>(Dv / 8);
  std::map<std::string, std::string> vars = {
      {"NAME", "@NAME@"},
      {"EPILOGUE_CODE", "@EPILOGUE_CODE@"},
      {"T", std::string(cuda_storage_type(q.dtype))},
      {"AS_USHORT", bf16 ? "__bfloat16_as_ushort" : "__half_as_ushort"},
      {"CVT", bf16 ? "__float2bfloat16_rn" : "__float2half_rn"},
      {"PTX_T", bf16 ? "bf16" : "f16"},
      {"MMA", bf16 ? "kiln_mma_tile_bf16" : "kiln_mma_tile_f16"},
      {"THREADS", std::to_string(32 * warps)},
      {"PARAMS", epi.params},
      {"BQ", std::to_string(bq)},
      {"BK", std::to_string(bk)},
      {"D", std::to_string(D)},
      {"DV", std::to_string(Dv)},
      {"SQ", std::to_string(Sq)},
      {"SK", std::to_string(Sk)},
      {"SC", std::to_string(std::min(4, n_s))},
      {"OC", std::to_string(n_o % 4 == 0 ? 4 : 2)},
      {"SMEM", std::to_string(kk.shared_bytes / 2)},
      {"KEND", causal ? "max(0, min(SK, q0 + nq + (SK - SQ)))" : "SK"},
      {"MASK_BASE", mask_base},
      {"QP", epi.q},
      {"KP", epi.k},
      {"VP", epi.v},
      {"INF", INF},
      {"SCALE", fmt::format("__uint_as_float({:#x}u)", std::bit_cast<uint32_t>(scale))},
      {"MASK_ADD", mask_add},
      {"CAUSAL_TEST", causal ? " || col > row + (SK - SQ)" : ""},
      {"BAD_VALUE", nan_to_zero ? "0.0f" : "__uint_as_float(0x7fc00000u)"},
      {"SPLIT_HEAD",
       split ? fmt::format("  constexpr int KV_SPLITS = {}, KV_TILES = {}, ROWS = {}, RS = DV + 2;  // split-KV\n"
                           "  const int tile_ = blockIdx.x % {}, ks_ = blockIdx.x / {};  // the tile, its split\n",
                           splits, per_split, B * H * Sq, tiles, tiles)
             : ""},
      {"BLK", split ? "tile_" : "blockIdx.x"},
      {"SPLIT_RANGE",
       split ? "  const int it0_ = ks_ * KV_TILES, it1_ = min(ntiles, it0_ + KV_TILES);  // this split's key tiles\n"
             : ""},
      {"FIRST_LOAD", split ? "if (it1_ > it0_) load_kv(0, it0_ * BK);" : "if (ntiles > 0) load_kv(0, 0);"},
      {"IT0", split ? "it0_" : "0"},
      {"IT1", split ? "it1_" : "ntiles"},
      {"NEXT_STAGE", split ? "(it + 1 - it0_) & 1" : "(it + 1) & 1"},
      {"THIS_STAGE", split ? "((it - it0_) & 1)" : "(it & 1)"},
      {"LDCG", "@NAME@_ldcg"},
  };
  std::string b = fmt::format(
      "// attention{} on tensor cores: q {} k {} v {}{}{}{}, scale {}; {} warps, BQ={} BK={}, {} bytes of shared "
      "memory{}\n",
      epi.label.empty() ? "" : " (" + epi.label + ")", q.str(), k.str(), v.str(), has_mask ? " mask" : "",
      causal ? " causal" : "", nan_to_zero ? " nan_to_zero" : "", scale, warps, bq, bk, kk.shared_bytes,
      split ? fmt::format("; split-KV: the keys in {} parts of {} tiles, combined by the last block of each tile",
                          splits, per_split)
            : "");
  if (split) {
    // What the model counts (perf/plan_work.cpp): the k-loop reads q, k, v,
    // the mask and writes the workspace; the combine reads the workspace and
    // the epilogue's operands and writes the results.
    std::string loop = "// buffers:", tail = "// tail buffers:";
    for (int i = 0; i < epi.buffer_count; ++i) {
      const bool operand =
          std::find(epi.operand_buffers.begin(), epi.operand_buffers.end(), i) != epi.operand_buffers.end();
      (operand ? loop : tail) += fmt::format(" {}", i);
    }
    b += fmt::format("{} {}\n{} {}\n", loop, epi.buffer_count, tail, epi.buffer_count);
    // The partial states were written by other SMs during this launch, and L1
    // is not coherent between SMs: read them from L2.
    b += "#ifndef KILN_SIM\n#define @NAME@_ldcg(p) __ldcg(p)\n#else\n#define @NAME@_ldcg(p) (*(p))\n#endif\n";
  }
  b += std::string(mma_prelude());
  b += epi.helpers;
  std::string tmpl(kKernel);
  const size_t fin = tmpl.find("@FINISH@");
  tmpl.replace(fin, std::string_view("@FINISH@").size(), split ? kSplitFinish : kFinish);
  if (split) {
    const std::string params = "@PARAMS@) {";
    const size_t pp = tmpl.find(params);
    tmpl.replace(pp, params.size(), "@PARAMS@, KILN_PTR(float) ws, KILN_PTR(unsigned) tickets) {");
  }
  std::string body = substitute(tmpl, vars);
  const size_t at = body.find("@EPILOGUE_CODE@");
  body.replace(at, std::string_view("@EPILOGUE_CODE@").size(), epi.code);
  b += body;
  b += split ? epi.sim_entry_split : epi.sim_entry;
  kk.source = finish_kernel_source("kiln_attn_tc", epi.label.empty() ? "attention" : epi.label, b, epi.dtypes, kk.name);
  return kk;
}

}  // namespace kiln::codegen
