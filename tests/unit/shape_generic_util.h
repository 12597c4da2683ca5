// Helpers shared by the shape-generic kernel tests (shape_generic_*_test.cpp):
// a symbolic graph compiled by the default pipeline, its GPU plan with one
// shape profile, and that plan run on the simulator (plan-on-sim) against
// the reference backend on the graph specialised to one shape.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/compare.h"
#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "tests/unit/pass_test_util.h"

namespace kiln::testing {

// `text` (IR, named `file` in errors) compiled for `target` with its symbolic
// dims kept, by the default pipeline less the passes named in `without`.
inline std::unique_ptr<Graph> compile_symbolic(const std::string& text, const std::string& file,
                                               const std::string& target,
                                               const std::vector<std::string>& without = {}) {
  auto g = parse_graph(text, file);
  CompileOptions o;
  o.pass.target = target;
  o.symbolic = true;
  if (!without.empty()) {
    o.passes = default_pipeline(o.pass);
    for (const std::string& p : without) std::erase(o.passes, p);
  }
  compile_graph(*g, o);
  return g;
}

// The fp32 GPU plan of `g` for `arch` with the one shape profile; errors
// name `source_name`.
inline plan::Plan profile_plan(const Graph& g, const std::string& arch, const plan::Profile& profile,
                               const std::string& source_name) {
  PlanBuildOptions po{arch, "fp32", {}};
  po.profiles = {profile};
  po.source_name = source_name;
  return build_plan(g, po);
}

// A seed for random_inputs from the symbols' values: `start`, then times 131
// plus each value in the symbols' name order.
inline uint64_t seed_of(const SymbolBindings& at_shape, uint64_t start) {
  uint64_t seed = start;
  for (const auto& [name, v] : at_shape) seed = seed * 131 + static_cast<uint64_t>(v);
  return seed;
}

// The plan on the simulator equals the reference backend on `g` specialised
// to `at_shape`, both fed random_inputs(seed): every output's shape, and its
// values within `tol`.
inline void expect_plan_on_sim_equals_reference(const plan::Plan& p, const Graph& g, const SymbolBindings& at_shape,
                                                uint64_t seed, Tolerance tol) {
  std::unique_ptr<Graph> at = specialize_graph(g, at_shape, op_registry());
  const std::map<std::string, Tensor> feed = random_inputs(*at, seed);
  std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
  std::vector<Tensor> got = run_plan_on_sim(p, g, feed);
  ASSERT_EQ(got.size(), want.size());
  std::string where;
  for (const auto& [name, v] : at_shape) where += fmt::format(" {}={}", name, v);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].shape(), want[i].shape()) << where << " output " << i;
    EXPECT_EQ(compare_tensors(got[i], want[i], tol), "") << where << " output " << i;
  }
}

}  // namespace kiln::testing
