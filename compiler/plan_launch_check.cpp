#include "compiler/plan_launch_check.h"

#ifdef KILN_HAVE_CODEGEN
#include <fmt/format.h>

#include "codegen/launch_fit.h"
#include "compiler/targets.h"

namespace kiln::planbuild {

namespace {

// The archs whose per-block limits a launch must fit: every arch the plan's
// code runs on (compiler/targets.h), not only the target's own: an sm_80
// plan's CUBIN also runs on sm_86 and sm_89, whose opt-in shared memory is
// smaller, and its PTX on sm_90.
std::vector<std::string> fit_archs(const std::string& target) { return archs_running_target(target); }

}  // namespace

void check_launch_fits(const plan::Step& s, const Node& n, const std::string& source, const std::string& kernel,
                       int regs, int static_shared, const std::string& cubin_arch, const PlanBuildOptions& o) {
  codegen::LaunchShape l;
  l.grid = {s.grid.x, s.grid.y, s.grid.z};
  l.block = {s.block.x, s.block.y, s.block.z};
  l.dynamic_shared = s.shared_bytes;
  // The one pointer to a table of buffers, or what the kernel's signature
  // takes: a pointer per buffer and, for a shape-generic kernel, its by-value
  // kiln_syms (64 bytes, which no table can hold), as the driver counts it.
  const long long signature_bytes = codegen::kernel_param_bytes(source, kernel);
  l.param_bytes = s.param_table          ? 8
                  : signature_bytes >= 0 ? signature_bytes
                                         : static_cast<long long>(s.args.size()) * 8;
  l.bounded_threads = codegen::declared_launch_bound(source, kernel);
  l.registers = regs;
  l.static_shared = static_shared;
  for (const std::string& arch : fit_archs(o.target)) {
    const codegen::ArchLimits& lim = codegen::arch_limits(arch);
    std::string misfit = codegen::launch_misfit(l, lim);
    if (!misfit.empty())
      throw LaunchMisfit(fmt::format("{}{}: kernel {}{} cannot be launched on {}{}: {}",
                                     o.source_name.empty() ? "" : o.source_name + ": ", n.describe(), kernel,
                                     cubin_arch.empty() ? "" : " (" + cubin_arch + " CUBIN)", arch,
                                     o.target == kTargetPortable ? " (a portable plan runs on every supported arch)"
                                     : arch != o.target          ? fmt::format(" (a {} plan runs there too)", o.target)
                                                                 : "",
                                     misfit),
                         &n, l.block.count(), codegen::fewer_threads_may_fit(l, lim));
  }
}

}  // namespace kiln::planbuild
#endif
