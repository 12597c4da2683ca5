// CPU plans with data-dependent result sizes (issue 19; docs/dynamic_shapes.md
// "Data-dependent sizes in plans"): the plan keeps the graph with its size
// symbols, the runtime's CPU path runs it stage by stage, each output is bound
// at its upper bound and holds the run's real shape afterwards
// (kiln_context_output_shape), and GPU targets are refused naming the node.
#include <gtest/gtest.h>

#include "compiler/plan_writer.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "kiln/kiln.h"
#include "runtime/plan_graph.h"

namespace kiln {
namespace {

// The positive entries of %x, doubled, from a batch of rows: nonzero decides
// the size, a symbolic batch gives the input shape.
const char* kSelect =
    "graph @select(%x: f32[b,3]) -> (f32[nonzero_n0], i64[2,nonzero_n1]) symbols(b in [1, 4], nonzero_n0 in [0, "
    "12], nonzero_n1 in [0, 12]) {\n"
    "  %zero = const f32[] splat<0.0>\n"
    "  %two = const f32[] splat<2.0>\n"
    "  %pos = greater(%x, %zero) : bool[b,3]\n"
    "  %flat_x = reshape(%x) {shape=[3*b]} : f32[3*b]\n"
    "  %flat_p = reshape(%pos) {shape=[3*b]} : bool[3*b]\n"
    "  %i = nonzero(%flat_p) {size_symbol=\"nonzero_n0\"} : i64[1,nonzero_n0]\n"
    "  %j = reshape(%i) {shape=[nonzero_n0]} : i64[nonzero_n0]\n"
    "  %v = gather(%flat_x, %j) {axis=0} : f32[nonzero_n0]\n"
    "  %y = mul(%v, %two) : f32[nonzero_n0]\n"
    "  %where = nonzero(%pos) {size_symbol=\"nonzero_n1\"} : i64[2,nonzero_n1]\n"
    "  return %y, %where\n"
    "}\n";

plan::Profile batch_profile() { return {{{"x", {1, 3}, {2, 3}, {4, 3}}}}; }

std::vector<uint8_t> select_plan() {
  auto g = parse_graph(kSelect, "select.kir");
  PlanBuildOptions po{"cpu", "fp32", {}};
  po.profiles = {batch_profile()};
  return plan::serialize(build_plan(*g, po));
}

std::vector<int64_t> shape_of(kiln_context* ctx, const char* name) {
  int64_t dims[4];
  int rank = 0;
  EXPECT_EQ(kiln_context_output_shape(ctx, name, dims, 4, &rank), KILN_OK) << kiln_last_error();
  return std::vector<int64_t>(dims, dims + rank);
}

TEST(PlanDataDependent, TheCpuPathTrimsEachOutputToTheRunsCount) {
  std::vector<uint8_t> bytes = select_plan();
  kiln_engine* engine = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU, &engine), KILN_OK)
      << kiln_last_error();
  kiln_tensor_info info;
  ASSERT_EQ(kiln_engine_output(engine, 0, &info), KILN_OK);
  ASSERT_EQ(info.rank, 1);
  EXPECT_EQ(info.shape[0], -1);  // decided at run time
  kiln_context* ctx = nullptr;
  ASSERT_EQ(kiln_context_create(engine, &ctx), KILN_OK) << kiln_last_error();

