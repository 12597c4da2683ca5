#include "codegen/launch_fit.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "codegen/core/kernel_text.h"
#include "codegen/core/size_expr.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

ArchLimits with_optin(std::string_view arch, long long optin_kb) {
  ArchLimits l;
  l.arch = arch;
  l.shared_optin = optin_kb * 1024;
  return l;
}

std::string dims(const LaunchDims& d) { return fmt::format("{} x {} x {}", d.x, d.y, d.z); }

// Where `__global__ void` followed by optional attributes and `name(` starts
// the kernel's signature: the position just after "__global__ void ", or npos.
size_t signature_at(const std::string& source, const std::string& name) {
  static constexpr std::string_view kGlobal = "__global__ void ";
  for (size_t at = source.find(kGlobal); at != std::string::npos; at = source.find(kGlobal, at + 1)) {
    size_t after = at + kGlobal.size();
    // The kernel's own signature: `name(` directly, or after a launch bound.
    if (source.compare(after, name.size() + 1, name + "(") == 0) return after;
    if (source.compare(after, 18, "__launch_bounds__(") == 0) {
      size_t close = source.find(')', after);
      if (close != std::string::npos && source.compare(close + 2, name.size() + 1, name + "(") == 0) return after;
    }
  }
  return std::string::npos;
}

}  // namespace

namespace {
const ArchLimits* g_override = nullptr;  // ScopedArchLimits (tests)
thread_local unsigned t_cap = 0;         // ThreadCap
}  // namespace

ScopedArchLimits::ScopedArchLimits(const ArchLimits& limits) : limits_(limits), saved_(g_override) {
  g_override = &limits_;
}
ScopedArchLimits::~ScopedArchLimits() { g_override = saved_; }

unsigned thread_cap() { return t_cap; }

ThreadCap::ThreadCap(unsigned threads) : saved_(t_cap) { t_cap = t_cap ? std::min(t_cap, threads) : threads; }
ThreadCap::~ThreadCap() { t_cap = saved_; }

unsigned block_threads(unsigned wanted, unsigned granule) {
  if (t_cap == 0 || wanted <= t_cap || granule == 0) return wanted;
  return std::max(granule, t_cap / granule * granule);
}

bool fewer_threads_may_fit(const LaunchShape& l, const ArchLimits& lim) {
  if (l.block.count() <= 32) return false;
  // One warp of the same kernel, its static shared memory (which may scale
  // with the block) left out: what stays -- the grid, the parameters, the
  // dynamic shared memory, one warp's registers -- fewer threads cannot help.
  LaunchShape one_warp = l;
  one_warp.block = LaunchDims(32);
  one_warp.static_shared = 0;
  one_warp.bounded_threads = -1;
  return launch_misfit(one_warp, lim).empty();
}

const ArchLimits& arch_limits(std::string_view arch) {
  if (g_override && g_override->arch == arch) return *g_override;
  static const ArchLimits sm80 = with_optin("sm_80", 163), sm86 = with_optin("sm_86", 99),
                          sm89 = with_optin("sm_89", 99), sm90 = with_optin("sm_90", 227),
                          sm90a = with_optin("sm_90a", 227);  // Hopper's arch-specific target: sm_90's limits
  if (arch == "sm_80") return sm80;
  if (arch == "sm_86") return sm86;
  if (arch == "sm_89") return sm89;
  if (arch == "sm_90") return sm90;
  if (arch == "sm_90a") return sm90a;
  fail("no launch limits known for arch '{}' (sm_80, sm_86, sm_89, sm_90, sm_90a)", arch);
}

