// Hopper wgmma tiles for the GEMM core (GemmTileConfig::wgmma; the kernel is
// emit_gemm_wgmma_tiled.cpp): when they are valid, what their shared-memory
// ring takes, and the opt-in under which choose_gemm_tile_config
// (gemm_tiles.h) considers them.
//
// Opt-in: the target sm_90a (`kiln compile --target sm_90a`; docs/cli.md).
// Its kernels are compiled for sm_90a, whose CUBINs run on sm_90 devices
// only. Until bench/gpu_run_all.sh has validated the wgmma kernels on an
// H100, no default target chooses them (docs/codegen.md, "wgmma GEMM").
//
// Choice: the wgmma tile whose estimated time by kiln's performance model
// (gemm_tile_cost.h: the tensor cores at the GPU's wgmma fraction of the
// peak, the blocks an SM keeps limited by the deep ring's shared memory) is
// lowest, if it is lower than the chosen mma.sync tile's (with its split-K,
// at the mma.sync fraction).
// wgmma tiles have no split-K yet: below one wave the split mma.sync kernel
// usually stays.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "codegen/emitters/gemm_conv/gemm_tiles.h"

namespace kiln::codegen {

// While one is alive on this thread with `on`, choose_gemm_tile_config may
// return wgmma tiles; scoped (the previous state is restored).
class ScopedSm90Wgmma {
 public:
  explicit ScopedSm90Wgmma(bool on);
  ~ScopedSm90Wgmma();
  ScopedSm90Wgmma(const ScopedSm90Wgmma&) = delete;
  ScopedSm90Wgmma& operator=(const ScopedSm90Wgmma&) = delete;

 private:
  bool previous_;
};
bool sm90_wgmma_enabled();

// Why `c` (wgmma set) cannot be built for `p` (empty: it can): f16/bf16,
// bm 64 or 128 (warps_m = bm / 16, warps_n = 1: one warpgroup per 64 rows),
// bn 64, 128 or 256, bk 64, 2 to 6 stages within 227 KiB, no split-K.
std::string wgmma_tile_invalid(const GemmTileConfig& c, const GemmProblem& p);
// Dynamic shared memory of the ring (with the 1 KiB the kernel may skip to align it).
size_t wgmma_ring_bytes(const GemmTileConfig& c);
// The wgmma tile for `p` where the model puts it faster than `mma` (the
// mma.sync tile chosen for `p`); nullopt otherwise.
std::optional<GemmTileConfig> wgmma_tile_if_faster(const GemmProblem& p, const GemmTileConfig& mma);

}  // namespace kiln::codegen
