// A fake CUDA driver (built as libcuda.so.1 in build/lib/fake_cuda, never on
// any search path) for testing the runtime's GPU path on a machine without a
// GPU: "device memory" is host memory, modules record whether they got a
// CUBIN or PTX, stream capture records launches and copies into a graph that
// cuGraphLaunch replays, and launches are handed to a callback the test
// installs (it runs the plan's kernels on the CPU simulator). A test process
// dlopens this file by path first; the runtime's dlopen("libcuda.so.1") then
// finds it loaded (same SONAME).
//
// For the autotuner and host staging it also fakes a device clock: every
// launch (direct or replayed from a graph) advances it by a cost computed from
// the launch's dimensions (FAKE_CUDA_COST / fake_cuda_set_cost: "blocks", the
// default, costs 0.005 ms + 0.001 ms per block, so the fewest blocks win;
// "inverse_blocks" costs 1/blocks ms, so the most blocks win), and every copy
// by its bytes at 10 GB/s; events record the clock, so cuEventElapsedTime is
// deterministic. Pinned host memory (cuMemHostAlloc) is tracked, copies say
// whether their host side was pinned, and the calls that matter for ordering
// are logged ("htod pinned s1", "record e3 s2", "wait s2 e3", ...).
// fake_cuda_fail_next(NAME) makes the next call of entry point NAME fail;
// fake_cuda_fail(NAME, SKIP, ERROR) the call after SKIP more with ERROR;
// fake_cuda_set_memory_limit(BYTES) makes cuMemAlloc return
// CUDA_ERROR_OUT_OF_MEMORY past a byte budget (cuMemGetInfo reports it).
// Thread-safe: the state is behind one mutex, each stream has its own
// capture (as with CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), and launches run
// outside the lock so contexts on different threads run kernels concurrently.
// A process without the test's simulator callbacks (kiln itself, loaded with
// LD_LIBRARY_PATH pointing here) only times launches, it runs none.
// Environment: FAKE_CUDA_ARCH ("8.6"), FAKE_CUDA_NAME, FAKE_CUDA_COST,
// FAKE_CUDA_INIT_ERROR (cuInit fails).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <map>
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
struct Stream {
  int id;
};
struct Event {
  int id;
  bool recorded = false;
  double time = 0;
};

// An armed failure: the call after `skip` more calls fails with `error`
// (0: the entry point's usual error).
struct Failure {
  int skip = 0;
  CUresult error = 0;
};

struct State {
  std::mutex mu;
  int major = 9, minor = 0;
  std::string name = "Fake GPU (kiln tests)";
  bool inverse_blocks = false;
  bool init_error = false;
  int cubin_loads = 0, ptx_loads = 0, graph_launches = 0, captured_launches = 0, direct_launches = 0;
  std::map<void*, size_t> allocs;  // live device allocation -> bytes
  size_t live_bytes = 0, memory_limit = SIZE_MAX;
  std::set<void*> pinned;
  int pinned_allocs = 0, events_recorded = 0, next_id = 1;
  double clock_ms = 0;
  std::string log;
  std::map<std::string, Failure> fail_next;
  std::map<void*, Graph> captures;  // stream -> the graph being captured on it
  std::map<std::string, std::unique_ptr<Function>> functions;  // by name: reloads reuse them
  int (*arg_count)(const char*) = nullptr;
  int (*launch)(const char*, const unsigned*, const unsigned*, unsigned, const CUdeviceptr*) = nullptr;
  State() {
    if (const char* a = std::getenv("FAKE_CUDA_ARCH")) std::sscanf(a, "%d.%d", &major, &minor);
    if (const char* n = std::getenv("FAKE_CUDA_NAME")) name = n;
    if (const char* c = std::getenv("FAKE_CUDA_COST")) inverse_blocks = std::strcmp(c, "inverse_blocks") == 0;
    init_error = std::getenv("FAKE_CUDA_INIT_ERROR") != nullptr;
  }
};
State& st() {
  static State s;
  return s;
}

