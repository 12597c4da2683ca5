#include "codegen/emitters/gemm_conv/gemm_tiles_wgmma.h"

#include "codegen/emitters/gemm_conv/gemm_tile_cost.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kiln::codegen {

namespace {

thread_local bool wgmma_on = false;

constexpr size_t kSharedPerSm = 227 * 1024;  // an H100 SM's shared memory for blocks (opt-in maximum)

}  // namespace

ScopedSm90Wgmma::ScopedSm90Wgmma(bool on) : previous_(wgmma_on) { wgmma_on = on; }
ScopedSm90Wgmma::~ScopedSm90Wgmma() { wgmma_on = previous_; }
bool sm90_wgmma_enabled() { return wgmma_on; }

size_t wgmma_ring_bytes(const GemmTileConfig& c) {
  return static_cast<size_t>(c.stages) * static_cast<size_t>(c.bm + c.bn) * static_cast<size_t>(c.bk) * 2 + 1024;
}

std::string wgmma_tile_invalid(const GemmTileConfig& c, const GemmProblem& p) {
  if (p.math != GemmMath::F16 && p.math != GemmMath::BF16) return "wgmma tiles need f16 or bf16 operands";
  if (c.bm != 64 && c.bm != 128) return "wgmma tiles are 64 or 128 rows (one warpgroup per 64)";
  if (c.bn != 64 && c.bn != 128 && c.bn != 256) return "wgmma tiles are 64, 128 or 256 columns";
  if (c.bk != 64) return "wgmma tiles are 64 deep (one 128-byte swizzle row)";
  if (c.warps_m != c.bm / 16 || c.warps_n != 1) return "wgmma tiles have 4 warps (a warpgroup) per 64 rows, 1 along N";
  if (c.split_k != 1 || c.fold_split) return "wgmma tiles have no split-K";
  if (c.stages < 2 || c.stages > 6) return "2 to 6 pipeline stages";
  const size_t staging = static_cast<size_t>(c.bm) * static_cast<size_t>(c.bn + 4) * 4;
  if (std::max(wgmma_ring_bytes(c), staging) > kSharedPerSm)
    return fmt::format("{} bytes of shared memory (227 KiB at most)", std::max(wgmma_ring_bytes(c), staging));
  return "";
}

std::optional<GemmTileConfig> wgmma_tile_if_faster(const GemmProblem& p, const GemmTileConfig& mma) {
  if (p.math != GemmMath::F16 && p.math != GemmMath::BF16) return std::nullopt;
  const int64_t k_tiles = (p.K + 63) / 64;
  std::optional<GemmTileConfig> best;
  double best_cost = gemm_tile_cost_us(p, mma);
  for (int bm : {128, 64})
    for (int bn : {256, 128, 64}) {
      GemmTileConfig c;
      c.wgmma = true;
      c.bm = bm;
      c.bn = bn;
      c.bk = 64;
      c.warps_m = bm / 16;
      c.warps_n = 1;
      c.stages = static_cast<int>(std::clamp<int64_t>(k_tiles + 1, 2, 4));
      if (!wgmma_tile_invalid(c, p).empty()) continue;
      const double cost = gemm_tile_cost_us(p, c);
      if (cost < best_cost) best = c, best_cost = cost;
    }
  return best;
}

}  // namespace kiln::codegen
