// The GPUs kiln's performance model knows (perf/perf_model.h): the figures a
// roofline and an occupancy calculation need, from NVIDIA's data sheets and
// architecture whitepapers (each GPU's sources are named in
// docs/performance.md, "GPU tables"). Peaks are dense (no 2:4 sparsity), at
// the boost clock, for the SXM/board variant named in `title`.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kiln::perf {

struct GpuSpec {
  std::string name;   // the --gpu value: "h100"
  std::string title;  // "NVIDIA H100 SXM5 80GB"
  std::string arch;   // the CUBIN arch it runs: "sm_90"
  int sms = 0;
  // Dense tensor-core peaks (TFLOPS) and the non-tensor FP32 FMA peak.
  double fp16_tensor_tflops = 0, bf16_tensor_tflops = 0, tf32_tensor_tflops = 0, fp32_tflops = 0;
  double dram_gb_per_s = 0;  // DRAM (HBM/GDDR) bandwidth, 1 GB = 1e9 bytes
  double l2_bytes = 0;
  // L2 to SM read bandwidth, GB/s (the attention kernels' L2 term,
  // perf/perf_model.h); 0: not known, no L2 term. Not in NVIDIA's data
  // sheets: an assumption per GPU (docs/performance.md, "GPU tables").
  double l2_gb_per_s = 0;
  // Per SM: the occupancy calculator's limits.
  int regs_per_sm = 65536;  // 32-bit registers (4 sub-partitions of 16K)
  int smem_per_sm = 0;      // shared memory bytes an SM can give to blocks
  int smem_per_block = 0;   // most shared memory bytes one block may use (opt-in)
  int max_warps_per_sm = 64;
  int max_blocks_per_sm = 32;
  // The fraction of the dense tensor peak kiln's mma.sync kernels can reach:
  // Hopper's peak needs wgmma (asynchronous warpgroup MMA); mma.sync issues
  // at a lower rate there. An assumption (docs/performance.md), to be
  // calibrated against measurements.
  double mma_sync_fraction = 1.0;
  // The fraction wgmma kernels (sm_90a) reach; 0: the GPU has no wgmma.
  // Also an assumption (docs/performance.md, "wgmma").
  double wgmma_fraction = 0;
  // Boost clock (GHz): the epilogue term counts load/store issue and L1
  // transfer cycles (perf/perf_model.h).
  double boost_clock_ghz = 1.0;
};

// Every GPU in the table, in a fixed order.
const std::vector<GpuSpec>& gpu_specs();
// The GPU named `name` ("h100"), or nullptr.
const GpuSpec* find_gpu(std::string_view name);
// The table's names joined by `sep` ("h100|h200|a100|l4"), for messages.
std::string gpu_names(std::string_view sep);
// The GPU a plan compiled for `arch` is modelled on when no --gpu is given:
// sm_90 (and sm_90a) -> h100, sm_80 -> a100, sm_89 -> l4; nullptr for other archs.
const GpuSpec* default_gpu_for_arch(std::string_view arch);

}  // namespace kiln::perf