std::string launch_misfit(const LaunchShape& l, const ArchLimits& lim) {
  const unsigned long long threads = l.block.count();
  const unsigned block[3] = {l.block.x, l.block.y, l.block.z};
  const unsigned grid[3] = {l.grid.x, l.grid.y, l.grid.z};
  static constexpr char kAxis[3] = {'x', 'y', 'z'};
  for (int i = 0; i < 3; ++i) {
    if (block[i] == 0 || block[i] > lim.max_block[i])
      return fmt::format("block {} has {} threads in {}, {} allows 1..{}", dims(l.block), block[i], kAxis[i], lim.arch,
                         lim.max_block[i]);
    if (grid[i] == 0 || grid[i] > lim.max_grid[i])
      return fmt::format("grid {} has {} blocks in {}, {} allows 1..{}", dims(l.grid), grid[i], kAxis[i], lim.arch,
                         lim.max_grid[i]);
  }
  if (threads > lim.max_threads)
    return fmt::format("block {} has {} threads, over {}'s {} threads per block", dims(l.block), threads, lim.arch,
                       lim.max_threads);
  if (l.bounded_threads >= 0 && threads > static_cast<unsigned long long>(l.bounded_threads))
    return fmt::format("block of {} threads, over the kernel's __launch_bounds__({})", threads, l.bounded_threads);
  if (l.param_bytes > lim.param_bytes)
    return fmt::format("{} bytes of kernel parameters, over {}'s {}-byte parameter space", l.param_bytes, lim.arch,
                       lim.param_bytes);
  if (l.registers > 0) {
    const long long per_warp = (l.registers * 32ll + 255) / 256 * 256;
    const long long warps = static_cast<long long>((threads + 31) / 32);
    if (per_warp * warps > lim.registers_per_block)
      return fmt::format(
          "{} threads x {} registers ({} warps x {} registers allocated per warp = {}) exceed {}'s {} "
          "registers per block",
          threads, l.registers, warps, per_warp, per_warp * warps, lim.arch, lim.registers_per_block);
  }
  const long long static_shared = std::max(l.static_shared, 0);
  if (static_shared > lim.static_shared)
    return fmt::format("{} bytes of static shared memory, over {}'s {} bytes per block", static_shared, lim.arch,
                       lim.static_shared);
  if (static_shared + l.dynamic_shared > lim.shared_optin)
    return fmt::format("{} static + {} dynamic bytes of shared memory, over {}'s {} bytes per block (with the opt-in)",
                       static_shared, l.dynamic_shared, lim.arch, lim.shared_optin);
  // The runtime opts a kernel in (cuFuncSetAttribute) only when its dynamic
  // bytes alone exceed 48 KB (runtime/gpu_executor.cpp); below that the
  // driver's default applies: static + dynamic within 48 KB.
  if (l.dynamic_shared <= lim.static_shared && static_shared + l.dynamic_shared > lim.static_shared)
    return fmt::format(
        "{} static + {} dynamic bytes of shared memory, over the {} bytes a kernel gets without "
        "the opt-in (the runtime opts in only above {} dynamic bytes)",
        static_shared, l.dynamic_shared, lim.static_shared, lim.static_shared);
  return "";
}

long long declared_launch_bound(const std::string& source, const std::string& name) {
  size_t at = signature_at(source, name);
  if (at == std::string::npos || source.compare(at, 18, "__launch_bounds__(") != 0) return -1;
  return std::strtoll(source.c_str() + at + 18, nullptr, 10);
}

KernelSignature kernel_signature(const std::string& source, const std::string& name) {
  KernelSignature sig;
  const size_t at = signature_at(source, name);
  if (at == std::string::npos) return sig;
  const size_t open = source.find(name + "(", at) + name.size();
  // Commas at the list's own depth separate parameters (KILN_PTR(const T)
  // and template arguments nest).
  int depth = 0;
  std::string one;
  auto push = [&] {
    const size_t b = one.find_first_not_of(" \t\r\n"), e = one.find_last_not_of(" \t\r\n");
    if (b != std::string::npos) sig.params.push_back(one.substr(b, e - b + 1));
    one.clear();
  };
  for (size_t i = open + 1; i < source.size(); ++i) {
    const char c = source[i];
    if (c == '(' || c == '<' || c == '[') ++depth;
    if ((c == ')' || c == '>' || c == ']') && depth-- == 0) {
      push();
      sig.global = at - std::string_view("__global__ void ").size();
      sig.open = open;
      sig.close = i;
      return sig;
    }
    if (c == ',' && depth == 0) push();
    else one += c;
  }
  sig.params.clear();  // no closing parenthesis
  return sig;
}

int kernel_param_count(const std::string& source, const std::string& name) {
  const KernelSignature sig = kernel_signature(source, name);
  return sig.open == std::string::npos ? -1 : static_cast<int>(sig.params.size());
}

long long kernel_param_bytes(const std::string& source, const std::string& name) {
  const KernelSignature sig = kernel_signature(source, name);
  if (sig.open == std::string::npos) return -1;
  long long bytes = 0;
  for (const std::string& p : sig.params) bytes += p.rfind("kiln_syms", 0) == 0 ? 8LL * kMaxKernelSymbols : 8;
  return bytes;
}

void LaunchBounder::apply(NodeKernel& k) {
  const unsigned long long threads = k.block.count();
  if (threads == 0 || k.grid.count() == 0) return;
  if (signature_at(k.source, k.name) == std::string::npos)
    fail("kernel {}: no `__global__ void {}(` signature in its source to bound", k.name, k.name);
  if (declared_launch_bound(k.source, k.name) >= 0) return;  // the emitter's own (tensor-core kernels)
  auto [it, fresh] = threads_of_.emplace(k.name, threads);
  if (!fresh && it->second != threads) {
    const std::string renamed = fmt::format("{}_t{}", k.name, threads);
    k.source = replace_all(k.source, k.name, renamed);
    k.name = renamed;
    threads_of_.emplace(k.name, threads);
  }
  // Over the arch's 1024 the bound would be an NVRTC error; the launch check
  // names the node and the limit instead.
  if (threads > 1024) return;
  const size_t at = signature_at(k.source, k.name);
  k.source.insert(at, fmt::format("__launch_bounds__({}) ", threads));
}

}  // namespace kiln::codegen
