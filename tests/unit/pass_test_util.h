// Helpers for pass tests: run a graph on the reference backend with seeded
// random inputs, and check that a pass kept the meaning (results before and
// after agree within the dtype's tolerance), as Glow's
// checkNumericalEquivalence does.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "backends/reference/executor.h"
#include "ir/graph.h"
#include "ir/parser.h"
#include "passes/pass.h"
#include "backends/compare.h"

namespace kiln::testing {

// Seeded inputs for every graph input: floats in [-2, 2), ints in [0, 5), bools.
inline std::map<std::string, Tensor> random_inputs(const Graph& g, uint64_t seed = 1) {
  std::map<std::string, Tensor> feed;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (Value* in : g.inputs()) {
    Tensor t(in->type().dtype, in->shape());
    for (int64_t i = 0; i < t.numel(); ++i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      double u = double(s >> 11) / double(1ull << 53);
      if (is_float(t.dtype())) t.set_double(i, u * 4 - 2);
      else if (t.dtype() == DType::Bool) t.set_int(i, u < 0.5);
      else t.set_int(i, int64_t(u * 5));
    }
    feed[in->name()] = std::move(t);
  }
  return feed;
}

// Runs `passes` on a copy of `g` and expects the same results as `g` on the
// reference backend. Returns the rewritten graph for further checks.
inline std::unique_ptr<Graph> expect_pass_keeps_meaning(const Graph& g, const std::vector<std::string>& passes,
                                                        const PassOptions& opts = {}, Tolerance tol = {1e-5, 1e-4}) {
  auto after = g.clone();
  for (const std::string& p : passes) {
    PassStats st;
    create_pass(p)->run(*after, opts, st);
  }
  auto feed = random_inputs(g);
  std::vector<Tensor> want = ReferenceExecutor(g).run(feed);
  std::vector<Tensor> got = ReferenceExecutor(*after).run(feed);
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    Tolerance t =
        is_float(got[i].dtype()) && got[i].dtype() != want[i].dtype() ? default_tolerance(got[i].dtype()) : tol;
    if (got[i].dtype() != want[i].dtype()) got[i] = got[i].cast(want[i].dtype());
    EXPECT_EQ(compare_tensors(got[i], want[i], t), "") << "output " << i;
  }
  return after;
}

inline std::unique_ptr<Graph> parse(const std::string& text) { return parse_graph(text, "test.kir"); }

}  // namespace kiln::testing
