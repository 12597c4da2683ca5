// The codegen stage of `kiln compile`: every kernel of the optimized graph
// emitted and compiled with NVRTC for --target (codegen/kernel_build.h), and
// what --stats and --json report about them (per-kernel registers, shared
// memory, spills). Only for GPU targets and when kiln was built with codegen.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ir/graph.h"
#include "compiler/compile.h"

namespace kiln {

namespace codegen {
struct GraphKernels;
}
namespace plan {
struct Plan;
}

struct KernelsReport;  // opaque: holds codegen's GraphKernels when built

struct KernelsOutcome {
  bool built = false;   // false: target cpu or kiln built without codegen
  std::string why_not;  // when !built
  std::shared_ptr<const KernelsReport> report;
};

// Emits and compiles the kernels of `g` for o.pass.target. `progress`, when
// set, is called from the compiling threads as kernels finish (done, total).
KernelsOutcome build_kernels(const Graph& g, const CompileOptions& o,
                             const std::function<void(int, int)>& progress = {});

// The emitted and compiled kernels (launches, sources, CUBINs) for the plan
// writer to reuse; null when !k.built.
const codegen::GraphKernels* graph_kernels(const KernelsOutcome& k);

// {"arch", "kernels_distinct", "nvrtc_compilations", "cache_hits", "seconds", "max_registers",
//  "max_registers_kernel", "spill_bytes", "nodes_without_kernels": [...],
//  "kernels_detail": [{"name", "registers", "shared_bytes", "spill_bytes"}]}
nlohmann::json kernels_json(const KernelsOutcome& k);
// One line: "kernels: N distinct for sm_90 (M compiled, H cached) in S s; max R registers (NAME); no spills".
std::string kernels_summary(const KernelsOutcome& k);
// The per-kernel table of --stats.
std::string format_kernel_stats(const KernelsOutcome& k);
// After the plan is built from `k`'s kernels: when the plan builder emitted
// some nodes again with fewer threads per block (the one thread cap,
// compiler/plan_writer.h), the plan's kernels replace the list, so that the
// summary, --stats and --json name the kernels the plan runs, not the first,
// uncapped ones; kernels_json says how many were emitted again
// ("kernels_reemitted"). Unchanged when the plan has exactly `k`'s kernels.
void adopt_plan_kernels(KernelsOutcome& k, const plan::Plan& p);
// Number of nodes without a kernel emitter (0 when !built).
size_t nodes_without_kernels(const KernelsOutcome& k);

}  // namespace kiln
