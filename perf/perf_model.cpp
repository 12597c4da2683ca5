#include "perf/perf_model.h"

#include <algorithm>
#include <cmath>

#include "ir/error.h"

namespace kiln::perf {

namespace {

constexpr int kWarpSize = 32;
constexpr int kSubPartitions = 4;            // SM sub-partitions, each with its own register file and tensor core
constexpr int kRegAllocUnit = 256;           // registers are allocated per warp in units of 256
constexpr int kSmemReservedPerBlock = 1024;  // sm_80+: the system's shared memory per block

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

const char* math_name(Math m) {
  switch (m) {
    case Math::F16Tensor:
      return "fp16-tc";
    case Math::BF16Tensor:
      return "bf16-tc";
    case Math::TF32Tensor:
      return "tf32-tc";
    case Math::Fp32:
      return "fp32";
  }
  return "?";
}

const char* work_kind_name(WorkKind k) {
  switch (k) {
    case WorkKind::Conv:
      return "conv";
    case WorkKind::Gemm:
      return "gemm";
    case WorkKind::Attention:
      return "attention";
    case WorkKind::Other:
      return "other";
    case WorkKind::Copy:
      return "copy";
  }
  return "?";
}

bool is_heavy(WorkKind k) { return k == WorkKind::Conv || k == WorkKind::Gemm || k == WorkKind::Attention; }

double math_peak_tflops(Math m, const GpuSpec& g) {
  switch (m) {
    case Math::F16Tensor:
      return g.fp16_tensor_tflops;
    case Math::BF16Tensor:
      return g.bf16_tensor_tflops;
    case Math::TF32Tensor:
      return g.tf32_tensor_tflops;
    case Math::Fp32:
      return g.fp32_tflops;
  }
  return g.fp32_tflops;
}

Occupancy occupancy(const LaunchWork& w, const GpuSpec& g) {
  Occupancy o;
  const int warps = static_cast<int>(ceil_div(std::max(w.threads, 1), kWarpSize));
  if (warps > g.max_warps_per_sm)
    fail("a block of {} threads is more than an SM of the {} holds ({} warps)", w.threads, g.name, g.max_warps_per_sm);
  const int smem = w.smem_bytes + kSmemReservedPerBlock;
  if (w.smem_bytes > g.smem_per_block)
    fail("a block needs {} bytes of shared memory; the {} allows {} per block", w.smem_bytes, g.name, g.smem_per_block);
  o.blocks_per_sm = g.max_blocks_per_sm;
  o.limiter = "blocks";
  auto limit = [&](int n, const char* why) {
    if (n < o.blocks_per_sm) {
      o.blocks_per_sm = n;
      o.limiter = why;
    }
  };
  limit(g.max_warps_per_sm / warps, "threads");
  if (w.registers > 0) {
    // Each warp takes ceil(regs x 32 / 256) x 256 registers from the file of
    // its sub-partition (regs_per_sm / 4); a block's warps spread over the 4.
    const int per_warp = static_cast<int>(ceil_div(int64_t(w.registers) * kWarpSize, kRegAllocUnit)) * kRegAllocUnit;
    const int warps_by_regs = (g.regs_per_sm / kSubPartitions / per_warp) * kSubPartitions;
    if (warps_by_regs < warps)
      fail("a block of {} threads x {} registers does not fit the {}'s register file", w.threads, w.registers, g.name);
    limit(warps_by_regs / warps, "registers");
  }
  limit(g.smem_per_sm / smem, "shared memory");
  o.warp_occupancy = double(o.blocks_per_sm * warps) / g.max_warps_per_sm;
  return o;
}

LaunchEstimate estimate_launch(const LaunchWork& w, const GpuSpec& g, const ModelConstants& c) {
  LaunchEstimate e;
  const double bandwidth = g.dram_gb_per_s * 1e9;  // bytes/s
  const double us = 1e6;
  e.sol_us = std::max(w.flops / (math_peak_tflops(w.math, g) * 1e12), (w.bytes + w.tail_bytes) / bandwidth) * us;
  if (w.kind == WorkKind::Copy) {
    // A graph memcpy node: the copy engines stream at the DRAM's rate.
    e.memory_us = w.bytes / (bandwidth * c.dram_efficiency) * us;
    e.latency_us = c.load_latency_us;
  } else {
    e.occ = occupancy(w, g);
    const int64_t blocks = std::max<int64_t>(w.blocks, 1);
    const int64_t per_wave = int64_t(g.sms) * e.occ.blocks_per_sm;
    e.waves = double(blocks) / double(per_wave);
    e.waves_run = ceil_div(blocks, per_wave);
    // The share of SMs that get any block: an SM without one contributes
    // neither arithmetic nor memory requests.
    const double sm_fill = double(std::min<int64_t>(blocks, g.sms)) / g.sms;
    const double sm_peak = math_peak_tflops(w.math, g) * 1e12 / g.sms;  // FLOP/s per SM
    const int warps = static_cast<int>(ceil_div(std::max(w.threads, 1), kWarpSize));
    if (w.tile.k_tiles > 0) {
      // The busiest SM works through ceil(blocks / SMs) blocks; the tensor
      // cores of its 4 sub-partitions are all busy only with >= 4 warps.
      const int64_t busiest = ceil_div(blocks, g.sms);
      const int resident_warps = static_cast<int>(std::min<int64_t>(busiest, e.occ.blocks_per_sm)) * warps;
      double rate = sm_peak * std::min(1.0, double(resident_warps) / kSubPartitions);
      if (w.math != Math::Fp32) rate *= w.wgmma && g.wgmma_fraction > 0 ? g.wgmma_fraction : g.mma_sync_fraction;
      const double block_flops = w.block_flops > 0 ? w.block_flops : w.flops / double(blocks);
      e.compute_us = double(busiest) * block_flops / rate * us;
      // Each k-tile waits for its operands: a pipeline of `stages` buffers
      // keeps stages - 1 loads in flight, hiding that much of the latency.
      const double per_tile = c.load_latency_us / std::max(1, w.tile.stages - 1);
      e.latency_us = double(e.waves_run) * (double(w.tile.k_tiles) * per_tile + 2 * c.load_latency_us);
    } else {
      e.compute_us = w.flops / (math_peak_tflops(w.math, g) * 1e12 * sm_fill) * us;
      e.latency_us = 2 * c.l2_latency_us;  // load, then the dependent store
    }
    e.memory_us = w.bytes / (bandwidth * c.dram_efficiency * sm_fill) * us;
    if (w.l2_bytes > 0 && g.l2_gb_per_s > 0) e.l2_us = w.l2_bytes / (g.l2_gb_per_s * 1e9 * sm_fill) * us;
  }
  if (w.tail_blocks > 0 && w.kind != WorkKind::Copy) {
    // One block per tile sums it: its warps read the partial sums an
    // iteration at a time (a latency-bound stream, not the DRAM's rate). The
    // tiles' last blocks run side by side where they are resident together:
    // one after another only past a wave of them.
    const double per_tile = w.tail_bytes / double(w.tail_blocks);
    const int warps = static_cast<int>(ceil_div(std::max(w.threads, 1), kWarpSize));
    const int64_t tail_waves = ceil_div(w.tail_blocks, int64_t(g.sms) * std::max(e.occ.blocks_per_sm, 1));
    e.tail_us = 2 * c.l2_latency_us + double(tail_waves) * per_tile / (warps * c.tail_warp_bytes_per_us);
  }
  if (w.epilogue_width > 0 && w.tile.k_tiles > 0 && w.kind != WorkKind::Copy) {
    // Each block's epilogue runs after its k-loop: warp accesses of 32 x
    // width elements, or the tile's bytes through L1, whichever is slower.
    const double elems = double(w.tile.bm) * double(w.tile.bn);
    const double accesses = elems / (32.0 * w.epilogue_width) * w.epilogue_accesses;
    const double cycles =
        std::max(accesses / c.lsu_warp_accesses_per_clock, elems * w.epilogue_bytes / c.l1_bytes_per_clock);
    // Charged once, for the blocks one SM holds at a time: an earlier wave's
    // epilogues overlap the next wave's k-loops, the last wave's do not.
    const int64_t stores = w.tail_blocks > 0 ? w.tail_blocks : std::max<int64_t>(w.blocks, 1);
    const int64_t per_sm = std::min<int64_t>(ceil_div(stores, g.sms), std::max(e.occ.blocks_per_sm, 1));
    e.epilogue_us = double(per_sm) * cycles / (g.boost_clock_ghz * 1e3);
  }
  const double body = std::max({e.compute_us, e.memory_us, e.l2_us, e.latency_us});
  e.est_us = body + e.tail_us + e.epilogue_us;
  if (e.est_us <= c.graph_node_overhead_us) e.bound = "launch";
  else if (body == e.compute_us) e.bound = "compute";
  else if (body == e.memory_us) e.bound = "memory";
  else if (body == e.l2_us) e.bound = "l2";
  else e.bound = "latency";
  e.sol_pct = e.est_us > 0 ? 100.0 * e.sol_us / e.est_us : 0;
  return e;
}

}  // namespace kiln::perf
