// Memory planning (passes/memory_plan.h): validate() rejecting broken
// plans, offsets aligned, and the plan-memory pass's counters.
#include "memory_plan_test_util.h"

namespace kiln {
namespace {

using namespace kiln::testing::memory_plan;

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

}  // namespace
}  // namespace kiln
