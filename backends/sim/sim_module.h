// Compiles emitted kernel sources for the CPU simulator (backends/sim) and
// loads them: the host C++ compiler builds a shared object with cuda_sim.h
// force-included and KILN_SIM defined; kernels are found by the entry every
// emitter writes under #ifdef KILN_SIM:
//   extern "C" int <name>_sim(const kiln::sim::LaunchConfig*, void* const* buffers,
//                             const long long* counts, std::string* error)
// The module resolves the simulator runtime (kiln::sim::run_grid, the fiber
// state...) from the process: the executable must link kiln_sim and export
// its symbols (CMake ENABLE_EXPORTS / -rdynamic); load() checks and says so.
//
// Several sources go into one module (one translation unit: the preludes are
// guarded), since the host compiler's time is mostly the CUDA headers. A
// compile() call splits its kernels over a few modules built in parallel.
//
// Cache: <dir>/sim/<xxh64>.so with <xxh64>.key holding the full key (the
// translation unit and the compiler command); a lookup compares the key in
// full. Files are written under temporary names and renamed into place.
// The simulator headers are embedded in the binary and written to
// <dir>/sim/include/<xxh64 of their text>/ (with cuda_sim.h precompiled there
// on the first miss), so modules never read kiln's source tree.
// Directory: as codegen/nvrtc/kernel_cache.h (argument, $KILN_CACHE_DIR,
// $XDG_CACHE_HOME/kiln, ~/.cache/kiln).
#pragma once
#include <atomic>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_runtime.h"

namespace kiln::codegen {

// A kernel's simulator entry and how many buffer parameters the kernel
// takes (its signature's; -1: not known), which sim_launch checks the
// buffers against: the entry reads buffers[i] for every parameter i.
struct SimEntry {
  using Fn = int (*)(const kiln::sim::LaunchConfig*, void* const*, const long long*, std::string*);
  Fn fn = nullptr;
  int params = -1;
  SimEntry() = default;
  SimEntry(std::nullptr_t) {}
  SimEntry(Fn f, int n) : fn(f), params(n) {}
  explicit operator bool() const { return fn != nullptr; }
};

// A loaded shared object (dlclose on destruction).
class SimModule {
 public:
  SimModule(std::filesystem::path so_path);
  ~SimModule();
  SimModule(const SimModule&) = delete;
  SimModule& operator=(const SimModule&) = delete;
  // The entry of kernel `name` taking `params` buffers (-1: not known);
  // throws kiln::Error if absent.
  SimEntry entry(const std::string& name, int params = -1) const;

 private:
  void* handle_ = nullptr;
  std::filesystem::path path_;
};

// Runs a kernel: `buffers` and `counts` are out first, then the operands.
// Throws kiln::sim::SimError with the simulator's message, and kiln::Error
// when there are fewer buffers than the kernel has parameters (the entry
// would read past them). More are allowed: the first ones are bound, as a
// driver reads only the parameters the kernel's image declares (a node's
// kernels share its bindings; some take a prefix of them).
void sim_launch(SimEntry entry, const kiln::sim::LaunchConfig& cfg, const std::vector<void*>& buffers,
                const std::vector<long long>& counts);

class SimCompiler {
 public:
  explicit SimCompiler(std::filesystem::path cache_dir = {});

  // Compiles `kernels` into up to `modules` shared objects (0: the core
  // count), in parallel, from the cache where possible. Returns each
  // kernel's entry by name, valid while this compiler lives (it keeps the
  // modules loaded). Throws kiln::Error with the compiler's output when a
  // module fails to compile.
  std::map<std::string, SimEntry> compile(const std::vector<KernelSource>& kernels, int modules = 0);

  // The compiler command (without the input and output files); part of the key.
  const std::string& command() const { return command_; }
  const std::filesystem::path& dir() const { return dir_; }
  int compilations() const { return compilations_.load(); }
  int cache_hits() const { return cache_hits_.load(); }

 private:
  std::shared_ptr<SimModule> build(const std::string& tu);
  void ensure_precompiled_header();

  std::filesystem::path dir_;
  std::filesystem::path shim_;  // the materialized cuda_sim.h
  std::string flags_;           // shared by modules and the precompiled shim
  std::string command_;
  std::once_flag pch_once_;
  std::vector<std::shared_ptr<SimModule>> loaded_;  // keeps entries valid
  std::atomic<int> compilations_{0};
  std::atomic<int> cache_hits_{0};
};

}  // namespace kiln::codegen
