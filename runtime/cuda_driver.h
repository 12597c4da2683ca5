// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1") so the
// runtime library has no link-time dependency on the driver and loads on
// machines without a GPU. Only the few entry points the GPU path uses, with
// the driver's ABI types declared here (no cuda.h needed to build).
#pragma once
#include <cstddef>
#include <string>

#include "ir/error.h"

namespace kiln::rt {

// A CUDA driver call that failed (out of memory, a launch failure...): the
// plan is fine, running it failed; the C API reports KILN_ERROR_RUNTIME.
class CudaError : public Error {
 public:
  explicit CudaError(const std::string& what, int code = 0) : Error(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// The GPU's CUDA context is unusable: an earlier call failed with a sticky
// error (an illegal address, a launch failure...). The driver reports it to
// every later call in the process, so the engine refuses to run (C API:
// KILN_ERROR_DEVICE_LOST).
class DeviceLost : public CudaError {
 public:
  using CudaError::CudaError;
};

// This machine cannot run the plan on a GPU, though the plan itself is valid:
// no driver or device, a GPU arch the plan has no code for, a driver older
// than its CUBIN/PTX need. Under the GPU backend Engine::load throws it (the
// C API: KILN_ERROR_UNAVAILABLE, not _INVALID_PLAN: another machine runs the
// same plan); the AUTO backend takes the CPU path and says why.
class GpuUnavailable : public Error {
 public:
  using Error::Error;
};

// The errors after which "the process is left in an inconsistent state and
// any further CUDA work will return the same error" (cuda.h):
// CUDA_ERROR_ILLEGAL_ADDRESS (700), _LAUNCH_TIMEOUT (702), _HARDWARE_STACK_ERROR
// (714), _ILLEGAL_INSTRUCTION (715), _MISALIGNED_ADDRESS (716),
// _INVALID_ADDRESS_SPACE (717), _INVALID_PC (718), _LAUNCH_FAILED (719).
inline bool is_sticky_error(int code) { return code == 700 || code == 702 || (code >= 714 && code <= 719); }

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
using CUevent = struct CUevent_st*;

struct CudaDriver {
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxPopCurrent)(CUcontext*) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*cuCtxGetDevice)(CUdevice*) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuStreamBeginCapture)(CUstream, int) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*) = nullptr;
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;
  // Device name (tuning-cache keys), events (timing, ordering the copy and
  // compute streams), pinned host memory (staging host buffers).
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned) = nullptr;
  CUresult (*cuMemFreeHost)(void*) = nullptr;
  // For `kiln doctor`'s report only, so optional: nullptr when the library
  // lacks them (the GPU path never calls them).
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice) = nullptr;

  // Throws CudaError "CUDA: <what>: <driver's text> (error N)" unless r is 0.
  void check(CUresult r, const char* what) const;
};

// The process's driver, loaded and cuInit'ed once; nullptr when there is none,
// with the reason (dlopen's message, cuInit's error) in *why.
const CudaDriver* cuda_driver(std::string* why);

// Compute-capability attributes of cuDeviceGetAttribute.
inline constexpr int kAttrComputeMajor = 75;
inline constexpr int kAttrComputeMinor = 76;
inline constexpr int kFuncAttrMaxDynamicShared = 8;
inline constexpr int kCaptureModeThreadLocal = 1;
inline constexpr unsigned kStreamNonBlocking = 1;
inline constexpr unsigned kEventDefault = 0;
inline constexpr unsigned kEventDisableTiming = 2;
inline constexpr unsigned kMemHostAllocPortable = 1;

// A device's name and compute capability ("NVIDIA H100 80GB HBM3", 9, 0).
struct DeviceIdentity {
  std::string name;
  int major = 0, minor = 0;
  std::string arch() const { return "sm_" + std::to_string(major) + std::to_string(minor); }
};
DeviceIdentity device_identity(const CudaDriver& d, int ordinal = 0);

// The device a GPU engine uses when the caller names none: the device of the
// calling thread's current CUDA context, else device 0.
int default_device(const CudaDriver& d);

// Sticky errors are per device (its primary context) for the process: the
// first one is remembered here, and every later engine or context on that
// device fails at once with its text (empty: the device is usable).
void mark_device_lost(int device, const std::string& why);
std::string device_lost(int device);

}  // namespace kiln::rt
