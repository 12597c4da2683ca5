// The tensor-core test kernels (mma_kernels.cuh) built for the simulator:
// the shim, then codegen/core/mma.cuh (its KILN_SIM branch), then the kernels.
#include "backends/sim/cuda_sim.h"
#include "codegen/core/mma.cuh"
#include "mma_kernels.cuh"
