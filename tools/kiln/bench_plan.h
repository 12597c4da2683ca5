// `kiln bench MODEL.plan`: the trtexec-style summary for a compiled plan, run
// through the runtime's C API (kiln/kiln.hpp over libkiln_runtime.so) on the
// backend it can use: the GPU (auto, when the plan has kernels and a usable
// GPU is present) or the runtime's CPU reference path (ref); `sim` runs the
// plan's own kernels and launch list on the CPU simulator (backends/plan_sim.h).
// On the GPU each run's CUDA-event times (kiln_context_last_timing) give the
// GPU compute time. --profile: per node on ref (the engine's CPU path is the
// reference executor over the plan's graph; the profile comes from extra runs
// of that executor with a per-node timer, since the C API has no profiling
// hook), per launch-list step on sim; on the GPU the launch list runs as one
// CUDA Graph and the runtime gives no per-kernel times, which bench says.
#pragma once

namespace kiln {

struct BenchOptions;

int run_bench_plan(const BenchOptions& o);

}  // namespace kiln
