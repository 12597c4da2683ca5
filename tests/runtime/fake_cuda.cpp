// A fake CUDA driver (built as libcuda.so.1 in build/lib/fake_cuda, never on
// any search path) for testing the runtime's GPU path on a machine without a
// GPU: "device memory" is host memory, modules record whether they got a
// CUBIN or PTX, stream capture records launches and copies into a graph that
// cuGraphLaunch replays, and launches are handed to a callback the test
// installs (it runs the plan's kernels on the CPU simulator). A test process
// dlopens this file by path first; the runtime's dlopen("libcuda.so.1") then
// finds it loaded (same SONAME).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
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

struct State {
  std::mutex mu;
  int major = 9, minor = 0;
  int cubin_loads = 0, ptx_loads = 0, graph_launches = 0, captured_launches = 0, direct_launches = 0;
  std::set<void*> allocs;
  bool capturing = false;
  Graph capture;
  int (*arg_count)(const char*) = nullptr;
  int (*launch)(const char*, const unsigned*, const unsigned*, unsigned, const CUdeviceptr*) = nullptr;
};
State& st() {
  static State s;
  return s;
}

constexpr CUresult kInvalid = 1, kNotFound = 500;

CUresult run(const Op& op) {
  if (!op.launch) {
    std::memmove(reinterpret_cast<void*>(op.dst), reinterpret_cast<const void*>(op.src), op.bytes);
    return 0;
  }
  if (!st().launch) return kInvalid;
  return st().launch(op.fn->name.c_str(), op.grid, op.block, op.shared, op.args.data());
}

CUresult enqueue(Op op) {
  if (st().capturing) {
    st().captured_launches += op.launch;
    st().capture.ops.push_back(std::move(op));
    return 0;
  }
  st().direct_launches += op.launch;
  return run(op);
}

}  // namespace

extern "C" {

// Test controls.
void fake_cuda_set_arch(int major, int minor) {
  st().major = major;
  st().minor = minor;
}
void fake_cuda_set_kernels(int (*arg_count)(const char*),
                           int (*launch)(const char*, const unsigned*, const unsigned*, unsigned, const CUdeviceptr*)) {
  st().arg_count = arg_count;
  st().launch = launch;
}
// cubin loads, ptx loads, graph launches, captured launches, launches outside a capture, live allocations.
void fake_cuda_stats(int* out) {
  out[0] = st().cubin_loads;
  out[1] = st().ptx_loads;
  out[2] = st().graph_launches;
  out[3] = st().captured_launches;
  out[4] = st().direct_launches;
  out[5] = int(st().allocs.size());
}

CUresult cuInit(unsigned) { return 0; }
CUresult cuGetErrorString(CUresult, const char** s) {
  *s = "fake CUDA error";
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
  if (st().arg_count && st().arg_count(name) < 0) return kNotFound;
  static std::vector<std::unique_ptr<Function>> keep;
  keep.push_back(std::make_unique<Function>(Function{name}));
  *f = keep.back().get();
  return 0;
}
CUresult cuFuncSetAttribute(void*, int, int) { return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  if (n == 0) return kInvalid;  // as the real driver
  void* m = std::aligned_alloc(256, (n + 255) / 256 * 256);
  st().allocs.insert(m);
  *p = reinterpret_cast<CUdeviceptr>(m);
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  void* m = reinterpret_cast<void*>(p);
  if (!st().allocs.erase(m)) return kInvalid;
  std::free(m);
  return 0;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) {
  std::memcpy(reinterpret_cast<void*>(d), s, n);
  return 0;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, void*) {
  return enqueue({false, nullptr, {0, 1, 1}, {0, 1, 1}, 0, {}, d, reinterpret_cast<CUdeviceptr>(s), n});
}
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, void*) {
  return enqueue({false, nullptr, {0, 1, 1}, {0, 1, 1}, 0, {}, reinterpret_cast<CUdeviceptr>(d), s, n});
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void*) {
  return enqueue({false, nullptr, {0, 1, 1}, {0, 1, 1}, 0, {}, d, s, n});
}
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void*, void** params, void** extra) {
  auto* fn = static_cast<Function*>(f);
  if (extra || !st().arg_count) return kInvalid;
  int n = st().arg_count(fn->name.c_str());
  if (n < 0) return kNotFound;
  Op op{true, fn, {gx, gy, gz}, {bx, by, bz}, shared, {}, 0, 0, 0};
  for (int i = 0; i < n; ++i) op.args.push_back(*static_cast<CUdeviceptr*>(params[i]));
  return enqueue(std::move(op));
}
CUresult cuStreamCreate(void** s, unsigned) {
  static int dummy;
  *s = &dummy;
  return 0;
}
CUresult cuStreamDestroy_v2(void*) { return 0; }
CUresult cuStreamSynchronize(void*) { return 0; }
CUresult cuStreamBeginCapture_v2(void*, int) {
  if (st().capturing) return kInvalid;
  st().capturing = true;
  st().capture = Graph{};
  return 0;
}
CUresult cuStreamEndCapture(void*, void** g) {
  if (!st().capturing) return kInvalid;
  st().capturing = false;
  *g = new Graph(std::move(st().capture));
  return 0;
}
CUresult cuGraphInstantiateWithFlags(void** exec, void* g, unsigned long long) {
  *exec = new Graph(*static_cast<Graph*>(g));
  return 0;
}
CUresult cuGraphLaunch(void* exec, void*) {
  ++st().graph_launches;
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
