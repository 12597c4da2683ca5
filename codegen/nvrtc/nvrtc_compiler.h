// Compiles CUDA C++ kernel sources with NVRTC to a CUBIN for one GPU arch plus
// the PTX (the fallback a newer GPU can JIT). All kernels of a model are
// compiled together on a pool of threads; identical sources are compiled once.
//
// Options (see KernelCompiler::options()): --std=c++17, -arch=sm_XX (which
// makes NVRTC emit both CUBIN and PTX), -default-device, -I<toolkit include
// dir> (for cuda_fp16.h / cuda_bf16.h), -Xptxas -v; no --use_fast_math.
// Resource usage comes from the ptxas report (-v) in NVRTC's log: "Used N
// registers", "N bytes smem" (static shared memory), "N bytes spill stores",
// "N bytes spill loads". A source with several __global__ functions reports
// the maximum over them; -1 means ptxas reported no entry function.
//
// Errors: a compilation failure throws kiln::Error naming the kernel and arch
// and carrying NVRTC's full log.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::codegen {

class KernelCache;

struct KernelSource {
  std::string name;    // for messages and the result; not part of the code
  std::string source;  // complete CUDA C++ translation unit
};

struct CompiledKernel {
  std::string name;
  std::string arch;            // "sm_90"
  std::vector<uint8_t> cubin;  // for `arch`
  std::string ptx;
  int registers = -1;     // per thread
  int shared_bytes = -1;  // static shared memory per block
  int spill_bytes = -1;   // spill stores + spill loads, bytes per thread
  std::string log;        // NVRTC's log (ptxas report, warnings)
};

// Fills registers/shared_bytes/spill_bytes of `k` from a ptxas -v report.
void parse_ptxas_report(const std::string& log, CompiledKernel& k);

// NVRTC's version as "major.minor".
std::string nvrtc_version();

class KernelCompiler {
 public:
  // `arch`: sm_80, sm_86, sm_89, sm_90 or sm_90a (else kiln::Error). `cache` may be
  // null (no caching); it must outlive the compiler. `extra_options` are
  // appended to the standard options (and so are part of the cache key).
  explicit KernelCompiler(std::string arch, KernelCache* cache = nullptr, std::vector<std::string> extra_options = {});

  // Results in the order of `kernels`. Throws kiln::Error for the first
  // kernel (in input order) that failed.
  std::vector<CompiledKernel> compile(const std::vector<KernelSource>& kernels);

  // Called by the compiling threads after each distinct kernel (done, total).
  void set_progress(std::function<void(int, int)> f) { progress_ = std::move(f); }
  const std::string& arch() const { return arch_; }
  const std::vector<std::string>& options() const { return options_; }
  // NVRTC compilations actually run / served from the cache, since construction.
  int nvrtc_compilations() const { return compilations_; }
  int cache_hits() const { return cache_hits_; }

 private:
  CompiledKernel compile_unique(const KernelSource& k);

  std::string arch_;
  KernelCache* cache_;
  std::vector<std::string> options_;
  std::atomic<int> compilations_{0};
  std::atomic<int> cache_hits_{0};
  std::function<void(int, int)> progress_;
};

}  // namespace kiln::codegen
