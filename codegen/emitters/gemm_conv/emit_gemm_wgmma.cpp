#include "codegen/emitters/gemm_conv/emit_gemm_wgmma.h"

#include <map>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"
#include "codegen/core/wgmma_text.h"
#include "codegen/emitters/gemm_conv/emit_gemm_tc_scaffold.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

constexpr int kBK = 64;  // 64 16-bit elements: one 128-byte swizzle row

// The kernel; @KEY@ are substituted, @NAME@ last (it names the hash); @TC_...@ is the
// text it shares with the mma.sync kernel (emit_gemm_tc_scaffold.h).
constexpr std::string_view kKernel = R"(@TC_KERNEL_HEAD@
  constexpr int A_STAGE = BM * BK, B_STAGE = BN * BK;  // elements; multiples of 512 (1024 bytes)
  constexpr int KT = (K + BK - 1) / BK;
  KILN_DYNAMIC_SHARED(@T@, smem_raw);
  // The 128-byte swizzle repeats every 1024 bytes of the shared window: the
  // stages start at such a boundary (the launch adds 1024 bytes of slack).
  const unsigned window = kiln_wgmma_smem_addr(smem_raw);
  const int align = static_cast<int>(((window + 1023u) & ~1023u) - window) / 2;
  const auto smem = smem_raw + align;
  const unsigned smem_addr = window + 2u * align;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
@TC_BLOCK_ORIGIN@
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;

  // Element (r, k) of a [rows][BK] stage (K-major, 128-byte swizzle) is at
  // r * BK + (((k / 8) ^ (r % 8)) * 8) + k % 8.
  auto load_tile = [&](int s, int kt) {
    const auto as = smem + s * (A_STAGE + B_STAGE);
    const auto bs = as + A_STAGE;
    const int k0 = kt * BK;
#pragma unroll
    for (int c = tid; c < BM * BK / 8; c += THREADS) {
      const int r = c / (BK / 8), kc = c % (BK / 8);
      const int gm = m0 + r, gk = k0 + kc * 8;
      const auto dst = as + r * BK + ((kc ^ (r % 8)) * 8);
@LOAD_A@
    }
#pragma unroll
    for (int c = tid; c < @B_CHUNKS@; c += THREADS) {
@LOAD_B@
    }
  };

@TC_PIPELINE_FILL@
    kiln_fence_proxy_async_shared();   // ... and is visible to the async proxy (wgmma) ...
    __syncthreads();                   // ... everyone's; and stage (kt - 1) % STAGES is free
    if (kt + STAGES - 1 < KT) load_tile((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
    kiln_cp_async_commit();
    const unsigned stage = smem_addr + 2u * static_cast<unsigned>((kt % STAGES) * (A_STAGE + B_STAGE));
    const unsigned a_addr = stage + 2u * static_cast<unsigned>(wg * 64 * BK), b_addr = stage + 2u * A_STAGE;
    kiln_wgmma_fence_acc(acc);
    kiln_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)  // k16 step kk: 32 bytes along the swizzled rows
      kiln_wgmma_m64k16<BN, @BF16@>(acc, kiln_wgmma_desc(a_addr + 32u * kk, 16u, 1024u, KILN_WGMMA_SWIZZLE_128B),
                                    kiln_wgmma_desc(b_addr + 32u * kk, 16u, 1024u, KILN_WGMMA_SWIZZLE_128B), 1);
    kiln_wgmma_commit();
    kiln_wgmma_wait<0>();
    kiln_wgmma_fence_acc(acc);
  }
  kiln_cp_async_wait<0>();

  // d_i of the m64nNk16 accumulator: row 16 warp + g + 8 ((i >> 1) & 1), col 8 (i >> 2) + 2 c + (i & 1).
  const int g = lane >> 2, c4 = lane % 4;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) {
    const int row = m0 + wg * 64 + 16 * warp + g + 8 * ((i >> 1) & 1);
    const int col = n0 + 8 * (i >> 2) + 2 * c4 + (i & 1);
    if (row < M && col < N) @NAME@_ep::kiln_epilogue(out, batch, row, col, acc[i]@EXTRA_ARGS@);
  }
}
)";

}  // namespace

std::string_view wgmma_prelude() { return wgmma_cuh_text(); }

