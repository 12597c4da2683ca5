// The fake driver's device, contexts, errors and test controls. The other
// concerns: streams.cpp (asynchronous streams, events, launches), memory.cpp
// (allocations, copies, the race detector), modules.cpp (module images,
// per-launch limits), capture.cpp (stream capture, graphs).
// Environment: FAKE_CUDA_DEVICE (h100, a100, l4: properties of that GPU),
// FAKE_CUDA_ARCH ("8.6": overrides the preset's), FAKE_CUDA_NAME,
// FAKE_CUDA_DRIVER_VERSION (13000 = CUDA 13.0: the newest PTX ISA it JITs),
// FAKE_CUDA_DEVICE_COUNT, FAKE_CUDA_COST, FAKE_CUDA_INIT_ERROR,
// FAKE_CUDA_FAIL (ENTRY:SKIP:ERROR, as fake_cuda_fail),
// KILN_FAKE_CUDA_DISABLE (rules to switch off, docs/testing.md).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "fake.h"

namespace fake {

void join(VClock& a, const VClock& b) {
  if (a.size() < b.size()) a.resize(b.size(), 0);
  for (size_t i = 0; i < b.size(); ++i) a[i] = std::max(a[i], b[i]);
}

Device preset(const std::string& name) {
  Device d;
  if (name == "a100") {
    d.name = "NVIDIA A100-SXM4-80GB";
    d.major = 8, d.minor = 0, d.shared_optin = 163 * 1024, d.sms = 108;
  } else if (name == "l4") {
    d.name = "NVIDIA L4";
    d.major = 8, d.minor = 9, d.shared_optin = 99 * 1024, d.sms = 58, d.memory = size_t(24) << 30;
  } else if (name == "h100") {
    d.name = "NVIDIA H100 80GB HBM3";
  }
  return d;
}

State::State() {
  if (const char* p = std::getenv("FAKE_CUDA_DEVICE")) dev = preset(p);
  if (const char* a = std::getenv("FAKE_CUDA_ARCH")) std::sscanf(a, "%d.%d", &dev.major, &dev.minor);
  if (const char* n = std::getenv("FAKE_CUDA_NAME")) dev.name = n;
  if (const char* v = std::getenv("FAKE_CUDA_DRIVER_VERSION")) driver_version = std::atoi(v);
  if (const char* v = std::getenv("FAKE_CUDA_DEVICE_COUNT")) device_count = std::atoi(v);
  if (const char* c = std::getenv("FAKE_CUDA_COST")) inverse_blocks = std::strcmp(c, "inverse_blocks") == 0;
  init_error = std::getenv("FAKE_CUDA_INIT_ERROR") != nullptr;
  // FAKE_CUDA_FAIL=ENTRY:SKIP:ERROR arms fake_cuda_fail for a process
  // without the test controls (kiln itself).
  if (const char* f = std::getenv("FAKE_CUDA_FAIL")) {
    char entry[128] = {};
    int skip = 0, error = 0;
    if (std::sscanf(f, "%127[^:]:%d:%d", entry, &skip, &error) == 3) fail_next[entry] = {skip, error};
  }
  if (const char* off = std::getenv("KILN_FAKE_CUDA_DISABLE")) {
    std::stringstream ss(off);
    std::string r;
    while (std::getline(ss, r, ',')) {
      if (r == "async") rules.async = false;
      else if (r == "races") rules.races = false;
      else if (r == "launch_limits") rules.launch_limits = false;
      else if (r == "capture") rules.capture = false;
      else if (r == "sticky") rules.sticky = false;
      else if (r == "modules") rules.modules = false;
      else if (r == "context") rules.context = false;
      else if (r == "params") rules.params = false;
      else if (r == "kernel_races") rules.kernel_races = false;
      else if (r == "table_races") rules.table_races = false;
      else std::fprintf(stderr, "fake CUDA: KILN_FAKE_CUDA_DISABLE: no rule named \"%s\"\n", r.c_str());
    }
  }
}

State& st() {
  static State* s = new State;  // never destroyed: worker threads may outlive static destructors
  return *s;
}

CUresult failing(const char* fn, CUresult usual) {
  auto it = st().fail_next.find(fn);
  if (it == st().fail_next.end()) return 0;
  if (it->second.skip-- > 0) return 0;
  CUresult e = it->second.error ? it->second.error : usual;
  st().fail_next.erase(it);
  if (is_sticky(e)) poison(e);
  return e;
}

// The errors after which "the process is left in an inconsistent state and
// any further CUDA work will return the same error" (cuda.h's comments on
// CUDA_ERROR_ILLEGAL_ADDRESS ... CUDA_ERROR_LAUNCH_FAILED).
bool is_sticky(CUresult r) { return r == 700 || r == 702 || (r >= 714 && r <= 719); }

void poison(CUresult r) {
  if (st().rules.sticky && is_sticky(r) && !st().sticky) st().sticky = r;
}

namespace {
thread_local std::vector<int> ctx_stack;  // the thread's current contexts (device numbers)
int primary[8];
}  // namespace

CUresult context_check() {
  if (st().sticky) return st().sticky;
  if (st().rules.context && ctx_stack.empty()) return kInvalidContext;
  return 0;
}

void log(const std::string& line) { st().log += line + "\n"; }

}  // namespace fake

