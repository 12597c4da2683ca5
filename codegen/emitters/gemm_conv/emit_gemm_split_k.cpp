#include "codegen/emitters/gemm_conv/emit_gemm_split_k.h"

#include <xxhash.h>

#include <algorithm>

#include <fmt/format.h>

#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"
#include "codegen/core/kernel_vector.h"
#include "codegen/emitters/gemm_conv/emit_gemm_store.h"
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "ir/error.h"

namespace kiln::codegen {

// Loads of the partial sums in a folded split-K's tail: other SMs wrote them
// during this launch, and L1 is not coherent between SMs, so they are read
// from L2 (ld.global.cg).
const char* const kLoadFromL2 = R"(#ifndef KILN_LDCG_PRELUDE_
#define KILN_LDCG_PRELUDE_
#ifndef KILN_SIM
__device__ __forceinline__ kiln_f32x4 kiln_ldcg4(const float* p) {
  const float4 v = __ldcg(reinterpret_cast<const float4*>(p));
  kiln_f32x4 r;
  r.v[0] = v.x;
  r.v[1] = v.y;
  r.v[2] = v.z;
  r.v[3] = v.w;
  return r;
}
#define KILN_LDCG(p) __ldcg(p)
#define KILN_LDCG4(p) kiln_ldcg4(p)
#else
#define KILN_LDCG(p) (*(p))
#define KILN_LDCG4(p) (*KILN_PTR_CAST(kiln_f32x4, p))
#endif
#endif  // KILN_LDCG_PRELUDE_
)";

// "// buffers: 0 3 4\n": the kernel parameters a split-K kernel reads or
// writes (perf/plan_work.cpp counts only those bytes): the partial GEMM the
// GEMM operands' slots and the workspace, the reduction every other buffer.
// A folded split's kernel states both: `label` "buffers" for its k-loop,
// "tail buffers" for the sums of its last blocks.
std::string buffers_comment(const TiledGemm& g, const Epilogue& ep, bool reduction, const char* label) {
  const size_t nr = ep.results().size(), ns = ep.slots().size();
  std::string s = fmt::format("// {}:", label);
  auto operand = [&](size_t slot) {
    return std::find(g.operand_slots.begin(), g.operand_slots.end(), int(slot)) != g.operand_slots.end();
  };
  if (reduction)
    for (size_t r = 0; r < nr; ++r) s += fmt::format(" {}", r);
  for (size_t slot = 0; slot < ns; ++slot)
    if (operand(slot) != reduction) s += fmt::format(" {}", nr + slot);
  return s + fmt::format(" {}\n", nr + ns);
}

// The partial GEMM's store: the block's BM x BN f32 tile (staged in `cs`,
// rows of CLD) to split `ks` of the workspace, ws[ks][bz][gm][gn], four
// columns per 16-byte store where N allows it and ws is 16-byte aligned.
std::string partial_store(const TiledGemm& g, int BM, int BN, int CLD, int threads, int64_t part) {
  std::string b;
  b += fmt::format("    const long long wbase = (long long)ks * {} + (long long)bz * {};\n", part, g.M * g.N);
  const std::string scalar = fmt::format(
      "#pragma unroll 2\n    for (int e = tid; e < {}; e += {}) {{\n"
      "      const int gm = m0 + e / {}, gn = n0 + e % {};\n"
      "      if (gm < {} && gn < {}) ws[wbase + (long long)gm * {} + gn] = cs[(e / {}) * {} + e % {}];\n    }}\n",
      BM * BN, threads, BN, BN, g.M, g.N, g.N, BN, CLD, BN);
  if (g.N % 4) return b + scalar;
  b += "    if (KILN_PTR_ADDR(ws) % 16 == 0) {\n";
  b += fmt::format("#pragma unroll 2\n      for (int e = tid; e < {}; e += {}) {{\n", BM * BN / 4, threads);
  b += fmt::format("        const int r = e / {}, c = (e % {}) * 4, gm = m0 + r, gn = n0 + c;\n", BN / 4, BN / 4);
  b += fmt::format("        if (gm < {} && gn < {}) {{\n", g.M, g.N);
  b += "          kiln_f32x4 v;\n";
  b += fmt::format("#pragma unroll\n          for (int j = 0; j < 4; ++j) v.v[j] = cs[r * {} + c + j];\n", CLD);
  b += fmt::format("          *KILN_PTR_CAST(kiln_f32x4, ws + wbase + (long long)gm * {} + gn) = v;\n", g.N);
  b += "        }\n      }\n    } else {\n" + scalar + "    }\n";
  return b;
}