constexpr CUresult kInvalid = 1, kOutOfMemory = 2, kNotReady = 600, kNotFound = 500, kLaunchFailed = 719;

// Every entry point holds the state's lock (run() lets go of it while a
// kernel runs).
using Lock = std::unique_lock<std::mutex>;
#define FAKE_LOCK Lock lock(st().mu)

// The error the test armed for this call of `fn` (0: none); `usual` when
// armed without one (fake_cuda_fail_next).
CUresult failing(const char* fn, CUresult usual) {
  auto it = st().fail_next.find(fn);
  if (it == st().fail_next.end()) return 0;
  if (it->second.skip-- > 0) return 0;
  CUresult e = it->second.error ? it->second.error : usual;
  st().fail_next.erase(it);
  return e;
}
bool capturing(void* stream) { return st().captures.count(stream) > 0; }

void log(const std::string& line) { st().log += line + "\n"; }
int id_of(void* stream) { return stream ? static_cast<Stream*>(stream)->id : 0; }

double cost_ms(const Op& op) {
  if (!op.launch) return double(op.bytes) / 1e7;  // 10 GB/s
  double blocks = double(op.grid[0]) * op.grid[1] * op.grid[2];
  if (blocks <= 0) blocks = 1;
  return st().inverse_blocks ? 1.0 / blocks : 0.005 + 0.001 * blocks;
}

// Called with the lock held; a kernel runs without it.
CUresult run(const Op& op, Lock& lock) {
  st().clock_ms += cost_ms(op);
  if (!op.launch) {
    std::memmove(reinterpret_cast<void*>(op.dst), reinterpret_cast<const void*>(op.src), op.bytes);
    return 0;
  }
  auto* launch = st().launch;
  if (!launch) return 0;  // timing only (no simulator in this process)
  lock.unlock();
  CUresult r = launch(op.fn->name.c_str(), op.grid, op.block, op.shared, op.args.data());
  lock.lock();
  return r;
}

CUresult enqueue(Op op, void* stream, Lock& lock) {
  if (auto it = st().captures.find(stream); it != st().captures.end()) {
    st().captured_launches += op.launch;
    it->second.ops.push_back(std::move(op));
    return 0;
  }
  st().direct_launches += op.launch;
  return run(op, lock);
}

// Staging copies start at their pinned allocation.
bool is_pinned(const void* p) { return st().pinned.count(const_cast<void*>(p)) > 0; }

}  // namespace

