// `kiln doctor [PLAN]`: what this machine offers kiln's GPU path (the CUDA
// driver and its version, each GPU, NVRTC) and, given a plan, whether the
// runtime would run it on a GPU here or fall back to the CPU, and why
// (issue 14: no silent CPU). Also the one-line warning `kiln run` / `kiln
// bench` print when the auto backend ended up on the CPU although a GPU is
// present.
#pragma once
#include <string>

namespace CLI {
class App;
}

namespace kiln {

namespace plan {
struct Meta;
}

struct DoctorOptions {
  std::string plan;       // optional: the plan to check against this machine
  std::string json_path;  // --json: the same report as JSON
};

CLI::App* register_doctor(CLI::App& app, DoctorOptions& o);
// Prints the report to stdout. 0: everything asked about is usable (without a
// plan, always: a report); 1: the plan cannot run on a GPU here (the reason
// on stderr).
int run_doctor(const DoctorOptions& o);

// For an engine loaded with the auto backend that runs on the CPU
// (`engine_info` is kiln_engine_info's "CPU reference path (REASON)"): the
// warning line to print on stderr when a CUDA driver with a device is
// present (the GPU was usable but not used), else "" (no GPU is the expected
// CPU case; *no_gpu then gets why, e.g. "no CUDA driver", for the engine line).
// "CUBINs CUDA driver 13.0+, PTX CUDA driver 13.0+": the oldest driver a
// plan's code loads on (kiln doctor PLAN, kiln inspect PLAN).
std::string plan_driver_needs(const plan::Meta& m);

std::string auto_cpu_warning(const std::string& engine_info, std::string* no_gpu);

}  // namespace kiln
