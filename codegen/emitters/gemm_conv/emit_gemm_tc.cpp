#include "codegen/emitters/gemm_conv/emit_gemm_tc.h"

#include <map>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"
#include "codegen/emitters/gemm_conv/emit_gemm_tc_scaffold.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

// codegen/core/mma.cuh, embedded at build time (CMake writes the .inc).
constexpr std::string_view kMma =
#include "mma.inc"
    ;

constexpr int kBK = 32;

// The kernel; @NAME@ stands for the kernel name until the body is hashed, @TC_...@
// for the text it shares with the wgmma kernel (emit_gemm_tc_scaffold.h).
constexpr std::string_view kKernel = R"(@TC_KERNEL_HEAD@
  constexpr int WARPS_N = @WARPS_N@, WTM = BM / 2, WTN = BN / WARPS_N, MI = WTM / 16, NI = WTN / 8;
  constexpr int LDA = BK + 8;  // A stage [BM][LDA]: rows padded by 16 bytes
  constexpr int LDB = @LDB@;  // B stage @B_STAGE_SHAPE@
  constexpr int A_STAGE = BM * LDA, B_STAGE = @B_STAGE@;
  constexpr int KT = (K + BK - 1) / BK;
  KILN_DYNAMIC_SHARED(@T@, smem);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
@TC_BLOCK_ORIGIN@
  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mi][ni][i] = 0.0f;

  // K tile kt -> stage s (zero-filled past M, N and K).
  auto load_tile = [&](int s, int kt) {
    const auto as = smem + s * (A_STAGE + B_STAGE);
    const auto bs = as + A_STAGE;
    const int k0 = kt * BK;
#pragma unroll
    for (int c = tid; c < BM * BK / 8; c += THREADS) {
      const int r = c / (BK / 8), kc = (c % (BK / 8)) * 8;
      const int gm = m0 + r, gk = k0 + kc;
@LOAD_A@
    }
#pragma unroll
    for (int c = tid; c < BN * BK / 8; c += THREADS) {
@LOAD_B@
    }
  };

@TC_PIPELINE_FILL@
    __syncthreads();                   // ... everyone's; and stage (kt - 1) % STAGES is free
    if (kt + STAGES - 1 < KT) load_tile((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    kiln_cp_async_commit();
    const auto as = smem + (kt % STAGES) * (A_STAGE + B_STAGE);
    const auto bs = as + A_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned af[MI][4], bf[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        kiln_ldmatrix_x4(af[mi], as + (wm * WTM + mi * 16 + lane % 16) * LDA + kk + (lane / 16) * 8);
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {
        unsigned r[4];
@LOAD_BFRAG@
        bf[2 * nj][0] = r[0];
        bf[2 * nj][1] = r[1];
        bf[2 * nj + 1][0] = r[2];
        bf[2 * nj + 1][1] = r[3];
      }
      @MMA@<MI, NI>(acc, af, bf);
    }
  }
  kiln_cp_async_wait<0>();

  // Accumulator c_i of mma tile (mi, ni): row g + 8 * (i >> 1), col 2t + (i & 1).
  const int g = lane >> 2, t = lane % 4;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = m0 + wm * WTM + mi * 16 + g + 8 * (i >> 1);
        const int col = n0 + wn * WTN + ni * 8 + 2 * t + (i & 1);
        if (row < M && col < N) @NAME@_ep::kiln_epilogue(out, batch, row, col, acc[mi][ni][i]@EXTRA_ARGS@);
      }
}
)";

}  // namespace

std::string_view mma_prelude() { return kMma; }

