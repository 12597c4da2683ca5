// The kernels of wgmma_kernels.cuh, as the host side sees them.
#pragma once
#include "backends/sim/sim_runtime.h"

namespace ks = kiln::sim;
#define KILN_TEST_WGMMA_KERNEL(name)                                                                  \
  void name(ks::Ptr<const unsigned short> A, ks::Ptr<const unsigned short> B, ks::Ptr<const float> C, \
            ks::Ptr<float> D, int bf16, int swizzle, int wrong, int skip_fence);
KILN_TEST_WGMMA_KERNEL(wgmma_n64)
KILN_TEST_WGMMA_KERNEL(wgmma_n128)
KILN_TEST_WGMMA_KERNEL(wgmma_n256)
#undef KILN_TEST_WGMMA_KERNEL
