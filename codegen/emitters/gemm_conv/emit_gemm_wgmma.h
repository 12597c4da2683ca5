// The sm_90a tensor-core GEMM emitter: the contract of emit_gemm_tc
// (codegen/emitters/gemm_conv/emit_gemm_tc.h: GemmTcSpec in, GemmTcKernel out, the same
// kernel parameters, epilogue hook and simulator entry) computed with
// Hopper's warpgroup MMA (codegen/core/wgmma.cuh) instead of mma.sync. The
// kernel must be compiled for sm_90a (NVRTC -arch=sm_90a); it runs on sm_90
// devices only.
//
// The kernel (docs/codegen.md, "wgmma GEMM (sm_90a)"): a block of BM / 64
// warpgroups (BM = 64 or 128) computes a BM x BN tile (BN = 64, 128 or 256)
// of one batch; warpgroup w owns rows 64 w .. 64 w + 63 and keeps its 64 x BN
// accumulator in registers (BN / 2 floats per thread, the m64nNk16 D
// layout). K advances BK = 64 at a time through a `stages`-deep cp.async
// ring in dynamic shared memory; each stage holds A as [BM][64] and B as
// [BN][64], K-major with the 128-byte swizzle (row r's 16-byte chunk c at
// chunk c ^ (r % 8); stages start at 1024-byte boundaries of the shared
// window), so one k-tile is four m64nBNk16 wgmmas whose descriptors advance
// 32 bytes each (LBO unused, SBO = 1024: eight 128-byte rows per atom).
// Operands whose rows are multiples of 8 elements are copied with
// cp.async.cg 16-byte chunks (zero-filled past M, N, K); others, and B
// stored [K, N] (which must be transposed into the K-major stage), element
// by element. Per k-tile: wait for the tile's copies, fence.proxy.async
// (the copies are generic-proxy writes, wgmma reads through the async proxy),
// one barrier, issue the next tile's copies, wgmma.fence, the four wgmmas,
// commit, wait_group 0 (the stage is free again before the next barrier).
//
// Opt-in: plans use it only under --sm90-wgmma (docs/cli.md) until
// bench/gpu_run_all.sh has validated it on an H100: descriptor or layout
// mistakes give silently wrong results on hardware, and the simulator checks
// the kernel against kiln's reading of the PTX ISA, not against a GPU.
#pragma once
#include <string_view>

#include "codegen/emitters/gemm_conv/emit_gemm_tc.h"

namespace kiln::codegen {

// Throws kiln::Error / Unsupported as emit_gemm_tc does; the tile override
// (spec.bm / bn / stages) takes bm 64 or 128, bn 64, 128 or 256, 2 to 6 stages.
GemmTcKernel emit_gemm_wgmma(const GemmTcSpec& spec);

// codegen/core/wgmma.cuh (guarded; under KILN_SIM it includes backends/sim/warpgroup_mma.h).
std::string_view wgmma_prelude();

// The NVRTC target wgmma kernels need.
inline constexpr std::string_view kWgmmaArch = "sm_90a";

}  // namespace kiln::codegen
