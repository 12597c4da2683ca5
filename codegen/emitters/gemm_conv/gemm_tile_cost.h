// What the tile chooser (gemm_tiles.h, gemm_tiles_wgmma.h) weighs: the time
// kiln's performance model (perf/perf_model.h) estimates for a tile
// configuration of a GEMM/conv problem on an H100 SXM -- the model and the
// calibrated constants `kiln inspect PLAN --perf` uses
// (docs/perf_calibration.md), not a copy of them, so a choice and the
// estimate printed for the plan it makes cannot disagree on the terms.
//
// The chooser knows the problem, not the kernel: it describes the launch as
// perf/plan_work.cpp would read it from the emitted kernel (grid, block,
// shared memory, tile loop, L2 operand bytes, a folded split's tail, a
// plain result store as the epilogue), with the registers ptxas is expected
// to give (the accumulators plus 64; the 2026-11-27 plans' mma.sync kernels
// got 72-125). The GPU is fixed (the h100 of perf/gpu_specs.h), so a plan
// does not depend on the machine it is built on.
#pragma once
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "perf/perf_model.h"

namespace kiln::codegen {

// The GPU the tile choices are made for: perf's h100.
const perf::GpuSpec& tile_choice_gpu();

// The GEMM launch of `c` (mma.sync or wgmma, with its split_k and
// fold_split) for `p`, as the performance model sees it.
perf::LaunchWork gemm_launch_work(const GemmProblem& p, const GemmTileConfig& c);

// The split-K reduction launch that follows an unfolded split of `c`
// (emit_gemm_split_k.cpp); blocks 0 when `c` has none.
perf::LaunchWork split_k_reduction_work(const GemmProblem& p, const GemmTileConfig& c);

// The model's estimate (us) of everything `c` launches for `p` on
// tile_choice_gpu(): the GEMM launch and, for an unfolded split, the
// reduction launch and its CUDA Graph node.
double gemm_tile_cost_us(const GemmProblem& p, const GemmTileConfig& c);

// The model's estimate (us) of a row normalization's own launch after the
// GEMM `p` (a layer norm over each of the batch x M rows of N, reading
// `in_bytes` and writing `out_bytes` per element) with its CUDA Graph node:
// what a GEMM whose split-K reduction kernel normalizes its rows saves
// (row_norm_gemm_tile).
double row_norm_launch_us(const GemmProblem& p, int in_bytes, int out_bytes);

// Resident blocks of `c`'s GEMM launch per SM by the model's occupancy
// (registers, threads, shared memory); at least 1.
int gemm_blocks_per_sm(const GemmProblem& p, const GemmTileConfig& c);

}  // namespace kiln::codegen
