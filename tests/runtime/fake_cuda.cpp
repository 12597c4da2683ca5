// A fake CUDA driver (built as libcuda.so.1 in build/lib/fake_cuda, never on
// any search path) for testing the runtime's GPU path on a machine without a
// GPU: "device memory" is host memory, modules record whether they got a
// CUBIN or PTX, stream capture records launches and copies into a graph that
// cuGraphLaunch replays, and launches are handed to a callback the test
// installs (it runs the plan's kernels on the CPU simulator). A test process
// dlopens this file by path first; the runtime's dlopen("libcuda.so.1") then
// finds it loaded (same SONAME). A process can also find it through
// LD_LIBRARY_PATH (the robustness corpus does, with KILN_FAKE_CUDA_ARCH=80 to
// pose as an sm_80 GPU).
//
// Failures on demand (runtime safety tests): fake_cuda_fail() makes the n-th
// next call of an entry point return an error, fake_cuda_set_memory_limit()
// makes cuMemAlloc return CUDA_ERROR_OUT_OF_MEMORY past a byte budget.
// Thread-safe: the state is behind one mutex, each stream has its own capture
// (as with CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), and launches run outside the
// lock so that contexts on different threads run their kernels concurrently.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;

struct Module {
  bool ptx;
};
struct Function {
  std::string name;
};
struct Op {
  bool launch;
  const Function* fn = nullptr;
  unsigned grid[3] = {0, 1, 1}, block[3] = {0, 1, 1}, shared = 0;
  std::vector<CUdeviceptr> args;
  CUdeviceptr dst = 0, src = 0;
  size_t bytes = 0;
};
struct Graph {
  std::vector<Op> ops;
};

// A failure armed by fake_cuda_fail: the call after `skip` more calls fails.
struct Failure {
  int skip = 0;
  CUresult error = 0;
};

struct State {
  State() {
    // KILN_FAKE_CUDA_ARCH=80: pose as an sm_80 GPU (default sm_90).
    if (const char* a = std::getenv("KILN_FAKE_CUDA_ARCH"); a && std::strlen(a) >= 2) {
      major = a[0] - '0';
      minor = std::atoi(a + 1);
    }
  }
  std::mutex mu;
  int major = 9, minor = 0;
  int cubin_loads = 0, ptx_loads = 0, graph_launches = 0, captured_launches = 0, direct_launches = 0;
  std::map<void*, size_t> allocs;  // live allocation -> bytes
  size_t live_bytes = 0, memory_limit = SIZE_MAX;
  std::set<void*> streams;
  std::map<void*, Graph> captures;  // stream -> the graph being captured on it
  std::map<std::string, Failure> failures;
  std::map<std::string, std::unique_ptr<Function>> functions;  // by name: reloads reuse them
  int (*arg_count)(const char*) = nullptr;
  int (*launch)(const char*, const unsigned*, const unsigned*, unsigned, const CUdeviceptr*) = nullptr;
};
State& st() {
  static State s;
  return s;
}

constexpr CUresult kInvalid = 1, kOutOfMemory = 2, kNotFound = 500, kLaunchFailed = 719;

// The error an armed failure of `fn` injects into this call (0: none). Call
// with the lock held.
CUresult injected(const char* fn) {
  auto it = st().failures.find(fn);
  if (it == st().failures.end()) return 0;
  if (it->second.skip-- > 0) return 0;
  CUresult e = it->second.error;
  st().failures.erase(it);
  return e;
}
CUresult injected_locked(const char* fn) {
  std::lock_guard lock(st().mu);
  return injected(fn);
}

// Runs outside the lock: kernels of different contexts run concurrently.
CUresult run(const Op& op) {
  if (!op.launch) {
    std::memmove(reinterpret_cast<void*>(op.dst), reinterpret_cast<const void*>(op.src), op.bytes);
    return 0;
  }
  if (!st().launch) return kInvalid;
  return st().launch(op.fn->name.c_str(), op.grid, op.block, op.shared, op.args.data());
}

