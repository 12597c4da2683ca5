// Context::bind_in_place (runtime/engine.h): a KV cache's past input and
// present output bound as one buffer (runtime/in_place_cache.h), host memory
// on the CPU path, device memory the kernels append to in place on a GPU
// engine (runtime/plan_in_place.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <climits>

#include "ir/error.h"
#include "runtime/engine.h"
#include "runtime/gpu_executor.h"
#include "runtime/plan_in_place.h"

namespace kiln::rt {

void Context::bind_in_place(const std::string& input, const std::string& output, void* data, const TensorType& capacity,
                            bool device) {
  const auto& pairs = engine_->in_place_pairs();
  const InPlacePair& p = in_place_pair(pairs, engine_->graph(), input, output);
  if (gpu_) {
    // The GPU kernels run on the buffer itself: the plan must carry the
    // pair's append (runtime/plan_in_place.h), and the buffer is device
    // memory the graphs read and write in place (zero-copy).
    if (!gpu_append(p)) {
      std::string why = plan::why_not_in_place_on_gpu(*p.concat, "");
      fail(
          "input \"{}\" and output \"{}\": the plan's GPU kernels cannot run on one buffer bound in place: {}; "
          "bind them on their own (the engine runs on {})",
          input, output,
          why.empty() ? "the plan records no in-place append for them (compile it with shape profiles for a GPU "
                        "target)"
                      : why,
          engine_->info());
    }
    if (!device)
      fail(
          "input \"{}\" and output \"{}\": host memory bound in place but the engine runs on the GPU ({}): bind "
          "device memory (KILN_MEMORY_DEVICE), which the kernels read and append to in place",
          input, output, engine_->info());
  } else if (device) {
    fail("input \"{}\" and output \"{}\": device memory bound but the engine runs on the CPU", input, output);
  }
  const TensorDesc& d = engine_->inputs()[p.input];
  if (capacity.dtype != d.type.dtype)
    fail("input \"{}\" is {} but the buffer bound in place with output \"{}\" is {}", input, dtype_name(d.type.dtype),
         output, dtype_name(capacity.dtype));
  if (capacity.shape.size() != d.type.shape.size())
    fail("input \"{}\" is [{}] but the buffer bound in place with output \"{}\" is [{}] (rank {})", input,
         dims_str(d.type.shape), output, fmt::join(capacity.shape, ","), capacity.shape.size());
  for (size_t k = 0; k < capacity.shape.size(); ++k)
    if (static_cast<int>(k) != p.axis && !is_symbolic_dim(d.type.shape[k]) && capacity.shape[k] != d.type.shape[k])
      fail(
          "input \"{}\" is [{}] but the buffer bound in place with output \"{}\" is [{}]: only dim {} (the "
          "positions appended along) may differ",
          input, dims_str(d.type.shape), output, fmt::join(capacity.shape, ","), p.axis);
  if (!data && capacity.nbytes()) fail("input \"{}\" and output \"{}\": null data pointer", input, output);
  if (gpu_) {
    // The kernels take the capacity as a 32-bit-ranged symbol
    // (codegen/emitters/attention/attention_dims.h).
    if (capacity.shape[p.axis] < 1 || capacity.shape[p.axis] > INT32_MAX)
      fail("input \"{}\": the buffer bound in place with output \"{}\" has {} positions along dim {} (1 to {})", input,
           output, capacity.shape[p.axis], p.axis, INT32_MAX);
    check_device_alignment("input", input, reinterpret_cast<unsigned long long>(data));
  }
  int index = static_cast<int>(&p - pairs.data());
  const bool on_gpu = gpu_ != nullptr;
  inputs_[p.input] = {data, on_gpu, true, on_gpu, {}, index, capacity.shape};
  outputs_[p.output] = {data, on_gpu, true, on_gpu, {}, index, capacity.shape};
}

const plan::InPlaceAppend* Context::gpu_append(const InPlacePair& p) const {
  for (const plan::InPlaceAppend& a : engine_->plan().in_place_appends)
    if (a.input == p.input && a.output == p.output) return &a;
  return nullptr;
}

}  // namespace kiln::rt
