// Helpers of the memory-plan tests (memory_plan_test.cpp,
// memory_plan_checks_test.cpp, memory_plan_models_test.cpp): values and their
// plans by name, and running a graph inside its planned arena.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>

#include "backends/reference/control_flow_run.h"
#include "ir/control_flow.h"
#include "backends/reference/executor.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "passes/memory_plan.h"
#include "passes/pass_manager.h"
#include "pass_test_util.h"
#include "backends/compare.h"
#include "compiler/compile.h"
#include "conformance/conformance.h"
#include "ir/string_values.h"

namespace kiln::testing::memory_plan {

using kiln::testing::parse;

// A node result by name (the tests name every value).
inline const Value* value(const Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    for (const Value* v : n->outputs())
      if (v->name() == name) return v;
  throw Error("no value %" + name);
}

inline const ValuePlan& plan_of(const MemoryPlan& p, const Graph& g, const std::string& name) {
  const ValuePlan* vp = p.find(value(g, name));
  if (!vp) throw Error("%" + name + " is not planned");
  return *vp;
}

inline bool share_bytes(const ValuePlan& a, const ValuePlan& b) {
  return a.storage == b.storage && a.output_index == b.output_index && a.offset < b.offset + b.size &&
         b.offset < a.offset + a.size;
}

// Runs `g` keeping every node result only in the bytes the plan gives it: one
// arena (filled with a junk pattern first), one buffer per graph output, and
// graph inputs/constants for views of them. Views run no kernel (their bytes
// must already be there); everything else is computed by the reference
// backend from operands read back out of those bytes and written to its
// place. A plan that lets two live values share bytes shows up as wrong results.
inline std::vector<Tensor> run_in_arena(const Graph& g, const MemoryPlan& plan,
                                        const std::map<std::string, Tensor>& feed) {
  std::vector<uint8_t> arena(size_t(plan.arena_bytes), 0xCD);
  std::vector<std::vector<uint8_t>> outs(g.outputs().size());
  for (size_t i = 0; i < outs.size(); ++i) outs[i].assign(g.outputs()[i]->type().nbytes(), 0xCD);
  auto bytes_of = [&](const ValuePlan& p) -> uint8_t* {
    switch (p.storage) {
      case Storage::Arena:
        return arena.data() + p.offset;
      case Storage::Output:
        return outs[p.output_index].data() + p.offset;
      default:
        return nullptr;
    }
  };
  auto read = [&](const Value* v) -> Tensor {
    if (v->is_constant()) return v->data();
    if (v->is_input()) return feed.at(v->name());
    const ValuePlan& p = *plan.find(v);
    Tensor t(v->type());
    const uint8_t* src = nullptr;
    Tensor root_data;
    if (p.storage == Storage::Input || p.storage == Storage::Constant) {
      root_data = p.root->is_constant() ? p.root->data() : feed.at(p.root->name());
      src = static_cast<const uint8_t*>(root_data.raw());
    } else {
      src = bytes_of(p);
    }
    if (t.nbytes()) std::memcpy(t.raw(), src, t.nbytes());
    return t;
  };
  for (const auto& n : g.nodes()) {
    if (n->num_outputs() == 1 && plan.find(n->output(0))->alias == AliasKind::View) continue;
    std::vector<Tensor> ins;
    for (const Value* v : n->inputs()) ins.push_back(v ? read(v) : Tensor());
    std::vector<const Tensor*> ptrs;
    for (size_t i = 0; i < ins.size(); ++i) ptrs.push_back(n->input(int(i)) ? &ins[i] : nullptr);
    std::vector<Tensor> res;
    if (is_control_flow(*n)) {  // if/loop/scan: regions run by the reference's control-flow driver
      res = run_control_flow(*n, ptrs, [&](int r, const std::vector<const Tensor*>& in) {
        return run_graph_reference(*n->region(r), in);
      });
    } else if (n->body()) {
      res = run_graph_reference(*n->body(), ptrs);
    } else {
      std::vector<TensorType> types;
      for (const Value* o : n->outputs()) types.push_back(o->type());
      res = evaluate_op(op_registry().get(n->op()), n->attrs(), ptrs, types, n->describe());
    }
    for (int k = 0; k < n->num_outputs(); ++k) {
      const ValuePlan& p = *plan.find(n->output(k));
      if (res[k].nbytes()) std::memcpy(bytes_of(p), res[k].raw(), res[k].nbytes());
    }
  }
  std::vector<Tensor> results;
  for (const Value* o : g.outputs()) results.push_back(read(o));
  return results;
}

// Returns false when the graph does not run on these inputs at all (the
// conformance run reports that).
inline bool expect_arena_run_matches(const Graph& g, const MemoryPlan& plan, const std::string& what = "",
                                     const std::map<std::string, Tensor>* given = nullptr) {
  // String tensors are objects, not bytes that an arena can hold; no plan
  // holds them (every plan target refuses them, ir/string_values.h).
  if (first_string_value(g)) return false;
  auto feed = given ? *given : testing::random_inputs(g);
  std::vector<Tensor> want;
  try {
    want = ReferenceExecutor(g).run(feed);
  } catch (const Error&) {
    return false;
  }
  std::vector<Tensor> got = run_in_arena(g, plan, feed);
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    EXPECT_EQ(compare_tensors(got[i], want[i], {0, 0}), "") << what << " output " << i;
  return true;
}

inline MemoryPlanOptions no_in_place() {
  MemoryPlanOptions o;
  o.in_place = false;
  return o;
}

}  // namespace kiln::testing::memory_plan
