// Plans are launchable by construction: every emitted kernel declares
// __launch_bounds__(the threads of its block), so ptxas caps its registers at
// what fits that block (65536 / threads, spilling if it must), and every
// launch is checked against the target arch's per-block limits before a plan
// is written -- what cuLaunchKernel would otherwise refuse on the GPU with
// CUDA_ERROR_INVALID_VALUE or CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES.
//
// The limits (CUDA C Programming Guide, "Compute Capabilities", table
// "Technical Specifications per Compute Capability"; the parameter space from
// "Function Parameters": 32,764 bytes on Volta and newer with a CUDA 12.1+
// driver, which kiln requires anyway for NVRTC 13's PTX):
//
//   arch   threads  regs/block  static smem  static+dynamic smem  grid          params
//   sm_80  1024     65536       48 KB        163 KB (opt-in)      2^31-1 x 64K  32764
//   sm_86  1024     65536       48 KB         99 KB (opt-in)      2^31-1 x 64K  32764
//   sm_89  1024     65536       48 KB         99 KB (opt-in)      2^31-1 x 64K  32764
//   sm_90  1024     65536       48 KB        227 KB (opt-in)      2^31-1 x 64K  32764
//
// Registers are allocated per warp in units of 256 (regs x 32 rounded up),
// which is what the block's warps must fit in (the strict fake driver,
// tests/runtime/fake_cuda/modules.cpp, checks the same rule).
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/emitter_table.h"

namespace kiln::codegen {

struct ArchLimits {
  std::string_view arch;
  unsigned long long max_threads = 1024;
  unsigned max_block[3] = {1024, 1024, 64};
  unsigned long long max_grid[3] = {2147483647ull, 65535, 65535};
  long long registers_per_block = 65536;
  long long static_shared = 48 * 1024;
  long long shared_optin = 0;  // static + dynamic per block, with the opt-in
  long long param_bytes = 32764;
};

// The limits of sm_80, sm_86, sm_89 or sm_90; kiln::Error for another arch.
const ArchLimits& arch_limits(std::string_view arch);

// For tests: while alive, arch_limits(limits.arch) answers `limits` (a
// device with a smaller register file or less shared memory, so that a
// launch misfits and the plan builder's retry with fewer threads shows).
class ScopedArchLimits {
 public:
  explicit ScopedArchLimits(const ArchLimits& limits);
  ~ScopedArchLimits();
  ScopedArchLimits(const ScopedArchLimits&) = delete;
  ScopedArchLimits& operator=(const ScopedArchLimits&) = delete;

 private:
  ArchLimits limits_;
  const ArchLimits* saved_;
};

// The one decision of a kernel's threads per block. Every emitter that
// chooses its block size asks here with the threads it would like
// (`wanted`, its heuristic) and writes its kernel for the answer: `wanted`,
// or, while a ThreadCap is in force on this thread, the largest multiple of
// `granule` within the cap, never less than one granule. The plan builder
// sets the cap when a node's launch does not fit the target's per-block
// limits (registers x threads, shared memory, threads; compiler/plan_writer.h)
// and emits the node again. Emitters whose block is fixed by their tiling
// (tensor-core GEMM and attention, which declare their own __launch_bounds__)
// do not ask: their misfit is refused, naming the node and the limit.
unsigned block_threads(unsigned wanted, unsigned granule = 32);

// The cap block_threads applies on this thread (0: none).
unsigned thread_cap();

// Caps block_threads on this thread while alive (nested caps: the smaller).
class ThreadCap {
 public:
  explicit ThreadCap(unsigned threads);
  ~ThreadCap();
  ThreadCap(const ThreadCap&) = delete;
  ThreadCap& operator=(const ThreadCap&) = delete;

 private:
  unsigned saved_;
};

// One launch as the checker sees it; -1: not known (yet).
struct LaunchShape {
  LaunchDims grid, block;
  long long dynamic_shared = 0;
  long long param_bytes = 0;       // kernel parameter bytes (kernel_param_bytes)
  int registers = -1;              // per thread, from ptxas / the CUBIN
  int static_shared = -1;          // per block, from ptxas
  long long bounded_threads = -1;  // the kernel's __launch_bounds__ (-1: none)
};

// "" when the launch fits `lim`, else the first limit it breaks, with the
// figures (e.g. "1024 threads x 94 registers (96 x 32 rounded to 256 per
// warp: 98304) exceed sm_90's 65536 registers per block").
std::string launch_misfit(const LaunchShape& l, const ArchLimits& lim);

// Whether a launch that misfits `lim` might fit with fewer threads per block:
// one warp of it, without its static shared memory (which may scale with the
// block), fits -- so not a misfit of the grid, the parameter space, the
// dynamic shared memory or one warp's registers.
bool fewer_threads_may_fit(const LaunchShape& l, const ArchLimits& lim);

// The threads a launch bound in `source` gives kernel `name`, or -1 when its
// signature has none.
long long declared_launch_bound(const std::string& source, const std::string& name);

// Kernel `name`'s signature in `source`: `__global__ void
// [__launch_bounds__(..)] name(params)`. `global` is where `__global__`
// starts, `open` and `close` where its parameter list's parentheses are
// (std::string::npos when `source` has no such signature); `params` each
// parameter's text without surrounding blanks.
struct KernelSignature {
  size_t global = std::string::npos, open = std::string::npos, close = std::string::npos;
  std::vector<std::string> params;
};
KernelSignature kernel_signature(const std::string& source, const std::string& name);

// How many parameters kernel `name`'s signature in `source` lists, or -1
// when `source` has no such signature.
int kernel_param_count(const std::string& source, const std::string& name);

// The bytes of parameter space kernel `name`'s signature in `source` takes,
// as the driver lays it out: 8 per buffer pointer (or the one pointer to a
// table of them) and the size of a shape-generic kernel's by-value
// `kiln_syms` (codegen/core/size_expr.h; 8-byte members, so no padding). -1
// when `source` has no such signature.
long long kernel_param_bytes(const std::string& source, const std::string& name);

// Gives each kernel __launch_bounds__(its block's threads). A kernel that
// declares its own bound keeps it. Kernels are deduplicated by name later, so
// when one name comes back with a different block (the same text launched
// two ways), that launch's kernel is renamed NAME_tTHREADS.
class LaunchBounder {
 public:
  void apply(NodeKernel& k);

 private:
  std::map<std::string, unsigned long long> threads_of_;
};

}  // namespace kiln::codegen
