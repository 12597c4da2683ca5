// `kiln inspect PLAN --perf [--gpu h100|h200|a100|l4]`: kiln's performance
// model (perf/, docs/performance.md) over a plan: per launch its estimated
// time on the GPU, its bound, % of speed of light and waves; the plan's
// total at its batch. An estimate from the plan alone, not a measurement.
#pragma once
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

#include "ir/graph.h"
#include "runtime/plan_format.h"

namespace kiln {

// Prints the report to `out` and returns the JSON object inspect stores
// under "perf". `gpu` empty: the GPU of the plan's arch (sm_90: h100).
// Throws kiln::Error (naming `path`) for an unknown GPU, a plan without GPU
// kernels, or a plan the GPU cannot run.
// A plan with shape-generic launches is modelled at `shapes` (--shapes
// name:4x64,..., inside its profiles), else at its first profile's opt shape.
nlohmann::json report_plan_perf(const plan::Plan& p, const Graph& g, const std::string& path, const std::string& gpu,
                                std::ostream& out, const std::string& shapes = "");

}  // namespace kiln
