// Tile configurations of the GEMM core (codegen/emitters/gemm_conv/emit_gemm.h) that matmul,
// gemm, conv and conv_transpose (and their fused epilogues) share: the
// default heuristic, the candidates an autotuner may time, and the hook
// through which it overrides the default (docs/codegen.md, "Tensor cores in
// matmul/gemm/conv").
//
// A problem is batch x [M x N] = [M x K] [K x N] in one of four maths:
//   Simt  -- the 256-thread SIMT core (integers, f64, f32 without tf32);
//   F16, BF16 -- mma.sync m16n8k16 with f32 accumulators;
//   Tf32  -- mma.sync m16n8k8 on f32 operands rounded to tf32 (nodes marked
//            tf32=1 by the precision pass).
// A configuration is the block tile (bm x bn, bk deep), the warp grid
// (warps_m x warps_n warps, each computing a (bm/warps_m) x (bn/warps_n)
// sub-tile) and the depth of the shared-memory pipeline (stages).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::codegen {

enum class GemmMath { Simt, F16, BF16, Tf32 };

// The most blocks one tile's K loop is split among (GemmTileConfig::split_k).
inline constexpr int kMaxSplitK = 64;

// The deepest shared-memory pipeline of the tensor-core core, and the most
// shared memory its ring of stages may take: 96 KiB fits every target's
// opt-in (sm_86 and sm_89 allow 99 KiB a block; sm_80 163, sm_90 227), so a
// plan's tiles do not depend on the target it is built for.
inline constexpr int kMaxGemmStages = 6;
inline constexpr int64_t kMaxGemmRingBytes = 96 * 1024;

struct GemmTileConfig {
  int bm = 64, bn = 64, bk = 16;
  int warps_m = 1, warps_n = 1;  // Simt: 8 warps in all (16 x 16 threads), the split is not used
  int stages = 1;                // Simt: 1 (register accumulation after each staged k-tile)
  // Split-K (tensor cores): the K loop divided among this many blocks per
  // tile, each writing f32 partial sums that are summed in a fixed order
  // (emit_gemm.h); 1: no split.
  int split_k = 1;
  // Split-K only: the last block of each tile to finish (a ticket from a
  // per-tile counter) sums the tile's partial sums and runs the epilogue in
  // the GEMM kernel itself, instead of a second, reduction kernel: one launch
  // less, but the sums of a tile run on one block.
  bool fold_split = false;
  // Hopper's warpgroup MMA (gemm_tiles_wgmma.h; kernel emit_gemm_wgmma_tiled.cpp,
  // compiled for sm_90a): bm / 64 warpgroups, bk 64; only under the opt-in.
  bool wgmma = false;
  bool operator==(const GemmTileConfig&) const = default;
};

// The tile, split-K and pipeline choices weigh a configuration's time with
// kiln's performance model itself (gemm_tile_cost.h: perf/perf_model.h and
// its calibrated constants, on an H100 SXM), so the choice is a function of
// the problem alone (plans do not depend on the GPU they are built on).

// How a configuration's split divides KT_ALL k-tiles: `splits` blocks of
// `k_tiles` each (the last may run fewer), none empty.
struct SplitK {
  int64_t splits = 1, k_tiles = 0;
};
SplitK split_k_of(const GemmTileConfig& c, int64_t k_tiles_all);
// Threads per block of the split-K reduction kernel for `items` work items
// (one per thread): 256, or 128 or 64 when fewer blocks would leave some of
// the SMs of the GPU tiles are chosen for (gemm_tile_cost.h: an H100's 132)
// without one (an SM without a block issues no loads).
int split_k_reduction_threads(int64_t items);

struct GemmProblem {
  GemmMath math = GemmMath::Simt;
  int64_t batch = 1, M = 0, N = 0, K = 0;
  // A hint, not part of the problem's key: bytes the GEMM operands occupy in
  // memory (a conv's input and weights; 0: batch x (M x K + K x N) elements),
  // which the split-K choice weighs against its workspace traffic.
  int64_t operand_bytes = 0;
  // Hints, not part of the key: the operands' shared-memory stages as the
  // kernel lays them out (emit_gemm_mma.cpp): A stored [K, M] and B stored
  // [K, N] (16-byte chunks along m / n) take stages of BK rows, padded along
  // the tile's M / N; otherwise rows of M / N, padded along K. The model's
  // occupancy weighs the shared memory that makes (gemm_tile_cost.h).
  bool a_k_rows = false, b_k_rows = false;
};

