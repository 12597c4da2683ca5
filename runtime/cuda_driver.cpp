#include "runtime/cuda_driver.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "ir/error.h"

namespace kiln::rt {

void CudaDriver::check(CUresult r, const char* what) const {
  if (r == 0) return;
  const char* s = nullptr;
  if (cuGetErrorString) cuGetErrorString(r, &s);
  throw CudaError(fmt::format("CUDA: {}: {} (error {})", what, s ? s : "unknown error", r), r);
}

namespace {

struct Loaded {
  CudaDriver driver;
  bool ok = false;
  std::string why;
};

template <typename F>
bool load(void* lib, F& fn, const char* name, std::string& why) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) why = std::string("libcuda.so.1 has no ") + name;
  return fn != nullptr;
}

Loaded load_driver() {
  Loaded l;
  // Never dlclose'd: the driver stays for the process's life.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    l.why = std::string("no CUDA driver (dlopen libcuda.so.1: ") + (e ? e : "failed") + ")";
    return l;
  }
  CudaDriver& d = l.driver;
  std::string& w = l.why;
  bool ok =
      load(lib, d.cuInit, "cuInit", w) && load(lib, d.cuGetErrorString, "cuGetErrorString", w) &&
      load(lib, d.cuDeviceGetCount, "cuDeviceGetCount", w) && load(lib, d.cuDeviceGet, "cuDeviceGet", w) &&
      load(lib, d.cuDeviceGetAttribute, "cuDeviceGetAttribute", w) &&
      load(lib, d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", w) &&
      load(lib, d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", w) &&
      load(lib, d.cuCtxPushCurrent, "cuCtxPushCurrent_v2", w) &&
      load(lib, d.cuCtxPopCurrent, "cuCtxPopCurrent_v2", w) && load(lib, d.cuCtxGetCurrent, "cuCtxGetCurrent", w) &&
      load(lib, d.cuCtxGetDevice, "cuCtxGetDevice", w) && load(lib, d.cuModuleLoadData, "cuModuleLoadData", w) &&
      load(lib, d.cuModuleUnload, "cuModuleUnload", w) && load(lib, d.cuModuleGetFunction, "cuModuleGetFunction", w) &&
      load(lib, d.cuFuncSetAttribute, "cuFuncSetAttribute", w) && load(lib, d.cuMemAlloc, "cuMemAlloc_v2", w) &&
      load(lib, d.cuMemFree, "cuMemFree_v2", w) && load(lib, d.cuMemcpyHtoD, "cuMemcpyHtoD_v2", w) &&
      load(lib, d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", w) &&
      load(lib, d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", w) &&
      load(lib, d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", w) && load(lib, d.cuLaunchKernel, "cuLaunchKernel", w) &&
      load(lib, d.cuStreamCreate, "cuStreamCreate", w) && load(lib, d.cuStreamDestroy, "cuStreamDestroy_v2", w) &&
      load(lib, d.cuStreamSynchronize, "cuStreamSynchronize", w) &&
      load(lib, d.cuStreamBeginCapture, "cuStreamBeginCapture_v2", w) &&
      load(lib, d.cuStreamEndCapture, "cuStreamEndCapture", w) &&
      load(lib, d.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", w) &&
      load(lib, d.cuGraphLaunch, "cuGraphLaunch", w) && load(lib, d.cuGraphExecDestroy, "cuGraphExecDestroy", w) &&
      load(lib, d.cuGraphDestroy, "cuGraphDestroy", w) && load(lib, d.cuDeviceGetName, "cuDeviceGetName", w) &&
      load(lib, d.cuEventCreate, "cuEventCreate", w) && load(lib, d.cuEventDestroy, "cuEventDestroy_v2", w) &&
      load(lib, d.cuEventRecord, "cuEventRecord", w) && load(lib, d.cuEventSynchronize, "cuEventSynchronize", w) &&
      load(lib, d.cuEventElapsedTime, "cuEventElapsedTime", w) &&
      load(lib, d.cuStreamWaitEvent, "cuStreamWaitEvent", w) && load(lib, d.cuMemHostAlloc, "cuMemHostAlloc", w) &&
      load(lib, d.cuMemFreeHost, "cuMemFreeHost", w);
  if (!ok) return l;
  // Optional (kiln doctor's report): absent, they stay nullptr.
  d.cuDriverGetVersion = reinterpret_cast<decltype(d.cuDriverGetVersion)>(dlsym(lib, "cuDriverGetVersion"));
  d.cuDeviceTotalMem = reinterpret_cast<decltype(d.cuDeviceTotalMem)>(dlsym(lib, "cuDeviceTotalMem_v2"));
  if (CUresult r = d.cuInit(0); r != 0) {
    const char* s = nullptr;
    d.cuGetErrorString(r, &s);
    l.why = std::string("the CUDA driver does not start (cuInit: ") + (s ? s : "error") + ")";
    return l;
  }
  int n = 0;
  if (d.cuDeviceGetCount(&n) != 0 || n == 0) {
    l.why = "no CUDA device";
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

DeviceIdentity device_identity(const CudaDriver& d, int ordinal) {
  DeviceIdentity id;
  CUdevice dev = 0;
  d.check(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  d.check(d.cuDeviceGetAttribute(&id.major, kAttrComputeMajor, dev), "compute capability");
  d.check(d.cuDeviceGetAttribute(&id.minor, kAttrComputeMinor, dev), "compute capability");
  char name[256] = {};
  d.check(d.cuDeviceGetName(name, int(sizeof name) - 1, dev), "cuDeviceGetName");
  id.name = name;
  return id;
}

int default_device(const CudaDriver& d) {
  CUcontext current = nullptr;
  CUdevice dev = 0;
  if (d.cuCtxGetCurrent(&current) == 0 && current && d.cuCtxGetDevice(&dev) == 0) return dev;
  return 0;
}

namespace {
std::mutex lost_mu;
std::map<int, std::string> lost;  // device -> why it is unusable
}  // namespace

void mark_device_lost(int device, const std::string& why) {
  std::lock_guard<std::mutex> g(lost_mu);
  lost.emplace(device, why);  // the first error is the cause
}

std::string device_lost(int device) {
  std::lock_guard<std::mutex> g(lost_mu);
  auto it = lost.find(device);
  return it == lost.end() ? std::string() : it->second;
}

const CudaDriver* cuda_driver(std::string* why) {
  static const Loaded loaded = load_driver();
  if (why) *why = loaded.why;
  return loaded.ok ? &loaded.driver : nullptr;
}

}  // namespace kiln::rt
