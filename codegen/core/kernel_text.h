// Text every emitted kernel source shares: the guarded prelude that defines
// kiln's pointer macros for NVRTC (docs/simulator.md's NVRTC column; the
// simulator's cuda_sim.h defines them under KILN_SIM), and how op names
// become parts of kernel names.
#pragma once
#include <string>
#include <string_view>

namespace kiln::codegen {

// Guarded, so several kernels can share one translation unit.
inline constexpr std::string_view kKernelPrelude = R"(#ifndef KILN_KERNEL_PRELUDE_
#define KILN_KERNEL_PRELUDE_
#ifndef KILN_SIM
#define KILN_PTR(T) T* __restrict__
#define KILN_PTR_CAST(U, p) reinterpret_cast<U*>(p)
#define KILN_DYNAMIC_SHARED(T, name) \
  extern __shared__ __align__(16) unsigned char kiln_smem_[]; \
  T* name = reinterpret_cast<T*>(kiln_smem_)
#endif
#endif  // KILN_KERNEL_PRELUDE_
)";

// Letters, digits and '_' kept; anything else becomes '_'.
std::string sanitize_identifier(std::string_view s);

// `s` with every occurrence of `from` replaced by `to` (template
// placeholders such as @NAME@ in kernel text).
std::string replace_all(const std::string& s, std::string_view from, std::string_view to);

}  // namespace kiln::codegen
