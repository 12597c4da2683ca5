// The tensor-core main loop of the GEMM core (codegen/emitters/gemm_conv/emit_gemm.h): the same
// TiledGemm (operand index maps, prologue, per-element store) as the SIMT
// kernel, computed with mma.sync (docs/codegen.md, "Tensor cores in
// matmul/gemm/conv").
//
// A block of warps_m x warps_n warps computes a BM x BN tile of one batch
// index (flat grid, as the SIMT kernel); each warp a (BM/warps_m) x
// (BN/warps_n) sub-tile as MI x NI mma tiles of 16 x 8. K advances BK at a
// time through a STAGES-deep ring of shared-memory stages:
//   A stage [BM][BK + pad] (k contiguous), B stage [BN][BK + pad] (k
//   contiguous) or, when B arrives as chunks along n, [BK][BN + pad];
//   pads of 16 bytes keep ldmatrix (and the tf32 fragment loads) free of
//   bank conflicts.
// An operand with 16-byte chunks (OperandLoad::chunk) is copied with cp.async
// (zero-filled where the chunk is out of range or padding), so STAGES - 1
// k-tiles are in flight while one is multiplied; any other operand is
// loaded element by element through its `load` (guarded, any index map),
// converted to the stage's type and stored (then the ring still saves one
// barrier per k-tile against the SIMT loop). One __syncthreads per k-tile.
// f16/bf16: fragments from ldmatrix (.trans for a [BK][BN] B stage), one
// kiln_mma_tile per 16 of k. tf32: the stage holds f32; fragments are read
// per lane and rounded with cvt.rna.tf32, m16n8k8 per 8 of k.
// After the loop the accumulators go to a BM x (BN + 4) f32 staging tile
// (reusing the ring's shared memory) and the epilogue sweeps it row-major,
// exactly as in the SIMT kernel.
#include <xxhash.h>

#include <algorithm>

#include <fmt/format.h>

#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_expr.h"
#include "codegen/emitters/gemm_conv/emit_gemm.h"
#include "codegen/emitters/gemm_conv/emit_gemm_split_k.h"
#include "codegen/emitters/gemm_conv/emit_gemm_store.h"
#include "codegen/emitters/gemm_conv/emit_gemm_tc.h"
#include "codegen/core/kernel_text.h"
#include "codegen/core/kernel_vector.h"
#include "ir/error.h"
#include "ir/symbolic_dim.h"