namespace {

// folded_tail (below) with the vectorized store: each thread sums EV columns
// (a multiple of 4: 16-byte loads of the partial sums) and stores them EV at a time.
std::string folded_tail_vector(const TiledGemm& g, const Epilogue& ep, int BM, int BN, int threads, int64_t splits,
                               int64_t part, int EV) {
  const int VB = BN / EV;
  std::string b;
  b += "    // Folded split-K: the last of the tile's splits to finish sums them.\n";
  b += "    __threadfence();  // this thread's partial sums reach device scope ...\n";
  b += "    __syncthreads();  // ... and every thread's, before the block takes its ticket\n";
  b += "    unsigned last_ = 0u;\n";
  b += fmt::format("    if (tid == 0) last_ = atomicAdd(tickets + tile_, 1u) == {}u ? 1u : 0u;\n", splits - 1);
  b += "    if (!__syncthreads_or(last_)) return;\n";
  b += "    __threadfence();  // the other splits published theirs before taking their tickets\n";
  b += "    if (tid == 0) tickets[tile_] = 0u;  // the counters clean themselves for the next launch\n";
  b += "    const bool vec = KILN_PTR_ADDR(ws) % 16 == 0;\n";
  b += fmt::format("#pragma unroll 1\n    for (int e = tid; e < {}; e += {}) {{\n", BM * VB, threads);
  b += fmt::format("      const int gm = m0 + e / {}, gn0 = n0 + (e % {}) * {};\n", VB, VB, EV);
  b += fmt::format("      if (gm >= {} || gn0 >= {}) continue;\n", g.M, g.N);
  b += fmt::format("      const long long w0 = (long long)bz * {} + (long long)gm * {} + gn0;\n", g.M * g.N, g.N);
  b += fmt::format("      float sum[{}];\n#pragma unroll\n      for (int j = 0; j < {}; ++j) sum[j] = 0.0f;\n", EV, EV);
  b += fmt::format("      for (int s = 0; s < {}; ++s) {{\n", splits);
  b += "        if (vec) {\n";
  b += fmt::format("#pragma unroll\n          for (int q = 0; q < {}; q += 4) {{\n", EV);
  b += fmt::format("            const kiln_f32x4 p = KILN_LDCG4(ws + s * {}LL + w0 + q);\n", part);
  b += "#pragma unroll\n            for (int j = 0; j < 4; ++j) sum[q + j] += p.v[j];\n          }\n        } else {\n";
  b += fmt::format(
      "#pragma unroll\n          for (int j = 0; j < {}; ++j) sum[j] += KILN_LDCG(ws + s * {}LL + w0 + j);\n", EV,
      part);
  b += "        }\n      }\n";
  b += vector_store(g, ep, EV, "sum");
  b += "    }\n";
  return b;
}

}  // namespace