GemmTcKernel emit_gemm_tc(const GemmTcSpec& s) {
  const TcGemmFrame f = check_tc_gemm_spec(s, "tensor-core GEMM");
  const std::string& label = f.label;

  GemmTcKernel k;
  // Tile heuristic (docs/codegen.md): 128x128 unless that gives fewer
  // blocks than one wave; then N, then M halves to 64.
  int bm = 0, bn = 0;
  default_tc_tile(s, &bm, &bn);
  if ((bm != 64 && bm != 128) || (bn != 64 && bn != 128))
    fail("codegen: {}: GEMM tile {}x{} (64 or 128 each)", label, bm, bn);
  const int stages = s.stages ? s.stages : 3;
  if (stages < 2 || stages > 5) fail("codegen: {}: {} pipeline stages (2 to 5)", label, stages);
  const int warps_n = bn == 128 ? 4 : 2;
  k.bm = bm;
  k.bn = bn;
  k.bk = kBK;
  k.stages = stages;
  k.warps = 2 * warps_n;
  k.block = static_cast<unsigned>(32 * k.warps);
  tc_grid_and_counts(s, f, bm, bn, k);
  const int lda = kBK + 8;
  const int ldb = s.b_transposed ? kBK + 8 : bn + 8;
  const int a_stage = bm * lda, b_stage = s.b_transposed ? bn * ldb : kBK * ldb;
  k.shared_bytes = static_cast<size_t>(stages) * static_cast<size_t>(a_stage + b_stage) * 2;

  // 16-byte cp.async needs rows (and batch offsets) that are multiples of 8 elements.
  const bool a_vec = s.k % 8 == 0 && f.a_stride % 8 == 0;
  const bool b_vec = (s.b_transposed ? s.k % 8 == 0 : s.n % 8 == 0) && f.b_stride % 8 == 0;
  std::string load_a, load_b, load_bfrag;
  if (a_vec) {
    load_a =
        "      const bool ok = gm < M && gk < K;\n"
        "      kiln_cp_async16_zfill(as + r * LDA + kc, a + (ok ? gm * K + gk : 0), ok ? 16 : 0);";
  } else {
    load_a =
        "#pragma unroll\n"
        "      for (int j = 0; j < 8; ++j) as[r * LDA + kc + j] = (gm < M && gk + j < K) ? a[gm * K + gk + j] : zero;";
  }
  if (s.b_transposed) {  // rows n of K elements; stage [BN][LDB]
    load_b =
        "      const int r = c / (BK / 8), kc = (c % (BK / 8)) * 8;\n"
        "      const int gn = n0 + r, gk = k0 + kc;\n";
    load_b += b_vec ? "      const bool ok = gn < N && gk < K;\n"
                      "      kiln_cp_async16_zfill(bs + r * LDB + kc, b + (ok ? gn * K + gk : 0), ok ? 16 : 0);"
                    : "#pragma unroll\n"
                      "      for (int j = 0; j < 8; ++j) bs[r * LDB + kc + j] = (gn < N && gk + j < K) ? b[gn * K + gk "
                      "+ j] : zero;";
    // Matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
    load_bfrag =
        "        kiln_ldmatrix_x4(r, bs + (wn * WTN + nj * 16 + lane % 8 + (lane / 16) * 8) * LDB + kk + ((lane / 8) % "
        "2) * 8);";
  } else {  // rows k of N elements; stage [BK][LDB]
    load_b =
        "      const int r = c / (BN / 8), nc = (c % (BN / 8)) * 8;\n"
        "      const int gk = k0 + r, gn = n0 + nc;\n";
    load_b += b_vec ? "      const bool ok = gk < K && gn < N;\n"
                      "      kiln_cp_async16_zfill(bs + r * LDB + nc, b + (ok ? gk * N + gn : 0), ok ? 16 : 0);"
                    : "#pragma unroll\n"
                      "      for (int j = 0; j < 8; ++j) bs[r * LDB + nc + j] = (gk < K && gn + j < N) ? b[gk * N + gn "
                      "+ j] : zero;";
    // Matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15), transposed.
    load_bfrag =
        "        kiln_ldmatrix_x4_trans(r, bs + (kk + lane % 8 + ((lane / 8) % 2) * 8) * LDB + wn * WTN + nj * 16 + "
        "(lane / 16) * 8);";
  }

  const TcEpilogueText ep = tc_epilogue_text(s, label);
  std::map<std::string, std::string> vars = tc_common_vars(s, f, k, ep, "@EPILOGUE_CODE@");
  vars.insert({
      {"WARPS_N", std::to_string(warps_n)},
      {"LDB", s.b_transposed ? "BK + 8" : "BN + 8"},
      {"B_STAGE_SHAPE", s.b_transposed ? "[BN][LDB] (B stored [N, K])" : "[BK][LDB] (B stored [K, N])"},
      {"B_STAGE", s.b_transposed ? "BN * LDB" : "BK * LDB"},
      {"LOAD_A", load_a},
      {"LOAD_B", load_b},
      {"LOAD_BFRAG", load_bfrag},
      {"MMA", s.dtype == DType::F16 ? "kiln_mma_tile_f16" : "kiln_mma_tile_bf16"},
  });
  std::string body =
      fmt::format("// {}: tensor-core GEMM [{}] {}x{}x{} {}{} -> {}, tile {}x{}x{}, {} stages, {} warps\n", label,
                  s.batch, s.m, s.n, s.k, dtype_name(s.dtype), s.b_transposed ? " B^T" : "", dtype_name(s.out_dtype),
                  bm, bn, kBK, stages, k.warps);
  body += substitute(with_tc_kernel_pieces(kKernel), vars);

  body += tc_sim_entry(s);
  finish_tc_kernel(s, label, "kiln_gemm_tc", body, ep.code, "@EPILOGUE_CODE@",
                   std::string(kKernelPrelude) + std::string(kMma), k);
  return k;
}

}  // namespace kiln::codegen
