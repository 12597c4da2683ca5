#include "codegen/emitters/gemm_conv/gemm_tiles.h"

#include "codegen/emitters/gemm_conv/gemm_tile_cost.h"
#include "codegen/emitters/gemm_conv/gemm_tiles_wgmma.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ir/error.h"

namespace kiln::codegen {

namespace {

// Blocks that fill the GPU tiles are chosen for (an H100: 132 SMs) once:
// fewer tiles than this shrink the tile.
int64_t target_blocks() { return tile_choice_gpu().sms; }

thread_local GemmTileChooser tile_chooser;

int64_t blocks_of(const GemmProblem& p, int bm, int bn) {
  return p.batch * ((p.M + bm - 1) / bm) * ((p.N + bn - 1) / bn);
}

bool one_of(int v, std::initializer_list<int> set) { return std::find(set.begin(), set.end(), v) != set.end(); }

// Tensor cores: warp tiles of at most 32 columns (NI <= 4 mma tiles of 8) and
// then as many warps along M as keep the block at 8 warps or fewer, with warp
// tiles of at most 64 rows (MI <= 4 mma tiles of 16).
void default_warps(GemmTileConfig& c) {
  c.warps_n = c.bn / std::min(c.bn, 32);
  c.warps_m = std::min(c.bm / std::min(c.bm, 32), 8 / c.warps_n);
}

// Each split keeps at least this many k-tiles (its cp.async pipeline overlaps
// loads with math; fewer would spend the split on its prologue's latency).
constexpr int64_t kMinSplitKTiles = 2;
// A smaller tile than the heuristic's must be this much cheaper by the model
// to be taken: its blocks stage more per product, which the model does not
// charge (its L2 term charges the operand re-reads) -- unless it gives a
// block to SMs the larger tile's grid leaves idle (sms_reached).
constexpr double kSmallerTileGain = 0.97;
// A tile whose grid gives a block to SMs the other grid leaves idle is taken
// at up to this much more cost by the model: the model's per-kernel error is
// 20-30% (docs/perf_calibration.md: log-RMS 0.19-0.28), so a difference of a
// few percent is below what it can tell, while an SM without a block is
// certain to add nothing to a latency- or L2-bound launch (BERT-base's FFN-up
// GEMM: 96 tiles of 64x64 at 6.6 us by the model, 192 of 32x64 at 7.1 us).
constexpr double kReachTolerance = 1.10;

// SMs that get at least one block of `c`'s grid (tiles x splits, at most 132).
int64_t sms_reached(const GemmProblem& p, const GemmTileConfig& c) {
  const int64_t k_tiles_all = (p.K + c.bk - 1) / c.bk;
  return std::min<int64_t>(blocks_of(p, c.bm, c.bn) * split_k_of(c, k_tiles_all).splits,
                           static_cast<int64_t>(tile_choice_gpu().sms));
}

// Blocks of `c` that one wave holds: the SMs x the blocks an SM keeps
// resident by the model's occupancy (registers, threads, shared memory) at
// the shallowest pipeline, which the depth chosen below one wave may deepen.
int64_t wave_slots(const GemmProblem& p, GemmTileConfig c) {
  c.stages = 2;
  return int64_t(tile_choice_gpu().sms) * gemm_blocks_per_sm(p, c);
}

// The pipeline depth a tie goes to: below one wave of resident blocks, as
// deep as the loop can use up to 4 stages (every k-tile of a short K in
// flight at once); from one wave on, 3 stages (2 for a K of one or two
// tiles), which leave shared memory to the resident blocks. The depths of the
// plans the first H100 run measured (docs/perf_calibration.md).
int tie_stages(int64_t k_tiles, int64_t blocks, int64_t slots) {
  if (blocks < slots) return static_cast<int>(std::clamp<int64_t>(k_tiles + 1, 2, 4));
  return k_tiles <= 2 ? 2 : 3;
}

// Tile `c` split in `split` parts (summed by a reduction kernel, or folded:
// by the last block of each tile) with the pipeline depth kiln's performance
// model puts fastest: 2 to kMaxGemmStages stages whose ring fits
// kMaxGemmRingBytes; tie_stages where none is strictly faster (a
// compute-bound grid of several waves, whose k-loop latency the model hides
// at any depth). Below one wave of resident blocks a deeper ring costs
// nothing that runs (resident slots stay empty either way) and each k-tile
// waits load latency / (stages - 1); from one wave on the model's occupancy
// charges the shared memory a deeper ring takes from the resident blocks
// (docs/performance.md).
GemmTileConfig with_split(const GemmProblem& p, GemmTileConfig c, int64_t split, bool fold) {
  c.split_k = static_cast<int>(split);
  c.fold_split = fold && split > 1;
  const SplitK sk = split_k_of(c, (p.K + c.bk - 1) / c.bk);
  // A ring deeper than the k-loop has k-tiles to fill it buys nothing.
  const int deepest = static_cast<int>(std::clamp<int64_t>(sk.k_tiles + 1, 2, kMaxGemmStages));
  // (best_split checked that 2 stages fit.)
  auto fits = [&](int stages) {
    GemmTileConfig t = c;
    t.stages = stages;
    return gemm_ring_bytes(p, t) <= kMaxGemmRingBytes;
  };
  int tie = tie_stages(sk.k_tiles, blocks_of(p, c.bm, c.bn) * sk.splits, wave_slots(p, c));
  while (tie > 2 && !fits(tie)) --tie;
  c.stages = tie;
  GemmTileConfig best = c;
  double best_cost = gemm_tile_cost_us(p, c);
  for (int stages = 2; stages <= deepest && fits(stages); ++stages) {
    if (stages == tie) continue;
    c.stages = stages;
    const double cost = gemm_tile_cost_us(p, c);
    if (cost < best_cost) best = c, best_cost = cost;
  }
  return best;
}

// The cheapest split of tile `c` for `p` (split_k, fold_split and stages set)
// and its cost. Split-K (docs/codegen.md, "Split-K"): where the tiles leave
// the GPU's resident block slots mostly empty, the split (each part of at
// least kMinSplitKTiles k-tiles) and the way its partial sums are summed (a
// reduction kernel, or folded into the GEMM) that kiln's performance model
// (gemm_tile_cost.h) puts fastest; the smallest split on a tie, and the reduction kernel on a tie.
// The splits of 2 or more parts worth weighing for tile `c`: none where its
// tiles fill a wave of resident blocks; else each part at least
// kMinSplitKTiles k-tiles, a split that normalizes to a smaller one skipped.
std::vector<int64_t> split_counts(const GemmProblem& p, const GemmTileConfig& c) {
  const int64_t k_tiles_all = (p.K + c.bk - 1) / c.bk;
  std::vector<int64_t> out;
  if (blocks_of(p, c.bm, c.bn) >= wave_slots(p, c)) return out;
  for (int64_t s = 2; s <= std::min<int64_t>(kMaxSplitK, k_tiles_all / kMinSplitKTiles); ++s) {
    GemmTileConfig t = c;
    t.split_k = static_cast<int>(s);
    if (split_k_of(t, k_tiles_all).splits == s) out.push_back(s);  // else the same split as a smaller s
  }
  return out;
}

std::pair<GemmTileConfig, double> best_split_at_depth(const GemmProblem& p, GemmTileConfig c) {
  GemmTileConfig best = with_split(p, c, 1, false);
  double best_cost = gemm_tile_cost_us(p, best);
  for (int64_t s : split_counts(p, c))
    for (bool fold : {false, true}) {
      const GemmTileConfig cand = with_split(p, c, s, fold);
      const double cost = gemm_tile_cost_us(p, cand);
      if (cost < best_cost) best = cand, best_cost = cost;
    }
  return {best, best_cost};
}

// The k-tile depths the chooser weighs for `c`'s math, the default first:
// f16/bf16 32 or 64 (64- or 128-byte rows), tf32 16 or 32. A deeper k-tile
// halves the k-loop's trips, each of which waits on its loads (the model's
// latency term); its ring takes twice the shared memory per stage.
std::vector<int> tile_depths(const GemmProblem& p, int default_bk) {
  if (p.math == GemmMath::Simt) return {default_bk};
  return {default_bk, default_bk * 2};
}

// The cheapest depth, split and pipeline of tile `c` (its bm, bn and warps)
// for `p`, by best_split_at_depth at each of tile_depths; the default depth on
// a tie.
std::pair<GemmTileConfig, double> best_split(const GemmProblem& p, const GemmTileConfig& c) {
  std::pair<GemmTileConfig, double> best{c, -1};
  for (int bk : tile_depths(p, c.bk)) {
    GemmTileConfig t = c;
    t.bk = bk;
    t.stages = 2;
    t.split_k = 1;
    t.fold_split = false;
    if (!gemm_tile_invalid(t, p).empty()) continue;
    auto at = best_split_at_depth(p, t);
    if (best.second < 0 || at.second < best.second) best = at;
  }
  KILN_CHECK(best.second >= 0, "codegen: no valid depth for tile {} of GEMM {}", gemm_tile_name(c),
             gemm_problem_key(p));
  return best;
}

}  // namespace

const char* gemm_math_name(GemmMath m) {
  switch (m) {
    case GemmMath::F16:
      return "f16";
    case GemmMath::BF16:
      return "bf16";
    case GemmMath::Tf32:
      return "tf32";
    case GemmMath::Simt:
      break;
  }
  return "simt";
}

std::string gemm_problem_key(const GemmProblem& p) {
  return fmt::format("{}:b{}:m{}:n{}:k{}", gemm_math_name(p.math), p.batch, p.M, p.N, p.K);
}

std::string gemm_tile_name(const GemmTileConfig& c) {
  std::string s = fmt::format("{}x{}x{} w{}x{} s{}", c.bm, c.bn, c.bk, c.warps_m, c.warps_n, c.stages);
  if (c.split_k > 1) s += fmt::format(" split{}", c.split_k);
  if (c.split_k > 1 && c.fold_split) s += " fold";
  if (c.wgmma) s += " wgmma";
  return s;
}

int split_k_reduction_threads(int64_t items) {
  for (int threads : {256, 128})
    if ((items + threads - 1) / threads >= static_cast<int64_t>(tile_choice_gpu().sms)) return threads;
  return 64;
}

int64_t gemm_ring_bytes(const GemmProblem& p, const GemmTileConfig& c) {
  if (c.wgmma || p.math == GemmMath::Simt) return 0;
  const int64_t esize = p.math == GemmMath::Tf32 ? 4 : 2, pad = 16 / esize;
  // Either layout of a stage (emit_gemm_mma.cpp): [rows][BK + pad] or [BK][rows + 8].
  auto stage = [&](int64_t rows) { return std::max(rows * (c.bk + pad), int64_t(c.bk) * (rows + 8)); };
  return int64_t(c.stages) * (stage(c.bm) + stage(c.bn)) * esize;
}

SplitK split_k_of(const GemmTileConfig& c, int64_t k_tiles_all) {
  SplitK s;
  const int64_t want = std::clamp<int64_t>(c.split_k, 1, std::max<int64_t>(k_tiles_all, 1));
  s.k_tiles = (k_tiles_all + want - 1) / want;
  s.splits = s.k_tiles ? (k_tiles_all + s.k_tiles - 1) / s.k_tiles : 1;
  return s;
}

std::string gemm_tile_invalid(const GemmTileConfig& c, const GemmProblem& p) {
  if (c.wgmma) return wgmma_tile_invalid(c, p);
  if (p.math == GemmMath::Simt) {
    if (!one_of(c.bm, {16, 32, 64}) || !one_of(c.bn, {16, 32, 64})) return "SIMT tiles are 16, 32 or 64 each way";
    if (c.bk != 16 || c.stages != 1 || c.split_k != 1 || c.fold_split)
      return "SIMT tiles are 16 deep with 1 stage and no split-K";
    return "";
  }
  if (!one_of(c.bm, {16, 32, 64, 128}) || !one_of(c.bn, {16, 32, 64, 128}))
    return "tensor-core tiles are 16, 32, 64 or 128 each way";
  if (!(p.math == GemmMath::Tf32 ? one_of(c.bk, {8, 16, 32}) : one_of(c.bk, {16, 32, 64})))
    return "tensor-core tile depth: 16, 32 or 64 (tf32: 8, 16 or 32)";
  if (c.warps_m < 1 || c.warps_n < 1 || c.warps_m * c.warps_n > 8) return "1 to 8 warps";
  if (c.bm % c.warps_m || c.bn % c.warps_n) return "the warps must split the tile evenly";
  const int wtm = c.bm / c.warps_m, wtn = c.bn / c.warps_n;
  if (!one_of(wtm, {16, 32, 48, 64}) || !one_of(wtn, {16, 32}))
    return "warp tiles: 16 to 64 rows (multiples of 16), 16 or 32 columns";
  if (c.stages < 2 || c.stages > kMaxGemmStages) return fmt::format("2 to {} pipeline stages", kMaxGemmStages);
  if (gemm_ring_bytes(p, c) > kMaxGemmRingBytes)
    return fmt::format("a ring of {} bytes of shared memory; at most {}", gemm_ring_bytes(p, c), kMaxGemmRingBytes);
  const int64_t k_tiles = (p.K + c.bk - 1) / c.bk;
  if (c.split_k < 1 || c.split_k > kMaxSplitK || (c.split_k > 1 && c.split_k > k_tiles))
    return fmt::format("split-K of 1 to {} parts, at most one per k-tile ({})", kMaxSplitK, k_tiles);
  if (c.fold_split && (c.split_k < 2 || split_k_of(c, k_tiles).splits < 2))
    return "a folded split-K needs at least 2 parts";
  return "";
}

GemmTileConfig default_gemm_tile(const GemmProblem& p) {
  GemmTileConfig c;
  if (p.math == GemmMath::Simt) {
    auto pick = [](int64_t n) { return n >= 48 ? 64 : n >= 24 ? 32 : 16; };
    c.bm = pick(p.M);
    c.bn = pick(p.N);
    // Fewer blocks than one wave: smaller tiles, but not below 32 (each
    // halving doubles the staging traffic per product, and the simulator's
    // barrier count).
    while (blocks_of(p, c.bm, c.bn) < target_blocks() && std::max(c.bm, c.bn) > 32) {
      if (c.bm >= c.bn) c.bm /= 2;
      else c.bn /= 2;
    }
    c.bk = 16;
    c.warps_m = 8;
    c.warps_n = 1;
    c.stages = 1;
    return c;
  }
  // Tensor cores: the smallest tile of 16 (rows) / 32 (columns) .. 128 that
  // covers the problem; then halve the larger side while that leaves fewer
  // blocks than one wave and the tile is above 64.
  c.bm = p.M <= 16 ? 16 : p.M <= 32 ? 32 : p.M <= 64 ? 64 : 128;
  c.bn = p.N <= 16 ? 16 : p.N <= 32 ? 32 : p.N <= 64 ? 64 : 128;
  while (blocks_of(p, c.bm, c.bn) < target_blocks() && std::max(c.bm, c.bn) > 64) {
    if (c.bm >= c.bn) c.bm /= 2;
    else c.bn /= 2;
  }
  c.bk = p.math == GemmMath::Tf32 ? 16 : 32;  // 64-byte rows of shared memory either way
  default_warps(c);
  // Below one wave, the tile too is chosen by the model's cost: the heuristic's,
  // or a half, quarter ... of it along M, N or both (rows down to 16, columns to 32), each
  // with its best split and pipeline; a smaller tile only for a clear gain
  // (kSmallerTileGain), or at no more cost where its grid reaches SMs the
  // other leaves without a block. More, smaller blocks spread a small
  // problem's DRAM traffic over more SMs and need fewer splits (less
  // workspace) for the same parallelism. The terms are flat where a sub-wave
  // grid is latency-bound (each block waits on the same k-loop whatever the
  // tile: ResNet-50's 1x1 convs of 49-104 blocks of 64x64), but an SM without
  // a block adds nothing -- no loads issued, no epilogue run -- which
  // kiln's model charges through its memory and epilogue terms: the grid
  // that reaches every SM is the faster one there (docs/codegen.md).
  auto [best, cost] = best_split(p, c);
  if (blocks_of(p, c.bm, c.bn) < wave_slots(p, c)) {
    const GemmTileConfig base = c;
    // Halved, quartered ... down to 16 rows / 32 columns, larger tiles first (at equal cost and
    // reach the first stays).
    for (auto [dm, dn] :
         {std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}, std::pair{4, 1}, std::pair{1, 4}, std::pair{4, 2},
          std::pair{2, 4}, std::pair{8, 1}, std::pair{4, 4}, std::pair{8, 2}, std::pair{8, 4}}) {
      GemmTileConfig t = base;
      t.bm /= dm;
      t.bn /= dn;
      t.stages = 2;  // (best_split sets the pipeline; any valid depth for the check below)
      default_warps(t);
      // Not below 16 rows / 32 columns, and only where halving adds blocks.
      if (t.bm < 16 || t.bn < 32 || blocks_of(p, t.bm, t.bn) == blocks_of(p, base.bm, base.bn) ||
          !gemm_tile_invalid(t, p).empty())
        continue;
      auto [tc, tcost] = best_split(p, t);
      if (tcost < cost * kSmallerTileGain ||
          (tcost <= cost * kReachTolerance && sms_reached(p, tc) > sms_reached(p, best)))
        best = tc, cost = tcost;
    }
  }
  return best;
}