  // Two runs of different batch and count through one context.
  const std::vector<std::vector<float>> xs = {{1, -2, 3, -4, 5, 6}, {-1, 2, -3, 0, 0, 7, 8, -9, 1}};
  for (const std::vector<float>& x : xs) {
    const int64_t batch = static_cast<int64_t>(x.size() / 3);
    const int64_t x_dims[] = {batch, 3};
    ASSERT_EQ(kiln_context_bind_input(ctx, "x", x.data(), KILN_F32, x_dims, 2, KILN_MEMORY_HOST), KILN_OK)
        << kiln_last_error();
    // Before the run: the upper bound the input shapes give, the buffer to bind.
    EXPECT_EQ(shape_of(ctx, "y"), std::vector<int64_t>{12});
    EXPECT_EQ(shape_of(ctx, "where"), (std::vector<int64_t>{2, 12}));
    std::vector<float> y(12, -100.0f);
    std::vector<int64_t> where(24, -100);
    const int64_t y_dims[] = {12}, w_dims[] = {2, 12};
    ASSERT_EQ(kiln_context_bind_output(ctx, "y", y.data(), KILN_F32, y_dims, 1, KILN_MEMORY_HOST), KILN_OK)
        << kiln_last_error();
    ASSERT_EQ(kiln_context_bind_output(ctx, "where", where.data(), KILN_I64, w_dims, 2, KILN_MEMORY_HOST), KILN_OK)
        << kiln_last_error();
    ASSERT_EQ(kiln_context_run(ctx), KILN_OK) << kiln_last_error();

    std::vector<float> want_y;
    std::vector<int64_t> rows, cols;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] > 0) {
        want_y.push_back(2 * x[i]);
        rows.push_back(static_cast<int64_t>(i / 3));
        cols.push_back(static_cast<int64_t>(i % 3));
      }
    const int64_t n = static_cast<int64_t>(want_y.size());
    // After the run: the data's shape, the values at the front of the buffer.
    EXPECT_EQ(shape_of(ctx, "y"), std::vector<int64_t>{n});
    EXPECT_EQ(shape_of(ctx, "where"), (std::vector<int64_t>{2, n}));
    EXPECT_EQ(std::vector<float>(y.begin(), y.begin() + n), want_y);
    std::vector<int64_t> want_where = rows;
    want_where.insert(want_where.end(), cols.begin(), cols.end());
    EXPECT_EQ(std::vector<int64_t>(where.begin(), where.begin() + 2 * n), want_where);
  }
  // A buffer smaller than the upper bound is refused when bound.
  float small[3];
  const int64_t small_dims[] = {3};
  EXPECT_EQ(kiln_context_bind_output(ctx, "y", small, KILN_F32, small_dims, 1, KILN_MEMORY_HOST),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("output \"y\" is f32[12] but was bound as f32[3]"), std::string::npos)
      << kiln_last_error();
  kiln_context_destroy(ctx);
  kiln_engine_destroy(engine);
}

// TopK with k an input: the count is k, checked against the axis; a failed
// run leaves the upper bound, not the shape of the run before it.
TEST(PlanDataDependent, TopkWithARunTimeKAndAFailedRun) {
  auto g = parse_graph(
      "graph @top(%x: f32[2,6], %k: i64[1]) -> (f32[2,topk_k0]) symbols(topk_k0 in [0, 6]) {\n"
      "  %t, %i = topk(%x, %k) {axis=1, largest=1, size_symbol=\"topk_k0\", sorted=1} : f32[2,topk_k0], "
      "i64[2,topk_k0]\n"
      "  return %t\n"
      "}\n",
      "top.kir");
  PlanBuildOptions po{"cpu", "fp32", {}};
  po.profiles = {plan::Profile{}};  // no dynamic input: one profile with none
  std::vector<uint8_t> bytes = plan::serialize(build_plan(*g, po));
  kiln_engine* engine = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU, &engine), KILN_OK)
      << kiln_last_error();
  kiln_context* ctx = nullptr;
  ASSERT_EQ(kiln_context_create(engine, &ctx), KILN_OK) << kiln_last_error();
  const float x[12] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8};
  int64_t k = 2;
  const int64_t x_dims[] = {2, 6}, k_dims[] = {1}, t_dims[] = {2, 6};
  float t[12];
  ASSERT_EQ(kiln_context_bind_input(ctx, "x", x, KILN_F32, x_dims, 2, KILN_MEMORY_HOST), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_context_bind_input(ctx, "k", &k, KILN_I64, k_dims, 1, KILN_MEMORY_HOST), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_context_bind_output(ctx, "t", t, KILN_F32, t_dims, 2, KILN_MEMORY_HOST), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_context_run(ctx), KILN_OK) << kiln_last_error();
  EXPECT_EQ(shape_of(ctx, "t"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(std::vector<float>(t, t + 4), (std::vector<float>{9, 5, 8, 6}));
  k = 9;
  EXPECT_EQ(kiln_context_run(ctx), KILN_ERROR_RUNTIME);  // the data, not the call, is wrong
  EXPECT_NE(std::string(kiln_last_error()).find("k = 9 is out of range for axis 1 of size 6"), std::string::npos)
      << kiln_last_error();
  EXPECT_EQ(shape_of(ctx, "t"), (std::vector<int64_t>{2, 6}));
  kiln_context_destroy(ctx);
  kiln_engine_destroy(engine);
}

TEST(PlanDataDependent, AGpuTargetIsRefusedNamingTheNodes) {
  auto g = parse_graph(kSelect, "select.kir");
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {batch_profile()};
  po.source_name = "select.onnx";
  try {
    build_plan(*g, po);
    FAIL() << "a GPU plan with data-dependent sizes was built";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("select.onnx: the graph has result sizes decided at run time"), std::string::npos) << m;
    EXPECT_NE(m.find("(nonzero) producing %i (nonzero_n0)"), std::string::npos) << m;
    EXPECT_NE(m.find("a GPU plan holds them only computed at their upper bounds"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kiln
