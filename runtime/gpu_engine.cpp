// The GPU engine: loads a plan's kernels and weights onto one device (the
// CUDA context), shared by its contexts (runtime/gpu_executor.h).
#include "runtime/gpu_executor.h"

#include <utility>

#include "ir/error.h"
#include "runtime/log.h"

namespace kiln::rt {

namespace detail {
CUdeviceptr alloc(const CudaDriver& d, size_t n, const char* what) {
  CUdeviceptr p = 0;
  d.check(d.cuMemAlloc(&p, n ? n : 1), what);  // a zero-byte allocation is an error in the driver
  return p;
}
}  // namespace detail

using detail::alloc;

CtxScope::CtxScope(const CudaDriver& d, CUcontext c) : d_(d) {
  d.check(d.cuCtxPushCurrent(c), "cuCtxPushCurrent");
  pushed_ = true;
}
CtxScope::CtxScope(const CudaDriver& d, CUcontext c, std::nothrow_t) noexcept : d_(d) {
  pushed_ = c && d.cuCtxPushCurrent(c) == 0;
}
CtxScope::~CtxScope() {
  CUcontext popped = nullptr;
  if (pushed_) d_.cuCtxPopCurrent(&popped);
}

void GpuEngine::check_usable() const {
  std::string why = device_lost(dev_);
  if (!why.empty()) throw DeviceLost(why);
}

void GpuEngine::lose(const CudaError& err) const {
  bool first = device_lost(dev_).empty();
  mark_device_lost(dev_, fmt::format("the GPU (CUDA device {}) is unusable: {}; CUDA reports this error to every "
                                     "later call in this process (restart the process to use the GPU again)",
                                     dev_, err.what()));
  if (first) log(LogLevel::Error, device_lost(dev_));
  throw DeviceLost(device_lost(dev_), err.code());
}

GpuEngine::GpuEngine(const CudaDriver& d, const plan::Plan& p, std::vector<size_t> input_bytes,
                     std::vector<size_t> output_bytes, const std::string& what, int device)
    : d_(d), plan_(p), input_bytes_(std::move(input_bytes)), output_bytes_(std::move(output_bytes)) {
  int ordinal = device >= 0 ? device : default_device(d);
  int count = 0;
  d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal >= count)  // CUDA_ERROR_INVALID_DEVICE: the GPU path's failure, not the plan's
    throw CudaError(fmt::format("CUDA device {} does not exist ({} device(s))", ordinal, count), 101);
  d.check(d.cuDeviceGet(&dev_, ordinal), "cuDeviceGet");
  check_usable();
  int major = 0, minor = 0;
  d.check(d.cuDeviceGetAttribute(&major, kAttrComputeMajor, dev_), "compute capability");
  d.check(d.cuDeviceGetAttribute(&minor, kAttrComputeMinor, dev_), "compute capability");
  std::string arch = fmt::format("sm_{}{}", major, minor);
  int driver_version = 0;
  if (d.cuDriverGetVersion) d.check(d.cuDriverGetVersion(&driver_version), "cuDriverGetVersion");
  plan::CodeChoice code;
  try {
    code = plan::select_code(p, arch, what);  // throws for a plan this GPU cannot run
    // A driver older than the plan's code needs would refuse it at
    // cuModuleLoadData (CUDA_ERROR_UNSUPPORTED_PTX_VERSION, or a CUBIN it
    // cannot read): say so with both versions before touching the device.
    plan::check_driver_version(code, driver_version, what);
  } catch (const CudaError&) {
    throw;
  } catch (const Error& e) {  // the plan is fine; this GPU or driver cannot run it
    throw GpuUnavailable(e.what());
  }
  d.check(d.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
  try {
    CtxScope scope(d, ctx_);
    guarded([&] {
      for (const plan::Kernel& k : p.kernels) {
        CUmodule m = nullptr;
        // The PTX must be NUL-terminated for the JIT: std::string's c_str() is.
        const void* image = plan::code_image(k, code);
        d.check(d.cuModuleLoadData(&m, image), ("loading kernel " + k.name).c_str());
        modules_.push_back(m);
        CUfunction f = nullptr;
        d.check(d.cuModuleGetFunction(&f, m, k.name.c_str()), ("finding kernel " + k.name).c_str());
        functions_.push_back(f);
      }
      // Control-flow regions' launches too, and the launch variants' (a plan
      // with shape profiles: runtime/plan_launch_variants.h).
      std::vector<const plan::Step*> every;
      for (const plan::StepAt& at : plan::all_steps(plan_)) every.push_back(at.step);
      for (const plan::LaunchVariant& v : plan_.launch_variants)
        for (const plan::Step& s : v.steps) every.push_back(&s);
      for (const plan::Step* s : every) {
        if (s->kind == plan::StepKind::Kernel && s->shared_bytes > 48 * 1024)
          d.check(d.cuFuncSetAttribute(functions_[s->kernel], kFuncAttrMaxDynamicShared, int(s->shared_bytes)),
                  "allowing large dynamic shared memory");
      }
      // They may take a pointer table too: keyed by step.
      for (const plan::Step* s : every)
        if (s->param_table) {
          table_at_[s] = table_words_;
          table_words_ += 2 * s->args.size();  // addresses, then element counts
        }
      weights_ = alloc(d, p.weight_data.size(), "allocating the weights");
      if (!p.weight_data.empty())
        d.check(d.cuMemcpyHtoD(weights_, p.weight_data.data(), p.weight_data.size()), "uploading the weights");
    });
  } catch (...) {
    release();
    throw;
  }
  // A plan with control flow cannot be one static graph: its launches are
  // issued per run, the host reading each condition (docs/embedding.md).
  std::string replay = host_driven() ? fmt::format(
                                           "{} control-flow node(s) run host-driven, the launches between them "
                                           "replayed as CUDA Graphs",
                                           p.control.size())
                                     : "CUDA Graph replay";
  description_ = fmt::format("GPU {} ({}, {} kernels, {}{})", arch,
                             code.kind == "ptx"  ? "PTX JIT"
                             : code.arch == arch ? "CUBIN"
                                                 : "CUBIN " + code.arch,
                             p.kernels.size(), replay, dev_ ? fmt::format(", device {}", dev_) : std::string());
}

GpuEngine::~GpuEngine() { release(); }

void GpuEngine::release() {
  if (!ctx_) return;
  {
    CtxScope scope(d_, ctx_, std::nothrow);
    if (weights_) d_.cuMemFree(weights_);
    for (CUmodule m : modules_) d_.cuModuleUnload(m);
  }
  weights_ = 0;
  modules_.clear();
  d_.cuDevicePrimaryCtxRelease(dev_);
  ctx_ = nullptr;
}

}  // namespace kiln::rt
