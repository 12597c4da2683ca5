// The strict fake CUDA driver as the fake-GPU tests use it: loaded by path
// (after every plan is compiled: NVRTC crashes in a process where it is),
// its test controls, and the launch callback that runs a plan's kernels on
// the simulator. Inline functions in a named namespace: one copy of each
// static for the whole executable.
#pragma once
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>

#include "backends/reference/executor.h"
#include "backends/sim/sim_module.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "kiln/kiln.h"
#include "runtime/engine.h"
#include "tests/unit/pass_test_util.h"
#include "backends/compare.h"
#include "compiler/compile.h"
#include "conformance/conformance.h"
#include "compiler/plan_writer.h"
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "codegen/launch_fit.h"
#include "tests/runtime/control_flow_graphs.h"
#include "tests/runtime/kernel_buffers.h"

namespace kiln::fakegpu {

using CUdeviceptr = unsigned long long;

struct Fake {
  void (*set_arch)(int, int);
  void (*set_kernels)(int (*)(const char*),
                      int (*)(const char*, const unsigned*, const unsigned*, unsigned, const CUdeviceptr*));
  void (*stats)(int*);
  void (*fail_next)(const char*);
  const char* (*take_log)();
  void (*fail)(const char*, int, int);    // entry point, calls to skip, error
  void (*set_memory_limit)(size_t);       // bytes; SIZE_MAX: none
  int (*mem_get_info)(size_t*, size_t*);  // cuMemGetInfo_v2: free, total
  void (*pause)(int);                     // 1: the "GPU" starts nothing until pause(0)
  const char* (*take_races)();            // races found since the last call
  void (*clear_sticky)();                 // a new process, as far as sticky errors go
  int (*set_property)(const char*, int);  // a device limit by name
  void (*set_driver_version)(int);        // 13000: CUDA 13.0
  void (*set_device)(const char*);        // "h100", "a100", "l4", "" (default)
  void (*set_device_count)(int);
  int (*rule)(const char*);     // 1: the rule is on (KILN_FAKE_CUDA_DISABLE turns them off)
  void (*set_alloc_fill)(int);  // the byte new device allocations hold (-1: as allocated)
  void (*set_kernel_buffers)(int (*)(const char*), int (*)(const char*, int, unsigned long long*));
  void* handle;  // the library, for its cu* entry points
  template <typename F>
  F sym(const char* name) const {
    return reinterpret_cast<F>(dlsym(handle, name));
  }
};

inline const std::map<std::string, plan::Plan>& plans();

inline const Fake& fake() {
  static Fake f = [] {
    // NVRTC crashes in a process where the fake driver is loaded (it looks
    // for the real driver's entry points), so every plan is compiled first.
    plans();
    // Loaded by path before the runtime looks for libcuda.so.1 (same SONAME).
    void* h = dlopen(KILN_FAKE_CUDA, RTLD_NOW | RTLD_GLOBAL);
    if (!h) throw std::runtime_error(std::string("cannot load the fake driver: ") + dlerror());
    Fake r;
    r.set_arch = reinterpret_cast<void (*)(int, int)>(dlsym(h, "fake_cuda_set_arch"));
    r.set_kernels = reinterpret_cast<decltype(r.set_kernels)>(dlsym(h, "fake_cuda_set_kernels"));
    r.stats = reinterpret_cast<void (*)(int*)>(dlsym(h, "fake_cuda_stats"));
    r.fail_next = reinterpret_cast<void (*)(const char*)>(dlsym(h, "fake_cuda_fail_next"));
    r.take_log = reinterpret_cast<const char* (*)()>(dlsym(h, "fake_cuda_take_log"));
    r.fail = reinterpret_cast<void (*)(const char*, int, int)>(dlsym(h, "fake_cuda_fail"));
    r.set_memory_limit = reinterpret_cast<void (*)(size_t)>(dlsym(h, "fake_cuda_set_memory_limit"));
    r.mem_get_info = reinterpret_cast<int (*)(size_t*, size_t*)>(dlsym(h, "cuMemGetInfo_v2"));
    r.pause = reinterpret_cast<void (*)(int)>(dlsym(h, "fake_cuda_pause"));
    r.take_races = reinterpret_cast<const char* (*)()>(dlsym(h, "fake_cuda_take_races"));
    r.clear_sticky = reinterpret_cast<void (*)()>(dlsym(h, "fake_cuda_clear_sticky"));
    r.set_property = reinterpret_cast<int (*)(const char*, int)>(dlsym(h, "fake_cuda_set_property"));
    r.set_driver_version = reinterpret_cast<void (*)(int)>(dlsym(h, "fake_cuda_set_driver_version"));
    r.set_device = reinterpret_cast<void (*)(const char*)>(dlsym(h, "fake_cuda_set_device"));
    r.set_device_count = reinterpret_cast<void (*)(int)>(dlsym(h, "fake_cuda_set_device_count"));
    r.rule = reinterpret_cast<int (*)(const char*)>(dlsym(h, "fake_cuda_rule"));
    r.set_alloc_fill = reinterpret_cast<void (*)(int)>(dlsym(h, "fake_cuda_set_alloc_fill"));
    r.set_kernel_buffers = reinterpret_cast<decltype(r.set_kernel_buffers)>(dlsym(h, "fake_cuda_set_kernel_buffers"));
    r.handle = h;
    return r;
  }();
  return f;
}

// The kernels the fake driver runs: name -> simulator entry and the element
// counts of its arguments (from the plan's steps).
struct SimKernel {
  codegen::SimEntry entry;
  std::vector<long long> counts;
};
inline std::map<std::string, SimKernel>& kernels() {
  static std::map<std::string, SimKernel> k;
  return k;
}

inline int arg_count(const char* name) {
  auto it = kernels().find(name);
  return it == kernels().end() ? -1 : int(it->second.counts.size());
}

// Kernel launches still to fail (as a kernel that faults would) before the
// simulator runs any: the runtime-safety tests set it.
inline std::atomic<int> launches_to_fail{0};

// The error a failing launch returns (a sticky one: a kernel that faults).
inline std::atomic<int> launch_error{719};  // CUDA_ERROR_LAUNCH_FAILED

// Null pointers the kernels were launched with (absent optional operands).
inline std::atomic<int> null_pointer_args{0};

// The name of every kernel the fake driver ran, in order (which launches a
// plan's launch list at a shape issued: its launch variants or the generic
// ones). Kernels run on several threads at once (FakeGpuThreads): appended
// under a lock; read it when no run is in flight.
inline std::vector<std::string>& launched_kernels() {
  static std::vector<std::string> names;
  return names;
}
inline std::mutex& launched_kernels_lock() {
  static std::mutex m;
  return m;
}

inline int launch(const char* name, const unsigned* grid, const unsigned* block, unsigned shared,
                  const CUdeviceptr* args) {
  if (launches_to_fail > 0 && launches_to_fail-- > 0) return launch_error;
  {
    std::lock_guard<std::mutex> hold(launched_kernels_lock());
    launched_kernels().push_back(name);
  }
  const SimKernel& k = kernels().at(name);
  std::vector<void*> bufs;
  for (size_t i = 0; i < k.counts.size(); ++i) {
    bufs.push_back(reinterpret_cast<void*>(args[i]));
    if (!args[i]) ++null_pointer_args;
  }
  kiln::sim::LaunchConfig cfg;
  cfg.kernel = name;
  cfg.grid = dim3(grid[0], grid[1], grid[2]);
  cfg.block = dim3(block[0], block[1], block[2]);
  cfg.shared_bytes = shared;
  try {
    codegen::sim_launch(k.entry, cfg, bufs, k.counts);
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << ": " << e.what();
    return 719;  // CUDA_ERROR_LAUNCH_FAILED
  }
  return 0;
}

}  // namespace kiln::fakegpu
