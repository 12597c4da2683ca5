// The build targets and precisions kiln compiles for, checked the same way
// whichever front end asks (the CLI's --target/--precision, Python's
// kiln.compile, the builder API): a target kiln has no kernels for (sm_75)
// is an error, not a plan that fails later on the GPU.
//
// Targets:
//   auto      the default: resolved by resolve_target() before anything is
//             compiled -- the local GPU's arch when a CUDA driver with a
//             device is present, else "portable". Never a CPU-only plan.
//   portable  a GPU plan for any GPU kiln supports: the graph is optimized
//             once, every kernel carries a CUBIN for each of portable_archs()
//             and the PTX of the first (compute_80), which the driver JITs
//             on newer archs. Launches must fit every supported arch.
//   sm_XX     one arch: its CUBIN and PTX.
//   cpu       a plan without GPU kernels (runs on the runtime's CPU path);
//             only when asked for.
#pragma once
#include <string>
#include <vector>

namespace kiln {

inline constexpr const char* kTargetAuto = "auto";
inline constexpr const char* kTargetPortable = "portable";

// "auto", "cpu", "portable", then the GPU archs codegen supports ("sm_80", ...).
const std::vector<std::string>& supported_targets();
// "fp32", "tf32", "fp16", "bf16".
const std::vector<std::string>& supported_precisions();

// The archs a portable plan has CUBINs for; the first one's PTX is the plan's
// PTX (it JIT-compiles on every newer arch).
const std::vector<std::string>& portable_archs();

// The archs a resolved target builds CUBINs for ({} for cpu; the first is the
// one whose PTX the plan carries). kiln::Error for "auto" (resolve it first).
std::vector<std::string> target_archs(const std::string& target);
// Every GPU arch kiln knows the limits of that a resolved target's plan runs
// on, so every launch must fit each: a CUBIN runs on its own major arch at an
// equal or newer minor (sm_80's on sm_86 and sm_89, with 99 KB of opt-in
// shared memory instead of 163), and the plan's PTX is JIT-compiled on any
// newer arch (an sm_86 plan on sm_90). sm_80 -> sm_80, sm_86, sm_89, sm_90;
// portable -> all but sm_90a; sm_90a (arch-specific: sm_90 devices only) ->
// sm_90a; cpu -> none. kiln::Error for "auto".
std::vector<std::string> archs_running_target(const std::string& target);
// Whether a target builds GPU kernels ("auto" does: it never resolves to cpu).
bool is_gpu_target(const std::string& target);

// Throws kiln::Error naming the value and the accepted ones.
void check_target(const std::string& target);
void check_precision(const std::string& precision);

// What "auto" (or any target) means on this machine.
struct ResolvedTarget {
  std::string target;  // cpu | portable | sm_XX, never "auto"
  std::string why;     // for a resolved "auto": the one-line reason ("" otherwise)
};

// The local GPU as resolve_target sees it; tests and embedders may pass their
// own (no GPU: `present` false, with `why` saying what was missing).
struct LocalGpu {
  bool present = false;
  std::string name, arch;  // "NVIDIA H100 80GB HBM3", "sm_90"
  std::string why;         // when !present: no driver, no device
};
// Device 0 of the CUDA driver (runtime/cuda_driver.h, loaded with dlopen).
LocalGpu detect_local_gpu();

// A target other than "auto" is returned as is (after check_target). "auto"
// becomes the local GPU's arch when kiln supports it, else "portable" (no
// driver, no device, or a GPU arch kiln has no CUBIN target for: its PTX
// runs on newer GPUs). `gpu` defaults to detect_local_gpu().
ResolvedTarget resolve_target(const std::string& requested);
ResolvedTarget resolve_target(const std::string& requested, const LocalGpu& gpu);

}  // namespace kiln
