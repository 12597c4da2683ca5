// The shell of a one-launch kernel with a grid-stride loop over `numel`
// work items, shared by the scatter, resize and sampling emitters
// (emit_scatter.h, emit_resize.h, emit_sample.h): given the parameter list
// and the kernel body, it adds the headers the element types need
// (cuda_fp16.h / cuda_bf16.h for NVRTC), the common prelude, the simulator
// entry NAME_sim and a deterministic name from the source's hash.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/launch_fit.h"
#include "ir/dtype.h"

namespace kiln::codegen {

struct OneLaunchKernel {
  std::string name;                     // kiln_<kind>_<op>_<16 hex digits of the source's hash>
  std::string source;                   // complete translation unit
  int64_t numel = 0;                    // work items (usually result elements)
  unsigned block = block_threads(256);  // the one decision (codegen/launch_fit.h)
  unsigned grid = 0;                    // 0: nothing to launch
};

struct LaunchParam {
  std::string type;  // element type, e.g. "float", "const long long"
  std::string name;  // e.g. "out", "in0"
};

// `body` is the statement list run for each work item `i` (a long long in
// [0, numel)); it may use the parameters by name. `helpers` is device code
// placed before the kernel (e.g. __device__ functions). `dtypes` lists the
// dtypes the code touches (for the half/bfloat16 headers).
// Launch: block 256, grid = ceil(numel / 256) capped at 8192 (the loop
// strides over the rest).
OneLaunchKernel make_simple_kernel(const std::string& kind, const std::string& op,
                                   const std::vector<LaunchParam>& params, const std::string& helpers,
                                   const std::string& body, int64_t numel, const std::vector<DType>& dtypes);

}  // namespace kiln::codegen