// The tail of a folded split-K GEMM, after the block stored its partial tile
// (partial_store): the block takes a ticket from its tile's counter; the last
// of the tile's `splits` blocks to arrive sums the tile's partial tiles in
// split order -- the order of the reduction kernel, so the result is the
// same bits whichever block arrives last -- and runs the store (anchor finish
// + epilogue), then sets the counter back to 0 for the next launch. No block
// waits for another (the blocks of a grid need not be resident together).
std::string folded_tail(const TiledGemm& g, const Epilogue& ep, int BM, int BN, int threads, int64_t splits,
                        int64_t part, int EV) {
  if (EV > 1) return folded_tail_vector(g, ep, BM, BN, threads, splits, part, EV);
  const int V = g.N % 4 == 0 ? 4 : 1;
  std::string b;
  b += "    // Folded split-K: the last of the tile's splits to finish sums them.\n";
  b += "    __threadfence();  // this thread's partial sums reach device scope ...\n";
  b += "    __syncthreads();  // ... and every thread's, before the block takes its ticket\n";
  b += "    unsigned last_ = 0u;\n";
  b += fmt::format("    if (tid == 0) last_ = atomicAdd(tickets + tile_, 1u) == {}u ? 1u : 0u;\n", splits - 1);
  b += "    if (!__syncthreads_or(last_)) return;\n";
  b += "    __threadfence();  // the other splits published theirs before taking their tickets\n";
  b += "    if (tid == 0) tickets[tile_] = 0u;  // the counters clean themselves for the next launch\n";
  if (V == 4) b += "    const bool vec = KILN_PTR_ADDR(ws) % 16 == 0;\n";
  b += fmt::format("#pragma unroll 1\n    for (int e = tid; e < {}; e += {}) {{\n", BM * BN / V, threads);
  b += fmt::format("      const int gm = m0 + e / {}, gn0 = n0 + (e % {}) * {};\n", BN / V, BN / V, V);
  b += fmt::format("      if (gm >= {} || gn0 >= {}) continue;\n", g.M, g.N);
  b += fmt::format("      const long long w0 = (long long)bz * {} + (long long)gm * {} + gn0;\n", g.M * g.N, g.N);
  b += fmt::format("      float sum[{}];\n#pragma unroll\n      for (int j = 0; j < {}; ++j) sum[j] = 0.0f;\n", V, V);
  b += fmt::format("      for (int s = 0; s < {}; ++s) {{\n", splits);
  if (V == 4) {
    b += "        if (vec) {\n";
    b += fmt::format("          const kiln_f32x4 p = KILN_LDCG4(ws + s * {}LL + w0);\n", part);
    b += "#pragma unroll\n          for (int j = 0; j < 4; ++j) sum[j] += p.v[j];\n        } else {\n";
    b += fmt::format(
        "#pragma unroll\n          for (int j = 0; j < 4; ++j) sum[j] += KILN_LDCG(ws + s * {}LL + w0 + j);\n", part);
    b += "        }\n";
  } else {
    b += fmt::format("        sum[0] += KILN_LDCG(ws + s * {}LL + w0);\n", part);
  }
  b += "      }\n";
  b += fmt::format("#pragma unroll\n      for (int j = 0; j < {}; ++j) {{\n        const int gn = gn0 + j;\n", V);
  b += "        const float acc = sum[j];\n";
  b += g.store;
  b += "      }\n    }\n";
  return b;
}

