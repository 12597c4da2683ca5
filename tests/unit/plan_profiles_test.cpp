// Plans with shape profiles (issue 19; runtime/plan_profiles.h,
// docs/dynamic_shapes.md): the `profiles` section round trip, memory laid
// out at the largest shapes with sizes as polynomials, the loader's checks,
// and the C API / C++ wrapper taking the input shapes at run time
// (kiln_context_set_input_shape, output shapes, out-of-profile errors),
// equal to the reference backend on the graph specialised to each shape.
#include <gtest/gtest.h>

#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ir/tensor_io.h"
#include "kiln/kiln.h"
#include "kiln/kiln.hpp"
#include "ops/registry.h"
#include "runtime/plan_graph.h"
#include "tests/unit/error_of.h"

namespace kiln {
namespace {

const char* kDynamic =
    "graph @m(%x: f32[b,s,4], %m: f32[b,1,s]) -> (f32[b,s,4]) symbols(b in [1, 4], s in [2, 16]) {\n"
    "  %w = const f32[4,4] dense<[0.5, -1.0, 0.25, 2.0, 1.5, 0.75, -0.5, 1.0, -2.0, 0.5, 1.25, -0.25, 1.0, 1.0, "
    "-1.5, 0.125]>\n"
    "  %h = matmul(%x, %w) : f32[b,s,4]\n"
    "  %t = transpose(%h) {perm=[0,2,1]} : f32[b,4,s]\n"
    "  %a = add(%t, %m) : f32[b,4,s]\n"
    "  %p = softmax(%a) {axis=-1} : f32[b,4,s]\n"
    "  %y = transpose(%p) {perm=[0,2,1]} : f32[b,s,4]\n"
    "  return %y\n"
    "}\n";

plan::Profile the_profile() {
  return {{{"x", {1, 2, 4}, {2, 8, 4}, {4, 16, 4}}, {"m", {1, 1, 2}, {2, 1, 8}, {4, 1, 16}}}};
}

// The graph through the default pipeline (as compile_model runs it for a
// profile) and into a CPU plan with the profile.
plan::Plan dynamic_plan(std::unique_ptr<Graph>* compiled = nullptr) {
  auto g = parse_graph(kDynamic, "dyn.kir");
  CompileOptions o;
  o.pass.target = "cpu";
  o.symbolic = true;
  compile_graph(*g, o);
  PlanBuildOptions po{"cpu", "fp32", {}};
  po.profiles = {the_profile()};
  plan::Plan p = build_plan(*g, po);
  if (compiled) *compiled = std::move(g);
  return p;
}

using testing::error_of;

TEST(PlanProfiles, RoundTripAndMemoryAtTheLargestShapes) {
  std::unique_ptr<Graph> g;
  plan::Plan p = dynamic_plan(&g);
  std::vector<uint8_t> bytes = plan::serialize(p);
  plan::Plan back = plan::deserialize(bytes.data(), bytes.size(), "dyn.plan");
  EXPECT_EQ(back.shapes, p.shapes);
  ASSERT_EQ(back.shapes.profiles.size(), 1u);
  EXPECT_EQ(back.shapes.profiles[0], the_profile());
  auto loaded = plan::load_graph(back, "dyn.plan");
  EXPECT_EQ(loaded->symbols(), (std::vector<SymbolDecl>{{"b", 1, 4}, {"s", 2, 16}}));
  // The arena is the one the same graph at b = 4, s = 16 gets.
  auto at_max = specialize_graph(*g, {{"b", 4}, {"s", 16}}, op_registry());
  plan::Plan fixed = build_plan(*at_max, {"cpu", "fp32", {}});
  EXPECT_EQ(back.memory.arena_bytes, fixed.memory.arena_bytes);
  ASSERT_EQ(back.memory.values.size(), fixed.memory.values.size());
  ASSERT_EQ(back.shapes.value_bytes.size(), back.memory.values.size());
  // Every result: 16 * b * s bytes here (f32 [b,s,4] or [b,4,s]), equal to
  // the entry's size at the largest shapes.
  for (size_t i = 0; i < back.memory.values.size(); ++i) {
    EXPECT_EQ(back.shapes.value_bytes[i], (DimPoly{{{"b", "s"}, 16}})) << i;
    EXPECT_EQ(eval_dim(dim_of_poly(back.shapes.value_bytes[i]), {{"b", 4}, {"s", 16}}), back.memory.values[i].size)
        << i;
  }
  // A static plan has no profiles section.
  plan::Plan st = plan::deserialize(plan::serialize(fixed).data(), plan::serialize(fixed).size(), "fixed.plan");
  EXPECT_TRUE(st.shapes.empty());
  EXPECT_LT(plan::serialize(fixed).size(), bytes.size());
}

TEST(PlanProfiles, LoadingChecksTheProfilesAgainstTheGraph) {
  auto load = [](const plan::Plan& p) {
    std::vector<uint8_t> b = plan::serialize(p);
    plan::Plan back = plan::deserialize(b.data(), b.size(), "bad.plan");
    plan::load_graph(back, "bad.plan");
  };
  plan::Plan p = dynamic_plan();
  plan::Plan wide = p;
  wide.shapes.profiles[0].inputs[0].max[0] = 9;
  EXPECT_EQ(error_of([&] { load(wide); }),
            "bad.plan: profile 0 input \"x\" dim 0 (b) has range [1, 9], outside the symbol's [1, 4]");
  plan::Plan fixed_dim = p;
  fixed_dim.shapes.profiles[0].inputs[0].max[2] = 5;
  EXPECT_EQ(error_of([&] { load(fixed_dim); }),
            "bad.plan: profile 0 input \"x\" dim 2 is fixed at 4 in the graph, the profile gives [4, 5]");
  plan::Plan none = p;
  none.shapes = {};
  EXPECT_EQ(error_of([&] { load(none); }),
            "bad.plan: the graph has symbolic dims but the plan records no shape profiles (section 'profiles')");
  plan::Plan sizes = p;
  sizes.shapes.value_bytes.pop_back();
  EXPECT_EQ(error_of([&] { load(sizes); }), fmt::format("bad.plan: section 'profiles' has {} result sizes, the memory "
                                                        "plan has {} results",
                                                        p.memory.values.size() - 1, p.memory.values.size()));
}

// reduce_sum has no shape-generic kernel yet (the matmul, transpose and
// softmax before it have; tests/unit/shape_generic_*_test.cpp): the plan is
// refused naming that node, never compiled at one shape.
TEST(PlanProfiles, AGpuTargetWithoutShapeGenericKernelsIsRefusedNotCompiledAtOneShape) {
  // Which kernels are shape-generic is codegen's answer (sanitizer builds have none).
  if (!kiln_has_codegen()) GTEST_SKIP() << "built without codegen";
  auto g = parse_graph(
      "graph @m(%x: f32[b,s,4], %w: f32[4,4]) -> (f32[b,1,4]) symbols(b in [1, 4], s in [2, 16]) {\n"
      "  %h = matmul(%x, %w) : f32[b,s,4]\n"
      "  %t = transpose(%h) {perm=[0,2,1]} : f32[b,4,s]\n"
      "  %p = softmax(%t) {axis=-1} : f32[b,4,s]\n"
      "  %u = transpose(%p) {perm=[0,2,1]} : f32[b,s,4]\n"
      "  %r = reduce_sum(%u) {axes=[1], keepdims=1} : f32[b,1,4]\n"
      "  return %r\n"
      "}\n",
      "dyn.kir");
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {{{{"x", {1, 2, 4}, {2, 8, 4}, {4, 16, 4}}}}};
  po.source_name = "dyn.onnx";
  EXPECT_EQ(
      error_of([&] { build_plan(*g, po); }),
      "dyn.onnx: node (reduce_sum) producing %r: target sm_90 needs a shape-generic GPU kernel for every node of a "
      "plan with shape profiles (b in [1, 4], s in [2, 16]), and kiln has none yet for reduce_sum (its kernel family "
      "(reduction) has no shape-generic kernel for it yet): compile the profile for --target cpu (the runtime's CPU "
      "path runs any shape in it), or fix the shapes with --shapes for a GPU plan (docs/dynamic_shapes.md)");
}

class CApiProfiles : public ::testing::Test {
 protected:
  void SetUp() override {
    p = dynamic_plan(&graph);
    bytes = plan::serialize(p);
    ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_AUTO, &engine), KILN_OK)
        << kiln_last_error();
    ASSERT_EQ(kiln_context_create(engine, &ctx), KILN_OK) << kiln_last_error();
  }
  void TearDown() override {
    kiln_context_destroy(ctx);
    kiln_engine_destroy(engine);
  }
  Shape output_shape() {
    int64_t dims[4] = {-7, -7, -7, -7};
    int rank = -1;
    EXPECT_EQ(kiln_context_output_shape(ctx, "y", dims, 4, &rank), KILN_OK) << kiln_last_error();
    return Shape(dims, dims + std::max(rank, 0));
  }

