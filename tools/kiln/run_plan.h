// `kiln run MODEL.plan`: loads a plan through the runtime's C API (the C++
// wrapper kiln/kiln.hpp over libkiln_runtime.so), binds inputs (from .npy
// files or seeded random values, tools/kiln/run_inputs.h), runs, reports each
// output (tools/kiln/output_report.h) and writes them as .npy when asked. --backend sim runs the plan's
// own kernels and launch list on the CPU simulator instead (backends/plan_sim.h).
#pragma once
#include <string>
#include <vector>

namespace kiln {

struct RunPlanOptions {
  std::string backend = "auto";           // auto | gpu | ref | sim
  std::string inputs;                     // name:file.npy,... (or .pb)
  std::vector<std::string> input_ranges;  // --input-range
  std::string outputs_dir;                // write <output name>.npy here
  int iterations = 1;
};

int run_plan_command(const std::string& path, const RunPlanOptions& o);

}  // namespace kiln
