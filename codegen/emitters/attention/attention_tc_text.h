// The text of the tensor-core attention kernel (emit_attention_tc.h): the
// template that emit_attention_tc() fills (@KEY@ placeholders) and the ends
// it closes with. Its bytes are in every plan with attention: edit with care
// (static plans must stay byte-identical unless a change means to alter them).
#pragma once
#include <string_view>

namespace kiln::codegen::attention_tc_text {

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

// The end of a block whose KW warps split each key tile (a decode step:
// one query tile of at most 16 rows; emit_attention_tc.h): every warp holds
// the same 16 rows over its own keys, so their states -- the row max m, the
// row sum l and the unnormalized output o -- meet in shared memory (the
// stages are free by now) and the block's threads combine them per element,
// in warp order, the way the split-KV combine merges blocks. Then
// @WARPS_END@: the one-block end (o / l into the epilogue) or a split's
// partial state to the workspace.
constexpr std::string_view kWarpsCombine =
    R"(  __syncthreads();  // every warp is done with the stages: shared memory takes the states
  float* st_ = reinterpret_cast<float*>(smem);  // [KW][16 rows][2 + DV]: m, l, o
  constexpr int RSW = DV + 2;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    if (t == 0) {
      st_[(warp * 16 + g + 8 * r) * RSW] = m[r];
      st_[(warp * 16 + g + 8 * r) * RSW + 1] = l[r];
    }
  }
#pragma unroll
  for (int a = 0; a < ONC; ++a)
#pragma unroll
    for (int n = 0; n < OC; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        st_[(warp * 16 + g + 8 * (i >> 1)) * RSW + 2 + (a * OC + n) * 8 + 2 * t + (i & 1)] = o[a][0][n][i];
  __syncthreads();
  for (int e = tid; e < nq * DV; e += THREADS) {
    const int rl = e / DV, d = e % DV, row = q0 + rl;
    // The row's max over the warps (NaN sticks), then each warp's share
    // rescaled to it; a warp that saw no visible key adds nothing.
    float mall = -@INF@;
    for (int w = 0; w < KW; ++w) mall = @NAME@_max(mall, st_[(w * 16 + rl) * RSW]);
    float lsum = 0.0f, osum = 0.0f;
    for (int w = 0; w < KW; ++w) {
      const float mw = st_[(w * 16 + rl) * RSW];
      const float c = mw == -@INF@ ? 0.0f : expf(mw - mall);
      lsum += c * st_[(w * 16 + rl) * RSW + 1];
      osum += c * st_[(w * 16 + rl) * RSW + 2 + d];
    }
@WARPS_END@  }
)";

// @WARPS_END@ of a block without split-KV: the element into the epilogue.
constexpr std::string_view kWarpsEndOne =
    R"(    const bool bad = !(mall - mall == 0.0f);
    const float val = bad ? @BAD_VALUE@ : osum * (1.0f / lsum);
    const long long lin = ((long long)bh * SQ + row) * DV + d;
@EPILOGUE_CODE@
)";

// @WARPS_END@ of a split-KV block: the block's partial state of the element
// to the workspace, as kSplitFinish writes it; kSplitFinish's ticket and
// combine follow.
constexpr std::string_view kWarpsEndSplit =
    R"(    const long long p_ = ((long long)ks_ * ROWS + (long long)bh * SQ + row) * RS;
    if (d == 0) {
      ws[p_] = mall;
      ws[p_ + 1] = lsum;
    }
    ws[p_ + 2 + d] = osum;
)";

// Where kSplitFinish's ticket (the last split combines) begins.
constexpr std::string_view kSplitTicketStart = "  // The last of the tile's splits to finish combines them";

}  // namespace kiln::codegen::attention_tc_text
