// The GPU path of the runtime: a plan's kernels and launch list on a CUDA
// device through the driver API (runtime/cuda_driver.h).
//
// GpuEngine (immutable, shared by contexts): device 0's primary context, one
// module per kernel (its CUBIN when built for this GPU's arch, else its PTX,
// which the driver JIT-compiles), the weights uploaded once into one device
// allocation.
// GpuContext (one per thread/stream): the activation arena (one allocation of
// the memory plan's size), a device buffer per graph input and output, and
// the whole launch list captured once as a CUDA Graph on a private compute
// stream.
// run() (synchronous) stages host buffers through pinned memory
// (cuMemHostAlloc, one staging buffer per input and output): inputs are
// copied into their staging buffer and uploaded on a copy stream, the compute
// stream waits for them (an event), replays the graph between two timing
// events, and the copy stream waits for that and downloads the outputs into
// staging, one event per output, which the host copies out as each arrives.
// So the host's copy of one buffer overlaps the DMA of the next, and the
// copies run on their own stream. enqueue(stream) copies the bound inputs in,
// replays the graph and copies the outputs out, all on the caller's stream
// (host buffers are copied directly, unstaged: staging needs the host to
// copy out of the pinned buffer after the download, which an asynchronous
// call cannot wait for).
//
// Untested until a GPU is lent (docs/embedding.md): this machine has none.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda_driver.h"
#include "runtime/plan_format.h"

namespace kiln::rt {

class GpuEngine {
 public:
  // `input_bytes` / `output_bytes`: the graph inputs' and outputs' sizes.
  GpuEngine(const CudaDriver& d, const plan::Plan& p, std::vector<size_t> input_bytes,
            std::vector<size_t> output_bytes, const std::string& what);
  ~GpuEngine();
  GpuEngine(const GpuEngine&) = delete;
  GpuEngine& operator=(const GpuEngine&) = delete;

  const std::string& description() const { return description_; }

 private:
  friend class GpuContext;
  void release();  // frees what the constructor got so far
  const CudaDriver& d_;
  const plan::Plan& plan_;
  std::vector<size_t> input_bytes_, output_bytes_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::vector<CUmodule> modules_;
  std::vector<CUfunction> functions_;  // per plan kernel
  CUdeviceptr weights_ = 0;
  std::string description_;
};

// Makes the engine's CUDA context current for a scope.
class CtxScope {
 public:
  CtxScope(const CudaDriver& d, CUcontext c);
  ~CtxScope();

 private:
  const CudaDriver& d_;
};

struct DeviceBinding {
  void* ptr = nullptr;
  bool device = false;  // a CUdeviceptr (else host memory)
};

// CUDA-event times of the last run(): the uploads on the copy stream, the
// graph on the compute stream, the downloads (from the graph's end).
struct GpuRunTiming {
  float upload_ms = 0, compute_ms = 0, download_ms = 0;
};

class GpuContext {
 public:
  explicit GpuContext(const GpuEngine& e);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  // Asynchronous on `stream`.
  void enqueue(const std::vector<DeviceBinding>& inputs, const std::vector<DeviceBinding>& outputs, CUstream stream);
  // Synchronous, staged through pinned memory on the copy and compute
  // streams (above); returns the event times.
  GpuRunTiming run(const std::vector<DeviceBinding>& inputs, const std::vector<DeviceBinding>& outputs);

 private:
  CUdeviceptr address(const plan::BufferRef& b) const;
  void release();
  const GpuEngine& e_;
  CUdeviceptr arena_ = 0;
  std::vector<CUdeviceptr> inputs_, outputs_;
  std::vector<void*> staged_in_, staged_out_;  // pinned host memory (null for empty tensors)
  CUstream stream_ = nullptr;                  // compute: the graph
  CUstream copy_stream_ = nullptr;             // uploads and downloads of run()
  // run()'s events: uploads begin/end (copy), graph begin/end (compute), one per output download (copy).
  CUevent up_begin_ = nullptr, up_end_ = nullptr, graph_begin_ = nullptr, graph_end_ = nullptr;
  std::vector<CUevent> downloaded_;
  CUgraphExec exec_ = nullptr;
};

}  // namespace kiln::rt