namespace kiln::codegen {

std::vector<ComputeKernel> emit_mma_gemm(const TiledGemm& g, const Epilogue& ep, GemmMath math,
                                         const GemmTileConfig& c) {
  KILN_CHECK(math != GemmMath::Simt, "codegen: {}: emit_mma_gemm needs tensor-core math", g.label);
  const bool tf32 = math == GemmMath::Tf32;
  const int BM = c.bm, BN = c.bn, BK = c.bk, STAGES = c.stages;
  const int threads = 32 * c.warps_m * c.warps_n;
  const int WTM = BM / c.warps_m, WTN = BN / c.warps_n, MI = WTM / 16, NI = WTN / 8;
  const int esize = tf32 ? 4 : 2, W = 16 / esize;  // bytes per element, elements per 16-byte chunk
  const std::string st = tf32 ? "float" : std::string(cuda_storage_type(g.dtype));
  const char* idx = ep.index_type();
  const bool a_chunk = static_cast<bool>(g.a.chunk), b_chunk = static_cast<bool>(g.b.chunk);
  KILN_CHECK(!a_chunk || (g.a.chunk_k_fast ? g.K % W == 0 : g.M % W == 0), "codegen: {}: A chunks off 16 bytes",
             g.label);
  KILN_CHECK(!b_chunk || (g.b.chunk_k_fast ? g.K % W == 0 : g.N % W == 0), "codegen: {}: B chunks off 16 bytes",
             g.label);
  const bool b_kn = b_chunk && !g.b.chunk_k_fast;  // B stage [BK][BN + pad]
  const bool a_km = a_chunk && !g.a.chunk_k_fast;  // A stage [BK][BM + pad] (A stored [K, M])
  const int pad = tf32 ? 4 : 8;
  const int LDA = a_km ? BM + 8 : BK + pad, LDB = b_kn ? BN + 8 : BK + pad;
  const int A_STAGE = a_km ? BK * LDA : BM * LDA, B_STAGE = b_kn ? BK * LDB : BN * LDB;
  const int CLD = BN + 4;
  // Shape-generic (symbolic batch/M/N/K, a plan with shape profiles): the
  // sizes from `ks`, the grid per shape (generic_gemm_grid, as the SIMT
  // kernel's), the k-tile count computed in the kernel; no split-K
  // (generic_gemm_tile: its workspace and tile counters would be symbolic).
  const bool generic = !g.syms.empty();
  KILN_CHECK(!generic || c.split_k == 1, "codegen: {}: a shape-generic tensor-core GEMM is unsplit", g.label);
  auto dim_text = [&](int64_t d) { return is_symbolic_dim(d) ? g.syms.lit(d) : std::to_string(d); };
  const std::string M_text = dim_text(g.M), N_text = dim_text(g.N), K_text = dim_text(g.K);
  const bool grid3 = generic && (is_symbolic_dim(g.batch) || is_symbolic_dim(g.N));
  const int64_t tiles_m = generic ? 0 : (g.M + BM - 1) / BM, tiles_n = grid3 ? 0 : (g.N + BN - 1) / BN;
  const int64_t blocks = generic ? 0 : g.batch * tiles_m * tiles_n;
  // Split-K: block s of `split` takes k-tiles [s * KT, s * KT + KT) of the KT_ALL.
  const int64_t KT_ALL = is_symbolic_dim(g.K) ? 1 : (g.K + BK - 1) / BK;
  const SplitK sk = generic ? SplitK{1, KT_ALL} : split_k_of(c, KT_ALL);
  const int64_t KT = sk.k_tiles;
  const bool split = sk.splits > 1;
  const bool fold = split && c.fold_split;  // no reduction kernel: the last block per tile sums
  if (blocks * sk.splits > INT32_MAX) unsupported("codegen: {}: {} tiles exceed one grid", g.label, blocks * sk.splits);
  ComputeKernel k;
  k.grid = g.M == 0 || g.N == 0 ? 0 : static_cast<unsigned>(blocks * sk.splits);
  if (generic) generic_gemm_grid(g, BM, BN, k);
  k.block = static_cast<unsigned>(threads);
  k.shared_bytes =
      std::max<size_t>(static_cast<size_t>(STAGES) * (A_STAGE + B_STAGE) * esize, static_cast<size_t>(BM) * CLD * 4);
  const int64_t part = split ? g.batch * g.M * g.N : 0;  // elements of one split's partial result
  if (split) k.workspace_f32 = sk.splits * part;
  if (fold) k.tile_counters = blocks;
  // The loop's trip count: every split but the last runs KT k-tiles.
  const std::string kt_n = split ? "kt_n" : "KT";
  // Decided (codegen/core/deciding_only.h): the rest is text, but for the reduction kernel's own grid.
  if (deciding_only()) {
    if (!split || fold) return {k};
    return {k, emit_split_k_reduction(g, ep, sk.splits, "")};
  }

  std::string b;
  b += fmt::format("// {}: batch {} x [{} x {}] = [{} x {}] [{} x {}] on tensor cores ({}); tile {}, A {}, B {}{}\n",
                   g.label, dim_str(g.batch), dim_str(g.M), dim_str(g.N), dim_str(g.M), dim_str(g.K), dim_str(g.K),
                   dim_str(g.N), gemm_math_name(math), gemm_tile_name(c),
                   a_chunk ? (a_km ? "cp.async [k][m]" : "cp.async") : "loaded",
                   b_chunk ? (b_kn ? "cp.async [k][n]" : "cp.async") : "loaded",
                   split ? fmt::format("; split-K partial sums of {} x {} k-tiles to the workspace{}", sk.splits, KT,
                                       fold ? ", summed by the last block of each tile" : "")
                         : "");
  if (split) b += buffers_comment(g, ep, false);
  if (fold) b += buffers_comment(g, ep, true, "tail buffers");
  // The epilogue's memory accesses, for the performance model's epilogue term (perf/plan_work.cpp).
  // A folded split's tail stores through the epilogue too: vectorized when
  // the width is a multiple of the partial sums' 16-byte loads.
  // A symbolic M, N or K: element by element (a symbolic batch alone keeps the rows' alignment).
  const bool sym_mnk = is_symbolic_dim(g.M) || is_symbolic_dim(g.N) || is_symbolic_dim(g.K);
  int V = generic && sym_mnk ? 1 : vector_store_width(g, ep, BN, split && !fold);
  if (fold && V % 4) V = 1;
  if (!split || fold)
    b += fmt::format("// epilogue: {}-element accesses, {} per {} elements, {} bytes per element\n", V,
                     V > 1 ? ep.vector_accesses() : ep.scalar_accesses(), V, ep.bytes_per_element());
  // Min. 1 block per SM: with the block size alone, NVRTC's ptxas capped small blocks' registers and spilled.
  if (generic) b += KernelSymbols::struct_text();
  b += fmt::format("extern \"C\" __global__ void __launch_bounds__({}, 1) @NAME@({}{}{}{}) {{\n", threads, ep.params(),
                   split ? ", KILN_PTR(float) ws" : "", fold ? ", KILN_PTR(unsigned) tickets" : "",
                   generic ? ", kiln_syms ks" : "");
  b += fmt::format("  constexpr int BM = {}, BN = {}, BK = {}, STAGES = {}, LDA = {}, LDB = {};\n", BM, BN, BK, STAGES,
                   LDA, LDB);
  if (is_symbolic_dim(g.K)) {
    b += fmt::format("  constexpr int A_STAGE = {}, B_STAGE = {}, WTM = {}, WTN = {}, MI = {}, NI = {};\n", A_STAGE,
                     B_STAGE, WTM, WTN, MI, NI);
    b += fmt::format("  const int KT = (int)(({} + {}LL) / {}LL);  // k-tiles at this shape\n", K_text, BK - 1, BK);
  } else {
    b += fmt::format("  constexpr int A_STAGE = {}, B_STAGE = {}, KT = {}, WTM = {}, WTN = {}, MI = {}, NI = {};\n",
                     A_STAGE, B_STAGE, KT, WTM, WTN, MI, NI);
  }
  b += fmt::format("  KILN_DYNAMIC_SHARED({}, smem);\n", st);
  b += "  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;\n";
  b += fmt::format("  const int wm = warp / {}, wn = warp % {};\n", c.warps_n, c.warps_n);
  if (split) {
    b += fmt::format("  const int ks = blockIdx.x / {};  // this block's split of K\n", blocks);
    b += fmt::format("  const int kt0 = ks * KT, kt_n = KT < {} - kt0 ? KT : {} - kt0;\n", KT_ALL, KT_ALL);
    if (fold) b += fmt::format("  const int tile_ = blockIdx.x % {};  // its counter\n  int t_ = tile_;\n", blocks);
    else b += fmt::format("  int t_ = blockIdx.x % {};\n", blocks);
  } else {
    if (!grid3) b += "  int t_ = blockIdx.x;\n";
  }
  if (grid3) {
    b += "  const int tm = blockIdx.x, tn = blockIdx.y, bz = blockIdx.z;\n";
  } else {
    const std::string tiles_m_text =
        generic ? fmt::format("(int)(({} + {}LL) / {}LL)", M_text, BM - 1, BM) : std::to_string(tiles_m);
    const int64_t tn_count = generic ? (g.N + BN - 1) / BN : tiles_n;
    b += fmt::format("  const int tn = t_ % {}; t_ /= {};\n", tn_count, tn_count);
    b += fmt::format("  const int tm = t_ % {};\n  const int bz = t_ / {};\n", tiles_m_text, tiles_m_text);
  }
  b += "  const int m0 = tm * BM, n0 = tn * BN;\n";
  b += g.prologue;
  b += "  float acc[MI][NI][4];\n";
  b += "#pragma unroll\n  for (int mi = 0; mi < MI; ++mi)\n#pragma unroll\n    for (int ni = 0; ni < NI; ++ni)\n"
       "#pragma unroll\n      for (int i = 0; i < 4; ++i) acc[mi][ni][i] = 0.0f;\n";

  // Loads of one operand's k-tile into a stage: `sm` names the stage pointer.
  // `ld_stage`: the stage's row length ([rows][ld_stage], or [BK][ld_stage] for chunks along the row).
  auto stage_loads = [&](const OperandLoad& ld, const char* p, const char* sm, const char* base, int rows,
                         const std::string& count, int ld_stage) {
    std::string s;
    if (ld.chunk) {
      const int chunks = rows * BK / W;
      for (int j = 0; j * threads < chunks; ++j) {
        const std::string v = fmt::format("{}c{}", p, j);
        s += "    {\n";
        s += fmt::format("      const int c = tid + {};\n", j * threads);
        if ((j + 1) * threads > chunks) s += fmt::format("      if (c < {}) {{\n", chunks);
        else s += "      {\n";
        std::string row, kk, dst;
        if (ld.chunk_k_fast) {
          row = fmt::format("c / {}", BK / W);
          kk = fmt::format("(c % {}) * {}", BK / W, W);
          dst = fmt::format("{}_r * {} + {}_kk", v, ld_stage, v);
        } else {
          kk = fmt::format("c / {}", rows / W);
          row = fmt::format("(c % {}) * {}", rows / W, W);
          dst = fmt::format("{}_kk * {} + {}_r", v, ld_stage, v);
        }
        s += fmt::format("      const int {}_r = {}, {}_kk = {};\n", v, row, v, kk);
        s += fmt::format("      const int {}_row = {} + {}_r;\n", v, base, v);
        s += fmt::format("      const int k = k0 + {}_kk;\n", v);
        std::string setup;
        ld.setup(v + "_row", v, setup);
        s += setup;
        s += fmt::format("      bool ok = false;\n      {} off = 0;\n", idx);
        s += fmt::format("      if ({}_row < {} && k < {}) {{\n{}      }}\n", v, count, K_text, ld.chunk("k", v));
        s += fmt::format("      kiln_cp_async16_zfill({} + {}, {} + (ok ? off : ({})0), ok ? 16 : 0);\n", sm, dst,
                         ld.chunk_buffer, idx);
        s += "      }\n    }\n";
      }
      return s;
    }
    // Element by element (any index map), into the padded stage.
    s += stage_operand_elements(
        ld, p, rows, BK, threads, base, count, K_text,
        [&](const std::string& v) { return fmt::format("{}[{}_r * {} + {}_kk]", sm, v, ld_stage, v); },
        tf32 ? "v" : cuda_store(g.dtype, "v"));
    return s;
  };
  // k-tile `lt` -> stage `ls` (inline text, twice: a device lambda made NVRTC spill).
  const std::string load_tile =
      "    {\n    const auto as = smem + ls * (A_STAGE + B_STAGE);\n"
      "    const auto bs = as + A_STAGE;\n    const int k0 = " +
      std::string(split ? "(kt0 + lt)" : "lt") + " * BK;\n" + stage_loads(g.a, "a", "as", "m0", BM, M_text, LDA) +
      stage_loads(g.b, "b", "bs", "n0", BN, N_text, LDB) + "    }\n";
  b += "  // The ring: STAGES - 1 k-tiles in flight while one is multiplied.\n";
  b += "#pragma unroll\n  for (int ls = 0; ls < STAGES - 1; ++ls) {\n    const int lt = ls;\n    if (lt < " + kt_n +
       ")\n" + load_tile + "    kiln_cp_async_commit();\n  }\n";
  b += "  const int g4 = lane >> 2, t4 = lane % 4;\n";
  b += "  (void)g4;\n  (void)t4;\n";
  b += "  for (int kt = 0; kt < " + kt_n + "; ++kt) {  // (no `#pragma unroll 1`: with it NVRTC's ptxas spilled)\n";
  b += "    kiln_cp_async_wait<STAGES - 2>();  // k-tile kt has landed (this thread's copies) ...\n";
  b += "    __syncthreads();  // ... and everyone's; stage (kt - 1) % STAGES is free again\n";
  b += "    if (kt + STAGES - 1 < " + kt_n + ") {\n      const int lt = kt + STAGES - 1, ls = lt % STAGES;\n" +
       load_tile + "    }\n";
  b += "    kiln_cp_async_commit();\n";
  b += "    const auto as = smem + (kt % STAGES) * (A_STAGE + B_STAGE);\n    const auto bs = as + A_STAGE;\n";
  if (!tf32) {
    b += "#pragma unroll\n    for (int kk = 0; kk < BK; kk += 16) {\n      unsigned af[MI][4], bf[NI][2];\n";
    b +=
        "#pragma unroll\n      for (int mi = 0; mi < MI; ++mi)\n" +
        std::string(
            a_km
                ? "        kiln_ldmatrix_x4_trans(af[mi], as + (kk + lane % 8 + (lane / 16) * 8) * LDA + wm * WTM + mi * 16 + "
                  "((lane / 8) % 2) * 8);\n"
                : "        kiln_ldmatrix_x4(af[mi], as + (wm * WTM + mi * 16 + lane % 16) * LDA + kk + (lane / 16) * 8);\n");
    b += "#pragma unroll\n      for (int nj = 0; nj < NI / 2; ++nj) {\n        unsigned r[4];\n";
    if (b_kn)
      b += "        kiln_ldmatrix_x4_trans(r, bs + (kk + lane % 8 + ((lane / 8) % 2) * 8) * LDB + wn * WTN + nj * 16 + "
           "(lane / 16) * 8);\n";
    else
      b += "        kiln_ldmatrix_x4(r, bs + (wn * WTN + nj * 16 + lane % 8 + (lane / 16) * 8) * LDB + kk + ((lane / "
           "8) % 2) * 8);\n";
    b += "        bf[2 * nj][0] = r[0];\n        bf[2 * nj][1] = r[1];\n"
         "        bf[2 * nj + 1][0] = r[2];\n        bf[2 * nj + 1][1] = r[3];\n      }\n";
    b += fmt::format("      {}<MI, NI>(acc, af, bf);\n    }}\n",
                     math == GemmMath::F16 ? "kiln_mma_tile_f16" : "kiln_mma_tile_bf16");
  } else {
    // m16n8k8 tf32 fragments: a_i (row g + 8 (i & 1), col t + 4 (i >> 1)), b_i (k t + 4 i, n g).
    b += "#pragma unroll\n    for (int kk = 0; kk < BK; kk += 8) {\n      unsigned af[MI][4], bf[NI][2];\n";
    b += "#pragma unroll\n      for (int mi = 0; mi < MI; ++mi) {\n" +
         std::string(
             a_km ? "        const auto ap = as + (kk + t4) * LDA + wm * WTM + mi * 16 + g4;\n"
                    "        af[mi][0] = kiln_f32_to_tf32(ap[0]);\n        af[mi][1] = kiln_f32_to_tf32(ap[8]);\n"
                    "        af[mi][2] = kiln_f32_to_tf32(ap[4 * LDA]);\n"
                    "        af[mi][3] = kiln_f32_to_tf32(ap[4 * LDA + 8]);\n"
                  : "        const auto ap = as + (wm * WTM + mi * 16 + g4) * LDA + kk + t4;\n"
                    "        af[mi][0] = kiln_f32_to_tf32(ap[0]);\n        af[mi][1] = kiln_f32_to_tf32(ap[8 * LDA]);\n"
                    "        af[mi][2] = kiln_f32_to_tf32(ap[4]);\n"
                    "        af[mi][3] = kiln_f32_to_tf32(ap[8 * LDA + 4]);\n") +
         "      }\n";
    b += "#pragma unroll\n      for (int ni = 0; ni < NI; ++ni) {\n";
    if (b_kn)
      b += "        const auto bp = bs + (kk + t4) * LDB + wn * WTN + ni * 8 + g4;\n"
           "        bf[ni][0] = kiln_f32_to_tf32(bp[0]);\n        bf[ni][1] = kiln_f32_to_tf32(bp[4 * LDB]);\n";
    else
      b += "        const auto bp = bs + (wn * WTN + ni * 8 + g4) * LDB + kk + t4;\n"
           "        bf[ni][0] = kiln_f32_to_tf32(bp[0]);\n        bf[ni][1] = kiln_f32_to_tf32(bp[4]);\n";
    b += "      }\n";
    b += "#pragma unroll\n      for (int mi = 0; mi < MI; ++mi)\n#pragma unroll\n        for (int ni = 0; ni < NI; "
         "++ni) kiln_mma_m16n8k8_tf32(acc[mi][ni], af[mi], bf[ni], acc[mi][ni]);\n    }\n";
  }
  b += "  }\n";
  b += "  kiln_cp_async_wait<0>();\n  __syncthreads();  // the ring's memory becomes the staging tile\n";
  b += "  {\n    KILN_DYNAMIC_SHARED(float, cs);\n";
  b += "    // Accumulator i of mma tile (mi, ni): row g + 8 (i >> 1), col 2t + (i & 1).\n";
  b += "#pragma unroll\n    for (int mi = 0; mi < MI; ++mi)\n#pragma unroll\n      for (int ni = 0; ni < NI; ++ni)\n"
       "#pragma unroll\n        for (int i = 0; i < 4; ++i)\n";
  b += fmt::format(
      "          cs[(wm * WTM + mi * 16 + g4 + 8 * (i >> 1)) * {} + wn * WTN + ni * 8 + 2 * t4 + (i & 1)] "
      "= acc[mi][ni][i];\n",
      CLD);
  b += "    __syncthreads();\n";
  if (split) {
    b += partial_store(g, BM, BN, CLD, threads, part);
    if (fold) b += folded_tail(g, ep, BM, BN, threads, sk.splits, part, V);
  } else if (V > 1) {
    // Vectorized (docs/codegen.md, "Vectorized GEMM/conv epilogues"): each
    // thread takes V consecutive columns of a row of the staging tile and the
    // epilogue loads and stores them V at a time.
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
    // Unrolled twice: `#pragma unroll 1` here made NVRTC's ptxas spill a few bytes.
    b += fmt::format("#pragma unroll 2\n    for (int e = tid; e < {}; e += {}) {{\n", BM * BN, threads);
    b += fmt::format("      const int gm = m0 + e / {}, gn = n0 + e % {};\n", BN, BN);
    b += fmt::format("      if (gm < {} && gn < {}) {{\n      const float acc = cs[(e / {}) * {} + e % {}];\n", M_text,
                     N_text, BN, CLD, BN);
    b += g.store;
    b += "      }\n    }\n";
  }
  b += "  }\n}\n";
  b += ep.sim_entry("@NAME@", split, fold, generic);
  k.name = fmt::format("kiln_{}_mma_{:016x}", sanitize_identifier(g.label), XXH64(b.data(), b.size(), 0));
  std::string includes = ep.fp_includes();
  if (g.dtype == DType::F16 && includes.find("cuda_fp16.h") == std::string::npos)
    includes += "#ifndef KILN_SIM\n#include <cuda_fp16.h>\n#endif\n";
  if (g.dtype == DType::BF16 && includes.find("cuda_bf16.h") == std::string::npos)
    includes += "#ifndef KILN_SIM\n#include <cuda_bf16.h>\n#endif\n";
  k.source = std::string(kKernelPrelude) + includes + std::string(expr_prelude()) +
             (split   ? std::string(kVectorPrelude) + kF32x4
              : V > 1 ? std::string(kVectorPrelude)
                      : std::string()) +
             (fold ? kLoadFromL2 : "") + std::string(mma_prelude()) + replace_all(b, "@NAME@", k.name);
  if (!split || fold) return {k};
  ComputeKernel r = emit_split_k_reduction(g, ep, sk.splits, includes);
  r.workspace_f32 = k.workspace_f32;
  return {k, r};
}

}  // namespace kiln::codegen