CUresult enqueue(Op op, void* stream) {
  {
    std::lock_guard lock(st().mu);
    if (auto it = st().captures.find(stream); it != st().captures.end()) {
      st().captured_launches += op.launch;
      it->second.ops.push_back(std::move(op));
      return 0;
    }
    st().direct_launches += op.launch;
  }
  return run(op);
}

}  // namespace

extern "C" {

// Test controls.
void fake_cuda_set_arch(int major, int minor) {
  std::lock_guard lock(st().mu);
  st().major = major;
  st().minor = minor;
}
void fake_cuda_set_kernels(int (*arg_count)(const char*),
                           int (*launch)(const char*, const unsigned*, const unsigned*, unsigned, const CUdeviceptr*)) {
  std::lock_guard lock(st().mu);
  st().arg_count = arg_count;
  st().launch = launch;
}
// cubin loads, ptx loads, graph launches, captured launches, launches outside a capture, live allocations.
void fake_cuda_stats(int* out) {
  std::lock_guard lock(st().mu);
  out[0] = st().cubin_loads;
  out[1] = st().ptx_loads;
  out[2] = st().graph_launches;
  out[3] = st().captured_launches;
  out[4] = st().direct_launches;
  out[5] = int(st().allocs.size());
}
// The call of entry point `fn` ("cuMemAlloc_v2", "cuLaunchKernel",
// "cuGraphLaunch", "cuStreamSynchronize"...) after `skip` more calls returns
// `error`, once. error 0 disarms.
void fake_cuda_fail(const char* fn, int skip, int error) {
  std::lock_guard lock(st().mu);
  if (error) st().failures[fn] = {skip, error};
  else st().failures.erase(fn);
}
// cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY when the live bytes would
// pass `bytes` (SIZE_MAX: no limit).
void fake_cuda_set_memory_limit(size_t bytes) {
  std::lock_guard lock(st().mu);
  st().memory_limit = bytes;
}

CUresult cuInit(unsigned) { return 0; }
CUresult cuGetErrorString(CUresult r, const char** s) {
  switch (r) {
    case kOutOfMemory: *s = "out of memory"; break;
    case kLaunchFailed: *s = "unspecified launch failure"; break;
    case 700: *s = "an illegal memory access was encountered"; break;
    default: *s = "fake CUDA error";
  }
  return 0;
}
CUresult cuDeviceGetCount(int* n) {
  *n = 1;
  return 0;
}
CUresult cuDeviceGet(int* d, int i) {
  *d = i;
  return i == 0 ? 0 : kInvalid;
}
CUresult cuDeviceGetAttribute(int* v, int attr, int) {
  std::lock_guard lock(st().mu);
  if (attr == 75) *v = st().major;
  else if (attr == 76) *v = st().minor;
  else return kInvalid;
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(void** ctx, int) {
  static int dummy;
  *ctx = &dummy;
  return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int) { return 0; }
CUresult cuCtxPushCurrent_v2(void*) { return 0; }
CUresult cuCtxPopCurrent_v2(void** c) {
  if (c) *c = nullptr;
  return 0;
}
CUresult cuModuleLoadData(void** m, const void* image) {
  std::lock_guard lock(st().mu);
  if (CUresult e = injected("cuModuleLoadData")) return e;
  // PTX is text starting with a comment or directive; a CUBIN is an ELF file.
  bool ptx = std::memcmp(image, "\x7f" "ELF", 4) != 0;
  (ptx ? st().ptx_loads : st().cubin_loads)++;
  *m = new Module{ptx};
  return 0;
}
CUresult cuModuleUnload(void* m) {
  delete static_cast<Module*>(m);
  return 0;
}
CUresult cuModuleGetFunction(void** f, void*, const char* name) {
  std::lock_guard lock(st().mu);
  if (st().arg_count && st().arg_count(name) < 0) return kNotFound;
  auto& fn = st().functions[name];
  if (!fn) fn = std::make_unique<Function>(Function{name});
  *f = fn.get();
  return 0;
}
CUresult cuFuncSetAttribute(void*, int, int) { return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  std::lock_guard lock(st().mu);
  if (CUresult e = injected("cuMemAlloc_v2")) return e;
  if (n == 0) return kInvalid;  // as the real driver
  if (n > st().memory_limit - st().live_bytes) return kOutOfMemory;
  void* m = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (!m) return kOutOfMemory;
  st().allocs.emplace(m, n);
  st().live_bytes += n;
  *p = reinterpret_cast<CUdeviceptr>(m);
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  void* m = reinterpret_cast<void*>(p);
  {
    std::lock_guard lock(st().mu);
    auto it = st().allocs.find(m);
    if (it == st().allocs.end()) return kInvalid;
    st().live_bytes -= it->second;
    st().allocs.erase(it);
  }
  std::free(m);
  return 0;
}
// Free and total "device" memory: total is the memory limit (or 80 GiB).
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  std::lock_guard lock(st().mu);
  size_t total = st().memory_limit == SIZE_MAX ? size_t(80) << 30 : st().memory_limit;
  *total_bytes = total;
  *free_bytes = total > st().live_bytes ? total - st().live_bytes : 0;
  return 0;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) {
  std::memcpy(reinterpret_cast<void*>(d), s, n);
  return 0;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, void* stream) {
  return enqueue({false, nullptr, {0, 1, 1}, {0, 1, 1}, 0, {}, d, reinterpret_cast<CUdeviceptr>(s), n}, stream);
}
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, void* stream) {
  return enqueue({false, nullptr, {0, 1, 1}, {0, 1, 1}, 0, {}, reinterpret_cast<CUdeviceptr>(d), s, n}, stream);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void* stream) {
  return enqueue({false, nullptr, {0, 1, 1}, {0, 1, 1}, 0, {}, d, s, n}, stream);
}
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void* stream, void** params, void** extra) {
  auto* fn = static_cast<Function*>(f);
  int n = 0;
  {
    std::lock_guard lock(st().mu);
    if (CUresult e = injected("cuLaunchKernel")) return e;
    if (extra || !st().arg_count) return kInvalid;
    n = st().arg_count(fn->name.c_str());
  }
  if (n < 0) return kNotFound;
  Op op{true, fn, {gx, gy, gz}, {bx, by, bz}, shared, {}, 0, 0, 0};
  for (int i = 0; i < n; ++i) op.args.push_back(*static_cast<CUdeviceptr*>(params[i]));
  return enqueue(std::move(op), stream);
}
CUresult cuStreamCreate(void** s, unsigned) {
  std::lock_guard lock(st().mu);
  *s = new int(0);
  st().streams.insert(*s);
  return 0;
}
CUresult cuStreamDestroy_v2(void* s) {
  std::lock_guard lock(st().mu);
  if (!st().streams.erase(s)) return kInvalid;
  st().captures.erase(s);
  delete static_cast<int*>(s);
  return 0;
}
CUresult cuStreamSynchronize(void*) { return injected_locked("cuStreamSynchronize"); }
CUresult cuStreamBeginCapture_v2(void* s, int) {
  std::lock_guard lock(st().mu);
  if (!st().streams.count(s) || st().captures.count(s)) return kInvalid;
  st().captures[s] = Graph{};
  return 0;
}
CUresult cuStreamEndCapture(void* s, void** g) {
  std::lock_guard lock(st().mu);
  auto it = st().captures.find(s);
  if (it == st().captures.end()) return kInvalid;
  *g = new Graph(std::move(it->second));
  st().captures.erase(it);
  return 0;
}
CUresult cuGraphInstantiateWithFlags(void** exec, void* g, unsigned long long) {
  *exec = new Graph(*static_cast<Graph*>(g));
  return 0;
}
CUresult cuGraphLaunch(void* exec, void*) {
  {
    std::lock_guard lock(st().mu);
    if (CUresult e = injected("cuGraphLaunch")) return e;
    ++st().graph_launches;
  }
  for (const Op& op : static_cast<Graph*>(exec)->ops)
    if (CUresult r = run(op); r != 0) return r;
  return 0;
}
CUresult cuGraphExecDestroy(void* e) {
  delete static_cast<Graph*>(e);
  return 0;
}
CUresult cuGraphDestroy(void* g) {
  delete static_cast<Graph*>(g);
  return 0;
}

}  // extern "C"
