// kiln's performance model of one kernel launch on a named GPU: an estimate
// from first principles, not a measurement (docs/performance.md says how it
// is built, what it assumes and where it is known to be off).
//
// For a launch it takes the work (useful FLOPs and compulsory DRAM bytes from
// the launch's real tensor sizes), the launch shape (blocks, threads), the
// kernel's resources (ptxas registers, shared memory) and, for the tiled
// GEMM/conv/attention kernels, their tile loop (block tile, k-tiles,
// pipeline stages). From the GPU table (perf/gpu_specs.h) it computes:
//   occupancy  blocks per SM = min over threads/warps, registers (allocated
//              per warp in units of 256, per sub-partition), shared memory
//              (+1 KiB reserved per block) and the blocks-per-SM cap;
//   waves      blocks / (SMs x blocks per SM), executed as ceil(waves);
//   compute    tiled: the busiest SM runs ceil(blocks / SMs) blocks of
//              padded tile work at its share of the tensor peak (scaled by
//              the GPU's mma.sync fraction, and by warps/4 when one SM holds
//              fewer than 4 warps); untiled: FLOPs / (non-tensor peak x the
//              fraction of SMs that have a block);
//   memory     bytes / (DRAM bandwidth x efficiency x the fraction of SMs
//              that have a block);
//   l2         tiled: the bytes every block streams from L2 (a GEMM/conv
//              block its A and B panels, an attention block its Q and K/V
//              tiles) over the L2 rate, likewise (GPUs with a figure);
//   latency    tiled: per wave, k-tiles x (load latency / (stages - 1)) plus
//              a prologue/epilogue round trip; untiled: two L2 round trips;
// and the estimate is the largest of the four (plus a folded split-K's
// tail, which runs after them); its name is the bound, or "launch" when even
// that is not above the per-node launch overhead.
#pragma once
#include <cstdint>
#include <string>

#include "perf/gpu_specs.h"

