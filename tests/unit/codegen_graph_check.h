// Helpers for codegen tests that check whole graphs: every kernel the sim
// backend emits for a set of graphs compiles with NVRTC for sm_80 and sm_90
// (registers and spills reported), and each graph gives on the simulator
// what the reference backend gives.
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "backends/reference/executor.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_executor.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "tests/unit/pass_test_util.h"
#include "backends/compare.h"

namespace kiln::testing {

// Compiles every kernel of `graphs` (each distinct source once) for sm_80 and
// sm_90; expects no failure and no spills. Returns the number of kernels.
inline size_t expect_kernels_compile(const std::vector<const Graph*>& graphs, const std::string& what) {
  std::vector<codegen::KernelSource> sources;
  std::map<std::string, bool> seen;
  for (const Graph* g : graphs)
    for (const auto& n : g->nodes()) {
      if (!n->body() && (n->op() == "reshape" || n->op() == "identity")) continue;
      const codegen::KernelEmitter* e = codegen::emitter_for(*n);
      if (!e) {
        ADD_FAILURE() << "no emitter for " << n->describe();
        continue;
      }
      for (const codegen::NodeKernel& k : e->emit(*n))
        if (!seen[k.name]) {
          seen[k.name] = true;
          sources.push_back({k.name, k.source});
        }
    }
  codegen::KernelCache cache;
  int max_regs = 0, spills = 0;
  std::string max_at;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks;
    try {
      ks = compiler.compile(sources);
    } catch (const Error& e) {
      ADD_FAILURE() << arch << ": " << e.what();
      continue;
    }
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_FALSE(ks[i].cubin.empty()) << sources[i].name;
      if (ks[i].registers > max_regs) {
        max_regs = ks[i].registers;
        max_at = sources[i].name + " " + arch;
      }
      if (ks[i].spill_bytes > 0) {
        ++spills;
        fmt::print("  spills: {} on {}: {} bytes\n", sources[i].name, arch, ks[i].spill_bytes);
      }
    }
  }
  fmt::print("{}: {} kernels compiled for sm_80/sm_90, max registers {} ({}), {} with spills\n", what, sources.size(),
             max_regs, max_at, spills);
  EXPECT_EQ(spills, 0);
  return sources.size();
}

// Runs `g` on the simulator and on the reference with seeded inputs; floats
// within `tol` (or the dtype's default tolerance for f16/bf16), others exact.
inline void expect_sim_matches_reference(const Graph& g, Tolerance tol = {1e-5, 1e-4}, uint64_t seed = 7) {
  auto feed = random_inputs(g, seed);
  std::vector<Tensor> want = ReferenceExecutor(g).run(feed);
  codegen::SimExecutor sim(g);
  std::vector<Tensor> got = sim.run(feed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].type(), want[i].type()) << "result " << i;
    const DType t = want[i].dtype();
    const Tolerance tt = !is_float(t)                            ? Tolerance{0, 0}
                         : (t == DType::F16 || t == DType::BF16) ? default_tolerance(t)
                                                                 : tol;
    EXPECT_EQ(compare_tensors(got[i], want[i], tt), "") << "result " << i << "\n" << print_graph(g);
  }
}

}  // namespace kiln::testing
