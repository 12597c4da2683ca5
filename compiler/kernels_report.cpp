#include "compiler/kernels_report.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "compiler/targets.h"
#include "runtime/plan_format.h"

#ifdef KILN_HAVE_CODEGEN
#include "codegen/kernel_build.h"
#endif

namespace kiln {

#ifdef KILN_HAVE_CODEGEN
struct KernelsReport {
  std::string arch;
  codegen::GraphKernels gk;
  int reemitted = 0;  // kernels of the plan the thread cap emitted again (adopt_plan_kernels)
};
#else
struct KernelsReport {};
#endif

KernelsOutcome build_kernels(const Graph& g, const CompileOptions& o, const std::function<void(int, int)>& progress) {
  KernelsOutcome out;
#ifdef KILN_HAVE_CODEGEN
  const std::vector<std::string> archs = target_archs(o.pass.target);
  if (archs.empty()) {
    out.why_not = "target cpu (no GPU kernels)";
    return out;
  }
  codegen::KernelBuildOptions ko;
  ko.arch = archs.front();
  ko.more_archs.assign(archs.begin() + 1, archs.end());
  ko.cache_dir = o.cache_dir;
  ko.use_cache = o.kernel_cache;
  ko.source = o.pipeline.source;  // codegen's errors name the model
  ko.progress = progress;
  auto r = std::make_shared<KernelsReport>();
  r->arch = fmt::format("{}", fmt::join(archs, "+"));
  r->gk = codegen::build_graph_kernels(g, ko);
  out.built = true;
  out.report = std::move(r);
#else
  (void)g;
  (void)o;
  (void)progress;
  out.why_not = "kiln was built without codegen (no CUDA toolkit with NVRTC at configure time)";
#endif
  return out;
}

const codegen::GraphKernels* graph_kernels(const KernelsOutcome& k) {
#ifdef KILN_HAVE_CODEGEN
  if (k.built) return &k.report->gk;
#endif
  (void)k;
  return nullptr;
}

void adopt_plan_kernels(KernelsOutcome& k, const plan::Plan& p) {
#ifdef KILN_HAVE_CODEGEN
  if (!k.built || !p.meta.gpu_kernels) return;
  std::set<std::string> first;
  for (const auto& c : k.report->gk.compiled) first.insert(c.name);
  int reemitted = 0;
  for (const plan::Kernel& pk : p.kernels) reemitted += first.count(pk.name) ? 0 : 1;
  if (reemitted == 0) return;
  auto r = std::make_shared<KernelsReport>(*k.report);
  r->reemitted = reemitted;
  r->gk.compiled.clear();
  r->gk.more_compiled.clear();
  for (const plan::Kernel& pk : p.kernels) {
    codegen::CompiledKernel c;
    c.name = pk.name;
    c.arch = pk.arch;
    c.registers = pk.registers;
    c.shared_bytes = pk.static_shared_bytes;
    c.spill_bytes = pk.spill_bytes;
    r->gk.compiled.push_back(std::move(c));
  }
  k.report = std::move(r);
#else
  (void)k;
  (void)p;
#endif
}

size_t nodes_without_kernels(const KernelsOutcome& k) {
#ifdef KILN_HAVE_CODEGEN
  if (k.built) return k.report->gk.missing.size();
#endif
  (void)k;
  return 0;
}

nlohmann::json kernels_json(const KernelsOutcome& k) {
  nlohmann::json j;
  if (!k.built) {
    j["built"] = false;
    j["why_not"] = k.why_not;
    return j;
  }
#ifdef KILN_HAVE_CODEGEN
  const auto& gk = k.report->gk;
  nlohmann::json detail = nlohmann::json::array();
  int max_regs = -1;
  std::string max_name;
  long long spills = 0;
  for (const auto& c : gk.compiled) {
    detail.push_back({{"name", c.name},
                      {"registers", c.registers},
                      {"shared_bytes", c.shared_bytes},
                      {"spill_bytes", c.spill_bytes}});
    if (c.registers > max_regs) max_regs = c.registers, max_name = c.name;
    spills += std::max(0, c.spill_bytes);
  }
  j = {{"built", true},
       {"arch", k.report->arch},
       {"kernels_distinct", gk.compiled.size()},
       {"nvrtc_compilations", gk.nvrtc_compilations},
       {"cache_hits", gk.cache_hits},
       {"seconds", gk.seconds},
       {"max_registers", max_regs},
       {"max_registers_kernel", max_name},
       {"spill_bytes", spills},
       {"nodes_without_kernels", gk.missing},
       {"kernels_reemitted", k.report->reemitted},
       {"kernels_detail", detail}};
#endif
  return j;
}

std::string kernels_summary(const KernelsOutcome& k) {
  if (!k.built) return "kernels: not built: " + k.why_not;
  nlohmann::json j = kernels_json(k);
  std::string s =
      fmt::format("kernels: {} distinct for {} ({} compiled by NVRTC, {} from the cache) in {:.2f} s; ",
                  j["kernels_distinct"].get<size_t>(), j["arch"].get<std::string>(), j["nvrtc_compilations"].get<int>(),
                  j["cache_hits"].get<int>(), j["seconds"].get<double>());
  s += fmt::format("max {} registers ({}); ", j["max_registers"].get<int>(),
                   j["max_registers_kernel"].get<std::string>());
  const long long spills = j["spill_bytes"].get<long long>();
  s += spills ? fmt::format("SPILLS: {} bytes in total", spills) : std::string("no spills");
  if (const int again = j["kernels_reemitted"].get<int>())
    s += fmt::format("; {} emitted again with fewer threads per block to fit", again);
  const size_t missing = j["nodes_without_kernels"].size();
  if (missing) s += fmt::format("; {} nodes have no kernel emitter yet", missing);
  return s;
}

std::string format_kernel_stats(const KernelsOutcome& k) {
  std::ostringstream s;
  if (!k.built) return kernels_summary(k) + "\n";
  nlohmann::json j = kernels_json(k);
  s << fmt::format("{:<56} {:>9} {:>12} {:>11}\n", "kernel", "registers", "shared bytes", "spill bytes");
  for (const auto& d : j["kernels_detail"])
    s << fmt::format("{:<56} {:>9} {:>12} {:>11}\n", d["name"].get<std::string>(), d["registers"].get<int>(),
                     d["shared_bytes"].get<int>(), d["spill_bytes"].get<int>());
  for (const auto& m : j["nodes_without_kernels"]) s << "no kernel emitter: " << m.get<std::string>() << "\n";
  s << kernels_summary(k) << "\n";
  return s.str();
}

}  // namespace kiln
