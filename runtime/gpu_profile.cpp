// GpuContext::profile: one run with an event after every step, the
// per-step times that `kiln bench --profile` and the C API report.
#include "ir/error.h"
#include "runtime/gpu_executor.h"

namespace kiln::rt {

std::vector<float> GpuContext::profile(const std::vector<DeviceBinding>& in, const std::vector<DeviceBinding>& out) {
  if (!queue_.empty()) fail("profile: {} submitted run(s) in flight; wait for them first", queue_.size());
  e_.check_usable();
  CtxScope scope(e_.d_, e_.ctx_);
  return e_.guarded([&] {
    const CudaDriver& d = e_.d_;
    const size_t steps = e_.plan_.steps.size();
    while (profile_events_.size() < steps + 1) {
      profile_events_.push_back(nullptr);
      d.check(d.cuEventCreate(&profile_events_.back(), kEventDefault), "cuEventCreate");
    }
    // Slot 0's buffers, ordered after an earlier enqueue as enqueue_on is;
    // everything on the compute stream, the host waits for the end.
    Slot& sl = *slots_[0];
    if (enqueue_pending_) {
      d.check(d.cuStreamWaitEvent(stream_, enqueued_, 0), "cuStreamWaitEvent");
      d.check(d.cuStreamWaitEvent(upload_stream_, enqueued_, 0), "cuStreamWaitEvent");
      enqueue_pending_ = false;
    }
    rebind(sl, in, out);
    for (size_t i = 0; i < in.size(); ++i) {
      size_t n = in_bytes_[i];
      if (!n || in[i].zero_copy) continue;
      if (in[i].device)
        d.check(d.cuMemcpyDtoDAsync(sl.inputs[i], reinterpret_cast<CUdeviceptr>(in[i].ptr), n, stream_),
                "copying an input");
      else d.check(d.cuMemcpyHtoDAsync(sl.inputs[i], in[i].ptr, n, stream_), "uploading an input");
    }
    d.check(d.cuEventRecord(profile_events_[0], stream_), "cuEventRecord");
    issue_steps(sl, stream_, profile_events_.data() + 1);
    for (size_t i = 0; i < out.size(); ++i) {
      size_t n = out_bytes_[i];
      if (!n || out[i].zero_copy) continue;
      if (out[i].device)
        d.check(d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(out[i].ptr), sl.outputs[i], n, stream_),
                "copying an output");
      else d.check(d.cuMemcpyDtoHAsync(out[i].ptr, sl.outputs[i], n, stream_), "downloading an output");
    }
    d.check(d.cuStreamSynchronize(stream_), "cuStreamSynchronize");
    std::vector<float> ms(steps);
    for (size_t i = 0; i < steps; ++i)
      d.check(d.cuEventElapsedTime(&ms[i], profile_events_[i], profile_events_[i + 1]), "cuEventElapsedTime");
    return ms;
  });
}

}  // namespace kiln::rt
