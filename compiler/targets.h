// The build targets and precisions kiln compiles for, checked the same way
// whichever front end asks (the CLI's --target/--precision, Python's
// kiln.compile, the builder API): a target kiln has no kernels for (sm_75)
// is an error, not a plan that fails later on the GPU.
#pragma once
#include <string>
#include <vector>

namespace kiln {

// "cpu", then the GPU archs codegen supports ("sm_80", ...).
const std::vector<std::string>& supported_targets();
// "fp32", "tf32", "fp16", "bf16".
const std::vector<std::string>& supported_precisions();

// Throws kiln::Error naming the value and the accepted ones.
void check_target(const std::string& target);
void check_precision(const std::string& precision);

}  // namespace kiln