extern "C" {

// Test controls.
void fake_cuda_set_arch(int major, int minor) {
  FAKE_LOCK;
  st().major = major;
  st().minor = minor;
}
void fake_cuda_set_kernels(int (*arg_count)(const char*),
                           int (*launch)(const char*, const unsigned*, const unsigned*, unsigned, const CUdeviceptr*)) {
  FAKE_LOCK;
  st().arg_count = arg_count;
  st().launch = launch;
}
// cubin loads, ptx loads, graph launches, captured launches, launches outside a capture, live allocations,
// live pinned host allocations, pinned allocations ever, events recorded.
void fake_cuda_stats(int* out) {
  FAKE_LOCK;
  out[0] = st().cubin_loads;
  out[1] = st().ptx_loads;
  out[2] = st().graph_launches;
  out[3] = st().captured_launches;
  out[4] = st().direct_launches;
  out[5] = int(st().allocs.size());
  out[6] = int(st().pinned.size());
  out[7] = st().pinned_allocs;
  out[8] = st().events_recorded;
}
void fake_cuda_set_cost(const char* mode) {
  FAKE_LOCK;
  st().inverse_blocks = std::strcmp(mode, "inverse_blocks") == 0;
}
void fake_cuda_set_name(const char* name) {
  FAKE_LOCK;
  st().name = name;
}
void fake_cuda_fail_next(const char* fn) {
  FAKE_LOCK;
  st().fail_next[fn] = {};
}
// The call of entry point `fn` ("cuMemAlloc_v2", "cuLaunchKernel",
// "cuGraphLaunch", "cuStreamSynchronize"...) after `skip` more calls returns
// `error`, once. error 0 disarms.
void fake_cuda_fail(const char* fn, int skip, int error) {
  FAKE_LOCK;
  if (error) st().fail_next[fn] = {skip, error};
  else st().fail_next.erase(fn);
}
// cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY when the live bytes would
// pass `bytes` (SIZE_MAX: no limit).
void fake_cuda_set_memory_limit(size_t bytes) {
  FAKE_LOCK;
  st().memory_limit = bytes;
}
// The call log since the last call (then cleared).
const char* fake_cuda_take_log() {
  FAKE_LOCK;
  static std::string taken;
  taken = std::move(st().log);
  st().log.clear();
  return taken.c_str();
}

CUresult cuInit(unsigned) { return st().init_error ? 100 : 0; }  // CUDA_ERROR_NO_DEVICE
// NVRTC asks the driver it finds loaded for its private tables; "not
// supported" makes it compile without them (without this NVRTC crashes in a
// process that has this fake loaded).
CUresult cuGetExportTable(const void** table, const void*) {
  if (table) *table = nullptr;
  return 801;  // CUDA_ERROR_NOT_SUPPORTED
}
CUresult cuDeviceGetName(char* name, int len, int) {
  FAKE_LOCK;
  if (len <= 0) return kInvalid;
  std::snprintf(name, size_t(len), "%s", st().name.c_str());
  return 0;
}
// The real driver's words for the errors tests inject.
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
  FAKE_LOCK;
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
  FAKE_LOCK;
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
  FAKE_LOCK;
  if (st().arg_count && st().arg_count(name) < 0) return kNotFound;
  auto& fn = st().functions[name];
  if (!fn) fn = std::make_unique<Function>(Function{name});
  *f = fn.get();
  return 0;
}
CUresult cuFuncSetAttribute(void*, int, int) { return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  FAKE_LOCK;
  if (CUresult e = failing("cuMemAlloc_v2", kOutOfMemory)) return e;
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
  FAKE_LOCK;
  void* m = reinterpret_cast<void*>(p);
  auto it = st().allocs.find(m);
  if (it == st().allocs.end()) return kInvalid;
  st().live_bytes -= it->second;
  st().allocs.erase(it);
  std::free(m);
  return 0;
}
// Free and total "device" memory: total is the memory limit (or 80 GiB).
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  FAKE_LOCK;
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
  FAKE_LOCK;
  if (CUresult e = failing("cuMemcpyHtoDAsync", kLaunchFailed)) return e;
  if (!capturing(stream))
    log(std::string("htod ") + (is_pinned(s) ? "pinned" : "pageable") + " s" + std::to_string(id_of(stream)));
  return enqueue({false, nullptr, {0, 1, 1}, {0, 1, 1}, 0, {}, d, reinterpret_cast<CUdeviceptr>(s), n}, stream, lock);
}
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, void* stream) {
  FAKE_LOCK;
  if (!capturing(stream))
    log(std::string("dtoh ") + (is_pinned(d) ? "pinned" : "pageable") + " s" + std::to_string(id_of(stream)));
  return enqueue({false, nullptr, {0, 1, 1}, {0, 1, 1}, 0, {}, reinterpret_cast<CUdeviceptr>(d), s, n}, stream, lock);
}
CUresult cuMemHostAlloc(void** p, size_t n, unsigned) {
  FAKE_LOCK;
  if (CUresult e = failing("cuMemHostAlloc", kOutOfMemory)) return e;
  if (n == 0) return kInvalid;
  void* m = std::aligned_alloc(256, (n + 255) / 256 * 256);
  st().pinned.insert(m);
  ++st().pinned_allocs;
  *p = m;
  return 0;
}
CUresult cuMemFreeHost(void* p) {
  FAKE_LOCK;
  if (!st().pinned.erase(p)) return kInvalid;
  std::free(p);
  return 0;
}
CUresult cuEventCreate(void** e, unsigned) {
  FAKE_LOCK;
  *e = new Event{st().next_id++};
  return 0;
}
CUresult cuEventDestroy_v2(void* e) {
  delete static_cast<Event*>(e);
  return 0;
}
CUresult cuEventRecord(void* e, void* stream) {
  FAKE_LOCK;
  if (!e) return kInvalid;
  auto* ev = static_cast<Event*>(e);
  ev->recorded = true;
  ev->time = st().clock_ms;
  ++st().events_recorded;
  log("record e" + std::to_string(ev->id) + " s" + std::to_string(id_of(stream)));
  return 0;
}
CUresult cuEventSynchronize(void* e) {
  FAKE_LOCK;
  if (CUresult r = failing("cuEventSynchronize", kLaunchFailed)) return r;
  return e && static_cast<Event*>(e)->recorded ? 0 : kInvalid;
}
CUresult cuEventElapsedTime(float* ms, void* a, void* b) {
  FAKE_LOCK;
  auto *ea = static_cast<Event*>(a), *eb = static_cast<Event*>(b);
  if (!ea || !eb) return kInvalid;
  if (!ea->recorded || !eb->recorded) return kNotReady;
  *ms = float(eb->time - ea->time);
  return 0;
}
CUresult cuStreamWaitEvent(void* stream, void* e, unsigned) {
  FAKE_LOCK;
  if (!e) return kInvalid;
  log("wait s" + std::to_string(id_of(stream)) + " e" + std::to_string(static_cast<Event*>(e)->id));
  return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void* stream) {
  FAKE_LOCK;
  return enqueue({false, nullptr, {0, 1, 1}, {0, 1, 1}, 0, {}, d, s, n}, stream, lock);
}
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void* stream, void** params, void** extra) {
  FAKE_LOCK;
  auto* fn = static_cast<Function*>(f);
  if (extra) return kInvalid;
  if (CUresult e = failing("cuLaunchKernel", kLaunchFailed)) return e;
  Op op{true, fn, {gx, gy, gz}, {bx, by, bz}, shared, {}, 0, 0, 0};
  if (st().arg_count) {
    int n = st().arg_count(fn->name.c_str());
    if (n < 0) return kNotFound;
    for (int i = 0; i < n; ++i) op.args.push_back(*static_cast<CUdeviceptr*>(params[i]));
  }
  return enqueue(std::move(op), stream, lock);
}
CUresult cuStreamCreate(void** s, unsigned) {
  FAKE_LOCK;
  *s = new Stream{st().next_id++};
  return 0;
}
CUresult cuStreamDestroy_v2(void* s) {
  FAKE_LOCK;
  st().captures.erase(s);
  delete static_cast<Stream*>(s);
  return 0;
}
CUresult cuStreamSynchronize(void*) {
  FAKE_LOCK;
  return failing("cuStreamSynchronize", kLaunchFailed);
}
CUresult cuStreamBeginCapture_v2(void* s, int) {
  FAKE_LOCK;
  if (capturing(s)) return kInvalid;
  st().captures[s] = Graph{};
  return 0;
}
CUresult cuStreamEndCapture(void* s, void** g) {
  FAKE_LOCK;
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
CUresult cuGraphLaunch(void* exec, void* stream) {
  FAKE_LOCK;
  if (CUresult e = failing("cuGraphLaunch", kLaunchFailed)) return e;
  ++st().graph_launches;
  log("graph s" + std::to_string(id_of(stream)));
  for (const Op& op : static_cast<Graph*>(exec)->ops)
    if (CUresult r = run(op, lock); r != 0) return r;
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
