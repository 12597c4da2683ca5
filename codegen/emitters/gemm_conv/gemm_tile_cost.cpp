#include "codegen/emitters/gemm_conv/gemm_tile_cost.h"

#include <algorithm>

#include "codegen/emitters/gemm_conv/gemm_tiles_wgmma.h"
#include "ir/error.h"
#include "perf/gpu_specs.h"

namespace kiln::codegen {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

perf::Math model_math(GemmMath m) {
  switch (m) {
    case GemmMath::F16:
      return perf::Math::F16Tensor;
    case GemmMath::BF16:
      return perf::Math::BF16Tensor;
    case GemmMath::Tf32:
      return perf::Math::TF32Tensor;
    case GemmMath::Simt:
      break;
  }
  return perf::Math::Fp32;
}

// Bytes of one operand element as the kernel stages it: f16/bf16 2, tf32
// and SIMT (f32; integers and f64 are not weighed by the model) 4.
int element_bytes(GemmMath m) { return m == GemmMath::F16 || m == GemmMath::BF16 ? 2 : 4; }

int threads_of(const GemmTileConfig& c, GemmMath m) {
  if (c.wgmma) return c.bm / 64 * 128;
  if (m == GemmMath::Simt) return 256;
  return 32 * c.warps_m * c.warps_n;
}

// ptxas's registers, expected: the f32 accumulators of a thread's share of
// the tile plus 64 for fragments and addresses (the mma.sync kernels of the
// 2026-11-27 ResNet-50 and BERT-base plans: 72-125 against 80-128 by this).
// A thread staging more than 4 16-byte chunks of each k-tile (a one-warp
// tile, or a 64-deep k-tile) keeps about 4 more registers per further chunk
// for their addresses (a one-warp 16x32x64 tile, 12 chunks a thread: ptxas
// gave 133 registers).
int expected_registers(const GemmTileConfig& c, int threads, int esize) {
  const int chunks = (c.bm + c.bn) * c.bk * esize / 16 / threads;
  return std::min(255, c.bm * c.bn / threads + 64 + 4 * std::max(0, chunks - 4));
}

// Shared memory per block, as the emitters size it (emit_gemm_mma.cpp,
// emit_gemm_wgmma_tiled.cpp): the ring of A and B stages (BK rows padded by
// 8 elements, or rows of the tile padded by 16 bytes along K; the problem's
// hints say which), or the f32 tile staged for the epilogue, if larger.
int shared_bytes_of(const GemmProblem& p, const GemmTileConfig& c) {
  const size_t staging = static_cast<size_t>(c.bm) * static_cast<size_t>(c.bn + 4) * 4;
  if (c.wgmma) return static_cast<int>(std::max(wgmma_ring_bytes(c), staging));
  const int esize = element_bytes(p.math), pad = 16 / esize;
  const int a_stage = p.a_k_rows ? c.bk * (c.bm + 8) : c.bm * (c.bk + pad);
  const int b_stage = p.b_k_rows ? c.bk * (c.bn + 8) : c.bn * (c.bk + pad);
  const size_t ring = static_cast<size_t>(c.stages) * static_cast<size_t>(a_stage + b_stage) * esize;
  return static_cast<int>(std::max(ring, staging));
}

}  // namespace

const perf::GpuSpec& tile_choice_gpu() {
  static const perf::GpuSpec* gpu = perf::find_gpu("h100");
  KILN_CHECK(gpu, "codegen: the performance model has no h100 to choose GEMM tiles for");
  return *gpu;
}

