// The GEMM core's kernel (codegen/emitters/gemm_conv/emit_gemm.h: TiledGemm's operand
// loads, prologue and per-element store; the epilogue) on Hopper's warpgroup
// MMA, for a tile with GemmTileConfig::wgmma (gemm_tiles_wgmma.h chooses it,
// only under the sm90-wgmma opt-in). Compiled for sm_90a.
//
// As the mma.sync kernel (emit_gemm_mma.cpp), one block computes a BM x BN
// tile of one batch index (flat grid) and leaves the accumulators in a
// BM x (BN + 4) f32 staging tile for the same stores (scalar, or the
// vectorized epilogue). The main loop is the one of emit_gemm_wgmma.h:
// BM / 64 warpgroups, BK = 64, a STAGES-deep ring of K-major stages with the
// 128-byte swizzle (element (r, k) at r * 64 + (((k / 8) ^ (r % 8)) * 8) +
// k % 8 of its operand's stage), one m64nBNk16 wgmma per 16 of k. Operands
// with 16-byte chunks along k are copied with cp.async into their swizzled
// place; any other operand (chunks along m or n, im2col, any index map) is
// loaded element by element through its `load` and stored swizzled.
// Split-K is not built on this kernel (gemm_tiles_wgmma.cpp never chooses it).
#include <xxhash.h>

#include <fmt/format.h>

#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"
#include "codegen/core/kernel_vector.h"
#include "codegen/emitters/gemm_conv/emit_gemm_store.h"
#include "codegen/emitters/gemm_conv/emit_gemm_tc.h"
#include "codegen/emitters/gemm_conv/emit_gemm_wgmma.h"
#include "codegen/emitters/gemm_conv/gemm_tiles_wgmma.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

// One operand's k-tile into its swizzled stage `sm` ([rows][64], K-major).
std::string wgmma_stage_loads(const TiledGemm& g, const Epilogue& ep, const OperandLoad& ld, const char* p,
                              const char* sm, const char* base, int rows, int64_t count, int threads) {
  constexpr int BK = 64, W = 8;
  std::string s;
  if (ld.chunk && ld.chunk_k_fast) {
    const int chunks = rows * BK / W;
    for (int j = 0; j * threads < chunks; ++j) {
      const std::string v = fmt::format("{}c{}", p, j);
      s += "    {\n";
      s += fmt::format("      const int c = tid + {};\n", j * threads);
      s += (j + 1) * threads > chunks ? fmt::format("      if (c < {}) {{\n", chunks) : "      {\n";
      s += fmt::format("      const int {}_r = c / {}, {}_kc = c % {};\n", v, BK / W, v, BK / W);
      s += fmt::format("      const int {}_row = {} + {}_r;\n", v, base, v);
      s += fmt::format("      const int k = k0 + {}_kc * {};\n", v, W);
      std::string setup;
      ld.setup(v + "_row", v, setup);
      s += setup;
      s += fmt::format("      bool ok = false;\n      {} off = 0;\n", ep.index_type());
      s += fmt::format("      if ({}_row < {} && k < {}) {{\n{}      }}\n", v, count, g.K, ld.chunk("k", v));
      s += fmt::format(
          "      kiln_cp_async16_zfill({} + {}_r * {} + (({}_kc ^ ({}_r % 8)) * {}), {} + (ok ? off : ({})0), ok ? 16 "
          ": 0);\n",
          sm, v, BK, v, v, W, ld.chunk_buffer, ep.index_type());
      s += "      }\n    }\n";
    }
    return s;
  }
  // Element by element (any index map), into the swizzled stage.
  s += stage_operand_elements(
      ld, p, rows, BK, threads, base, std::to_string(count), std::to_string(g.K),
      [&](const std::string& v) {
        return fmt::format("{}[{}_r * {} + ((({}_kk / 8) ^ ({}_r % 8)) * 8) + {}_kk % 8]", sm, v, BK, v, v, v);
      },
      cuda_store(g.dtype, "v"));
  return s;
}

}  // namespace

