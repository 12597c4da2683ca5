#include "codegen/emitters/gemm_conv/emit_gemm.h"

#include <xxhash.h>

#include <algorithm>

#include <fmt/format.h>

#include "codegen/core/deciding_only.h"
#include "codegen/core/emit_expr.h"
#include "codegen/core/kernel_text.h"
#include "codegen/core/kernel_vector.h"
#include "codegen/emitters/gemm_conv/gemm_tiles_wgmma.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"
#include "ops/linalg_internal.h"

namespace kiln::codegen {

namespace {

constexpr int kThreads = 256;  // 16 x 16 threads per block

// Staging of one operand into shared memory for the k-tile at k0: per slot
// j, the element l = tid + 256 j of the BROWS x BK tile.
struct Staging {
  int rows;   // BM or BN
  int slots;  // rows * BK / 256
  bool k_fast;
};

// The (row, kk) of slot j for thread `tid` as expressions.
std::pair<std::string, std::string> slot_coords(const Staging& st, int bk, int j) {
  if (st.k_fast) {
    // kk = l % BK, row = l / BK; 256 is a multiple of BK.
    return {fmt::format("(tid / {} + {})", bk, j * kThreads / bk), fmt::format("(tid % {})", bk)};
  }
  return {fmt::format("(tid % {} + {})", st.rows, (j * kThreads) % st.rows),
          fmt::format("(tid / {} + {})", st.rows, (j * kThreads) / st.rows)};
}

}  // namespace

std::string gemm_compute_type(DType t) {
  if (t == DType::F64) return "double";
  if (is_float(t)) return "float";
  return "unsigned long long";
}

std::string gemm_acc_for_epilogue(DType t, const std::string& acc) {
  if (is_float(t)) return acc;
  return fmt::format("(long long)({})", acc);
}

GemmMath gemm_math(const TiledGemm& g) {
  if (g.dtype == DType::F16) return GemmMath::F16;
  if (g.dtype == DType::BF16) return GemmMath::BF16;
  if (g.dtype == DType::F32 && g.tf32) return GemmMath::Tf32;
  return GemmMath::Simt;
}

namespace {
thread_local int64_t generic_rows = 0;  // 0: the defaults below
}  // namespace

ScopedGenericGemmRows::ScopedGenericGemmRows(int64_t rows) : previous_(generic_rows) {
  generic_rows = std::max<int64_t>(rows, 1);
}
ScopedGenericGemmRows::~ScopedGenericGemmRows() { generic_rows = previous_; }

GemmProblem generic_gemm_problem(const TiledGemm& g) {
  auto at = [](int64_t d, int64_t rep) { return is_symbolic_dim(d) ? rep : d; };
  // A symbolic batch over a static M (an NCHW conv over a dynamic batch of
  // images) stands for many images (the representative rows over M); over a
  // symbolic M (an encoder's batch of heads), for one.
  // A size bucket's rows (ScopedGenericGemmRows): M itself, or as images of M rows.
  const int64_t rows = generic_rows;
  const int64_t batch_rep = is_symbolic_dim(g.M) ? 1
                            : rows               ? std::max<int64_t>(rows / std::max<int64_t>(g.M, 1), 1)
                                                 : 4096;
  return {gemm_math(g),
          at(g.batch, batch_rep),
          at(g.M, rows ? rows : 4096),
          at(g.N, 512),
          at(g.K, 512),
          0,
          g.a.chunk && !g.a.chunk_k_fast,
          g.b.chunk && !g.b.chunk_k_fast};
}

GemmTileConfig generic_gemm_tile(const TiledGemm& g, GemmMath math) {
  if (g.syms.empty())
    return choose_gemm_tile_config({math, g.batch, g.M, g.N, g.K, g.operand_bytes, g.a.chunk && !g.a.chunk_k_fast,
                                    g.b.chunk && !g.b.chunk_k_fast});
  // The wgmma kernel (the sm_90a opt-in) has no shape-generic form: a
  // symbolic problem takes the mma.sync tiles.
  ScopedSm90Wgmma no_wgmma(false);
  const GemmProblem p = generic_gemm_problem(g);
  GemmTileConfig tile = choose_gemm_tile_config(p);
  if (tile.wgmma)
    unsupported("codegen: {}: tile {} is a wgmma tile, and the wgmma GEMM takes no symbolic sizes yet", g.label,
                gemm_tile_name(tile));
  // No split-K: the split is decided from the grid, which follows the
  // symbols, and its workspace and tile counters would be sized by them. The
  // default's split is dropped; a chooser's (autotuning) is an error.
  if (tile.split_k > 1 && !(tile == default_gemm_tile(p)))
    unsupported(
        "codegen: {}: tile {} splits K, which a shape-generic GEMM does not: its grid, workspace and tile "
        "counters would follow the symbols",
        g.label, gemm_tile_name(tile));
  tile.split_k = 1;
  tile.fold_split = false;
  return tile;
}

bool generic_gemm_grid(const TiledGemm& g, int bm, int bn, ComputeKernel& k) {
  const bool grid3 = is_symbolic_dim(g.batch) || is_symbolic_dim(g.N);
  k.symbols = g.syms.names();
  if (grid3) {
    k.grid_expr = GridAxisExpr{g.M, bm, 0, 1};
    k.grid_expr_y = GridAxisExpr{g.N, bn, 0, 1};
    k.grid_expr_z = GridAxisExpr{g.batch, 1, 0, 1};
  } else {
    k.grid_expr = GridAxisExpr{g.M, bm, 0, g.batch * ((g.N + bn - 1) / bn)};
  }
  k.grid = g.M == 0 || g.N == 0 || g.batch == 0 ? 0 : 1;  // evaluated per shape
  return grid3;
}

std::vector<ComputeKernel> emit_tiled_gemm(const TiledGemm& g, const Epilogue& ep) {
  const GemmMath math = gemm_math(g);
  // Symbolic sizes (a plan with shape profiles): any of the batch, M, N and
  // K may be symbolic dims, read from `ks`; the tile is chosen for a large
  // problem (every tail is guarded, so it is right at every size), unsplit,
  // and the grid is a function of the symbols (generic_gemm_grid).
  const bool generic = !g.syms.empty();
  const GemmTileConfig tile = generic_gemm_tile(g, math);
  if (math != GemmMath::Simt)
    return tile.wgmma ? emit_wgmma_tiled_gemm(g, ep, math, tile) : emit_mma_gemm(g, ep, math, tile);
  const int BM = tile.bm, BN = tile.bn, BK = tile.bk, TM = BM / 16, TN = BN / 16;
  const std::string ct = gemm_compute_type(g.dtype);
  // One flat grid of batch x row tiles x column tiles, unless the batch or N
  // is symbolic: then x counts the row tiles, y the column tiles, z the batch.
  const bool grid3 = generic && (is_symbolic_dim(g.batch) || is_symbolic_dim(g.N));
  const int64_t tiles_m = generic ? 0 : (g.M + BM - 1) / BM, tiles_n = grid3 ? 0 : (g.N + BN - 1) / BN;
  ComputeKernel k;
  const int64_t blocks = generic ? 0 : g.batch * tiles_m * tiles_n;
  if (blocks > INT32_MAX) unsupported("codegen: {}: {} tiles exceed one grid", g.label, blocks);
  k.grid = g.M == 0 || g.N == 0 ? 0 : static_cast<unsigned>(blocks);
  if (generic) generic_gemm_grid(g, BM, BN, k);
  auto dim_text = [&](int64_t d) { return is_symbolic_dim(d) ? g.syms.lit(d) : std::to_string(d); };
  const std::string tiles_m_text =
      generic ? fmt::format("(({} + {}LL) / {}LL)", dim_text(g.M), BM - 1, BM) : std::to_string(tiles_m);
  const std::string M_text = dim_text(g.M), N_text = dim_text(g.N), K_text = dim_text(g.K);
  k.block = kThreads;
  if (deciding_only()) return {k};  // the launch is decided; the rest is text (codegen/core/deciding_only.h)
  const int stage_elems = std::max(BK * (BM + 1) + BK * (BN + 1), BM * BN);

  std::string b;
  b += fmt::format("// {}: batch {} x [{} x {}] = [{} x {}] [{} x {}]; tile {}x{}x{}, {}\n", g.label, dim_str(g.batch),
                   dim_str(g.M), dim_str(g.N), dim_str(g.M), dim_str(g.K), dim_str(g.K), dim_str(g.N), BM, BN, BK, ct);
  if (generic) b += KernelSymbols::struct_text();
  b += fmt::format("extern \"C\" __global__ void @NAME@({}{}) {{\n", ep.params(), generic ? ", kiln_syms ks" : "");
  b += fmt::format("  __shared__ {} kiln_sm[{}];\n", ct, stage_elems);
  b += fmt::format("  {}* As = kiln_sm;  // [{}][{}]: A(m, k) at k * {} + m\n", ct, BK, BM + 1, BM + 1);
  b += fmt::format("  {}* Bs = kiln_sm + {};  // [{}][{}]\n", ct, BK * (BM + 1), BK, BN + 1);
  b += "  const int tid = threadIdx.x;\n  const int tx = tid % 16, ty = tid / 16;\n";
  if (grid3) {
    b += "  const int tm = blockIdx.x, tn = blockIdx.y, bz = blockIdx.z;\n";
  } else {
    b += fmt::format("  int t = blockIdx.x;\n  const int tn = t % {}; t /= {};\n", tiles_n, tiles_n);
    b += fmt::format("  const int tm = t % {};\n  const int bz = t / {};\n", tiles_m_text, tiles_m_text);
  }
  b += fmt::format("  const int m0 = tm * {}, n0 = tn * {};\n", BM, BN);
  b += g.prologue;
  const Staging sa{BM, BM * BK / kThreads, g.a.k_fast}, sb{BN, BN * BK / kThreads, g.b.k_fast};
  // 128-bit loads: an f32 operand with 16-byte chunks (OperandLoad::chunk) is
  // staged a chunk of 4 elements per load where its buffer is 16-byte aligned
  // (tested at run time, one uniform branch: views and graph inputs may start
  // anywhere, docs/codegen.md), else element by element. Chunk c of the tile
  // is row c / (BK / 4) and k (c % (BK / 4)) * 4 along k, or k c / (rows / 4)
  // and row (c % (rows / 4)) * 4 along the row.
  const bool f32 = g.dtype == DType::F32;
  auto vectorized = [&](const OperandLoad& ld, int rows) {
    return f32 && ld.chunk && (ld.chunk_k_fast ? BK % 4 == 0 : rows % 4 == 0);
  };
  const bool va = vectorized(g.a, BM), vb = vectorized(g.b, BN);
  // Per-slot setup, before the K loop: everything a slot needs but k.
  auto slot_setup = [&](const Staging& st, const OperandLoad& ld, const char* p, const char* base) {
    for (int j = 0; j < st.slots; ++j) {
      auto [row, kk] = slot_coords(st, BK, j);
      const std::string s = fmt::format("{}{}", p, j);
      b += fmt::format("  const int {}_row = {} + {};\n", s, base, row);
      b += fmt::format("  const int {}_kk = {};\n", s, kk);
      b += fmt::format("  const int {}_st = {}_kk * {} + {};  // staging index\n", s, s, st.rows + 1, row);
      ld.setup(s + "_row", s, b);
    }
  };
  // Per-chunk setup, likewise.
  auto chunk_setup = [&](const OperandLoad& ld, const char* p, const char* base, int rows) {
    for (int j = 0; j * kThreads < rows * BK / 4; ++j) {
      const std::string v = fmt::format("{}c{}", p, j);
      b += fmt::format("  const int {}_c = tid + {};\n", v, j * kThreads);
      if (ld.chunk_k_fast)
        b += fmt::format("  const int {0}_r = {0}_c / {1}, {0}_kk = ({0}_c % {1}) * 4;\n", v, BK / 4);
      else b += fmt::format("  const int {0}_kk = {0}_c / {1}, {0}_r = ({0}_c % {1}) * 4;\n", v, rows / 4);
      b += fmt::format("  const int {}_row = {} + {}_r;\n", v, base, v);
      ld.setup(v + "_row", v, b);
    }
  };
  auto stage = [&](const Staging& st, const OperandLoad& ld, const char* p, const char* sm, const std::string& rows) {
    for (int j = 0; j < st.slots; ++j) {
      const std::string s = fmt::format("{}{}", p, j);
      b += fmt::format("    {{\n      const int k = k0 + {}_kk;\n      {} v = 0;\n", s, ct);
      b += fmt::format("      if ({}_row < {} && k < {}) {{\n{}      }}\n", s, rows, K_text, ld.load("k", s));
      b += fmt::format("      {}[{}_st] = v;\n    }}\n", sm, s);
    }
  };
  // The chunks of one operand's k-tile: one 16-byte load each, four shared-memory stores.
  auto stage_chunks = [&](const OperandLoad& ld, const char* p, const char* sm, int rows, const std::string& count) {
    const int chunks = rows * BK / 4;
    for (int j = 0; j * kThreads < chunks; ++j) {
      const std::string v = fmt::format("{}c{}", p, j);
      b += (j + 1) * kThreads > chunks ? fmt::format("    if ({}_c < {}) {{\n", v, chunks) : "    {\n";
      b += fmt::format("      const int k = k0 + {}_kk;\n      bool ok = false;\n      {} off = 0;\n", v,
                       ep.index_type());
      b += fmt::format("      if ({}_row < {} && k < {}) {{\n{}      }}\n", v, count, K_text, ld.chunk("k", v));
      // (No struct-valued ?: : ptxas put its temporary on the stack.)
      b += fmt::format(
          "      kiln_f32x4 q;\n      if (ok) q = *KILN_PTR_CAST(const kiln_f32x4, {} + off);\n"
          "      else q.v[0] = q.v[1] = q.v[2] = q.v[3] = 0.0f;\n",
          ld.chunk_buffer);
      const std::string at = ld.chunk_k_fast ? fmt::format("({}_kk + j) * {} + {}_r", v, rows + 1, v)
                                             : fmt::format("{}_kk * {} + {}_r + j", v, rows + 1, v);
      b += fmt::format("#pragma unroll\n      for (int j = 0; j < 4; ++j) {}[{}] = q.v[j];\n    }}\n", sm, at);
    }
  };
  // The K loop, staging A / B by chunks where `ca` / `cb`.
  auto k_loop = [&](bool ca, bool cb) {
    b += fmt::format("  for (int k0 = 0; k0 < {}; k0 += {}) {{\n", K_text, BK);
    if (ca) stage_chunks(g.a, "a", "As", BM, M_text);
    else stage(sa, g.a, "a", "As", M_text);
    if (cb) stage_chunks(g.b, "b", "Bs", BN, N_text);
    else stage(sb, g.b, "b", "Bs", N_text);
    b += "    __syncthreads();\n";
    // Main loop (SIMT): the seam where a tensor-core loop would go.
    b += fmt::format("#pragma unroll\n    for (int kk = 0; kk < {}; ++kk) {{\n", BK);
    for (int i = 0; i < TM; ++i)
      b += fmt::format("      const {} a{} = As[kk * {} + ty + {}];\n", ct, i, BM + 1, 16 * i);
    for (int j = 0; j < TN; ++j)
      b += fmt::format("      const {} b{} = Bs[kk * {} + tx + {}];\n", ct, j, BN + 1, 16 * j);
    for (int i = 0; i < TM; ++i)
      for (int j = 0; j < TN; ++j) b += fmt::format("      acc{}_{} += a{} * b{};\n", i, j, i, j);
    b += "    }\n    __syncthreads();\n  }\n";
  };
  auto accumulators = [&] {
    for (int i = 0; i < TM; ++i)
      for (int j = 0; j < TN; ++j) b += fmt::format("  {} acc{}_{} = 0;\n", ct, i, j);
  };
  if (!va && !vb) {
    slot_setup(sa, g.a, "a", "m0");
    slot_setup(sb, g.b, "b", "n0");
    accumulators();
    k_loop(false, false);
  } else {
    // Two K loops, each with only its own setup live: both setups live
    // through one loop pushed the nhwc convs past their registers (spills).
    accumulators();
    std::string aligned;
    for (const OperandLoad* ld : {va ? &g.a : nullptr, vb ? &g.b : nullptr})
      if (ld) aligned += fmt::format("{}KILN_PTR_ADDR({}) % 16 == 0", aligned.empty() ? "" : " && ", ld->chunk_buffer);
    b += fmt::format("  if ({}) {{\n", aligned);
    if (va) chunk_setup(g.a, "a", "m0", BM);
    else slot_setup(sa, g.a, "a", "m0");
    if (vb) chunk_setup(g.b, "b", "n0", BN);
    else slot_setup(sb, g.b, "b", "n0");
    k_loop(va, vb);
    b += "  } else {\n";
    slot_setup(sa, g.a, "a", "m0");
    slot_setup(sb, g.b, "b", "n0");
    k_loop(false, false);
    b += "  }\n";
  }
  // Staging tile, then the epilogue once per element.
  b += fmt::format("  {}* Cs = kiln_sm;  // [{}][{}]\n", ct, BM, BN);
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TN; ++j)
      b += fmt::format("  Cs[(ty + {}) * {} + tx + {}] = acc{}_{};\n", 16 * i, BN, 16 * j, i, j);
  b += "  __syncthreads();\n";
  b += fmt::format("#pragma unroll 1\n  for (int e = tid; e < {}; e += {}) {{\n", BM * BN, kThreads);
  b += fmt::format("    const int gm = m0 + e / {}, gn = n0 + e % {};\n", BN, BN);
  b += fmt::format("    if (gm < {} && gn < {}) {{\n      const {} acc = Cs[e];\n", M_text, N_text, ct);
  b += g.store;
  b += "    }\n  }\n}\n";
  b += ep.sim_entry("@NAME@", false, false, generic);
  k.name = fmt::format("kiln_{}_{:016x}", sanitize_identifier(g.label), XXH64(b.data(), b.size(), 0));
  k.source = std::string(kKernelPrelude) + ep.fp_includes() + std::string(expr_prelude()) +
             (va || vb ? std::string(kVectorPrelude) + "typedef kiln_vec<float, 4> kiln_f32x4;\n" : "") +
             replace_all(b, "@NAME@", k.name);
  return {k};
}

