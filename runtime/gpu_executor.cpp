#include "runtime/gpu_executor.h"

#include <cstring>

#include "ir/error.h"

namespace kiln::rt {

namespace {
CUdeviceptr alloc(const CudaDriver& d, size_t n, const char* what) {
  CUdeviceptr p = 0;
  d.check(d.cuMemAlloc(&p, n ? n : 1), what);  // a zero-byte allocation is an error in the driver
  return p;
}
}  // namespace

CtxScope::CtxScope(const CudaDriver& d, CUcontext c) : d_(d) { d.check(d.cuCtxPushCurrent(c), "cuCtxPushCurrent"); }
CtxScope::~CtxScope() {
  CUcontext popped = nullptr;
  d_.cuCtxPopCurrent(&popped);
}

GpuEngine::GpuEngine(const CudaDriver& d, const plan::Plan& p, std::vector<size_t> input_bytes,
                     std::vector<size_t> output_bytes, const std::string& what)
    : d_(d), plan_(p), input_bytes_(std::move(input_bytes)), output_bytes_(std::move(output_bytes)) {
  d.check(d.cuDeviceGet(&dev_, 0), "cuDeviceGet");
  int major = 0, minor = 0;
  d.check(d.cuDeviceGetAttribute(&major, kAttrComputeMajor, dev_), "compute capability");
  d.check(d.cuDeviceGetAttribute(&minor, kAttrComputeMinor, dev_), "compute capability");
  std::string arch = fmt::format("sm_{}{}", major, minor);
  std::string code = plan::select_code(p, arch, what);  // throws for a plan this GPU cannot run
  d.check(d.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
  try {
    CtxScope scope(d, ctx_);
    for (const plan::Kernel& k : p.kernels) {
      CUmodule m = nullptr;
      // The PTX must be NUL-terminated for the JIT: std::string's c_str() is.
      const void* image = code == "cubin" ? static_cast<const void*>(k.cubin.data()) : k.ptx.c_str();
      d.check(d.cuModuleLoadData(&m, image), ("loading kernel " + k.name).c_str());
      modules_.push_back(m);
      CUfunction f = nullptr;
      d.check(d.cuModuleGetFunction(&f, m, k.name.c_str()), ("finding kernel " + k.name).c_str());
      functions_.push_back(f);
    }
    for (const plan::Step& s : p.steps)
      if (s.kind == plan::StepKind::Kernel && s.shared_bytes > 48 * 1024)
        d.check(d.cuFuncSetAttribute(functions_[s.kernel], kFuncAttrMaxDynamicShared, int(s.shared_bytes)),
                "allowing large dynamic shared memory");
    weights_ = alloc(d, p.weight_data.size(), "allocating the weights");
    if (!p.weight_data.empty())
      d.check(d.cuMemcpyHtoD(weights_, p.weight_data.data(), p.weight_data.size()), "uploading the weights");
  } catch (...) {
    release();
    throw;
  }
  description_ = fmt::format("GPU {} ({}, {} kernels, CUDA Graph replay)", arch,
                             code == "cubin" ? "CUBIN" : "PTX JIT", p.kernels.size());
}

GpuEngine::~GpuEngine() { release(); }

void GpuEngine::release() {
  if (!ctx_) return;
  {
    CtxScope scope(d_, ctx_);
    if (weights_) d_.cuMemFree(weights_);
    for (CUmodule m : modules_) d_.cuModuleUnload(m);
  }
  weights_ = 0;
  modules_.clear();
  d_.cuDevicePrimaryCtxRelease(dev_);
  ctx_ = nullptr;
}

CUdeviceptr GpuContext::address(const plan::BufferRef& b) const {
  switch (b.kind) {
    case plan::BufferKind::Arena: return arena_ + b.offset;
    case plan::BufferKind::Input: return inputs_.at(b.index) + b.offset;
    case plan::BufferKind::Output: return outputs_.at(b.index) + b.offset;
    case plan::BufferKind::Weight: return e_.weights_ + e_.plan_.weights.at(b.index).offset + b.offset;
  }
  return 0;
}

GpuContext::GpuContext(const GpuEngine& e) : e_(e) {
  const CudaDriver& d = e.d_;
  CtxScope scope(d, e.ctx_);
  try {
    arena_ = alloc(d, e.plan_.memory.arena_bytes, "allocating the activation arena");
    for (size_t n : e.input_bytes_) inputs_.push_back(alloc(d, n, "allocating an input buffer"));
    for (size_t n : e.output_bytes_) outputs_.push_back(alloc(d, n, "allocating an output buffer"));
    // Pinned staging for host bindings: DMA-able, so uploads and downloads
    // are truly asynchronous to the host.
    auto pinned = [&](size_t n, const char* what) {
      void* p = nullptr;
      if (n) d.check(d.cuMemHostAlloc(&p, n, kMemHostAllocPortable), what);
      return p;
    };
    for (size_t n : e.input_bytes_) staged_in_.push_back(pinned(n, "allocating pinned staging for an input"));
    for (size_t n : e.output_bytes_) staged_out_.push_back(pinned(n, "allocating pinned staging for an output"));
    for (CUevent* ev : {&up_begin_, &up_end_, &graph_begin_, &graph_end_})
      d.check(d.cuEventCreate(ev, kEventDefault), "cuEventCreate");
    for (size_t i = 0; i < e.output_bytes_.size(); ++i) {
      downloaded_.push_back(nullptr);
      d.check(d.cuEventCreate(&downloaded_.back(), kEventDefault), "cuEventCreate");
    }
    d.check(d.cuStreamCreate(&copy_stream_, kStreamNonBlocking), "cuStreamCreate (copies)");
    d.check(d.cuStreamCreate(&stream_, kStreamNonBlocking), "cuStreamCreate");
    // The launch list, captured once; every address is fixed for the
    // context's life, so the graph is replayed as is.
    d.check(d.cuStreamBeginCapture(stream_, kCaptureModeThreadLocal), "cuStreamBeginCapture");
    for (const plan::Step& s : e.plan_.steps) {
      if (s.kind == plan::StepKind::Copy) {
        d.check(d.cuMemcpyDtoDAsync(address(s.args[0]), address(s.args[1]), s.args[0].nbytes, stream_),
                "capturing a copy");
        continue;
      }
      std::vector<CUdeviceptr> ptrs;
      for (const plan::BufferRef& b : s.args) ptrs.push_back(address(b));
      std::vector<void*> params;
      for (CUdeviceptr& p : ptrs) params.push_back(&p);
      d.check(d.cuLaunchKernel(e.functions_[s.kernel], s.grid.x, s.grid.y, s.grid.z, s.block.x, s.block.y,
                               s.block.z, s.shared_bytes, stream_,
                               params.data(), nullptr),
              ("capturing kernel " + e.plan_.kernels[s.kernel].name).c_str());
    }
    CUgraph graph = nullptr;
    d.check(d.cuStreamEndCapture(stream_, &graph), "cuStreamEndCapture");
    CUresult r = d.cuGraphInstantiateWithFlags(&exec_, graph, 0);
    d.cuGraphDestroy(graph);
    d.check(r, "cuGraphInstantiate");
  } catch (...) {
    release();
    throw;
  }
}

GpuContext::~GpuContext() { release(); }

void GpuContext::release() {
  const CudaDriver& d = e_.d_;
  CtxScope scope(d, e_.ctx_);
  if (exec_) d.cuGraphExecDestroy(exec_);
  if (stream_) d.cuStreamDestroy(stream_);
  if (copy_stream_) d.cuStreamDestroy(copy_stream_);
  for (CUevent ev : {up_begin_, up_end_, graph_begin_, graph_end_})
    if (ev) d.cuEventDestroy(ev);
  for (CUevent ev : downloaded_)
    if (ev) d.cuEventDestroy(ev);
  for (void* p : staged_in_)
    if (p) d.cuMemFreeHost(p);
  for (void* p : staged_out_)
    if (p) d.cuMemFreeHost(p);
  up_begin_ = up_end_ = graph_begin_ = graph_end_ = nullptr;
  downloaded_.clear();
  staged_in_.clear();
  staged_out_.clear();
  copy_stream_ = nullptr;
  for (CUdeviceptr p : inputs_) d.cuMemFree(p);
  for (CUdeviceptr p : outputs_) d.cuMemFree(p);
  if (arena_) d.cuMemFree(arena_);
  exec_ = nullptr;
  stream_ = nullptr;
  inputs_.clear();
  outputs_.clear();
  arena_ = 0;
}

GpuRunTiming GpuContext::run(const std::vector<DeviceBinding>& in, const std::vector<DeviceBinding>& out) {
  const CudaDriver& d = e_.d_;
  CtxScope scope(d, e_.ctx_);
  // Uploads on the copy stream; the host fills staging buffer i+1 while
  // buffer i is on its way.
  d.check(d.cuEventRecord(up_begin_, copy_stream_), "cuEventRecord");
  for (size_t i = 0; i < in.size(); ++i) {
    size_t n = e_.input_bytes_[i];
    if (!n) continue;
    if (in[i].device) {
      d.check(d.cuMemcpyDtoDAsync(inputs_[i], reinterpret_cast<CUdeviceptr>(in[i].ptr), n, copy_stream_),
              "copying an input");
    } else {
      std::memcpy(staged_in_[i], in[i].ptr, n);
      d.check(d.cuMemcpyHtoDAsync(inputs_[i], staged_in_[i], n, copy_stream_), "uploading an input");
    }
  }
  d.check(d.cuEventRecord(up_end_, copy_stream_), "cuEventRecord");
  // The graph on the compute stream once the inputs are there.
  d.check(d.cuStreamWaitEvent(stream_, up_end_, 0), "cuStreamWaitEvent");
  d.check(d.cuEventRecord(graph_begin_, stream_), "cuEventRecord");
  d.check(d.cuGraphLaunch(exec_, stream_), "cuGraphLaunch");
  d.check(d.cuEventRecord(graph_end_, stream_), "cuEventRecord");
  // Downloads on the copy stream once the graph is done, one event each.
  d.check(d.cuStreamWaitEvent(copy_stream_, graph_end_, 0), "cuStreamWaitEvent");
  for (size_t i = 0; i < out.size(); ++i) {
    size_t n = e_.output_bytes_[i];
    if (n && out[i].device)
      d.check(d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(out[i].ptr), outputs_[i], n, copy_stream_),
              "copying an output");
    else if (n)
      d.check(d.cuMemcpyDtoHAsync(staged_out_[i], outputs_[i], n, copy_stream_), "downloading an output");
    d.check(d.cuEventRecord(downloaded_[i], copy_stream_), "cuEventRecord");
  }
  // The host copies each output out of staging as it arrives.
  for (size_t i = 0; i < out.size(); ++i) {
    d.check(d.cuEventSynchronize(downloaded_[i]), "waiting for an output");
    size_t n = e_.output_bytes_[i];
    if (n && !out[i].device) std::memcpy(out[i].ptr, staged_out_[i], n);
  }
  d.check(d.cuEventSynchronize(graph_end_), "waiting for the graph");
  GpuRunTiming t;
  d.check(d.cuEventElapsedTime(&t.upload_ms, up_begin_, up_end_), "cuEventElapsedTime (uploads)");
  d.check(d.cuEventElapsedTime(&t.compute_ms, graph_begin_, graph_end_), "cuEventElapsedTime (graph)");
  if (!downloaded_.empty())
    d.check(d.cuEventElapsedTime(&t.download_ms, graph_end_, downloaded_.back()), "cuEventElapsedTime (downloads)");
  return t;
}

void GpuContext::enqueue(const std::vector<DeviceBinding>& in, const std::vector<DeviceBinding>& out,
                         CUstream stream) {
  const CudaDriver& d = e_.d_;
  CtxScope scope(d, e_.ctx_);
  CUstream s = stream ? stream : stream_;
  for (size_t i = 0; i < in.size(); ++i) {
    size_t n = e_.input_bytes_[i];
    if (!n) continue;
    if (in[i].device)
      d.check(d.cuMemcpyDtoDAsync(inputs_[i], reinterpret_cast<CUdeviceptr>(in[i].ptr), n, s), "copying an input");
    else
      d.check(d.cuMemcpyHtoDAsync(inputs_[i], in[i].ptr, n, s), "copying an input");
  }
  d.check(d.cuGraphLaunch(exec_, s), "cuGraphLaunch");
  for (size_t i = 0; i < out.size(); ++i) {
    size_t n = e_.output_bytes_[i];
    if (!n) continue;
    if (out[i].device)
      d.check(d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(out[i].ptr), outputs_[i], n, s), "copying an output");
    else
      d.check(d.cuMemcpyDtoHAsync(out[i].ptr, outputs_[i], n, s), "copying an output");
  }
  if (!stream) d.check(d.cuStreamSynchronize(s), "cuStreamSynchronize");
}

}  // namespace kiln::rt