GemmTcKernel emit_gemm_wgmma(const GemmTcSpec& s) {
  const TcGemmFrame f = check_tc_gemm_spec(s, "wgmma GEMM");
  const std::string& label = f.label;

  // Tiles: 128 x 128 (two warpgroups) unless that leaves an H100 with less
  // than one wave of blocks; then N, then M halves to 64.
  int bm = 0, bn = 0;
  default_tc_tile(s, &bm, &bn);
  if ((bm != 64 && bm != 128) || (bn != 64 && bn != 128 && bn != 256))
    fail("codegen: {}: wgmma GEMM tile {}x{} (bm 64 or 128, bn 64, 128 or 256)", label, bm, bn);
  const int stages = s.stages ? s.stages : 4;
  if (stages < 2 || stages > 6) fail("codegen: {}: {} pipeline stages (2 to 6)", label, stages);
  GemmTcKernel k;
  k.bm = bm;
  k.bn = bn;
  k.bk = kBK;
  k.stages = stages;
  k.warps = bm / 64 * 4;
  k.block = static_cast<unsigned>(32 * k.warps);
  tc_grid_and_counts(s, f, bm, bn, k);
  k.shared_bytes = static_cast<size_t>(stages) * static_cast<size_t>((bm + bn) * kBK) * 2 + 1024;
  if (k.shared_bytes > 227 * 1024)
    fail("codegen: {}: wgmma GEMM tile {}x{} with {} stages needs {} bytes of shared memory (227 KiB at most)", label,
         bm, bn, stages, k.shared_bytes);

  // 16-byte cp.async needs rows (and batch offsets) that are multiples of 8 elements.
  const bool a_vec = s.k % 8 == 0 && f.a_stride % 8 == 0;
  const bool b_vec = s.b_transposed && s.k % 8 == 0 && f.b_stride % 8 == 0;
  const std::string load_a =
      a_vec ? "      const bool ok = gm < M && gk < K;\n"
              "      kiln_cp_async16_zfill(dst, a + (ok ? gm * K + gk : 0), ok ? 16 : 0);"
            : "#pragma unroll\n"
              "      for (int j = 0; j < 8; ++j) dst[j] = (gm < M && gk + j < K) ? a[gm * K + gk + j] : zero;";
  std::string load_b, b_chunks;
  if (s.b_transposed) {  // rows n of K elements: as A
    b_chunks = "BN * BK / 8";
    load_b =
        "      const int r = c / (BK / 8), kc = c % (BK / 8);\n"
        "      const int gn = n0 + r, gk = k0 + kc * 8;\n"
        "      const auto dst = bs + r * BK + ((kc ^ (r % 8)) * 8);\n";
    load_b += b_vec ? "      const bool ok = gn < N && gk < K;\n"
                      "      kiln_cp_async16_zfill(dst, b + (ok ? gn * K + gk : 0), ok ? 16 : 0);"
                    : "#pragma unroll\n"
                      "      for (int j = 0; j < 8; ++j) dst[j] = (gn < N && gk + j < K) ? b[gn * K + gk + j] : zero;";
  } else {  // rows k of N elements: 8 n of one k, transposed into the K-major stage
    b_chunks = "BK * BN / 8";
    load_b =
        "      const int r = c / (BN / 8), nc = (c % (BN / 8)) * 8;\n"
        "      const int gk = k0 + r, gn = n0 + nc;\n"
        "#pragma unroll\n"
        "      for (int j = 0; j < 8; ++j) {\n"
        "        const int n = nc + j;\n"
        "        bs[n * BK + (((r / 8) ^ (n % 8)) * 8) + r % 8] = (gk < K && gn + j < N) ? b[gk * N + gn + j] : zero;\n"
        "      }";
  }

  const TcEpilogueText ep = tc_epilogue_text(s, label);
  // @NAME@ and the epilogue (user code, may hold '@') go in after the hash (finish_tc_kernel).
  std::map<std::string, std::string> vars = tc_common_vars(s, f, k, ep, "@EPILOGUE@");
  vars.insert({
      {"LOAD_A", load_a},
      {"LOAD_B", load_b},
      {"B_CHUNKS", b_chunks},
      {"BF16", s.dtype == DType::BF16 ? "true" : "false"},
  });
  std::string body =
      fmt::format("// {}: wgmma GEMM (sm_90a) [{}] {}x{}x{} {}{} -> {}, tile {}x{}x{}, {} stages, {} warpgroups\n",
                  label, s.batch, s.m, s.n, s.k, dtype_name(s.dtype), s.b_transposed ? " B^T" : "",
                  dtype_name(s.out_dtype), bm, bn, kBK, stages, bm / 64);
  body += substitute(with_tc_kernel_pieces(kKernel), vars);

  body += tc_sim_entry(s);
  finish_tc_kernel(s, label, "kiln_gemm_wgmma", body, ep.code, "@EPILOGUE@",
                   std::string(kKernelPrelude) + std::string(mma_prelude()) + std::string(wgmma_prelude()), k);
  return k;
}

}  // namespace kiln::codegen
