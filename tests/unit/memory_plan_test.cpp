// Memory planning (passes/memory_plan.h): hand-built graphs with known
// answers (chains reuse, diamonds, views, in-place only where legal, graph
// outputs), validate() rejecting broken plans, and every conformance model
// and real model planned after the default pipeline: validate() holds, and
// running the graph with every value read from and written to its planned
// bytes of one arena gives the reference results.
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

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::parse;

// A node result by name (the tests name every value).
const Value* value(const Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    for (const Value* v : n->outputs())
      if (v->name() == name) return v;
  throw Error("no value %" + name);
}

const ValuePlan& plan_of(const MemoryPlan& p, const Graph& g, const std::string& name) {
  const ValuePlan* vp = p.find(value(g, name));
  if (!vp) throw Error("%" + name + " is not planned");
  return *vp;
}

bool share_bytes(const ValuePlan& a, const ValuePlan& b) {
  return a.storage == b.storage && a.output_index == b.output_index && a.offset < b.offset + b.size &&
         b.offset < a.offset + a.size;
}

// Runs `g` keeping every node result only in the bytes the plan gives it: one
// arena (filled with a junk pattern first), one buffer per graph output, and
// graph inputs/constants for views of them. Views run no kernel (their bytes
// must already be there); everything else is computed by the reference
// backend from operands read back out of those bytes and written to its
// place. A plan that lets two live values share bytes shows up as wrong results.
std::vector<Tensor> run_in_arena(const Graph& g, const MemoryPlan& plan, const std::map<std::string, Tensor>& feed) {
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
bool expect_arena_run_matches(const Graph& g, const MemoryPlan& plan, const std::string& what = "",
                              const std::map<std::string, Tensor>* given = nullptr) {
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

MemoryPlanOptions no_in_place() {
  MemoryPlanOptions o;
  o.in_place = false;
  return o;
}

// ---------------------------------------------------------------------------

// softmax is a reduction: never in place. Four in a row need two buffers.
TEST(MemoryPlan, ChainReusesMemory) {
  auto g = parse(R"(
graph @chain(%x: f32[64,64]) -> (f32[64,64]) {
  %a = softmax(%x) {axis=1} : f32[64,64]
  %b = softmax(%a) {axis=1} : f32[64,64]
  %c = softmax(%b) {axis=1} : f32[64,64]
  %d = softmax(%c) {axis=1} : f32[64,64]
  return %d
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  EXPECT_EQ(p.naive_bytes, 3 * 16384);
  EXPECT_EQ(p.arena_bytes, 2 * 16384);
  EXPECT_EQ(p.live_peak_bytes, 2 * 16384);
  EXPECT_EQ(p.in_place, 0);
  EXPECT_EQ(plan_of(p, *g, "a").offset, plan_of(p, *g, "c").offset);
  EXPECT_FALSE(share_bytes(plan_of(p, *g, "a"), plan_of(p, *g, "b")));
  EXPECT_FALSE(share_bytes(plan_of(p, *g, "b"), plan_of(p, *g, "c")));
  EXPECT_EQ(plan_of(p, *g, "d").storage, Storage::Output);
  expect_arena_run_matches(*g, p);
}

// A pointwise chain runs in one buffer: each op overwrites its dying operand.
TEST(MemoryPlan, PointwiseChainRunsInPlace) {
  auto g = parse(R"(
graph @pw(%x: f32[1000]) -> (f32[1000]) {
  %a = exp(%x) : f32[1000]
  %b = neg(%a) : f32[1000]
  %c = tanh(%b) : f32[1000]
  %d = relu(%c) : f32[1000]
  return %d
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  EXPECT_EQ(p.in_place, 3);  // b, c and d; a cannot overwrite the graph input
  EXPECT_EQ(plan_of(p, *g, "a").alias, AliasKind::None);
  EXPECT_EQ(plan_of(p, *g, "b").alias_of, value(*g, "a"));
  EXPECT_EQ(plan_of(p, *g, "d").root, value(*g, "a"));
  // d is the graph output, so the whole chain lives in the caller's buffer.
  EXPECT_EQ(plan_of(p, *g, "a").storage, Storage::Output);
  EXPECT_EQ(p.arena_bytes, 0);
  expect_arena_run_matches(*g, p);
  MemoryPlan q = plan_memory(*g, no_in_place());
  q.validate();
  EXPECT_EQ(q.in_place, 0);
  EXPECT_EQ(q.arena_bytes, 2 * 4096);  // 4000 bytes each, rounded up to 256
  expect_arena_run_matches(*g, q);
}

// a feeds two branches: it lives until both ran, and three buffers are live
// at the second branch; the join overwrites one branch in place.
TEST(MemoryPlan, Diamond) {
  auto g = parse(R"(
graph @diamond(%x: f32[32,32]) -> (f32[32]) {
  %a = softmax(%x) {axis=1} : f32[32,32]
  %b = softmax(%a) {axis=0} : f32[32,32]
  %c = log_softmax(%a) {axis=1} : f32[32,32]
  %d = add(%b, %c) : f32[32,32]
  %e = reduce_sum(%d) {axes=[0], keepdims=0} : f32[32]
  return %e
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  const ValuePlan &a = plan_of(p, *g, "a"), &b = plan_of(p, *g, "b"), &c = plan_of(p, *g, "c"),
                  &d = plan_of(p, *g, "d");
  EXPECT_FALSE(share_bytes(a, b));
  EXPECT_FALSE(share_bytes(a, c));
  EXPECT_FALSE(share_bytes(b, c));
  EXPECT_EQ(d.alias, AliasKind::InPlace);
  EXPECT_EQ(d.alias_of, value(*g, "b"));
  EXPECT_EQ(d.offset, b.offset);
  EXPECT_EQ(p.arena_bytes, 3 * 4096);
  EXPECT_EQ(p.naive_bytes, 4 * 4096);
  expect_arena_run_matches(*g, p);
}

// A reshape is a view: same bytes, and its operand's bytes stay taken while
// the view is read, even after the operand's own last use.
TEST(MemoryPlan, ViewsAliasAndExtendLifetime) {
  auto g = parse(R"(
graph @view(%x: f32[16,64]) -> (f32[1024], f32[16,64]) {
  %a = softmax(%x) {axis=1} : f32[16,64]
  %r = reshape(%a) {shape=[1024]} : f32[1024]
  %b = softmax(%x) {axis=0} : f32[16,64]
  %c = softmax(%b) {axis=0} : f32[16,64]
  %s = softmax(%r) {axis=0} : f32[1024]
  return %s, %c
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  const ValuePlan &a = plan_of(p, *g, "a"), &r = plan_of(p, *g, "r"), &b = plan_of(p, *g, "b");
  EXPECT_EQ(r.alias, AliasKind::View);
  EXPECT_EQ(r.alias_of, value(*g, "a"));
  EXPECT_EQ(r.offset, a.offset);
  EXPECT_EQ(r.storage, Storage::Arena);
  EXPECT_EQ(p.views, 1);
  EXPECT_FALSE(share_bytes(a, b));     // a's bytes are read through %r after %b is made
  EXPECT_EQ(p.naive_bytes, 3 * 4096);  // a, r and b (s and c are outputs)
  EXPECT_EQ(p.arena_bytes, 2 * 4096);
  expect_arena_run_matches(*g, p);
}

// In place only where legal: not over an operand read later, not over an
// operand that is broadcast, a graph input, a constant or a graph output, not
// by a non-pointwise op, not across element sizes.
TEST(MemoryPlan, InPlaceOnlyWhenLegal) {
  auto g = parse(R"(
graph @legal(%x: f32[8,8], %v: f32[8]) -> (f32[8,8], f32[8,8]) {
  %k = const f32[8,8] splat<2.0>
  %a = softmax(%x) {axis=1} : f32[8,8]
  %y = exp(%a) : f32[8,8]
  %z = add(%a, %y) : f32[8,8]
  %w = add(%z, %k) : f32[8,8]
  %row = softmax(%v) {axis=0} : f32[8]
  %q = softmax(%w) {axis=0} : f32[8,8]
  %bc = mul(%row, %q) : f32[8,8]
  %h = cast(%bc) {to="f16"} : f16[8,8]
  %i = cast(%h) {to="f32"} : f32[8,8]
  %t = transpose(%i) {perm=[1,0]} : f32[8,8]
  %o = softmax(%t) {axis=1} : f32[8,8]
  %o2 = sigmoid(%o) : f32[8,8]
  return %o, %o2
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  EXPECT_EQ(plan_of(p, *g, "y").alias, AliasKind::None) << "a is read again by z";
  EXPECT_EQ(plan_of(p, *g, "z").alias, AliasKind::InPlace);  // a and y both die at z
  EXPECT_EQ(plan_of(p, *g, "z").alias_of, value(*g, "a"));
  EXPECT_EQ(plan_of(p, *g, "w").alias_of, value(*g, "z"));  // not over the constant
  EXPECT_EQ(plan_of(p, *g, "bc").alias_of, value(*g, "q")) << "not over the broadcast %row";
  EXPECT_EQ(plan_of(p, *g, "h").alias, AliasKind::None) << "f16 result over f32 operand";
  EXPECT_EQ(plan_of(p, *g, "i").alias, AliasKind::None) << "f32 result over f16 operand";
  EXPECT_EQ(plan_of(p, *g, "o2").alias, AliasKind::None) << "o is a graph output";
  EXPECT_EQ(plan_of(p, *g, "t").alias, AliasKind::None) << "transpose is not pointwise";
  EXPECT_FALSE(share_bytes(plan_of(p, *g, "t"), plan_of(p, *g, "i")));
  EXPECT_EQ(p.in_place, 3);
  expect_arena_run_matches(*g, p);
}

// Over a graph input: never, even when the input dies there.
TEST(MemoryPlan, NeverOverGraphInputs) {
  auto g = parse(R"(
graph @inputs(%x: f32[256]) -> (f32[256]) {
  %a = relu(%x) : f32[256]
  %b = softmax(%a) {axis=0} : f32[256]
  return %b
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  EXPECT_EQ(p.in_place, 0);
}

// Same element size, other dtype: a cast f32 -> i32 may overwrite its operand.
TEST(MemoryPlan, InPlaceAcrossDtypesOfOneSize) {
  auto g = parse(R"(
graph @cast(%x: f32[64]) -> (i32[64]) {
  %a = softmax(%x) {axis=0} : f32[64]
  %b = cast(%a) {to="i32"} : i32[64]
  %c = neg(%b) : i32[64]
  return %c
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  EXPECT_EQ(plan_of(p, *g, "b").alias_of, value(*g, "a"));
  expect_arena_run_matches(*g, p);
}

// A node's workspace (split-K partial sums) lives in the arena at that node
// only: apart from every value live there, reused by values live elsewhere,
// counted in the live peak; validate() rejects one that overlaps a live value.
TEST(MemoryPlan, WorkspaceLivesAtItsNodeOnly) {
  auto g = parse(R"(
graph @ws(%x: f32[64,64]) -> (f32[64,64]) {
  %a = softmax(%x) {axis=1} : f32[64,64]
  %b = softmax(%a) {axis=1} : f32[64,64]
  %c = softmax(%b) {axis=1} : f32[64,64]
  %d = softmax(%c) {axis=1} : f32[64,64]
  return %d
})");
  const Node* second = value(*g, "b")->producer();
  MemoryPlanOptions o;
  o.workspace_bytes = [&](const Node& n) { return &n == second ? int64_t{40000} : int64_t{0}; };
  MemoryPlan p = plan_memory(*g, o);
  p.validate();
  ASSERT_EQ(p.workspaces.size(), 1u);
  const WorkspacePlan* w = p.workspace(second);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(p.workspace(value(*g, "a")->producer()), nullptr);
  EXPECT_EQ(w->position, 1);
  EXPECT_EQ(w->size, 40000);
  EXPECT_EQ(w->offset % 256, 0);
  // Apart from %a and %b (live at node 1), inside the arena.
  for (const char* v : {"a", "b"}) {
    const ValuePlan& vp = plan_of(p, *g, v);
    EXPECT_TRUE(vp.offset + vp.size <= w->offset || w->offset + w->size <= vp.offset) << v;
  }
  EXPECT_LE(w->offset + w->size, p.arena_bytes);
  EXPECT_EQ(p.live_peak_bytes, 2 * 16384 + 40192);  // %a, %b and the workspace rounded to 256 bytes
  EXPECT_NE(p.str().find("workspace of #1"), std::string::npos);
  // Overlapping a live value is caught.
  MemoryPlan bad = p;
  bad.workspaces[0].offset = plan_of(p, *g, "a").offset;
  bad.workspaces[0].size = 256;  // inside the arena: only the overlap is wrong
  EXPECT_THROW(bad.validate(), Error);
  bad = p;
  bad.workspaces[0].offset = p.arena_bytes;  // outside the arena
  EXPECT_THROW(bad.validate(), Error);
  // A workspace at node 3 may reuse %a's bytes (dead by then).
  const Node* fourth = value(*g, "d")->producer();
  o.workspace_bytes = [&](const Node& n) { return &n == fourth ? int64_t{16384} : int64_t{0}; };
  MemoryPlan q = plan_memory(*g, o);
  q.validate();
  EXPECT_EQ(q.arena_bytes, 2 * 16384);
  expect_arena_run_matches(*g, q);
}

// A fused node counts as one node: its body's values are not planned; made of
// pointwise ops only, it may run in place; with a reduction inside, it may not.
TEST(MemoryPlan, FusedNodes) {
  auto g = parse(R"(
graph @fused(%x: f32[4,32]) -> (f32[4,32]) {
  %a = softmax(%x) {axis=1} : f32[4,32]
  %f = fused(%a) {kind="pointwise"} : f32[4,32] {
    graph @f0(%p: f32[4,32]) -> (f32[4,32]) {
      %e = exp(%p) : f32[4,32]
      %n = neg(%e) : f32[4,32]
      return %n
    }
  }
  %s = fused(%f) {kind="reduction"} : f32[4,32] {
    graph @f1(%p: f32[4,32]) -> (f32[4,32]) {
      %e = exp(%p) : f32[4,32]
      %m = softmax(%e) {axis=1} : f32[4,32]
      return %m
    }
  }
  %t = softmax(%s) {axis=0} : f32[4,32]
  return %t
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  EXPECT_EQ(p.values.size(), 4u);
  EXPECT_EQ(p.naive_bytes, 3 * 512);
  EXPECT_EQ(plan_of(p, *g, "f").alias_of, value(*g, "a"));
  EXPECT_EQ(plan_of(p, *g, "s").alias, AliasKind::None);
  EXPECT_EQ(p.in_place, 1);
  expect_arena_run_matches(*g, p);
}

// A fused GEMM with a residual epilogue: the residual flows only through the
// pointwise add, so the result may overwrite it (the kernel reads each
// residual element right before writing that element). The GEMM's own
// operands never: the GEMM reads them all over.
TEST(MemoryPlan, FusedEpilogueOverwritesResidual) {
  auto g = parse(R"(
graph @epilogue(%x: f32[8,16], %w: f32[16,16]) -> (f32[8,16]) {
  %res = softmax(%x) {axis=1} : f32[8,16]
  %a = softmax(%x) {axis=0} : f32[8,16]
  %f = fused(%a, %w, %res) {kind="gemm"} : f32[8,16] {
    graph @f0(%p: f32[8,16], %q: f32[16,16], %r: f32[8,16]) -> (f32[8,16]) {
      %m = matmul(%p, %q) : f32[8,16]
      %s = add(%m, %r) : f32[8,16]
      %t = relu(%s) : f32[8,16]
      return %t
    }
  }
  %o = softmax(%f) {axis=1} : f32[8,16]
  return %o
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  EXPECT_EQ(plan_of(p, *g, "f").alias, AliasKind::InPlace);
  EXPECT_EQ(plan_of(p, *g, "f").alias_of, value(*g, "res"));
  expect_arena_run_matches(*g, p);
}

// A fused node that reads the dying operand through a non-pointwise op, or
// broadcasts it into a larger body value (a thread writing element j of that
// value reads another element of the operand), does not overwrite it.
TEST(MemoryPlan, FusedNodesThatReadAcrossElementsDoNotOverwrite) {
  auto g = parse(R"(
graph @across(%x: f32[8,16], %w: f32[16,16], %q: f32[3,8,16]) -> (f32[8,16], f32[8,16], f32[3,8,16]) {
  %a = softmax(%x) {axis=1} : f32[8,16]
  %f = fused(%a, %w) {kind="gemm"} : f32[8,16] {
    graph @f0(%p: f32[8,16], %v: f32[16,16]) -> (f32[8,16]) {
      %m = matmul(%p, %v) : f32[8,16]
      %s = add(%m, %p) : f32[8,16]
      return %s
    }
  }
  %b = softmax(%x) {axis=0} : f32[8,16]
  %h, %k = fused(%b, %q) {kind="pointwise"} : f32[8,16], f32[3,8,16] {
    graph @f1(%p: f32[8,16], %r: f32[3,8,16]) -> (f32[8,16], f32[3,8,16]) {
      %e = exp(%p) : f32[8,16]
      %s = add(%p, %r) : f32[3,8,16]
      return %e, %s
    }
  }
  return %f, %h, %k
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  EXPECT_EQ(p.in_place, 0);
  EXPECT_FALSE(may_overwrite(*value(*g, "f")->producer(), {0}, value(*g, "f")));
  EXPECT_FALSE(may_overwrite(*value(*g, "h")->producer(), {0}, value(*g, "h")));
  expect_arena_run_matches(*g, p);
}

// A node with two results that both could overwrite the one dying operand:
// only one does. A result nobody reads still gets bytes, at its producer.
TEST(MemoryPlan, MultiResultNodes) {
  auto g = parse(R"(
graph @multi(%x: f32[4,32]) -> (f32[4,32]) {
  %a = softmax(%x) {axis=1} : f32[4,32]
  %f, %g = fused(%a) {kind="pointwise"} : f32[4,32], f32[4,32] {
    graph @f0(%p: f32[4,32]) -> (f32[4,32], f32[4,32]) {
      %e = exp(%p) : f32[4,32]
      %n = neg(%p) : f32[4,32]
      return %e, %n
    }
  }
  %h = add(%f, %g) : f32[4,32]
  %s1, %s2 = split(%h) {axis=0, split=[2,2]} : f32[2,32], f32[2,32]
  %t = softmax(%s1) {axis=1} : f32[2,32]
  %u = concat(%t, %t) {axis=0} : f32[4,32]
  return %u
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  const ValuePlan &f = plan_of(p, *g, "f"), &gg = plan_of(p, *g, "g");
  EXPECT_EQ(f.alias_of, value(*g, "a"));
  EXPECT_EQ(gg.alias, AliasKind::None);
  EXPECT_FALSE(share_bytes(f, gg));
  const ValuePlan& s2 = plan_of(p, *g, "s2");
  EXPECT_EQ(s2.first, s2.last);
  EXPECT_FALSE(share_bytes(s2, plan_of(p, *g, "s1")));
  EXPECT_FALSE(share_bytes(s2, plan_of(p, *g, "h")));
  expect_arena_run_matches(*g, p);
}

// A graph output that is a reshape of an intermediate: the intermediate is
// computed straight into the output's buffer. A reshape of a graph input as
// output cannot be a view (the caller owns both buffers): it is a copy.
TEST(MemoryPlan, GraphOutputs) {
  auto g = parse(R"(
graph @outs(%x: f32[4,8]) -> (f32[32], f32[32], f32[4,8]) {
  %a = softmax(%x) {axis=1} : f32[4,8]
  %r = reshape(%a) {shape=[32]} : f32[32]
  %xr = reshape(%x) {shape=[32]} : f32[32]
  %b = softmax(%x) {axis=0} : f32[4,8]
  %br = identity(%b) : f32[4,8]
  %bv = reshape(%b) {shape=[4,8]} : f32[4,8]
  %c = softmax(%bv) {axis=1} : f32[4,8]
  return %r, %xr, %c
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  EXPECT_EQ(plan_of(p, *g, "a").storage, Storage::Output);
  EXPECT_EQ(plan_of(p, *g, "a").output_index, 0);
  EXPECT_EQ(plan_of(p, *g, "r").alias, AliasKind::View);
  EXPECT_EQ(plan_of(p, *g, "xr").alias, AliasKind::None);
  EXPECT_EQ(plan_of(p, *g, "xr").storage, Storage::Output);
  EXPECT_EQ(p.view_copies, 1);
  EXPECT_EQ(plan_of(p, *g, "bv").storage, Storage::Arena);
  expect_arena_run_matches(*g, p);

  // With outputs in the arena, they live to the end.
  MemoryPlanOptions o;
  o.outputs_in_arena = true;
  MemoryPlan q = plan_memory(*g, o);
  q.validate();
  EXPECT_EQ(plan_of(q, *g, "a").storage, Storage::Arena);
  EXPECT_EQ(plan_of(q, *g, "r").last, int(g->num_nodes()));
  EXPECT_FALSE(share_bytes(plan_of(q, *g, "a"), plan_of(q, *g, "c")));
  expect_arena_run_matches(*g, q);
}

// Views of a graph input are not in the arena; a view as the operand of a
// pointwise op does not let it write over the input.
TEST(MemoryPlan, ViewsOfInputsAreReadOnly) {
  auto g = parse(R"(
graph @vin(%x: f32[4,8]) -> (f32[32]) {
  %r = reshape(%x) {shape=[32]} : f32[32]
  %e = exp(%r) : f32[32]
  %s = softmax(%e) {axis=0} : f32[32]
  return %s
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  EXPECT_EQ(plan_of(p, *g, "r").storage, Storage::Input);
  EXPECT_EQ(plan_of(p, *g, "r").root, g->inputs()[0]);
  EXPECT_EQ(plan_of(p, *g, "e").alias, AliasKind::None);
  expect_arena_run_matches(*g, p);
}

// validate() catches plans that would corrupt data.
TEST(MemoryPlan, ValidateRejectsBrokenPlans) {
  auto g = parse(R"(
graph @bad(%x: f32[64]) -> (f32[64]) {
  %a = softmax(%x) {axis=0} : f32[64]
  %b = exp(%a) : f32[64]
  %c = add(%a, %b) : f32[64]
  %d = softmax(%c) {axis=0} : f32[64]
  return %d
})");
  MemoryPlan good = plan_memory(*g);
  good.validate();
  EXPECT_EQ(plan_of(good, *g, "c").alias_of, value(*g, "a"));

  // a and b are live together: putting them at one offset must fail.
  MemoryPlan p = good;
  const_cast<ValuePlan&>(plan_of(p, *g, "b")).offset = plan_of(p, *g, "a").offset;
  EXPECT_THROW(p.validate(), Error);
  // ... and running with it computes exp(a) + exp(a) instead of a + exp(a):
  // the arena run of the tests above would see that.
  auto feed = testing::random_inputs(*g);
  EXPECT_NE(compare_tensors(run_in_arena(*g, p, feed)[0], ReferenceExecutor(*g).run(feed)[0], {0, 0}), "");

  // b in place over a, which add still reads.
  p = good;
  ValuePlan& b = const_cast<ValuePlan&>(plan_of(p, *g, "b"));
  b.alias = AliasKind::InPlace, b.alias_of = value(*g, "a"), b.offset = plan_of(p, *g, "a").offset;
  EXPECT_THROW(p.validate(), Error);

  // Offsets out of the arena or misaligned.
  p = good;
  const_cast<ValuePlan&>(plan_of(p, *g, "b")).offset = p.arena_bytes;
  EXPECT_THROW(p.validate(), Error);
  p = good;
  const_cast<ValuePlan&>(plan_of(p, *g, "b")).offset += 4;
  EXPECT_THROW(p.validate(), Error);

  // The graph output out of its buffer.
  p = good;
  const_cast<ValuePlan&>(plan_of(p, *g, "d")).storage = Storage::Arena;
  EXPECT_THROW(p.validate(), Error);
}

TEST(MemoryPlan, AlignmentMustBeAPowerOfTwo) {
  auto g = parse("graph @a(%x: f32[4]) -> (f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}");
  MemoryPlanOptions o;
  o.alignment = 96;
  EXPECT_THROW(plan_memory(*g, o), Error);
}

// Sizes round up to the alignment: three live 1-byte values take 768 bytes.
TEST(MemoryPlan, AlignsEveryOffset) {
  auto g = parse(R"(
graph @small(%x: u8[1]) -> (u8[3]) {
  %a = add(%x, %x) : u8[1]
  %b = mul(%x, %x) : u8[1]
  %c = sub(%x, %x) : u8[1]
  %s = concat(%a, %b, %c) {axis=0} : u8[3]
  return %s
})");
  MemoryPlan p = plan_memory(*g);
  p.validate();
  EXPECT_EQ(p.naive_bytes, 3);
  EXPECT_EQ(p.arena_bytes, 3 * 256);
  for (const ValuePlan& v : p.values)
    if (v.storage == Storage::Arena) {
      EXPECT_EQ(v.offset % 256, 0);
    }
}

// The pass reports the figures and leaves the graph alone.
TEST(MemoryPlan, PassReportsCounters) {
  auto g = parse(R"(
graph @pass(%x: f32[64,64]) -> (f32[64,64]) {
  %a = softmax(%x) {axis=1} : f32[64,64]
  %b = relu(%a) : f32[64,64]
  %c = softmax(%b) {axis=1} : f32[64,64]
  return %c
})");
  PassStats st;
  EXPECT_FALSE(create_pass("plan-memory")->run(*g, PassOptions{}, st));
  EXPECT_EQ(st.counters.at("activation_bytes_naive"), 2 * 16384);
  EXPECT_EQ(st.counters.at("activation_bytes_planned"), 16384);
  EXPECT_EQ(st.counters.at("in_place_reuses"), 1);
  EXPECT_EQ(g->num_nodes(), 3u);
}

// ---------------------------------------------------------------------------
// Every conformance model after the default pipeline.

// A stand-in for the fuser (another pass): folds each pointwise node into
// the producer of an operand that nothing else reads, when that producer is
// pointwise, a conv/matmul/gemm (an epilogue) or an earlier such fused node,
// so the planner meets pointwise chains and epilogues as fused nodes on
// whole models.
int fuse_for_test(Graph& g) {
  auto single = [](const Node* n) { return n->num_outputs() == 1; };
  auto pointwise = [&](const Node* n) { return single(n) && n->op() != "fused" && is_pointwise_node(*n); };
  auto head = [&](const Node* n) {
    return single(n) &&
           (pointwise(n) || n->op() == "fused" || n->op() == "conv" || n->op() == "matmul" || n->op() == "gemm");
  };
  int fused = 0;
  for (;;) {  // one fusion per sweep: erased nodes' addresses may be reused
    Node *m = nullptr, *n = nullptr;
    for (Node* cand : g.node_list()) {
      if (!pointwise(cand)) continue;
      for (Value* x : cand->inputs())
        if (x && x->producer() && head(x->producer()) && x->uses().size() == 1 && !g.is_output(x))
          n = x->producer(), m = cand;
      if (m) break;
    }
    if (!m) break;
    std::vector<Value*> operands;
    for (const Node* k : {static_cast<const Node*>(n), static_cast<const Node*>(m)})
      for (Value* v : k->inputs())
        if (v && v != n->output(0) && std::find(operands.begin(), operands.end(), v) == operands.end())
          operands.push_back(v);
    auto body = std::make_unique<Graph>(fmt::format("fused_{}", fused));
    std::map<const Value*, Value*> map;
    for (Value* v : operands) map[v] = body->add_input(fmt::format("p{}", map.size()), v->type());
    auto copy = [&](const Node* k, std::map<const Value*, Value*>& to) {
      std::vector<Value*> ins;
      for (Value* v : k->inputs()) ins.push_back(v ? to.at(v) : nullptr);
      Node* c = body->add_node(k->op(), ins, {k->output(0)->type()}, k->attrs());
      to[k->output(0)] = c->output(0);
    };
    if (n->op() == "fused") {  // inline the earlier fused node's body
      std::map<const Value*, Value*> inner;
      for (int i = 0; i < n->num_inputs(); ++i) inner[n->body()->inputs()[i]] = map.at(n->input(i));
      for (const auto& k : n->body()->nodes()) copy(k.get(), inner);
      map[n->output(0)] = inner.at(n->body()->outputs()[0]);
    } else {
      copy(n, map);
    }
    copy(m, map);
    body->set_outputs({map.at(m->output(0))});
    Node* f = g.add_node("fused", operands, {m->output(0)->type()}, {}, n->name() + "+" + m->name(), m);
    f->set_body(std::move(body));
    g.replace_all_uses(m->output(0), f->output(0));
    g.erase_node(m);
    g.erase_node(n);
    ++fused;
  }
  return fused;
}

// Plans `g` four ways and validates each; runs it in the arena when given inputs.
// Returns how many arena runs were compared.
int check_graph(Graph& g, const std::string& name, const std::map<std::string, Tensor>* feed, bool verbose = false) {
  int runs = 0;
  for (bool in_arena : {false, true})
    for (bool in_place : {true, false}) {
      MemoryPlanOptions o;
      o.outputs_in_arena = in_arena;
      o.in_place = in_place;
      MemoryPlan p = plan_memory(g, o);
      std::string what = fmt::format("{} (outputs_in_arena={}, in_place={})", name, in_arena, in_place);
      try {
        p.validate();
      } catch (const Error& e) {
        ADD_FAILURE() << what << ": " << e.what();
        continue;
      }
      EXPECT_LE(p.live_peak_bytes, p.arena_bytes) << what;
      if (feed && in_place) runs += expect_arena_run_matches(g, p, what, feed);
    }
  // Again with pointwise chains and epilogues fused, when there are any.
  auto f = g.clone();
  if (int pairs = fuse_for_test(*f)) {
    std::string what = name + " (fused)";
    MemoryPlan p = plan_memory(*f);
    if (verbose) {
      MemoryPlan unfused = plan_memory(g);
      std::cout << fmt::format("[ memory plan ] {}: arena {} of naive {}; with {} nodes fused into others {} of {}\n",
                               name, unfused.arena_bytes, unfused.naive_bytes, pairs, p.arena_bytes, p.naive_bytes);
    }
    try {
      verify_graph(*f, op_registry());
      p.validate();
    } catch (const Error& e) {
      ADD_FAILURE() << what << ": " << e.what();
      return runs;
    }
    if (feed) runs += expect_arena_run_matches(*f, p, what, feed);
  }
  return runs;
}

TEST(MemoryPlanModels, EveryConformanceModel) {
  if (!fs::exists(kDebianTestData)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::vector<std::string> suites;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"})
    suites.push_back((fs::path(kDebianTestData) / suite).string());
  int planned = 0, runs = 0, in_place = 0;
  for (const std::string& dir : conformance_test_dirs(suites)) {
    std::string name = fs::path(dir).filename().string();
    std::unique_ptr<Graph> g;
    std::map<std::string, Tensor> feed;
    try {
      g = import_conformance_case(dir, "test_data_set_0", &feed).graph;
      CompileOptions o;
      compile_graph(*g, o);
    } catch (const Error&) {
      continue;  // not importable or not compilable yet: the conformance run reports it
    }
    ++planned;
    // Executing with the plan is cheap on these small models, except a few.
    int64_t bytes = 0;
    for (const Value* in : g->inputs()) bytes += int64_t(in->type().nbytes());
    runs += check_graph(*g, name, bytes < (16 << 20) ? &feed : nullptr);
    in_place += plan_memory(*g).in_place > 0;
  }
  std::cout << fmt::format(
      "[ memory plan ] {} models planned and validated, {} arena runs match the reference, "
      "{} models have in-place results\n",
      planned, runs, in_place);
  EXPECT_GT(planned, 500);
  EXPECT_GT(runs, 500);
}

// Where tools/prepare_models.sh put the real models: $KILN_MODELS_DIR, else
// build/models beside build/bin.
fs::path models_dir() {
  if (const char* env = std::getenv("KILN_MODELS_DIR")) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path().parent_path() / "models";
}

TEST(MemoryPlanModels, RealModels) {
  int found = 0;
  for (const char* m : {"resnet50", "mobilenet_v2", "vit_b_16", "bert_base", "gpt2"}) {
    fs::path dir = models_dir() / m;
    if (!fs::exists(dir / "model.onnx") || !fs::exists(dir / "test_data_set_0")) continue;
    ++found;
    std::map<std::string, Tensor> feed;
    auto imported = import_conformance_case(dir.string(), "test_data_set_0", &feed).graph;
    // Running in the arena on the reference backend takes a second or two for
    // the CNNs (10 s for the transformers, which are left to validate()).
    bool run = std::string(m) == "resnet50" || std::string(m) == "mobilenet_v2";
    for (const char* precision : {"fp32", "fp16"}) {
      auto g = imported->clone();
      CompileOptions o;
      o.pass.precision = precision;
      o.pass.target = "sm_90";
      compile_graph(*g, o);
      bool run_here = run && precision == std::string("fp32");
      int runs = check_graph(*g, fmt::format("{} {}", m, precision), run_here ? &feed : nullptr, true);
      if (run_here) {
        EXPECT_GE(runs, 2) << m;
      }
      if (std::string(m) == "resnet50") {
        MemoryPlan p = plan_memory(*g);
        EXPECT_LE(p.arena_bytes * 4, p.naive_bytes) << "issue 3: at most 25% of the naive sum";
      }
    }
  }
  if (!found)
    GTEST_SKIP() << "no models under " << models_dir() << " (tools/prepare_models.sh; or set KILN_MODELS_DIR)";
}

}  // namespace
}  // namespace kiln