  plan::Plan p;
  std::unique_ptr<Graph> graph;
  std::vector<uint8_t> bytes;
  kiln_engine* engine = nullptr;
  kiln_context* ctx = nullptr;
};

TEST_F(CApiProfiles, DescribesDynamicDimsAndProfiles) {
  kiln_tensor_info info;
  ASSERT_EQ(kiln_engine_input(engine, 0, &info), KILN_OK);
  ASSERT_EQ(info.rank, 3);
  EXPECT_EQ(Shape(info.shape, info.shape + 3), (Shape{-1, -1, 4}));
  ASSERT_EQ(kiln_engine_output(engine, 0, &info), KILN_OK);
  EXPECT_EQ(Shape(info.shape, info.shape + 3), (Shape{-1, -1, 4}));
  int n = 0;
  ASSERT_EQ(kiln_engine_num_profiles(engine, &n), KILN_OK);
  EXPECT_EQ(n, 1);
  int64_t dims[3];
  int rank = 0;
  ASSERT_EQ(kiln_engine_profile_shape(engine, 0, "m", KILN_PROFILE_OPT, dims, 3, &rank), KILN_OK);
  EXPECT_EQ(Shape(dims, dims + rank), (Shape{2, 1, 8}));
  ASSERT_EQ(kiln_engine_profile_shape(engine, 0, "x", KILN_PROFILE_MAX, dims, 3, &rank), KILN_OK);
  EXPECT_EQ(Shape(dims, dims + rank), (Shape{4, 16, 4}));
  EXPECT_EQ(kiln_engine_profile_shape(engine, 0, "x", KILN_PROFILE_MIN, dims, 2, &rank), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rank, 3);  // the caller learns the size it needs
  EXPECT_EQ(kiln_engine_profile_shape(engine, 1, "x", KILN_PROFILE_MIN, dims, 3, &rank), KILN_ERROR_NOT_FOUND);
  EXPECT_STREQ(kiln_last_error(), "profile 1 is out of range (the plan has 1)");
  EXPECT_EQ(kiln_engine_profile_shape(engine, 0, "z", KILN_PROFILE_MIN, dims, 3, &rank), KILN_ERROR_NOT_FOUND);
}

