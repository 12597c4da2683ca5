// Memory planning (passes/memory_plan.h): hand-built graphs with known
// answers (chains reuse, diamonds, views, in-place only where legal, graph
// outputs), each also run in its planned arena against the reference.
// validate(), alignment and the pass's counters are in
// memory_plan_checks_test.cpp; whole models in memory_plan_models_test.cpp.
#include "memory_plan_test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing::memory_plan;

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

}  // namespace
}  // namespace kiln