std::string gemm_load_as(DType t, const std::string& stored) {
  if (is_float(t)) return cuda_load(t, stored);
  return fmt::format("(unsigned long long)(long long)({})", stored);
}

std::vector<ComputeKernel> emit_matmul_gemm(const Epilogue& ep) {
  const Node& n = ep.anchor();
  const std::string& op = n.op();
  const bool mi = op == "matmul_integer", qm = op == "qlinear_matmul";
  if (op != "matmul" && op != "gemm" && !mi && !qm)
    unsupported("codegen: {} is not matmul, gemm, matmul_integer or qlinear_matmul", n.describe());
  const int ib = qm ? 3 : 1;
  const TensorType& at = n.input(0)->type();
  const TensorType& bt = n.input(ib)->type();
  const DType dt = at.dtype;
  if (dt == DType::Bool) unsupported("codegen: {}: bool operands", n.describe());
  const char* idx = ep.index_type();
  const int sa = ep.anchor_slot(0), sb = ep.anchor_slot(ib);
  // Zero points (matmul_integer, qlinear_matmul): one per tensor, per row of A, per column of B.
  const int sazp = mi || qm ? ep.anchor_slot(2) : -1, sbzp = mi ? ep.anchor_slot(3) : qm ? ep.anchor_slot(5) : -1;
  auto numel_of = [&](int i) { return n.input(i) ? n.input(i)->type().numel() : 0; };
  const bool azp_rows = sazp >= 0 && numel_of(2) > 1, bzp_cols = sbzp >= 0 && numel_of(qm ? 5 : 3) > 1;
  // An element of A / B as the compute type, zero point subtracted.
  auto with_zp = [=](const std::string& stored, int zslot, bool per, const std::string& row) {
    if (zslot < 0) return gemm_load_as(dt, stored);
    return fmt::format("(unsigned long long)((long long){} - (long long)in{}[{}])", stored, zslot, per ? row : "0");
  };
  TiledGemm g;
  g.dtype = dt;
  g.label = op;
  g.tf32 = n.attrs().get_int("tf32", 0) != 0;
  for (int slot : {sa, sb, sazp, sbzp})
    if (slot >= 0) g.operand_slots.push_back(slot);
  // Shape-generic (a plan with shape profiles): matmul's batch, M, N and K
  // may be symbolic, and so may gemm's M, N and K (either operand transposed).
  g.syms = ep.symbols();  // every shape the anchor and its epilogue read or write
  const bool generic = !g.syms.empty();
  if (generic && (mi || qm)) unsupported("codegen: {}: a shape-generic {} is not supported yet", n.describe(), op);
  // A dim as C text: a constant as before symbols, a symbolic one from `ks`.
  auto dim_text = [&](int64_t d) { return is_symbolic_dim(d) ? g.syms.lit(d) : std::to_string(d); };
  // Whether a dim is a multiple of w at every value (a symbolic one: not assumed).
  auto multiple = [](int64_t d, int64_t w) { return !is_symbolic_dim(d) && d % w == 0; };
  g.operand_bytes = generic ? 0 : static_cast<int64_t>(at.nbytes() + bt.nbytes());
  // Elements per 16-byte chunk: the cp.async path of the tensor-core kernel,
  // the 128-bit loads of the SIMT kernel at f32.
  const int64_t W = 16 / static_cast<int64_t>(dtype_size(dt));
  const bool chunks = (gemm_math(g) != GemmMath::Simt || dt == DType::F32) && !mi && !qm;
  std::string store;
  const std::string ind = "      ";
  if (op != "gemm") {
    ops::linalg::MatmulDims d = ops::linalg::matmul_dims(at.shape, bt.shape);
    // Shape-generic with a 2-D B (a projection of [batch, seq, d]): A's
    // batch folds into M, so the row tiles span batch*seq rows (one flat
    // grid of full tiles instead of a grid axis of batches of short M).
    const bool fold_batch = generic && bt.rank() <= 2 && at.rank() > 2 && !d.batch.empty();
    if (fold_batch) {
      d.M = dim_mul(dim_product(d.batch), d.M);
      d.batch.clear();
    }
    g.batch = generic ? dim_product(d.batch) : shape_numel(d.batch);
    g.M = d.M;
    g.N = d.N;
    g.K = d.K;
    // Batch offsets of A's and B's matrices (broadcast batch dims).
    const int ar = fold_batch ? 0 : std::max(0, at.rank() - 2), br = std::max(0, bt.rank() - 2);
    Shape ab(at.shape.begin(), at.shape.begin() + ar), bb(bt.shape.begin(), bt.shape.begin() + br);
    std::vector<int64_t> as = generic ? symbolic_broadcast_strides(ab, d.batch) : broadcast_strides(ab, d.batch),
                         bs = generic ? symbolic_broadcast_strides(bb, d.batch) : broadcast_strides(bb, d.batch);
    // A batch of A's matrices against one B ([S, 1, K] x [K, N]: torchvision's sequence-first attention
    // projections) is one [batch x M, K] x [K, N] GEMM: A's matrices, and the result's, lie back to
    // back. As a batch of M-row GEMMs every block would pad its few rows to a whole tile (ViT-B/16's QKV
    // projection: 197 x 18 blocks of 16 rows for 1 row each). Not for quantized ops (per-row scales and
    // zero points index rows within a matrix) or a shape-generic kernel; a batch of one is left as it is.
    if (!generic && !mi && !qm && g.batch > 1 && ab == d.batch &&
        std::all_of(bs.begin(), bs.end(), [](int64_t v) { return v == 0; })) {
      g.M = g.batch * d.M;
      g.batch = 1;
      d.M = g.M;
      d.batch.clear();
    }
    std::string pro = fmt::format("  {} a_off = 0, b_off = 0;\n", idx);
    if (!d.batch.empty()) {
      pro += fmt::format("  {{\n    {} r = bz;\n", idx);
      for (int q = static_cast<int>(d.batch.size()) - 1; q >= 0; --q) {
        pro += fmt::format("    {{ const {} c = r % {}; r /= {};", idx, dim_text(d.batch[q]), dim_text(d.batch[q]));
        if (as[q]) pro += fmt::format(" a_off += c * ({}){};", idx, dim_text(dim_mul(as[q], dim_mul(d.M, d.K))));
        if (bs[q]) pro += fmt::format(" b_off += c * ({}){};", idx, dim_text(dim_mul(bs[q], dim_mul(d.K, d.N))));
        pro += " }\n";
      }
      pro += "  }\n";
    }
    g.prologue = pro;
    const std::string K = dim_text(d.K), N = dim_text(d.N);
    g.a.k_fast = true;
    g.a.setup = [=](const std::string& row, const std::string& s, std::string& b) {
      b += fmt::format("  const {} {}_base = a_off + ({}){} * {};\n", idx, s, idx, row, K);
    };
    g.a.load = [=](const std::string& k, const std::string& s) {
      return fmt::format("        v = {};\n",
                         with_zp(fmt::format("in{}[{}_base + {}]", sa, s, k), sazp, azp_rows, s + "_row"));
    };
    if (chunks && multiple(d.K, W)) {  // rows of A: a_off and row * K are multiples of W
      g.a.chunk_buffer = fmt::format("in{}", sa);
      g.a.chunk = [=](const std::string& k, const std::string& s) {
        return fmt::format("        ok = true;\n        off = {}_base + {};\n", s, k);
      };
    }
    g.b.k_fast = false;
    g.b.setup = [=](const std::string& row, const std::string& s, std::string& b) {
      b += fmt::format("  const {} {}_base = b_off + {};\n", idx, s, row);
    };
    if (chunks && multiple(d.N, W)) {  // rows of B [K, N]: chunks along n
      g.b.chunk_buffer = fmt::format("in{}", sb);
      g.b.chunk_k_fast = false;
      g.b.chunk = [=](const std::string& k, const std::string& s) {
        return fmt::format("        ok = true;\n        off = {}_base + ({}){} * {};\n", s, idx, k, N);
      };
    }
    g.b.load = [=](const std::string& k, const std::string& s) {
      return fmt::format("        v = {};\n", with_zp(fmt::format("in{}[{}_base + ({}){} * {}]", sb, s, idx, k, N),
                                                      sbzp, bzp_cols, s + "_row"));
    };
    store += fmt::format("{}const {} index = ({})bz * {} + ({})gm * {} + gn;\n", ind, idx, idx,
                         dim_text(dim_mul(d.M, d.N)), idx, N);
    if (qm) {
      // As the reference: multiplier a_scale[row] * b_scale[col] / y_scale[row] in float, then
      // rint(acc * multiplier + y_zero_point[row]) in double, saturated (NaN -> 0).
      auto at_ = [&](int i, const char* var) {
        return fmt::format("in{}[{}]", ep.anchor_slot(i), numel_of(i) > 1 ? var : "0");
      };
      const DType yt = n.output(0)->dtype();
      // In the scales' type (f32, f16 or bf16), rounded after each step.
      const DType st = n.input(1)->dtype();
      auto round = [st](const std::string& v) {
        if (st == DType::F16) return fmt::format("__half2float(__float2half_rn({}))", v);
        if (st == DType::BF16) return fmt::format("__bfloat162float(__float2bfloat16_rn({}))", v);
        return v;
      };
      store += fmt::format(
          "{}const float mult = {};\n", ind,
          round(fmt::format("{} / {}",
                            round(fmt::format("{} * {}", cuda_load(st, at_(1, "gm")), cuda_load(st, at_(4, "gn")))),
                            cuda_load(st, at_(6, "gm")))));
      store +=
          fmt::format("{}double q = rint((double)(long long)acc * (double)mult + (double){});\n", ind, at_(7, "gm"));
      store += fmt::format("{}q = q != q ? 0.0 : q < {} ? {} : q > {} ? {} : q;\n", ind,
                           yt == DType::U8 ? "0.0" : "-128.0", yt == DType::U8 ? "0.0" : "-128.0",
                           yt == DType::U8 ? "255.0" : "127.0", yt == DType::U8 ? "255.0" : "127.0");
      store += ep.code("(long long)q", "index", ind);
    } else {
      store += ep.code(gemm_acc_for_epilogue(dt, "acc"), "index", ind);
      // The vector store needs rows that are multiples of N at every shape (a static N).
      if (is_float(dt) && !is_symbolic_dim(d.N)) {
        g.vstore_row = fmt::format("({})bz * {} + ({})gm * {}", idx, dim_text(dim_mul(d.M, d.N)), idx, d.N);
        g.vstore_align = d.N;
        g.vstore_value = gemm_acc_for_epilogue(dt, "acc");
      }
    }
  } else {
    if (at.rank() != 2 || bt.rank() != 2) fail("codegen: {}: gemm operands must be 2-D", n.describe());
    const bool ta = n.attrs().get_int("trans_a", 0) != 0, tb = n.attrs().get_int("trans_b", 0) != 0;
    const double alpha = n.attrs().get_float("alpha", 1.0f), beta = n.attrs().get_float("beta", 1.0f);
    g.M = ta ? at.shape[1] : at.shape[0];
    g.K = ta ? at.shape[0] : at.shape[1];
    g.N = tb ? bt.shape[0] : bt.shape[1];
    // The sizes as C text: numbers, or polynomials of `ks` in a shape-generic kernel.
    const std::string M = dim_text(g.M), N = dim_text(g.N), K = dim_text(g.K);
    g.a.k_fast = !ta;
    g.a.setup = [=](const std::string& row, const std::string& s, std::string& b) {
      b += fmt::format("  const {} {}_base = ({}){}{};\n", idx, s, idx, row, ta ? "" : fmt::format(" * {}", K));
    };
    g.a.load = [=](const std::string& k, const std::string& s) {
      return fmt::format("        v = {};\n",
                         gemm_load_as(dt, ta ? fmt::format("in{}[{}_base + ({}){} * {}]", sa, s, idx, k, M)
                                             : fmt::format("in{}[{}_base + {}]", sa, s, k)));
    };
    if (chunks && multiple(ta ? g.M : g.K, W)) {
      g.a.chunk_buffer = fmt::format("in{}", sa);
      g.a.chunk_k_fast = !ta;  // A stored [K, M]: chunks along m (an A stage [BK][BM], ldmatrix.trans)
      g.a.chunk = [=](const std::string& k, const std::string& s) {
        return ta ? fmt::format("        ok = true;\n        off = {}_base + ({}){} * {};\n", s, idx, k, M)
                  : fmt::format("        ok = true;\n        off = {}_base + {};\n", s, k);
      };
    }
    g.b.k_fast = tb;
    g.b.setup = [=](const std::string& row, const std::string& s, std::string& b) {
      b += fmt::format("  const {} {}_base = ({}){}{};\n", idx, s, idx, row, tb ? fmt::format(" * {}", K) : "");
    };
    g.b.load = [=](const std::string& k, const std::string& s) {
      return fmt::format("        v = {};\n",
                         gemm_load_as(dt, tb ? fmt::format("in{}[{}_base + {}]", sb, s, k)
                                             : fmt::format("in{}[{}_base + ({}){} * {}]", sb, s, idx, k, N)));
    };
    if (chunks && multiple(tb ? g.K : g.N, W)) {
      g.b.chunk_buffer = fmt::format("in{}", sb);
      g.b.chunk_k_fast = tb;
      g.b.chunk = [=](const std::string& k, const std::string& s) {
        return tb ? fmt::format("        ok = true;\n        off = {}_base + {};\n", s, k)
                  : fmt::format("        ok = true;\n        off = {}_base + ({}){} * {};\n", s, idx, k, N);
      };
    }
    const int sc = ep.anchor_slot(2);
    const bool has_c = sc >= 0 && beta != 0;  // beta == 0 ignores C, as the reference does
    std::string cval;
    if (has_c) {
      const TensorType& ctt = n.input(2)->type();
      std::vector<int64_t> cs =
          generic ? symbolic_broadcast_strides(ctt.shape, {g.M, g.N}) : broadcast_strides(ctt.shape, {g.M, g.N});
      std::string off;
      if (cs[0])
        off += fmt::format("({})gm * {}", idx, is_symbolic_dim(cs[0]) ? g.syms.lit(cs[0]) : std::to_string(cs[0]));
      if (cs[1])
        off += fmt::format("{}({})gn{}", off.empty() ? "" : " + ", idx,
                           cs[1] == 1 ? "" : fmt::format(" * {}", dim_text(cs[1])));
      if (off.empty()) off = "0";
      store += fmt::format("{}const {} c_raw = in{}[{}];\n", ind, cuda_storage_type(ctt.dtype), sc, off);
      cval = "c_raw";
    }
    const std::string ct = gemm_compute_type(dt);
    if (is_float(dt)) {
      // As the reference: Y = (T)(beta * C) first, then alpha * AB + Y.
      std::string r = alpha == 1.0 ? "acc" : fmt::format("({})({:.17g}) * acc", ct, alpha);
      if (has_c) r = fmt::format("{} + ({})({:.17g} * (double){})", r, ct, beta, cuda_load(dt, cval));
      store += fmt::format("{}const {} r = {};\n", ind, ct, r);
      // The vectorized store: C is read per column (the finishing step as
      // above); its rows are multiples of N at every shape only for a static N.
      if (!is_symbolic_dim(g.N)) {
        g.vstore_row = fmt::format("({})gm * {}", idx, N);
        g.vstore_align = g.N;
        g.vstore_finish = store;
        g.vstore_value = gemm_acc_for_epilogue(dt, "r");
      }
    } else {
      const bool exact = alpha == 1.0 && (!has_c || beta == 1.0);
      if (exact) {
        store += fmt::format("{}const {} r = acc{};\n", ind, ct,
                             has_c ? fmt::format(" + (unsigned long long)(long long){}", cval) : "");
      } else {
        store +=
            fmt::format("{}const {} r = (unsigned long long)(long long)({:.17g} * (double)(long long)acc{});\n", ind,
                        ct, alpha, has_c ? fmt::format(" + {:.17g} * (double)(long long){}", beta, cval) : "");
      }
    }
    store += ep.code(gemm_acc_for_epilogue(dt, "r"), fmt::format("({})gm * {} + gn", idx, N), ind);
  }
  g.store = store;
  return emit_tiled_gemm(g, ep);
}