TEST_F(CApiProfiles, RunsAtThreeShapesFromOnePlanEqualToTheReference) {
  for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 2}, {3, 7}, {4, 16}}) {
    Tensor x = random_tensor(TensorType(DType::F32, {b, s, 4}), 3),
           m = random_tensor(TensorType(DType::F32, {b, 1, s}), 4);
    int64_t xs[] = {b, s, 4}, ms[] = {b, 1, s};
    ASSERT_EQ(kiln_context_set_input_shape(ctx, "x", xs, 3), KILN_OK) << kiln_last_error();
    ASSERT_EQ(kiln_context_bind_input(ctx, "x", x.raw(), KILN_F32, xs, 3, KILN_MEMORY_HOST), KILN_OK)
        << kiln_last_error();
    // Binding with the shape sets it, without set_input_shape.
    ASSERT_EQ(kiln_context_bind_input(ctx, "m", m.raw(), KILN_F32, ms, 3, KILN_MEMORY_HOST), KILN_OK)
        << kiln_last_error();
    Shape ys = output_shape();
    ASSERT_EQ(ys, (Shape{b, s, 4}));
    Tensor y(TensorType(DType::F32, ys));
    ASSERT_EQ(kiln_context_bind_output(ctx, "y", y.raw(), KILN_F32, ys.data(), 3, KILN_MEMORY_HOST), KILN_OK)
        << kiln_last_error();
    ASSERT_EQ(kiln_context_run(ctx), KILN_OK) << kiln_last_error();
    auto at = specialize_graph(*graph, {{"b", b}, {"s", s}}, op_registry());
    Tensor want = ReferenceExecutor(*at).run({{"x", x}, {"m", m}})[0];
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_EQ(y.data<float>()[i], want.data<float>()[i]) << b << "x" << s << " " << i;
  }
}

