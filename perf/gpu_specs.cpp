#include "perf/gpu_specs.h"

#include <fmt/format.h>

namespace kiln::perf {

namespace {

constexpr double kMB = 1e6;

std::vector<GpuSpec> make_table() {
  std::vector<GpuSpec> t;
  // H100 SXM5: NVIDIA H100 Tensor Core GPU data sheet (SXM column; the
  // sheet's tensor figures are with sparsity, dense is half) and the NVIDIA
  // H100 Tensor Core GPU Architecture whitepaper (132 SMs on SXM5, 50 MB L2,
  // 256 KB L1/shared per SM of which 228 KB shared, 227 KB per block).
  GpuSpec h100;
  h100.name = "h100";
  h100.title = "NVIDIA H100 SXM5 80GB";
  h100.arch = "sm_90";
  h100.sms = 132;
  h100.fp16_tensor_tflops = 989.4;
  h100.bf16_tensor_tflops = 989.4;
  h100.tf32_tensor_tflops = 494.7;
  h100.fp32_tflops = 66.9;
  h100.dram_gb_per_s = 3350;
  h100.l2_bytes = 50 * kMB;
  h100.smem_per_sm = 228 * 1024;
  h100.smem_per_block = 227 * 1024;
  h100.max_warps_per_sm = 64;
  h100.max_blocks_per_sm = 32;
  // kiln's mma.sync GEMM reached 219 of the 989 TFLOP/s (4096^3 fp16 micro
  // benchmark, the 2026-11-27 H100 run; docs/perf_calibration.md).
  h100.mma_sync_fraction = 0.22;
  h100.wgmma_fraction = 0.8;
  h100.boost_clock_ghz = 1.98;
  // L2 to SM rate kiln's tiled kernels got: fitted to the per-kernel times of
  // the 2026-11-27 H100 run (docs/perf_calibration.md); NVIDIA publishes no
  // figure (the A100's 5120 bytes per clock at 1.98 GHz would be 10138).
  h100.l2_gb_per_s = 4000;
  t.push_back(h100);

  // H200 SXM: NVIDIA H200 Tensor Core GPU data sheet (the same GH100 SMs and
  // peaks as the H100 SXM5, HBM3e at 4.8 TB/s).
  GpuSpec h200 = h100;
  h200.name = "h200";
  h200.title = "NVIDIA H200 SXM 141GB";
  h200.dram_gb_per_s = 4800;
  t.push_back(h200);

  // A100 SXM4 80GB: NVIDIA A100 Tensor Core GPU data sheet and the NVIDIA
  // A100 Tensor Core GPU Architecture whitepaper (108 SMs, 40 MB L2, 164 KB
  // shared per SM, 163 KB per block). mma.sync is Ampere's full-rate MMA.
  GpuSpec a100;
  a100.name = "a100";
  a100.title = "NVIDIA A100 SXM4 80GB";
  a100.arch = "sm_80";
  a100.sms = 108;
  a100.fp16_tensor_tflops = 312;
  a100.bf16_tensor_tflops = 312;
  a100.tf32_tensor_tflops = 156;
  a100.fp32_tflops = 19.5;
  a100.dram_gb_per_s = 2039;
  a100.l2_bytes = 40 * kMB;
  a100.smem_per_sm = 164 * 1024;
  a100.smem_per_block = 163 * 1024;
  a100.max_warps_per_sm = 64;
  a100.max_blocks_per_sm = 32;
  a100.mma_sync_fraction = 1.0;
  a100.boost_clock_ghz = 1.41;
  a100.l2_gb_per_s = 5120 * 1.41;  // the A100 whitepaper's L2 read bandwidth: 5120 bytes per clock
  t.push_back(a100);

  // L4: NVIDIA L4 Tensor Core GPU data sheet (tensor figures with sparsity,
  // dense is half) and the NVIDIA Ada GPU Architecture whitepaper (58 SMs on
  // AD104 as in L4, 48 MB L2, compute capability 8.9: 100 KB shared per SM,
  // 99 KB per block, 48 warps and 24 blocks per SM).
  GpuSpec l4;
  l4.name = "l4";
  l4.title = "NVIDIA L4 24GB";
  l4.arch = "sm_89";
  l4.sms = 58;
  l4.fp16_tensor_tflops = 121;
  l4.bf16_tensor_tflops = 121;
  l4.tf32_tensor_tflops = 60;
  l4.fp32_tflops = 30.3;
  l4.dram_gb_per_s = 300;
  l4.l2_bytes = 48 * kMB;
  l4.smem_per_sm = 100 * 1024;
  l4.smem_per_block = 99 * 1024;
  l4.max_warps_per_sm = 48;
  l4.max_blocks_per_sm = 24;
  l4.mma_sync_fraction = 1.0;
  l4.boost_clock_ghz = 2.04;
  t.push_back(l4);
  return t;
}

}  // namespace

const std::vector<GpuSpec>& gpu_specs() {
  static const std::vector<GpuSpec> table = make_table();
  return table;
}

const GpuSpec* find_gpu(std::string_view name) {
  for (const GpuSpec& g : gpu_specs())
    if (g.name == name) return &g;
  return nullptr;
}

std::string gpu_names(std::string_view sep) {
  std::string s;
  for (const GpuSpec& g : gpu_specs()) s += (s.empty() ? "" : std::string(sep)) + g.name;
  return s;
}

const GpuSpec* default_gpu_for_arch(std::string_view arch) {
  if (arch == "sm_90a") arch = "sm_90";  // Hopper's arch-specific target (wgmma) runs on sm_90 GPUs
  for (const GpuSpec& g : gpu_specs())
    if (g.arch == arch) return &g;  // the first of an arch: h100 before h200
  return nullptr;
}

}  // namespace kiln::perf
