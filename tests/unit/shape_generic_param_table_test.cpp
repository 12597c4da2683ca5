// Shape-generic kernels and the kernel parameter space (docs/dynamic_shapes.md
// "Shape-generic GPU kernels"): a kernel taking symbolic sizes passes its
// buffers as parameters and its kiln_syms by value, and cannot take a pointer
// table (codegen/param_table.h). The fuser learns so from
// codegen::why_not_shape_generic when it asks about a group, so it never
// forms one whose kernel would need a table (before, the group was formed and
// its kernel build failed).
#include <gtest/gtest.h>

#include "backends/compare.h"
#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "codegen/emitter_table.h"
#include "codegen/param_table.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

// A chain of adds over `inputs` operands of a symbolic batch: one pointwise
// group of them would take inputs + 1 buffers and the kiln_syms.
std::string add_chain(int inputs) {
  std::string t = "graph @m(";
  for (int i = 0; i < inputs; ++i) t += fmt::format("{}%x{}: f32[b,4]", i ? ", " : "", i);
  t += ") -> (f32[b,4]) symbols(b in [1, 8]) {\n";
  std::string prev = "%x0";
  for (int i = 1; i < inputs; ++i) {
    t += fmt::format("  %s{} = add({}, %x{}) : f32[b,4]\n", i, prev, i);
    prev = fmt::format("%s{}", i);
  }
  return t + "  return " + prev + "\n}\n";
}

plan::Profile chain_profile(int inputs) {
  plan::Profile p;
  for (int i = 0; i < inputs; ++i) p.inputs.push_back({fmt::format("x{}", i), {1, 4}, {8, 4}, {8, 4}});
  return p;
}

// 4,100 operands: 4,101 buffers and the 64-byte kiln_syms are 32,872 bytes,
// past the 32,764 of every arch. The fuser leaves the adds as they are (each
// a shape-generic kernel of three buffers) and the plan builds.
TEST(ShapeGenericKernels, AGroupThatWouldNeedAPointerTableIsNotFormed) {
  constexpr int kInputs = 4100;
  const std::string text = add_chain(kInputs);
  auto g = parse_graph(text, "wide.kir");
  CompileOptions o;
  o.pass.target = "sm_90";
  o.symbolic = true;
  compile_graph(*g, o);
  for (const auto& n : g->nodes()) {
    ASSERT_NE(n->op(), "fused") << "a group of " << n->num_inputs() << " operands was formed";
    EXPECT_EQ(codegen::why_not_shape_generic(*n), "") << n->describe();
  }
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {chain_profile(kInputs)};
  po.source_name = "wide.onnx";
  plan::Plan p = build_plan(*g, po);
  EXPECT_EQ(p.generic_launches.size(), static_cast<size_t>(kInputs - 1));
  for (const plan::Step& s : p.steps) EXPECT_FALSE(s.param_table);
  for (int64_t b : {1, 3, 8}) {
    std::unique_ptr<Graph> spec = specialize_graph(*g, {{"b", b}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*spec, static_cast<uint64_t>(b));
    std::vector<Tensor> want = ReferenceExecutor(*spec).run(feed);
    std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(compare_tensors(got[0], want[0], {1e-4, 1e-5}), "") << "b=" << b;
  }
}

// The answer names the pointer table, for the fused node as the fuser builds
// it, and for a bare concat of as many parts (refused by name when the plan
// is written, not when its kernel is built).
TEST(ShapeGenericKernels, WhyNotShapeGenericNamesThePointerTable) {
  constexpr int kParts = 4100;
  std::string t = "graph @m(";
  for (int i = 0; i < kParts; ++i) t += fmt::format("{}%x{}: f32[b,1]", i ? ", " : "", i);
  t += fmt::format(") -> (f32[b,{}]) symbols(b in [1, 8]) {{\n  %c = concat(", kParts);
  for (int i = 0; i < kParts; ++i) t += fmt::format("{}%x{}", i ? ", " : "", i);
  t += fmt::format(") {{axis=1}} : f32[b,{}]\n  return %c\n}}\n", kParts);
  auto g = parse_graph(t, "concat.kir");
  const std::string why = codegen::why_not_shape_generic(*g->nodes().front());
  EXPECT_NE(why.find("would need a pointer table (4101 buffers and the 64-byte kiln_syms"), std::string::npos) << why;
  // A static concat of as many parts takes the table, as before.
  auto s = specialize_graph(*g, {{"b", 2}}, op_registry());
  EXPECT_EQ(codegen::why_not_shape_generic(*s->nodes().front()), "");
  std::vector<codegen::NodeKernel> ks = codegen::emitter_for(*s->nodes().front())->emit(*s->nodes().front());
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_TRUE(codegen::use_param_table_if_needed(ks[0]));
}

}  // namespace
}  // namespace kiln