std::vector<ComputeKernel> emit_wgmma_tiled_gemm(const TiledGemm& g, const Epilogue& ep, GemmMath math,
                                                 const GemmTileConfig& c) {
  KILN_CHECK(c.wgmma && (math == GemmMath::F16 || math == GemmMath::BF16),
             "codegen: {}: the wgmma kernel needs f16/bf16 operands and a wgmma tile", g.label);
  const std::string why = wgmma_tile_invalid(c, {math, g.batch, g.M, g.N, g.K, g.operand_bytes});
  KILN_CHECK(why.empty(), "codegen: {}: wgmma tile {}: {}", g.label, gemm_tile_name(c), why);
  const int BM = c.bm, BN = c.bn, BK = c.bk, STAGES = c.stages, threads = BM / 64 * 128;
  const int A_STAGE = BM * BK, B_STAGE = BN * BK, CLD = BN + 4;
  const int64_t tiles_m = (g.M + BM - 1) / BM, tiles_n = (g.N + BN - 1) / BN, blocks = g.batch * tiles_m * tiles_n;
  const int64_t KT = (g.K + BK - 1) / BK;
  if (blocks > INT32_MAX) unsupported("codegen: {}: {} tiles exceed one grid", g.label, blocks);
  ComputeKernel k;
  k.grid = g.M == 0 || g.N == 0 ? 0 : static_cast<unsigned>(blocks);
  k.block = static_cast<unsigned>(threads);
  k.shared_bytes = std::max<size_t>(wgmma_ring_bytes(c), static_cast<size_t>(BM) * CLD * 4);
  if (deciding_only()) return {k};  // the launch is decided; the rest is text (codegen/core/deciding_only.h)
  const std::string st(cuda_storage_type(g.dtype));
  const bool a_async = g.a.chunk && g.a.chunk_k_fast, b_async = g.b.chunk && g.b.chunk_k_fast;

  std::string b;
  b += fmt::format(
      "// {}: batch {} x [{} x {}] = [{} x {}] [{} x {}] on tensor cores ({}, wgmma sm_90a); tile {}, A {}, B {}\n",
      g.label, g.batch, g.M, g.N, g.M, g.K, g.K, g.N, gemm_math_name(math), gemm_tile_name(c),
      a_async ? "cp.async" : "loaded", b_async ? "cp.async" : "loaded");
  const int V = vector_store_width(g, ep, BN, false);
  b += fmt::format("// epilogue: {}-element accesses, {} per {} elements, {} bytes per element\n", V,
                   V > 1 ? ep.vector_accesses() : ep.scalar_accesses(), V, ep.bytes_per_element());
  b += fmt::format("extern \"C\" __global__ void __launch_bounds__({}, 1) @NAME@({}) {{\n", threads, ep.params());
  b += fmt::format("  constexpr int BM = {}, BN = {}, BK = {}, STAGES = {}, A_STAGE = {}, B_STAGE = {}, KT = {};\n", BM,
                   BN, BK, STAGES, A_STAGE, B_STAGE, KT);
  b += fmt::format("  KILN_DYNAMIC_SHARED({}, smem_raw);\n", st);
  b += "  // The 128-byte swizzle repeats every 1024 bytes of the shared window: the ring starts at such a boundary.\n";
  b += "  const unsigned window = kiln_wgmma_smem_addr(smem_raw);\n";
  b += "  const int align = static_cast<int>(((window + 1023u) & ~1023u) - window) / 2;\n";
  b += "  const auto smem = smem_raw + align;\n  const unsigned smem_addr = window + 2u * align;\n";
  b += "  const int tid = threadIdx.x, lane = tid % 32, wg = tid / 128, warp = (tid % 128) / 32;\n";
  b += "  int t_ = blockIdx.x;\n";
  b += fmt::format("  const int tn = t_ % {}; t_ /= {};\n", tiles_n, tiles_n);
  b += fmt::format("  const int tm = t_ % {};\n  const int bz = t_ / {};\n  (void)bz;\n", tiles_m, tiles_m);
  b += "  const int m0 = tm * BM, n0 = tn * BN;\n";
  b += g.prologue;
  b += "  float acc[BN / 2];\n#pragma unroll\n  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;\n";
  const std::string load_tile =
      "    {\n    const auto as = smem + ls * (A_STAGE + B_STAGE);\n"
      "    const auto bs = as + A_STAGE;\n    const int k0 = lt * BK;\n" +
      wgmma_stage_loads(g, ep, g.a, "a", "as", "m0", BM, g.M, threads) +
      wgmma_stage_loads(g, ep, g.b, "b", "bs", "n0", BN, g.N, threads) + "    }\n";
  b += "  // The ring: STAGES - 1 k-tiles in flight while one is multiplied.\n";
  b += "#pragma unroll\n  for (int ls = 0; ls < STAGES - 1; ++ls) {\n    const int lt = ls;\n    if (lt < KT)\n" +
       load_tile + "    kiln_cp_async_commit();\n  }\n";
  b += "  for (int kt = 0; kt < KT; ++kt) {\n";
  b += "    kiln_cp_async_wait<STAGES - 2>();  // k-tile kt has landed (this thread's copies) ...\n";
  b += "    kiln_fence_proxy_async_shared();   // ... is visible to wgmma (the async proxy) ...\n";
  b += "    __syncthreads();                   // ... everyone's; stage (kt - 1) % STAGES is free again\n";
  b += "    if (kt + STAGES - 1 < KT) {\n      const int lt = kt + STAGES - 1, ls = lt % STAGES;\n" + load_tile +
       "    }\n";
  b += "    kiln_cp_async_commit();\n";
  b += "    const unsigned stage = smem_addr + 2u * static_cast<unsigned>((kt % STAGES) * (A_STAGE + B_STAGE));\n";
  b += "    const unsigned a_addr = stage + 2u * static_cast<unsigned>(wg * 64 * BK), b_addr = stage + 2u * A_STAGE;\n";
  b += "    kiln_wgmma_fence_acc(acc);\n    kiln_wgmma_fence();\n";
  b += "#pragma unroll\n    for (int kk = 0; kk < BK / 16; ++kk)  // 32 bytes along the swizzled rows per k16\n";
  b += fmt::format(
      "      kiln_wgmma_m64k16<BN, {}>(acc, kiln_wgmma_desc(a_addr + 32u * kk, 16u, 1024u, KILN_WGMMA_SWIZZLE_128B),\n"
      "                                kiln_wgmma_desc(b_addr + 32u * kk, 16u, 1024u, KILN_WGMMA_SWIZZLE_128B), 1);\n",
      math == GemmMath::BF16 ? "true" : "false");
  b += "    kiln_wgmma_commit();\n    kiln_wgmma_wait<0>();  // the stage is read before the next barrier frees it\n";
  b += "    kiln_wgmma_fence_acc(acc);\n  }\n";
  b += "  kiln_cp_async_wait<0>();\n  __syncthreads();  // the ring's memory becomes the staging tile\n";
  b += "  {\n    KILN_DYNAMIC_SHARED(float, cs);\n";
  b += "    // d_i of the m64nNk16 accumulator: row 16 warp + g + 8 ((i >> 1) & 1), col 8 (i >> 2) + 2 c + (i & 1).\n";
  b += "    const int g4 = lane >> 2, t4 = lane % 4;\n";
  b += fmt::format(
      "#pragma unroll\n    for (int i = 0; i < BN / 2; ++i)\n"
      "      cs[(wg * 64 + 16 * warp + g4 + 8 * ((i >> 1) & 1)) * {} + 8 * (i >> 2) + 2 * t4 + (i & 1)] = acc[i];\n",
      CLD);
  b += "    __syncthreads();\n";
  if (V > 1) {
    const int VB = BN / V;
    b += fmt::format("#pragma unroll 2\n    for (int e = tid; e < {}; e += {}) {{\n", BM * VB, threads);
    b += fmt::format("      const int gm = m0 + e / {}, gn0 = n0 + (e % {}) * {};\n", VB, VB, V);
    b += fmt::format("      if (gm < {} && gn0 < {}) {{\n", g.M, g.N);
    b += fmt::format(
        "      float accv[{}];\n#pragma unroll\n      for (int j = 0; j < {}; ++j) accv[j] = cs[(e / {}) * {} "
        "+ (e % {}) * {} + j];\n",
        V, V, VB, CLD, VB, V);
    b += vector_store(g, ep, V, "accv");
    b += "      }\n    }\n";
  } else {
    b += fmt::format("#pragma unroll 2\n    for (int e = tid; e < {}; e += {}) {{\n", BM * BN, threads);
    b += fmt::format("      const int gm = m0 + e / {}, gn = n0 + e % {};\n", BN, BN);
    b += fmt::format("      if (gm < {} && gn < {}) {{\n      const float acc = cs[(e / {}) * {} + e % {}];\n", g.M,
                     g.N, BN, CLD, BN);
    b += g.store;
    b += "      }\n    }\n";
  }
  b += "  }\n}\n";
  b += ep.sim_entry("@NAME@");
  k.name = fmt::format("kiln_{}_wgmma_{:016x}", sanitize_identifier(g.label), XXH64(b.data(), b.size(), 0));
  std::string includes = ep.fp_includes();
  if (g.dtype == DType::F16 && includes.find("cuda_fp16.h") == std::string::npos)
    includes += "#ifndef KILN_SIM\n#include <cuda_fp16.h>\n#endif\n";
  if (g.dtype == DType::BF16 && includes.find("cuda_bf16.h") == std::string::npos)
    includes += "#ifndef KILN_SIM\n#include <cuda_bf16.h>\n#endif\n";
  k.source = std::string(kKernelPrelude) + includes + std::string(expr_prelude()) +
             (V > 1 ? std::string(kVectorPrelude) : std::string()) + std::string(mma_prelude()) +
             std::string(wgmma_prelude()) + replace_all(b, "@NAME@", k.name);
  return {k};
}

}  // namespace kiln::codegen