using namespace fake;
#define FAKE_LOCK Lock lock(st().mu)

extern "C" {

// Test controls.
void fake_cuda_set_arch(int major, int minor) {
  FAKE_LOCK;
  st().dev.major = major;
  st().dev.minor = minor;
}
// "h100", "a100", "l4" or "" (the default fake GPU).
void fake_cuda_set_device(const char* name) {
  FAKE_LOCK;
  st().dev = preset(name);
}
// A device property by name: "regs_per_block", "shared_per_block", "shared_optin", "max_threads".
int fake_cuda_set_property(const char* name, int value) {
  FAKE_LOCK;
  Device& d = st().dev;
  std::string n = name;
  if (n == "regs_per_block") d.regs_per_block = value;
  else if (n == "shared_per_block") d.shared_per_block = value;
  else if (n == "shared_optin") d.shared_optin = value;
  else if (n == "max_threads") d.max_threads = value;
  else return 1;
  return 0;
}
void fake_cuda_set_device_count(int n) {
  FAKE_LOCK;
  st().device_count = n;
}
void fake_cuda_set_driver_version(int v) {
  FAKE_LOCK;
  st().driver_version = v;
}
void fake_cuda_set_kernels(int (*arg_count)(const char*),
                           int (*launch)(const char*, const unsigned*, const unsigned*, unsigned, const CUdeviceptr*)) {
  FAKE_LOCK;
  st().arg_count = arg_count;
  st().launch = launch;
}
// What each kernel does with its buffers, for the race detector (memory.cpp):
// `table_size(kernel)` is N when the kernel's one parameter is a table of N
// buffers in device memory (codegen/param_table.h), 0 when its buffers are
// its parameters, -1 when not known; `buffer_use(kernel, i, &bytes)` is 1
// when it may write buffer i, 0 when it only reads it, -1 when not known, and
// sets the bytes it may touch from there (0: the rest of the allocation).
void fake_cuda_set_kernel_buffers(int (*table_size)(const char*),
                                  int (*buffer_use)(const char*, int, unsigned long long*)) {
  FAKE_LOCK;
  st().table_size = table_size;
  st().buffer_use = buffer_use;
}
// cubin loads, ptx loads, graph launches, captured launches, launches outside a capture, live device allocations,
// live pinned host allocations, pinned allocations ever, events recorded, captures in progress, races found,
// the sticky error (0: none).
void fake_cuda_stats(int* out) {
  FAKE_LOCK;
  out[0] = st().cubin_loads;
  out[1] = st().ptx_loads;
  out[2] = st().graph_launches;
  out[3] = st().captured_launches;
  out[4] = st().direct_launches;
  out[5] = st().device_allocs;
  out[6] = st().pinned_live;
  out[7] = st().pinned_allocs;
  out[8] = st().events_recorded;
  out[9] = int(st().captures.size());
  out[10] = st().race_count;
  out[11] = st().sticky;
}
void fake_cuda_set_cost(const char* mode) {
  FAKE_LOCK;
  st().inverse_blocks = std::strcmp(mode, "inverse_blocks") == 0;
}
void fake_cuda_set_name(const char* name) {
  FAKE_LOCK;
  st().dev.name = name;
}
void fake_cuda_fail_next(const char* fn) {
  FAKE_LOCK;
  st().fail_next[fn] = {};
}
// The call of entry point `fn` after `skip` more calls returns `error`, once
// (a sticky error poisons the context). error 0 disarms.
void fake_cuda_fail(const char* fn, int skip, int error) {
  FAKE_LOCK;
  if (error) st().fail_next[fn] = {skip, error};
  else st().fail_next.erase(fn);
}
void fake_cuda_set_memory_limit(size_t bytes) {
  FAKE_LOCK;
  st().memory_limit = bytes;
}
// cuMemAlloc does not zero memory: a test that needs to see a reader of
// never-written device memory fail fills new allocations with `byte` (0-255;
// -1: leave them as allocated, the default).
void fake_cuda_set_alloc_fill(int byte) {
  FAKE_LOCK;
  st().alloc_fill = byte;
}
const char* fake_cuda_take_log() {
  FAKE_LOCK;
  static std::string taken;
  taken = std::move(st().log);
  st().log.clear();
  return taken.c_str();
}
// The races found since the last call, one per line (then cleared).
const char* fake_cuda_take_races() {
  FAKE_LOCK;
  static std::string taken;
  taken = std::move(st().races);
  st().races.clear();
  st().race_count = 0;
  return taken.c_str();
}
// 1: the "GPU" starts nothing more until fake_cuda_pause(0) (work stays
// queued: shows what a caller sees before the device has run its work).
void fake_cuda_pause(int on) {
  FAKE_LOCK;
  st().paused = on;
  st().cv.notify_all();
}
// A new process as far as sticky errors go (the real driver's only cure).
void fake_cuda_clear_sticky() {
  FAKE_LOCK;
  st().sticky = 0;
}
// 1 when the rule (KILN_FAKE_CUDA_DISABLE's names) is on.
int fake_cuda_rule(const char* name) {
  FAKE_LOCK;
  const Rules& r = st().rules;
  std::string n = name;
  return n == "async"           ? r.async
         : n == "races"         ? r.races
         : n == "launch_limits" ? r.launch_limits
         : n == "capture"       ? r.capture
         : n == "sticky"        ? r.sticky
         : n == "modules"       ? r.modules
         : n == "context"       ? r.context
         : n == "params"        ? r.params
         : n == "kernel_races"  ? r.kernel_races
         : n == "table_races"   ? r.table_races
                                : -1;
}

CUresult cuInit(unsigned) { return st().init_error ? kNoDevice : 0; }
CUresult cuDriverGetVersion(int* v) {
  FAKE_LOCK;
  *v = st().driver_version;
  return 0;
}
// NVRTC asks the driver it finds loaded for its private tables; "not
// supported" makes it compile without them (without this NVRTC crashes in a
// process that has this fake loaded).
CUresult cuGetExportTable(const void** table, const void*) {
  if (table) *table = nullptr;
  return kNotSupported;
}
CUresult cuDeviceGetName(char* name, int len, int dev) {
  FAKE_LOCK;
  if (len <= 0) return kInvalidValue;
  if (dev < 0 || dev >= st().device_count) return kInvalidDevice;
  std::snprintf(name, size_t(len), "%s", st().dev.name.c_str());
  return 0;
}
// The preset's memory (`kiln doctor` reports it), not the memory budget.
CUresult cuDeviceTotalMem_v2(size_t* bytes, int dev) {
  FAKE_LOCK;
  if (!bytes) return kInvalidValue;
  if (dev < 0 || dev >= st().device_count) return kInvalidDevice;
  *bytes = st().dev.memory;
  return 0;
}
// The real driver's words.
CUresult cuGetErrorString(CUresult r, const char** s) {
  switch (r) {
    case kInvalidValue:
      *s = "invalid argument";
      break;
    case kOutOfMemory:
      *s = "out of memory";
      break;
    case kInvalidContext:
      *s = "invalid device context";
      break;
    case kNoBinaryForGpu:
      *s = "no kernel image is available for execution on the device";
      break;
    case kInvalidPtx:
      *s = "a PTX JIT compilation failed";
      break;
    case kUnsupportedPtxVersion:
      *s = "the provided PTX was compiled with an unsupported toolchain.";
      break;
    case kInvalidImage:
      *s = "device kernel image is invalid";
      break;
    case kInvalidHandle:
      *s = "invalid resource handle";
      break;
    case kNotFound:
      *s = "named symbol not found";
      break;
    case kNotReady:
      *s = "device not ready";
      break;
    case kLaunchFailed:
      *s = "unspecified launch failure";
      break;
    case kIllegalAddress:
      *s = "an illegal memory access was encountered";
      break;
    case kLaunchOutOfResources:
      *s = "too many resources requested for launch";
      break;
    case kCaptureUnsupported:
      *s = "operation not permitted when stream is capturing";
      break;
    case kCaptureInvalidated:
      *s = "operation failed due to a previous error during capture";
      break;
    case kCaptureWrongThread:
      *s = "attempt to terminate a thread-local capture sequence from another thread";
      break;
    default:
      *s = "fake CUDA error";
  }
  return 0;
}
CUresult cuDeviceGetCount(int* n) {
  *n = st().device_count;
  return 0;
}
CUresult cuDeviceGet(int* d, int i) {
  *d = i;
  return i >= 0 && i < st().device_count ? 0 : kInvalidDevice;
}
CUresult cuDeviceGetAttribute(int* v, int attr, int dev) {
  FAKE_LOCK;
  if (dev < 0 || dev >= st().device_count) return kInvalidDevice;
  const Device& d = st().dev;
  switch (attr) {
    case 1:
      *v = d.max_threads;
      break;
    case 2:
    case 3:
    case 4:
      *v = d.max_block[attr - 2];
      break;
    case 5:
    case 6:
    case 7:
      *v = d.max_grid[attr - 5];
      break;
    case 8:
      *v = d.shared_per_block;
      break;
    case 10:
      *v = 32;
      break;  // warp size
    case 12:
      *v = d.regs_per_block;
      break;
    case 16:
      *v = d.sms;
      break;
    case 75:
      *v = d.major;
      break;
    case 76:
      *v = d.minor;
      break;
    case 97:
      *v = d.shared_optin;
      break;
    default:
      return kInvalidValue;
  }
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) {
  if (dev < 0 || dev >= 8 || dev >= st().device_count) return kInvalidDevice;
  primary[dev] = dev;
  *ctx = &primary[dev];
  return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { return dev >= 0 && dev < st().device_count ? 0 : kInvalidDevice; }
CUresult cuCtxPushCurrent_v2(void* c) {
  if (!c) return kInvalidContext;
  {
    FAKE_LOCK;
    if (CUresult e = failing("cuCtxPushCurrent_v2", kInvalidContext)) return e;
  }
  ctx_stack.push_back(*static_cast<int*>(c));
  return 0;
}
CUresult cuCtxPopCurrent_v2(void** c) {
  if (ctx_stack.empty()) return kInvalidContext;
  if (c) *c = &primary[ctx_stack.back()];
  ctx_stack.pop_back();
  return 0;
}
CUresult cuCtxGetCurrent(void** c) {
  *c = ctx_stack.empty() ? nullptr : &primary[ctx_stack.back()];
  return 0;
}
CUresult cuCtxGetDevice(int* d) {
  if (ctx_stack.empty()) return kInvalidContext;
  *d = ctx_stack.back();
  return 0;
}

}  // extern "C"
