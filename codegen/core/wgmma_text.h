// The text of codegen/core/wgmma.cuh as kernels embed it. The file holds
// everything but its six wgmma.mma_async wrappers (m64n{64,128,256}k16 for f16
// and bf16), which differ only in N: their 32, 64 or 128 accumulator
// operands are written here from one template, in place of the file's
// @WGMMA_MMA_ASYNC_WRAPPERS@ lines, byte for byte as the file once held them
// (so sm_90a plans keep their bytes).
#pragma once
#include <string>
#include <string_view>

namespace kiln::codegen {

// kiln_wgmma_m64n<n>k16_<f16|bf16>(float (&d)[n / 2], desc_a, desc_b, scale_d):
// D(64 x n) = A(64 x 16) B(16 x n) + (scale_d ? D : 0), one inline-asm
// wgmma.mma_async (PTX ISA 9.7.15.5); n is 64, 128 or 256.
std::string wgmma_mma_async_wrapper(int n, bool bf16);

// wgmma.cuh with the wrappers written in (built once).
std::string_view wgmma_cuh_text();

}  // namespace kiln::codegen
