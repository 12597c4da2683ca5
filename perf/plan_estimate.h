// The performance model over a whole plan: every step's estimate
// (perf/perf_model.h over perf/plan_work.h) and the plan's total at the
// batch it was compiled for -- the kernels' sum plus one graph-node overhead
// per step, as the runtime replays the launch list as one CUDA Graph.
#pragma once
#include <vector>

#include "perf/plan_work.h"

namespace kiln::perf {

struct StepEstimate {
  StepWork work;
  LaunchEstimate est;
};

struct PlanEstimate {
  GpuSpec gpu;
  ModelConstants constants;
  int64_t batch = 1;
  std::vector<StepEstimate> steps;
  double kernel_us = 0;    // sum of the steps' estimates
  double overhead_us = 0;  // steps x graph_node_overhead_us
  double total_us = 0;     // kernel_us + overhead_us
  double sol_us = 0;       // sum of the steps' speed-of-light times
  // Conv/GEMM/attention launches: all, those whose grid fills at least one
  // wave (blocks >= SMs x blocks per SM), those with at least one block per SM.
  int heavy = 0, heavy_full_wave = 0, heavy_every_sm = 0;
};

// Throws kiln::Error naming the step, kernel and node when a launch cannot
// run on `gpu` (a block larger than an SM allows).
PlanEstimate estimate_plan(const plan::Plan& p, const Graph& g, const GpuSpec& gpu, const ModelConstants& c = {});

}  // namespace kiln::perf