std::optional<GemmTileConfig> row_norm_gemm_tile(const GemmProblem& p, double norm_launch_us) {
  if (p.math == GemmMath::Simt) return std::nullopt;
  const GemmTileConfig def = default_gemm_tile(p);
  const double alone = gemm_tile_cost_us(p, def) + norm_launch_us;
  // The default's tile and its halvings and quarterings (down to 16 rows / 32
  // columns; default_gemm_tile also weighs eighths of the rows, and only
  // shrinks that add blocks), each at every depth and split of 2 or more
  // parts with a reduction kernel.
  GemmTileConfig base = def;
  base.split_k = 1;
  base.fold_split = false;
  std::optional<GemmTileConfig> best;
  double best_cost = 0;
  for (auto [dm, dn] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}, std::pair{4, 1},
                        std::pair{1, 4}, std::pair{4, 2}, std::pair{2, 4}, std::pair{4, 4}}) {
    GemmTileConfig t = base;
    t.bm /= dm;
    t.bn /= dn;
    if (t.bm < 16 || t.bn < 32) continue;
    default_warps(t);
    for (int bk : tile_depths(p, def.bk)) {
      t.bk = bk;
      t.stages = 2;
      if (!gemm_tile_invalid(t, p).empty()) continue;
      for (int64_t s : split_counts(p, t)) {
        const GemmTileConfig c = with_split(p, t, s, false);
        const double cost = gemm_tile_cost_us(p, c);
        if (!best || cost < best_cost) best = c, best_cost = cost;
      }
    }
  }
  if (!best || best_cost > alone) return std::nullopt;
  return best;
}

