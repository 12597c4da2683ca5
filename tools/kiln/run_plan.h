// `kiln run MODEL.plan`: loads a plan through the runtime's C API (the C++
// wrapper kiln/kiln.hpp over libkiln_runtime.so), binds inputs (from .npy
// files or seeded random values), runs, prints each output's type and
// checksum and writes them as .npy when asked. --backend sim runs the plan's
// own kernels and launch list on the CPU simulator instead (tools/kiln/plan_sim.h).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor.h"

namespace kiln {

struct RunPlanOptions {
  std::string backend = "auto";  // auto | gpu | ref | sim
  std::string inputs;            // name:file.npy,...
  std::string outputs_dir;       // write <output name>.npy here
  int iterations = 1;
};

// Inputs from --inputs files (name:file.npy,...; checked against the declared
// types), the others seeded random (seed = position + 1).
std::map<std::string, Tensor> make_run_inputs(const std::vector<std::pair<std::string, TensorType>>& decl,
                                              const std::string& flag);
// Prints each output's type and checksum; writes DIR/<name>.npy when dir is set.
void report_outputs(const std::vector<std::pair<std::string, Tensor>>& outs, const std::string& dir);

int run_plan_command(const std::string& path, const RunPlanOptions& o);

}  // namespace kiln
