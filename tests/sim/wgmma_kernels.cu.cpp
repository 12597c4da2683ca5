// The wgmma test kernels (wgmma_kernels.cuh) built for the simulator: the
// shim, then codegen/core/wgmma.cuh (its KILN_SIM branch), then the kernels.
#include "backends/sim/cuda_sim.h"
#include "codegen/core/wgmma.cuh"
#include "wgmma_kernels.cuh"
