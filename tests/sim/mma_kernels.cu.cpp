// The tensor-core test kernels (mma_kernels.cuh) built for the simulator:
// the shim, then codegen/mma.cuh (its KILN_SIM branch), then the kernels.
#include "codegen/sim/cuda_sim.h"
#include "codegen/mma.cuh"
#include "mma_kernels.cuh"