std::vector<GemmTileConfig> gemm_tile_candidates(const GemmProblem& p) {
  std::vector<GemmTileConfig> out = {default_gemm_tile(p)};
  auto add = [&](const GemmTileConfig& c) {
    if (gemm_tile_invalid(c, p).empty() && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  if (p.math == GemmMath::Simt) {
    for (int bm : {16, 32, 64})
      for (int bn : {16, 32, 64}) {
        GemmTileConfig c = out[0];
        c.bm = bm;
        c.bn = bn;
        add(c);
      }
    return out;
  }
  // Tiles no larger than twice the problem (larger ones only add padding).
  const std::vector<int> bks = p.math == GemmMath::Tf32 ? std::vector<int>{16, 32} : std::vector<int>{32, 16};
  auto tile = [](int bm, int bn, int bk, int stages) {
    GemmTileConfig c;
    c.bm = bm;
    c.bn = bn;
    c.bk = bk;
    c.stages = stages;
    default_warps(c);
    return c;
  };
  for (int bm : {128, 64, 32, 16}) {
    if (bm > 16 && bm / 2 >= p.M) continue;
    for (int bn : {128, 64, 32, 16}) {
      if (bn > 16 && bn / 2 >= p.N) continue;
      for (int bk : bks)
        for (int stages : {3, 2, 4}) {
          GemmTileConfig c = tile(bm, bn, bk, stages);
          add(c);
          // The other warp split of a 128-row tile: 4 warps of 32 columns x 64 rows.
          if (bm == 128 && c.warps_m > 2) {
            c.warps_m = 2;
            add(c);
          }
        }
      // The deeper pipelines the default may choose (a 6-deep ring, a 64-deep
      // k-tile for f16/bf16), once per tile rather than for every depth.
      add(tile(bm, bn, bks[0], kMaxGemmStages));
      add(tile(bm, bn, bks[0] * 2, 4));
    }
  }
  return out;
}

ScopedGemmTileChooser::ScopedGemmTileChooser(GemmTileChooser chooser) : previous_(std::move(tile_chooser)) {
  tile_chooser = std::move(chooser);
}
ScopedGemmTileChooser::~ScopedGemmTileChooser() { tile_chooser = std::move(previous_); }

GemmTileConfig choose_gemm_tile_config(const GemmProblem& p) {
  if (tile_chooser) {
    if (std::optional<GemmTileConfig> c = tile_chooser(p)) {
      const std::string why = gemm_tile_invalid(*c, p);
      if (!why.empty()) fail("codegen: tile {} chosen for GEMM {}: {}", gemm_tile_name(*c), gemm_problem_key(p), why);
      return *c;
    }
  }
  const GemmTileConfig c = default_gemm_tile(p);
  if (sm90_wgmma_enabled())  // the sm_90a target's opt-in (gemm_tiles_wgmma.h)
    if (std::optional<GemmTileConfig> w = wgmma_tile_if_faster(p, c)) return *w;
  return c;
}

}  // namespace kiln::codegen
