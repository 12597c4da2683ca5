// Host tensors for a runtime engine's outputs (the C API through
// kiln/kiln.hpp), shared by everything that runs a plan and reads its
// outputs back: `kiln run`/`bench` (tools/kiln/run_plan.cpp), the
// conformance runner's GPU backend (gpu_run.cpp) and its one-plan path
// (one_plan.cpp). Header-only: each caller already links kiln_runtime.
#pragma once
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor.h"
#include "kiln/kiln.hpp"

namespace kiln {

// A host tensor bound to each output of the engine, named, in the engine's
// order: at its declared shape, or, in a plan with profiles, at the shape the
// inputs bound so far give it. A size decided by the data is bound at its bound.
inline std::vector<std::pair<std::string, Tensor>> bind_host_outputs(const Engine& engine, Context& ctx) {
  std::vector<std::pair<std::string, Tensor>> outs;
  for (const TensorInfo& t : engine.outputs()) {
    std::vector<int64_t> shape = t.dynamic() ? ctx.output_shape(t.name) : t.shape;
    outs.emplace_back(t.name, Tensor(DType(t.dtype), shape));
    ctx.bind_output(t.name, outs.back().second.raw(), t.dtype, shape);
  }
  return outs;
}

// After a run: the output cut to the shape the run gave it. A size decided by
// the data was bound at its bound, and the run wrote the real shape's
// elements at the front of the buffer.
inline void trim_to_run_shape(Context& ctx, const std::string& name, Tensor& t) {
  std::vector<int64_t> real = ctx.output_shape(name);
  if (real == t.shape()) return;
  Tensor trimmed(t.dtype(), real);
  if (trimmed.nbytes()) std::memcpy(trimmed.raw(), t.raw(), trimmed.nbytes());
  t = std::move(trimmed);
}

}  // namespace kiln