namespace kiln::perf {

// Which peak the launch's arithmetic runs at.
enum class Math { F16Tensor, BF16Tensor, TF32Tensor, Fp32 };
// What the launch computes; conv, gemm and attention are the "heavy" kinds
// whose grids should fill the GPU.
enum class WorkKind { Conv, Gemm, Attention, Other, Copy };

const char* math_name(Math m);
const char* work_kind_name(WorkKind k);
bool is_heavy(WorkKind k);

// A tiled kernel's main loop: each block computes a bm x bn tile (attention:
// bm query rows) by k_tiles steps of bk, through a `stages`-deep pipeline.
struct TileLoop {
  int bm = 0, bn = 0, bk = 0, stages = 1;
  int64_t k_tiles = 0;  // 0: the kernel has no tile loop (split-K: each block's share)
  int split = 1;        // split-K: blocks per output tile, each running k_tiles (a reduction launch follows)
};

struct LaunchWork {
  WorkKind kind = WorkKind::Other;
  Math math = Math::Fp32;
  double flops = 0;  // useful floating-point operations (multiply-add = 2)
  double bytes = 0;  // compulsory DRAM bytes: every distinct buffer read or written once
  int64_t blocks = 1;
  int threads = 32;
  int registers = -1;  // per thread; -1: unknown (no register limit applied)
  int smem_bytes = 0;  // per block, static + dynamic
  TileLoop tile;
  // Hopper's warpgroup MMA (a kernel of the sm_90a target's wgmma tiles):
  // its tensor cores run at GpuSpec::wgmma_fraction, not mma_sync_fraction.
  bool wgmma = false;
  // One block's arithmetic including tile padding (2 x bm x bn x bk x
  // k_tiles for a GEMM tile); 0: flops / blocks.
  double block_flops = 0;
  // A folded split-K GEMM (codegen/emitters/gemm_conv/emit_gemm.h): after
  // the k-loops, the last block of each of `tail_blocks` tiles takes a ticket
  // and sums the tile's partial sums, reading and writing `tail_bytes` in all
  // (partial sums, epilogue operands, results); 0: no tail.
  int64_t tail_blocks = 0;
  double tail_bytes = 0;
  // The epilogue of a tiled GEMM/conv (the kernel's "// epilogue:" line,
  // codegen/emitters/gemm_conv/emit_gemm_mma.cpp): each block (a folded
  // split: each tile's last block) stores its bm x bn tile with accesses of
  // `epilogue_width` elements per thread, `epilogue_accesses` of them per
  // epilogue_width elements (results and the operands read along the row),
  // moving `epilogue_bytes` per element; 0: not stated (no epilogue term).
  int epilogue_width = 0, epilogue_accesses = 0, epilogue_bytes = 0;
  // Attention: the bytes every block streams from L2 through its k-loop (its
  // Q tile and its K/V tiles), summed over the blocks. Query heads that share
  // a key/value head in separate blocks each read it: L2 serves the copies
  // DRAM does not (docs/performance.md, "GQA head packing"). 0: no L2 term.
  double l2_bytes = 0;
};

// The assumptions that are not in a GPU table (docs/performance.md,
// "Constants"; each calibrated against the first measured H100 run,
// docs/perf_calibration.md); tests pass their own.
struct ModelConstants {
  // What one more kernel node adds to a replayed CUDA Graph beyond its own
  // estimate: the smallest launch measured in a graph took 0.65 us in all.
  double graph_node_overhead_us = 0.6;
  // The share of the data-sheet DRAM bandwidth kiln's streaming kernels got:
  // the layernorm 32 MB micro benchmark (67 MB in 29.7 us of graph replay).
  double dram_efficiency = 0.67;
  // A tiled kernel's operand load round trip under load (DRAM): each k-tile
  // waits load_latency / (stages - 1), the prologue and epilogue one each.
  double load_latency_us = 1.25;
  // A round trip to data the previous kernel just wrote (in L2): an untiled
  // kernel waits two (a load, then the dependent store), a folded split's
  // tail two (its ticket, then its first partial sums).
  double l2_latency_us = 0.85;
  // The rate one warp of a folded split's last block reads the tile's partial
  // sums at (its loads go out one iteration at a time): bytes per us.
  double tail_warp_bytes_per_us = 5000;
  // The epilogue term: an SM issues one warp-wide load/store per clock and
  // its L1 moves 128 bytes per clock (sm_80/sm_90: 32 load/store units, a
  // 128-byte L1 data path).
  double lsu_warp_accesses_per_clock = 1.0;
  double l1_bytes_per_clock = 128.0;
};

struct Occupancy {
  int blocks_per_sm = 0;      // 0: the block does not fit on an SM
  std::string limiter;        // "threads", "registers", "shared memory", "blocks"
  double warp_occupancy = 0;  // resident warps / the SM's maximum
};

struct LaunchEstimate {
  Occupancy occ;
  double waves = 0;       // blocks / (SMs x blocks per SM)
  int64_t waves_run = 0;  // ceil(waves): what the GPU executes
  double compute_us = 0, memory_us = 0, latency_us = 0;
  // l2_bytes over the L2's rate (GpuSpec::l2_gb_per_s, an achieved rate)
  // times the share of SMs with a block; 0 without either.
  double l2_us = 0;
  // A folded split-K's tail, after the rest: a ticket and the first partial
  // sums (two L2 round trips), then a tile's tail bytes at its last block's
  // rate (warps x tail_warp_bytes_per_us), once per wave of last blocks
  // (tail_blocks / (SMs x blocks per SM), rounded up).
  double tail_us = 0;
  // The epilogue after each block's k-loop: the blocks the busiest SM holds at
  // once (a folded split: of its tiles' last blocks; earlier waves' epilogues
  // overlap later k-loops) x per block max(warp accesses / rate, bytes / L1
  // rate) cycles.
  double epilogue_us = 0;
  double est_us = 0;   // max of the four, plus the tail and the epilogue
  std::string bound;   // "compute", "memory", "l2", "latency" or "launch"
  double sol_us = 0;   // speed of light: max(flops / peak, bytes / bandwidth)
  double sol_pct = 0;  // 100 x sol_us / est_us
};

double math_peak_tflops(Math m, const GpuSpec& g);
// Blocks of `w` that fit on one SM of `g` at once. Throws kiln::Error when
// one block needs more shared memory or threads than `g` allows.
Occupancy occupancy(const LaunchWork& w, const GpuSpec& g);
LaunchEstimate estimate_launch(const LaunchWork& w, const GpuSpec& g, const ModelConstants& c = {});

}  // namespace kiln::perf