perf::LaunchWork gemm_launch_work(const GemmProblem& p, const GemmTileConfig& c) {
  const int64_t k_tiles_all = ceil_div(p.K, c.bk);
  const SplitK sk = split_k_of(c, k_tiles_all);
  const int64_t tiles = p.batch * ceil_div(p.M, c.bm) * ceil_div(p.N, c.bn);
  const bool split = sk.splits > 1, fold = split && c.fold_split;
  const double elem = element_bytes(p.math);
  const double mn = double(p.batch) * double(p.M) * double(p.N);
  const double operands =
      p.operand_bytes > 0 ? double(p.operand_bytes) : double(p.batch) * double(p.M * p.K + p.K * p.N) * elem;
  const double result = mn * elem, workspace = split ? double(sk.splits) * mn * 4 : 0;
  perf::LaunchWork w;
  w.kind = perf::WorkKind::Gemm;
  w.math = model_math(p.math);
  w.flops = 2.0 * mn * double(p.K);
  // perf/plan_work.cpp's bytes: a split kernel's "// buffers:" (the
  // operands and the workspace), else every buffer (operands and result).
  w.bytes = operands + (split ? workspace : result);
  w.blocks = tiles * sk.splits;
  w.threads = threads_of(c, p.math);
  w.registers = c.wgmma ? expected_registers(c, w.threads, 0) : expected_registers(c, w.threads, element_bytes(p.math));
  w.smem_bytes = shared_bytes_of(p, c);
  w.tile.bm = c.bm;
  w.tile.bn = c.bn;
  w.tile.bk = c.bk;
  w.tile.stages = c.stages;
  w.tile.k_tiles = sk.k_tiles;
  w.tile.split = static_cast<int>(sk.splits);
  w.wgmma = c.wgmma;
  const double depth = double(sk.k_tiles) * c.bk;
  w.block_flops = 2.0 * c.bm * c.bn * depth;
  w.l2_bytes = double(w.blocks) * elem * depth * double(c.bm + c.bn);
  if (fold) {
    // The last block of each tile sums the workspace and stores the result.
    w.tail_blocks = tiles;
    w.tail_bytes = workspace + result;
  }
  if (!split || fold) {
    // A plain result store: 16-byte accesses where the row allows them (a
    // folded tail's only at multiples of its 4-wide partial-sum loads).
    int v = 16 / static_cast<int>(elem);
    if (p.N % v || c.bn % v || (fold && v % 4)) v = 1;
    w.epilogue_width = v;
    w.epilogue_accesses = 1;
    w.epilogue_bytes = static_cast<int>(elem);
  }
  return w;
}

perf::LaunchWork split_k_reduction_work(const GemmProblem& p, const GemmTileConfig& c) {
  perf::LaunchWork w;
  w.blocks = 0;
  const SplitK sk = split_k_of(c, ceil_div(p.K, c.bk));
  if (sk.splits < 2 || c.fold_split) return w;
  // emit_gemm_split_k.cpp's launch: EV elements per access of a plain
  // result store (16 bytes where the row allows), V per thread.
  const int64_t mn = p.batch * p.M * p.N;
  const int e = element_bytes(p.math), ev = p.N % (16 / e) == 0 ? 16 / e : 1;
  const int v = ev > 1 ? ev : p.N % 4 == 0 ? 4 : 1;
  const int64_t items = mn / v;
  w.kind = perf::WorkKind::Other;
  w.math = perf::Math::Fp32;
  w.flops = double(sk.splits) * double(mn);
  w.bytes = double(sk.splits) * double(mn) * 4 + double(mn) * e;
  w.threads = ev > 4 ? split_k_reduction_threads(mn / 4) * 4 / ev : split_k_reduction_threads(items);
  w.blocks = ceil_div(items, w.threads);
  return w;
}

double gemm_tile_cost_us(const GemmProblem& p, const GemmTileConfig& c) {
  const perf::GpuSpec& gpu = tile_choice_gpu();
  const perf::ModelConstants constants;
  double t = perf::estimate_launch(gemm_launch_work(p, c), gpu, constants).est_us;
  const perf::LaunchWork reduction = split_k_reduction_work(p, c);
  if (reduction.blocks > 0)
    t += perf::estimate_launch(reduction, gpu, constants).est_us + constants.graph_node_overhead_us;
  return t;
}

double row_norm_launch_us(const GemmProblem& p, int in_bytes, int out_bytes) {
  // A block per row, as emit_rowwise.cpp launches it; its width only
  // approximated (N / 8 threads, 32 to 256).
  const double mn = double(p.batch) * double(p.M) * double(p.N);
  perf::LaunchWork w;
  w.kind = perf::WorkKind::Other;
  w.math = perf::Math::Fp32;
  w.flops = 8.0 * mn;
  w.bytes = mn * double(in_bytes + out_bytes);
  w.blocks = p.batch * p.M;
  w.threads = static_cast<int>(std::clamp<int64_t>(p.N / 8, 32, 256));
  const perf::ModelConstants constants;
  return perf::estimate_launch(w, tile_choice_gpu(), constants).est_us + constants.graph_node_overhead_us;
}

int gemm_blocks_per_sm(const GemmProblem& p, const GemmTileConfig& c) {
  return std::max(1, perf::occupancy(gemm_launch_work(p, c), tile_choice_gpu()).blocks_per_sm);
}

}  // namespace kiln::codegen