std::string stage_operand_elements(const OperandLoad& ld, const std::string& p, int rows, int bk, int threads,
                                   const std::string& base, const std::string& count, const std::string& k_text,
                                   const std::function<std::string(const std::string& v)>& slot,
                                   const std::string& value) {
  const int elems = rows * bk, iters = (elems + threads - 1) / threads;
  const std::string v = fmt::format("{}e", p);
  std::string s = fmt::format("#pragma unroll 4\n    for (int j = 0; j < {}; ++j) {{\n", iters);
  s += fmt::format("      const int l = tid + {} * j;\n", threads);
  if (elems % threads) s += fmt::format("      if (l >= {}) break;\n", elems);
  if (ld.k_fast) s += fmt::format("      const int {}_r = l / {}, {}_kk = l % {};\n", v, bk, v, bk);
  else s += fmt::format("      const int {}_r = l % {}, {}_kk = l / {};\n", v, rows, v, rows);
  s += fmt::format("      const int {}_row = {} + {}_r;\n", v, base, v);
  std::string setup;
  ld.setup(v + "_row", v, setup);
  s += setup;
  s += fmt::format("      const int k = k0 + {}_kk;\n      float v = 0;\n", v);
  s += fmt::format("      if ({}_row < {} && k < {}) {{\n{}      }}\n", v, count, k_text, ld.load("k", v));
  s += fmt::format("      {} = {};\n", slot(v), value);
  s += "    }\n";
  return s;
}

}  // namespace kiln::codegen