TEST_F(CApiProfiles, ShapesOutsideTheProfileAreErrorsNamingInputDimAndRange) {
  int64_t big[] = {5, 3, 4}, flat[] = {2, 3}, wide[] = {2, 3, 5}, short_seq[] = {2, 1, 4};
  EXPECT_EQ(kiln_context_set_input_shape(ctx, "x", big, 3), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(),
               "input \"x\" has shape [5,3,4], outside every shape profile of the plan: input \"x\": dim 0 is 5, "
               "outside profile 0's range [1, 4]");
  EXPECT_EQ(kiln_context_set_input_shape(ctx, "x", short_seq, 3), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(),
               "input \"x\" has shape [2,1,4], outside every shape profile of the plan: input \"x\": dim 1 is 1, "
               "outside profile 0's range [2, 16]");
  EXPECT_EQ(kiln_context_set_input_shape(ctx, "x", flat, 2), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "input \"x\" has rank 2, the plan's is 3 ([b,s,4])");
  EXPECT_EQ(kiln_context_set_input_shape(ctx, "x", wide, 3), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "input \"x\": dim 2 is 5, the plan fixes it at 4 ([b,s,4])");
  EXPECT_EQ(kiln_context_set_input_shape(ctx, "nope", flat, 2), KILN_ERROR_NOT_FOUND);
  // Output shapes need every input's shape.
  int64_t ok[] = {2, 5, 4};
  ASSERT_EQ(kiln_context_set_input_shape(ctx, "x", ok, 3), KILN_OK) << kiln_last_error();
  int64_t dims[3];
  int rank = 0;
  EXPECT_EQ(kiln_context_output_shape(ctx, "y", dims, 3, &rank), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(),
               "input \"m\" is [b,1,s]: set its shape first (kiln_context_set_input_shape, or bind it with its shape)");
  // Inputs that disagree on a symbol.
  int64_t other[] = {3, 1, 5};
  ASSERT_EQ(kiln_context_set_input_shape(ctx, "m", other, 3), KILN_OK) << kiln_last_error();
  EXPECT_EQ(kiln_context_output_shape(ctx, "y", dims, 3, &rank), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(),
               "input shapes: input \"m\" has shape [3,1,5]: dim 0 (b) is 3 but input \"x\" gives b = 2");
}

TEST_F(CApiProfiles, ABufferBoundBeforeTheShapeChangedMustBeBoundAgain) {
  Engine e = Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU);
  Context c(e);
  std::vector<float> x(2 * 5 * 4, 0.5f), m(2 * 5, 0.f), y(2 * 5 * 4);
  c.bind_input("x", x.data(), KILN_F32, {2, 5, 4});
  c.bind_input("m", m.data(), KILN_F32, {2, 1, 5});
  EXPECT_EQ(c.output_shape("y"), (std::vector<int64_t>{2, 5, 4}));
  c.bind_output("y", y.data(), KILN_F32, {2, 5, 4});
  c.run();
  EXPECT_NEAR(y[0], 0.2f, 1e-6);  // softmax over 5 equal scores
  c.set_input_shape("x", {2, 3, 4});
  c.set_input_shape("m", {2, 1, 3});
  EXPECT_EQ(c.input_shape("x"), (std::vector<int64_t>{2, 3, 4}));
  try {
    c.run();
    FAIL() << "a stale binding must not run";
  } catch (const runtime_error& err) {
    EXPECT_NE(
        std::string(err.what()).find("input \"x\" was bound as [2,5,4] but its shape is now [2,3,4]: bind it again"),
        std::string::npos)
        << err.what();
  }
  EXPECT_TRUE(e.inputs()[0].dynamic());
  EXPECT_EQ(e.num_profiles(), 1);
  EXPECT_EQ(e.profile_shape(0, "x", KILN_PROFILE_MIN), (std::vector<int64_t>{1, 2, 4}));
}

}  // namespace
}  // namespace kiln
