// Kernel signatures with any list of buffer parameters, for emitters whose
// kernels take more than (out, in0, ...): the parameter list, the simulator
// entry NAME_sim that binds buffers[i] to parameter i (backends/sim/sim_module.h),
// and the finished translation unit (prelude + body with the hashed name).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace kiln::codegen {

struct KernelParam {
  DType dtype;    // element type (storage type in the kernel)
  bool writable;  // a result (T*) or an operand (const T*)
  std::string name;
};

// "KILN_PTR(T) a, KILN_PTR(const T) b, ...".
std::string kernel_param_list(const std::vector<KernelParam>& params);

// The header of a grid-stride loop over `count` items in `var` (a long long):
// "  for (long long var = (long long)blockIdx.x * blockDim.x + threadIdx.x;
// var < countLL; var += (long long)gridDim.x * blockDim.x) {\n"; the caller
// writes the body and the closing brace.
std::string grid_stride_loop(const std::string& var, int64_t count);

// The #ifdef KILN_SIM entry `@NAME@_sim` launching `@NAME@` with buffers[i]
// (counts[i] elements) as parameter i; with `by_value_syms`, then a
// shape-generic kernel's kiln_syms read from buffers[params.size()].
std::string kernel_sim_entry(const std::vector<KernelParam>& params, bool by_value_syms = false);

// Sets `name` to <prefix>_<label>_<hash of body> and returns the complete
// source: the guarded prelude (with cuda_fp16.h / cuda_bf16.h outside the
// simulator when `dtypes` holds f16 / bf16) followed by `body` with every
// @NAME@ replaced by the name.
std::string finish_kernel_source(const std::string& prefix, const std::string& label, const std::string& body,
                                 const std::vector<DType>& dtypes, std::string& name);

}  // namespace kiln::codegen