// The second launch of a split-K GEMM: each thread sums `splits` partial
// values of V consecutive elements of one row (V = 4 when N allows 16-byte
// loads, else 1) in split order -- a fixed order, so the result does not
// depend on scheduling -- then runs the store (anchor finish + epilogue) per
// element, as the one-kernel GEMM does after its loop. Where the epilogue has
// a vector form (vector_store_width) of 4 or 8 columns, each thread takes that
// many (one or two 16-byte partial loads per split) and stores them through
// it, with as many elements per block as the 4-wide kernel (so the same grid).
ComputeKernel emit_split_k_reduction(const TiledGemm& g, const Epilogue& ep, int64_t splits,
                                     const std::string& includes) {
  // (The reduction has no tile: 16 stands for any block width the vector divides.)
  int EV = vector_store_width(g, ep, 16, false);
  if (EV % 4) EV = 1;
  const int V = EV > 1 ? EV : g.N % 4 == 0 ? 4 : 1;
  const int64_t part = g.batch * g.M * g.N, items = part / V;
  const int threads = EV > 4 ? split_k_reduction_threads(part / 4) * 4 / EV : split_k_reduction_threads(items);
  if ((items + threads - 1) / threads > INT32_MAX)
    unsupported("codegen: {}: {} elements exceed one grid", g.label, part);
  ComputeKernel k;
  k.grid = static_cast<unsigned>((items + threads - 1) / threads);
  k.block = threads;
  if (deciding_only()) return k;  // the launch is decided; the rest is text (codegen/core/deciding_only.h)
  std::string b;
  b += fmt::format(
      "// {}: split-K reduction of {} partial sums, batch {} x [{} x {}], {} per thread; then the epilogue{}\n",
      g.label, splits, g.batch, g.M, g.N, V, EV > 1 ? fmt::format(" ({} per access)", EV) : "");
  b += buffers_comment(g, ep, true);
  b += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) @NAME@({}, KILN_PTR(float) ws) {{\n", threads,
                   ep.params());
  b += fmt::format("  const long long e0 = ((long long)blockIdx.x * {} + threadIdx.x) * {};\n", threads, V);
  b += fmt::format("  if (e0 >= {}LL) return;\n", part);
  b += fmt::format("  const int bz = (int)(e0 / {}LL), gm = (int)(e0 / {} % {}), gn0 = (int)(e0 % {});\n", g.M * g.N,
                   g.N, g.M, g.N);
  b += g.prologue;
  b += fmt::format("  float sum[{}];\n#pragma unroll\n  for (int j = 0; j < {}; ++j) sum[j] = 0.0f;\n", V, V);
  if (V >= 4) {
    b += "  if (KILN_PTR_ADDR(ws) % 16 == 0) {\n";
    b += fmt::format("    for (int s = 0; s < {}; ++s) {{\n", splits);
    if (V == 4) {
      b += fmt::format("      const kiln_f32x4 p = *KILN_PTR_CAST(kiln_f32x4, ws + s * {}LL + e0);\n", part);
      b += "#pragma unroll\n      for (int j = 0; j < 4; ++j) sum[j] += p.v[j];\n    }\n  } else {\n";
    } else {
      b += fmt::format("#pragma unroll\n      for (int q = 0; q < {}; q += 4) {{\n", V);
      b += fmt::format("        const kiln_f32x4 p = *KILN_PTR_CAST(kiln_f32x4, ws + s * {}LL + e0 + q);\n", part);
      b += "#pragma unroll\n        for (int j = 0; j < 4; ++j) sum[q + j] += p.v[j];\n      }\n    }\n  } else {\n";
    }
    b += fmt::format(
        "    for (int s = 0; s < {}; ++s)\n#pragma unroll\n      for (int j = 0; j < {}; ++j) sum[j] += "
        "ws[s * {}LL + e0 + j];\n  }}\n",
        splits, V, part);
  } else {
    b += fmt::format("  for (int s = 0; s < {}; ++s) sum[0] += ws[s * {}LL + e0];\n", splits, part);
  }
  if (EV > 1) {
    b += "  {\n" + vector_store(g, ep, EV, "sum") + "  }\n}\n";
  } else {
    b += fmt::format("#pragma unroll\n  for (int j = 0; j < {}; ++j) {{\n    const int gn = gn0 + j;\n", V);
    b += "    {\n      const float acc = sum[j];\n";
    b += g.store;
    b += "    }\n  }\n}\n";
  }
  b += ep.sim_entry("@NAME@", true);
  k.name = fmt::format("kiln_{}_splitk_{:016x}", sanitize_identifier(g.label), XXH64(b.data(), b.size(), 0));
  k.source = std::string(kKernelPrelude) + includes + std::string(expr_prelude()) + std::string(kVectorPrelude) +
             kF32x4 + replace_all(b, "@NAME@", k.name);
  return k;
}

}  // namespace kiln::codegen
