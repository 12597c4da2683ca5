// kiln's performance model (perf/perf_model.h) on hand-computed cases: the
// GPU table, occupancy limits, wave quantization, a compute-bound GEMM, a
// memory-bound pointwise kernel, a latency-bound sub-wave GEMM, a tiny
// kernel, a folded split's tail; the tile loop read from kernel sources. The
// expected figures use the constants calibrated on the 2026-11-27 H100 run
// (docs/perf_calibration.md).
#include <gtest/gtest.h>

#include "ir/error.h"
#include "perf/gpu_specs.h"
#include "perf/perf_model.h"
#include "perf/plan_work.h"

namespace kiln::perf {
namespace {

const GpuSpec& h100() { return *find_gpu("h100"); }

TEST(PerfGpuTable, NamesAndSmCounts) {
  ASSERT_NE(find_gpu("h100"), nullptr);
  EXPECT_EQ(find_gpu("h100")->sms, 132);
  EXPECT_EQ(find_gpu("h200")->sms, 132);
  EXPECT_EQ(find_gpu("a100")->sms, 108);
  EXPECT_EQ(find_gpu("l4")->sms, 58);
  EXPECT_EQ(find_gpu("v100"), nullptr);
  EXPECT_EQ(gpu_names("|"), "h100|h200|a100|l4");
  EXPECT_EQ(default_gpu_for_arch("sm_90")->name, "h100");
  EXPECT_EQ(default_gpu_for_arch("sm_80")->name, "a100");
  EXPECT_EQ(default_gpu_for_arch("sm_89")->name, "l4");
  EXPECT_EQ(default_gpu_for_arch("sm_75"), nullptr);
  // The H200 is an H100 with faster memory.
  EXPECT_GT(find_gpu("h200")->dram_gb_per_s, find_gpu("h100")->dram_gb_per_s);
  EXPECT_EQ(find_gpu("h200")->fp16_tensor_tflops, find_gpu("h100")->fp16_tensor_tflops);
}

LaunchWork block_of(int threads, int regs, int smem) {
  LaunchWork w;
  w.threads = threads;
  w.registers = regs;
  w.smem_bytes = smem;
  return w;
}

TEST(PerfOccupancy, EachLimit) {
  // 256 threads x 32 registers, no shared memory: 8 warps, 64 / 8 = 8 blocks by threads.
  Occupancy o = occupancy(block_of(256, 32, 0), h100());
  EXPECT_EQ(o.blocks_per_sm, 8);
  EXPECT_EQ(o.limiter, "threads");
  EXPECT_DOUBLE_EQ(o.warp_occupancy, 1.0);
  // 128 threads x 128 registers: a warp takes 4096 of a sub-partition's
  // 16384, so 4 warps per sub-partition, 16 per SM: 4 blocks of 4 warps.
  o = occupancy(block_of(128, 128, 0), h100());
  EXPECT_EQ(o.blocks_per_sm, 4);
  EXPECT_EQ(o.limiter, "registers");
  EXPECT_DOUBLE_EQ(o.warp_occupancy, 0.25);
  // 97 registers: 3104 per warp round up to 3328, 4 warps per sub-partition,
  // so 4 blocks (65536 / 3104 without the allocation units would give 5).
  EXPECT_EQ(occupancy(block_of(128, 97, 0), h100()).blocks_per_sm, 4);
  EXPECT_EQ(occupancy(block_of(128, 95, 0), h100()).blocks_per_sm, 5);  // 3072 per warp: 5 per sub-partition
  // 255 registers round up to 8192 per warp: 2 warps per sub-partition, one 8-warp block.
  EXPECT_EQ(occupancy(block_of(256, 255, 0), h100()).blocks_per_sm, 1);
  // 100 KiB of shared memory (+1 KiB reserved): 228 KiB / 101 KiB = 2 blocks.
  o = occupancy(block_of(128, 32, 100 * 1024), h100());
  EXPECT_EQ(o.blocks_per_sm, 2);
  EXPECT_EQ(o.limiter, "shared memory");
  // 32-thread blocks: 32 blocks per SM at most.
  o = occupancy(block_of(32, 16, 0), h100());
  EXPECT_EQ(o.blocks_per_sm, 32);
  EXPECT_EQ(o.limiter, "blocks");
  // The L4 holds 48 warps per SM: three 512-thread blocks, not four.
  EXPECT_EQ(occupancy(block_of(512, 32, 0), *find_gpu("l4")).blocks_per_sm, 3);
}

TEST(PerfOccupancy, BlocksThatDoNotFitAreErrors) {
  EXPECT_THROW(occupancy(block_of(128, 32, 228 * 1024), h100()), Error);           // over 227 KiB per block
  EXPECT_THROW(occupancy(block_of(128, 32, 100 * 1024), *find_gpu("l4")), Error);  // over 99 KiB
  EXPECT_THROW(occupancy(block_of(1024, 255, 0), h100()), Error);                  // 32 warps x 8192 registers
}

// C[4096 x 4096] = A[4096 x 4096] B[4096 x 4096] in f16 with 64 x 64 x 32
// tiles, 3 stages, 128 threads x 128 registers, 30 KiB shared memory.
LaunchWork big_gemm() {
  LaunchWork w = block_of(128, 128, 30 * 1024);
  w.kind = WorkKind::Gemm;
  w.math = Math::F16Tensor;
  w.flops = 2.0 * 4096 * 4096 * 4096;
  w.bytes = 3.0 * 4096 * 4096 * 2;
  w.blocks = 64 * 64;
  w.tile = {64, 64, 32, 3, 128};
  w.block_flops = 2.0 * 64 * 64 * 32 * 128;
  return w;
}

TEST(PerfEstimate, LargeGemmWavesAndComputeTime) {
  // Latency per k-tile made negligible, so the compute term decides.
  ModelConstants c;
  c.load_latency_us = 0.01;
  LaunchEstimate e = estimate_launch(big_gemm(), h100(), c);
  // 4 blocks per SM (registers): 4096 / (132 x 4) = 7.76 waves, 8 run.
  EXPECT_EQ(e.occ.blocks_per_sm, 4);
  EXPECT_NEAR(e.waves, 4096.0 / 528.0, 1e-12);
  EXPECT_EQ(e.waves_run, 8);
  // The busiest SM runs ceil(4096 / 132) = 32 blocks of 2 x 64 x 64 x 4096
  // FLOP at 989.4 TFLOPS / 132 x 0.22 (kiln's mma.sync GEMM measured 219
  // TFLOP/s): 651.1 us.
  const double expect_us = 32 * (2.0 * 64 * 64 * 4096) / (989.4e12 / 132 * 0.22) * 1e6;
  EXPECT_NEAR(expect_us, 651.1, 0.1);
  EXPECT_NEAR(e.compute_us, expect_us, 1e-9);
  EXPECT_EQ(e.bound, "compute");
  EXPECT_DOUBLE_EQ(e.est_us, e.compute_us);
  // Memory: 100.66 MB at 3350 GB/s x 0.67 = 44.85 us.
  EXPECT_NEAR(e.memory_us, 3.0 * 4096 * 4096 * 2 / (3350e9 * 0.67) * 1e6, 1e-9);
  // Speed of light: 137.4 GFLOP at 989.4 TFLOPS = 138.9 us, so 21.3%.
  EXPECT_NEAR(e.sol_us, 2.0 * 4096 * 4096 * 4096 / 989.4e12 * 1e6, 1e-9);
  EXPECT_NEAR(e.sol_pct, 100.0 * e.sol_us / e.est_us, 1e-9);
  EXPECT_NEAR(e.sol_pct, 21.3, 0.1);
  // The same GEMM on an A100 (full-rate mma.sync): 4096 / 108 -> 38 blocks on the busiest SM.
  LaunchEstimate a = estimate_launch(big_gemm(), *find_gpu("a100"), c);
  EXPECT_NEAR(a.compute_us, 38 * (2.0 * 64 * 64 * 4096) / (312e12 / 108) * 1e6, 1e-9);
}

// A kernel of the sm_90a target's wgmma tiles: the tensor cores at the
// wgmma fraction (0.8) on Hopper; a GPU without wgmma keeps its mma.sync rate.
TEST(PerfEstimate, WgmmaLaunchesRunAtTheWgmmaFraction) {
  ModelConstants c;
  c.load_latency_us = 0.01;
  LaunchWork w = big_gemm();
  w.wgmma = true;
  const LaunchEstimate e = estimate_launch(w, h100(), c);
  EXPECT_NEAR(e.compute_us, 32 * (2.0 * 64 * 64 * 4096) / (989.4e12 / 132 * 0.8) * 1e6, 1e-9);
  EXPECT_NEAR(e.compute_us, 651.1 * 0.22 / 0.8, 0.1);
  const LaunchEstimate a = estimate_launch(w, *find_gpu("a100"), c);
  EXPECT_NEAR(a.compute_us, 38 * (2.0 * 64 * 64 * 4096) / (312e12 / 108) * 1e6, 1e-9);
}

TEST(PerfEstimate, SubWaveGemmIsLatencyBound) {
  // ResNet-50's stage-4 3x3 conv shape: 8 blocks, each 144 k-tiles of 32.
  LaunchWork w = big_gemm();
  w.blocks = 8;
  w.flops = 2.0 * 64 * 64 * 8 * 4608;
  w.block_flops = 2.0 * 64 * 64 * 4608;
  w.bytes = 1e5;
  w.tile.k_tiles = 144;
  LaunchEstimate e = estimate_launch(w, h100());
  EXPECT_NEAR(e.waves, 8.0 / 528.0, 1e-12);
  EXPECT_EQ(e.waves_run, 1);
  // One wave of 144 k-tiles x 1.25 us / (3 - 1) stages + a 2 x 1.25 us round trip = 92.5 us.
  EXPECT_NEAR(e.latency_us, 92.5, 1e-9);
  EXPECT_EQ(e.bound, "latency");
  // Compute: one block per SM at 0.22 of an SM's peak: 37.7 MFLOP / 1.649 TFLOPS = 22.9 us.
  EXPECT_NEAR(e.compute_us, 2.0 * 64 * 64 * 4608 / (989.4e12 / 132 * 0.22) * 1e6, 1e-9);
}

// The attention L2 term (GQA head packing, docs/performance.md): the bytes
// every block streams from L2 over the L2 rate (4000 GB/s on the H100, fitted
// to the measured GEMM/conv kernels), scaled by the share of SMs with a
// block; it bounds a decode step whose query heads each read their group's
// K/V. A GPU without an L2 figure (L4) has no such term.
TEST(PerfEstimate, AttentionL2BytesBoundUnpackedGroups) {
  // 32 query heads over 8 K/V heads, head dim 128, 2048 keys, split 16 ways:
  // 512 one-head blocks each stream 4 K/V tiles of 32 keys and a 16-row Q tile.
  LaunchWork w = block_of(64, 162, 34816);
  w.kind = WorkKind::Attention;
  w.math = Math::F16Tensor;
  w.blocks = 512;
  w.bytes = 8.663e6;
  w.tile = TileLoop{16, 128, 32, 2, 4, 16};
  w.l2_bytes = 512.0 * 2 * (4 * 32 * 256 + 16 * 128);
  LaunchEstimate e = estimate_launch(w, h100());
  EXPECT_NEAR(e.l2_us, w.l2_bytes / 4000e9 * 1e6, 1e-9);  // 8.91 us
  EXPECT_GT(e.l2_us, 8.9);
  EXPECT_GT(e.l2_us, e.latency_us);
  EXPECT_EQ(e.bound, "l2");
  // Two heads packed per block: half the blocks, half the L2 bytes, on 256 of 132 SMs.
  w.blocks = 256;
  w.l2_bytes /= 2;
  e = estimate_launch(w, h100());
  EXPECT_NEAR(e.l2_us, w.l2_bytes / 4000e9 * 1e6, 1e-9);
  EXPECT_NE(e.bound, "l2");
  // Few blocks: the share of SMs with one.
  w.blocks = 33;
  EXPECT_NEAR(estimate_launch(w, h100()).l2_us, w.l2_bytes / (4000e9 * 0.25) * 1e6, 1e-9);
  EXPECT_EQ(estimate_launch(w, *find_gpu("l4")).l2_us, 0.0);
  EXPECT_NEAR(find_gpu("a100")->l2_gb_per_s, 5120 * 1.41, 1e-9);
}

// A folded split-K (the GEMM's last block per tile sums the partial sums):
// its tail runs after the k-loops: the ticket and the first partial sums (two
// L2 round trips, 2 x 0.85 us), then the tile's bytes at one block's rate
// (5000 bytes per us per warp: the last block's loads go out one iteration at
// a time), once per wave of the tiles' last blocks.
TEST(PerfEstimate, FoldedSplitKAddsItsTail) {
  LaunchWork w = big_gemm();
  w.blocks = 8 * 21;
  w.flops = 2.0 * 64 * 64 * 8 * 4608;
  w.block_flops = 2.0 * 64 * 64 * 7 * 32;
  w.bytes = 1e5;
  w.tile.k_tiles = 7;
  w.tile.split = 21;
  const LaunchEstimate plain = estimate_launch(w, h100());
  EXPECT_DOUBLE_EQ(plain.tail_us, 0.0);
  // 8 tiles reading 21 x 64 x 64 x 4 bytes each: 344 KB per tile by a
  // 4-warp block at 4 x 5000 bytes per us = 17.2 us, after 1.7 us.
  w.tail_blocks = 8;
  w.tail_bytes = 8.0 * 21 * 64 * 64 * 4;
  LaunchEstimate e = estimate_launch(w, h100());
  EXPECT_NEAR(e.tail_us, 2 * 0.85 + 21 * 64 * 64 * 4 / (4 * 5000.0), 1e-9);
  EXPECT_NEAR(e.tail_us, 18.90, 0.01);
  EXPECT_NEAR(e.est_us, plain.est_us + e.tail_us, 1e-9);
  EXPECT_EQ(e.bound, plain.bound);
  // 4 blocks of this kernel fit an SM: up to 528 tiles' last blocks sum side
  // by side; 529 take a second round.
  const double per_tile = 21.0 * 64 * 64 * 4;
  w.tail_blocks = 528;
  w.tail_bytes = 528 * per_tile;
  EXPECT_NEAR(estimate_launch(w, h100()).tail_us, e.tail_us, 1e-9);
  w.tail_blocks = 529;
  w.tail_bytes = 529 * per_tile;
  EXPECT_NEAR(estimate_launch(w, h100()).tail_us, 2 * 0.85 + 2 * per_tile / (4 * 5000.0), 1e-9);
  // One-warp blocks read at a quarter of the rate.
  w.threads = 32;
  w.tail_blocks = 8;
  w.tail_bytes = 8 * per_tile;
  EXPECT_NEAR(estimate_launch(w, h100()).tail_us, 2 * 0.85 + per_tile / 5000.0, 1e-9);
  // Small partial sums: the two round trips.
  w.threads = 128;
  w.tail_bytes = 8;
  EXPECT_NEAR(estimate_launch(w, h100()).tail_us, 1.7, 1e-3);
}

// The epilogue after each block's k-loop (the kernel's "// epilogue:" line):
// max(warp accesses at 1 per clock, the tile's bytes at 128 per clock) per
// block, times the blocks the busiest SM holds at once (the last wave's), at
// the boost clock; a folded split counts the tiles' last blocks. 8-wide accesses cut the element-by-
// element epilogue of an f16 result with an f16 residual from 256 to 128
// cycles a block (the L1 bytes bound it then).
TEST(PerfEstimate, EpilogueAccessesAndBytes) {
  LaunchWork w = big_gemm();
  w.blocks = 264;  // 2 blocks on the busiest SM
  w.tile.k_tiles = 4;
  const LaunchEstimate none = estimate_launch(w, h100());
  EXPECT_DOUBLE_EQ(none.epilogue_us, 0.0);
  w.epilogue_width = 1;
  w.epilogue_accesses = 2;  // the result's store and the residual's load
  w.epilogue_bytes = 4;
  const LaunchEstimate scalar = estimate_launch(w, h100());
  // 64 x 64 / 32 x 2 = 256 warp accesses (above 4096 x 4 / 128 = 128 cycles of bytes), 2 blocks, 1.98 GHz.
  EXPECT_NEAR(scalar.epilogue_us, 2 * 256 / 1980.0, 1e-12);
  EXPECT_NEAR(scalar.est_us, none.est_us + scalar.epilogue_us, 1e-9);
  w.epilogue_width = 8;
  EXPECT_NEAR(estimate_launch(w, h100()).epilogue_us, 2 * 128 / 1980.0, 1e-12);
  // Many waves: only the last wave's epilogues (4 blocks of this kernel per SM) follow every k-loop.
  w.blocks = 4096;
  EXPECT_NEAR(estimate_launch(w, h100()).epilogue_us, 4 * 128 / 1980.0, 1e-12);
  // A folded split: only the 132 tiles' last blocks (one per SM) store.
  w.tail_blocks = 132;
  EXPECT_NEAR(estimate_launch(w, h100()).epilogue_us, 128 / 1980.0, 1e-12);
}

TEST(PerfEstimate, PointwiseIsMemoryBound) {
  // y = relu(x), 2^24 f16 elements: 32 MiB read + 32 MiB written by 65536 blocks of 256 threads.
  LaunchWork w = block_of(256, 16, 0);
  w.flops = double(1 << 24);
  w.bytes = 2.0 * (1 << 24) * 2;
  w.blocks = 65536;
  LaunchEstimate e = estimate_launch(w, h100());
  EXPECT_EQ(e.bound, "memory");
  EXPECT_NEAR(e.est_us, 67108864.0 / (3350e9 * 0.67) * 1e6, 1e-9);  // 29.90 us
  EXPECT_NEAR(e.est_us, 29.90, 0.01);
  EXPECT_NEAR(e.sol_pct, 67.0, 1e-9);  // the measured DRAM efficiency
  EXPECT_NEAR(e.waves, 65536.0 / (132 * 8), 1e-12);
  // The H200's 4.8 TB/s makes it 1.43x faster.
  EXPECT_NEAR(estimate_launch(w, *find_gpu("h200")).est_us, 67108864.0 / (4800e9 * 0.67) * 1e6, 1e-9);
}

TEST(PerfEstimate, FewBlocksGetAShareOfTheBandwidth) {
  // The same bytes from 33 blocks: a quarter of the SMs issue requests.
  LaunchWork w = block_of(256, 16, 0);
  w.bytes = 64e6;
  w.blocks = 33;
  LaunchEstimate e = estimate_launch(w, h100());
  EXPECT_NEAR(e.memory_us, 64e6 / (3350e9 * 0.67 * 0.25) * 1e6, 1e-9);
}

// A tiny kernel waits for a load and its dependent store: two L2 round trips
// (what it reads, the previous kernel just wrote). It is "launch" bound only
// where that is not above the graph-node floor.
TEST(PerfEstimate, TinyKernelWaitsTwoL2RoundTrips) {
  LaunchWork w = block_of(64, 16, 0);
  w.bytes = 1024;
  w.flops = 256;
  LaunchEstimate e = estimate_launch(w, h100());
  EXPECT_EQ(e.bound, "latency");
  EXPECT_DOUBLE_EQ(e.est_us, 2 * 0.85);
  ModelConstants c;
  c.graph_node_overhead_us = 2.0;
  EXPECT_EQ(estimate_launch(w, h100(), c).bound, "launch");
}

// The calibrated constants and where each came from (docs/perf_calibration.md):
// a change to one is a change to what the model claims was measured.
TEST(PerfEstimate, CalibratedConstants) {
  const ModelConstants c;
  EXPECT_DOUBLE_EQ(c.graph_node_overhead_us, 0.6);  // below the smallest launch in a graph, 0.65 us
  // layernorm 32 MB micro benchmark: 67.1 MB in 30.29 us of replay less one node.
  EXPECT_NEAR(c.dram_efficiency, (2.0 * 4096 * 4096 * 2 + 2 * 4096 * 2) / (30.288 - 0.6) / 3350e3, 0.005);
  EXPECT_DOUBLE_EQ(c.load_latency_us, 1.25);  // fitted: ResNet-50 + BERT-base per-kernel times
  EXPECT_DOUBLE_EQ(c.l2_latency_us, 0.85);
  EXPECT_DOUBLE_EQ(c.tail_warp_bytes_per_us, 5000);
  // GEMM 4096^3 fp16 micro benchmark: 218.9 of 989.4 TFLOP/s.
  EXPECT_NEAR(h100().mma_sync_fraction, 218.92 / 989.4, 0.005);
  EXPECT_DOUBLE_EQ(h100().l2_gb_per_s, 4000);
  EXPECT_DOUBLE_EQ(find_gpu("h200")->mma_sync_fraction, h100().mma_sync_fraction);
}

TEST(PerfEstimate, CopyStreamsAtDramRate) {
  LaunchWork w;
  w.kind = WorkKind::Copy;
  w.bytes = 2.0 * 8e6;
  LaunchEstimate e = estimate_launch(w, h100());
  EXPECT_EQ(e.bound, "memory");
  EXPECT_NEAR(e.est_us, 16e6 / (3350e9 * 0.67) * 1e6, 1e-9);
}

TEST(PerfTileLoop, FromGemmSources) {
  // The tensor-core GEMM core's header and constants (emit_gemm_mma.cpp).
  TileLoop t = tile_loop_from_source(
      "// conv: batch 1 x [49 x 512] = [49 x 4608] [4608 x 512] on tensor cores (f16); tile 64x64x32 w2x2 s3, A "
      "cp.async, B cp.async\n  constexpr int BM = 64, BN = 64, BK = 32, STAGES = 3, LDA = 40, LDB = 40;\n"
      "  constexpr int A_STAGE = 2560, B_STAGE = 2560, KT = 144, WTM = 32, WTN = 32, MI = 2, NI = 4;\n",
      0);
  EXPECT_EQ(t.bm, 64);
  EXPECT_EQ(t.bn, 64);
  EXPECT_EQ(t.bk, 32);
  EXPECT_EQ(t.stages, 3);
  EXPECT_EQ(t.k_tiles, 144);
  // The SIMT core: one stage, k-tiles from the node's K when the source gives none.
  t = tile_loop_from_source("// gemm: batch 1 x [8 x 8] = [8 x 100] [100 x 8]; tile 64x64x16, float\n", 100);
  EXPECT_EQ(t.stages, 1);
  EXPECT_EQ(t.k_tiles, 7);
  // Attention: BQ query rows, keys in tiles of BK, two stages.
  t = tile_loop_from_source("  constexpr int BQ = 32, BK = 64, D = 64, DV = 64, SQ = 128, SK = 200, THREADS = 64;\n",
                            0);
  EXPECT_EQ(t.bm, 32);
  EXPECT_EQ(t.k_tiles, 4);
  EXPECT_EQ(t.stages, 2);
  // The SIMT attention kernel's header; the keys from the node.
  t = tile_loop_from_source("// attention: q f32[1,2,9,8] ...; tiles BQ=16 BK=64, 4 threads per row\n", 300);
  EXPECT_EQ(t.bm, 16);
  EXPECT_EQ(t.k_tiles, 5);
  // A split-KV attention kernel: each block runs KV_TILES of the key tiles, KV_SPLITS blocks per query tile.
  t = tile_loop_from_source(
      "  constexpr int BQ = 16, BK = 32, D = 128, DV = 128, SQ = 1, SK = 2048, THREADS = 32;\n"
      "  constexpr int KV_SPLITS = 5, KV_TILES = 13, ROWS = 32, RS = DV + 2;  // split-KV\n",
      0);
  EXPECT_EQ(t.k_tiles, 13);
  EXPECT_EQ(t.split, 5);
  // A pointwise kernel has no tile loop.
  EXPECT_EQ(tile_loop_from_source("extern \"C\" __global__ void k(float* y) { y[threadIdx.x] = 0; }", 0).k_tiles, 0);
}

}  // namespace
}  // namespace kiln::perf