// Shared memory of `c`'s ring of stages (tensor cores, mma.sync), for the
// larger of the two layouts a stage may take ([rows][BK + pad] or
// [BK][rows + 8]); 0 for SIMT and wgmma tiles.
int64_t gemm_ring_bytes(const GemmProblem& p, const GemmTileConfig& c);

// "f16", "bf16", "tf32", "simt".
const char* gemm_math_name(GemmMath m);
// A stable key of the problem ("f16:b1:m3136:n64:k576"), for tuning caches.
std::string gemm_problem_key(const GemmProblem& p);
// "128x64x32 w2x2 s3", "64x64x32 w2x2 s4 split8", "64x64x32 w2x2 s4 split8 fold".
std::string gemm_tile_name(const GemmTileConfig& c);

// Whether the core can build `c` for `p` (empty: yes; else why not). Tensor
// cores: bm, bn in {16 (bm only), 32, 64, 128}, warp tiles of 16..64 rows and
// 16..32 columns (at most 4 x 4 mma tiles), at most 8 warps, bk 16 or 32
// (tf32: 8, 16 or 32; f16/bf16 also 64), 2 to kMaxGemmStages stages in a ring of at most
// kMaxGemmRingBytes. Simt: bm, bn in {16, 32, 64}, bk 16,
// 1 stage.
std::string gemm_tile_invalid(const GemmTileConfig& c, const GemmProblem& p);

// The default configuration (deterministic: a function of the problem only).
GemmTileConfig default_gemm_tile(const GemmProblem& p);

// The tile of a GEMM whose epilogue ends in a normalization of each result
// row (a layer norm over N: BERT's "dense + bias + residual, then LayerNorm"),
// which runs in the split-K reduction kernel (emit_gemm_row_norm.h): the
// cheapest tensor-core tile split in 2 or more parts summed by a reduction
// kernel, by the same model and candidates as default_gemm_tile. nullopt when
// no such split exists (SIMT math, K of fewer than 4 k-tiles, a grid of a
// wave or more) or when, by the model, it costs more than the default tile
// plus a launch of the normalization's own (`norm_launch_us`, with its
// graph node): then the layer norm stays a kernel of its own.
std::optional<GemmTileConfig> row_norm_gemm_tile(const GemmProblem& p, double norm_launch_us);

// Every valid configuration worth timing for `p`, the default first.
std::vector<GemmTileConfig> gemm_tile_candidates(const GemmProblem& p);

// The override hook for autotuning: while a chooser is installed (on this
// thread), the emitters ask it first; it returns a configuration for the
// problem (which must be valid, else the emitter throws) or nullopt for the
// default. Scoped: the previous chooser is restored on destruction. Each
// matmul/gemm/conv/conv_transpose kernel (not depthwise, not einsum) asks
// exactly once per emission, so a tuner can emit a node once under a chooser
// that records the problem and returns nullopt, then once per candidate of
// gemm_tile_candidates(problem) under a chooser returning it, and time each.
using GemmTileChooser = std::function<std::optional<GemmTileConfig>(const GemmProblem&)>;
class ScopedGemmTileChooser {
 public:
  explicit ScopedGemmTileChooser(GemmTileChooser chooser);
  ~ScopedGemmTileChooser();
  ScopedGemmTileChooser(const ScopedGemmTileChooser&) = delete;
  ScopedGemmTileChooser& operator=(const ScopedGemmTileChooser&) = delete;

 private:
  GemmTileChooser previous_;
};

// The configuration the emitters use: the installed chooser's, else the
// default. Throws kiln::Error for an invalid chosen configuration.
GemmTileConfig choose_gemm_tile_config(const GemmProblem& p);

}  // namespace kiln::codegen
