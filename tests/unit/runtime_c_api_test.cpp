// The C API (runtime/include/kiln/kiln.h, libkiln_runtime.so) and its C++
// wrapper: loading, I/O queries, binding errors with their text, runs that
// match the reference backend, an engine still usable after a failed run,
// one engine shared by threads.
#include <gtest/gtest.h>

#include <thread>

#include "backends/reference/executor.h"
#include "kiln/kiln.h"
#include "kiln/kiln.hpp"
#include "tests/unit/plan_test_util.h"
#include "ir/tensor_io.h"

namespace kiln {
namespace {

class CApi : public ::testing::Test {
 protected:
  void SetUp() override {
    graph = testing::compile_onnx(testing::tiny_cnn_path());
    bytes = testing::plan_bytes(*graph);
    ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_AUTO, &engine), KILN_OK)
        << kiln_last_error();
    ASSERT_EQ(kiln_context_create(engine, &ctx), KILN_OK) << kiln_last_error();
    input = random_tensor(graph->inputs()[0]->type(), 11);
    want = ReferenceExecutor(*graph).run({{"input", input}})[0];
  }
  void TearDown() override {
    kiln_context_destroy(ctx);
    kiln_engine_destroy(engine);
  }
  kiln_status bind_all(float* out) {
    int64_t in_shape[] = {1, 3, 32, 32}, out_shape[] = {1, 10};
    kiln_status s = kiln_context_bind_input(ctx, "input", input.raw(), KILN_F32, in_shape, 4, KILN_MEMORY_HOST);
    if (s != KILN_OK) return s;
    return kiln_context_bind_output(ctx, "probs", out, KILN_F32, out_shape, 2, KILN_MEMORY_HOST);
  }

  std::unique_ptr<Graph> graph;
  std::vector<uint8_t> bytes;
  kiln_engine* engine = nullptr;
  kiln_context* ctx = nullptr;
  Tensor input, want;
};

TEST_F(CApi, DescribesTheModelAndTheBackend) {
  int n = -1;
  ASSERT_EQ(kiln_engine_num_inputs(engine, &n), KILN_OK);
  EXPECT_EQ(n, 1);
  kiln_tensor_info info;
  ASSERT_EQ(kiln_engine_input(engine, 0, &info), KILN_OK);
  EXPECT_STREQ(info.name, "input");
  EXPECT_EQ(info.dtype, KILN_F32);
  ASSERT_EQ(info.rank, 4);
  EXPECT_EQ(info.shape[1], 3);
  ASSERT_EQ(kiln_engine_output(engine, 0, &info), KILN_OK);
  EXPECT_STREQ(info.name, "probs");
  EXPECT_EQ(kiln_engine_output(engine, 1, &info), KILN_ERROR_NOT_FOUND);
  EXPECT_STREQ(kiln_last_error(), "output index 1 is out of range (the model has 1)");
  kiln_backend b;
  ASSERT_EQ(kiln_engine_backend(engine, &b), KILN_OK);
  EXPECT_EQ(b, KILN_BACKEND_CPU);
  const char* text = nullptr;
  ASSERT_EQ(kiln_engine_info(engine, &text), KILN_OK);
  EXPECT_EQ(std::string(text).rfind("CPU reference path (the plan has no GPU kernels", 0), 0u) << text;
  EXPECT_STREQ(kiln_dtype_name(KILN_BF16), "bf16");
  EXPECT_EQ(kiln_dtype_size(KILN_I64), 8u);
}

TEST_F(CApi, RunMatchesTheReferenceBackend) {
  std::vector<float> out(10, -1);
  ASSERT_EQ(bind_all(out.data()), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_context_run(ctx), KILN_OK) << kiln_last_error();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(out[i], want.data<float>()[i]) << i;
  // Enqueue on the CPU: a null stream runs synchronously.
  std::fill(out.begin(), out.end(), -1.f);
  ASSERT_EQ(kiln_context_enqueue(ctx, nullptr), KILN_OK) << kiln_last_error();
  EXPECT_EQ(out[3], want.data<float>()[3]);
}

TEST_F(CApi, BindingErrorsSayWhatIsWrongAndTheEngineStaysUsable) {
  int64_t in_shape[] = {1, 3, 32, 32}, bad_shape[] = {1, 3, 32, 31};
  EXPECT_EQ(kiln_context_bind_input(ctx, "image", input.raw(), KILN_F32, in_shape, 4, KILN_MEMORY_HOST),
            KILN_ERROR_NOT_FOUND);
  EXPECT_STREQ(kiln_last_error(), "the model has no input named \"image\" (inputs: \"input\")");
  EXPECT_EQ(kiln_context_bind_input(ctx, "input", input.raw(), KILN_I32, in_shape, 4, KILN_MEMORY_HOST),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "input \"input\" is f32[1,3,32,32] but was bound as i32[1,3,32,32]");
  EXPECT_EQ(kiln_context_bind_input(ctx, "input", input.raw(), KILN_F32, bad_shape, 4, KILN_MEMORY_HOST),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "input \"input\" is f32[1,3,32,32] but was bound as f32[1,3,32,31]");
  EXPECT_EQ(kiln_context_bind_input(ctx, "input", input.raw(), KILN_F32, in_shape, 4, KILN_MEMORY_DEVICE),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "input \"input\": device memory bound but the engine runs on the CPU");
  EXPECT_EQ(kiln_context_bind_input(ctx, "input", input.raw(), kiln_dtype(99), in_shape, 4, KILN_MEMORY_HOST),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "dtype 99 is not a kiln_dtype");
  EXPECT_EQ(kiln_context_bind_input(ctx, "input", input.raw(), KILN_F32, in_shape, 4, kiln_memory(7)),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "memory 7 is not a kiln_memory");
  EXPECT_EQ(kiln_context_bind_input(nullptr, "input", input.raw(), KILN_F32, in_shape, 4, KILN_MEMORY_HOST),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "context must not be null");
  // A run with nothing bound fails with text, then the same context runs fine.
  EXPECT_EQ(kiln_context_run(ctx), KILN_ERROR_RUNTIME);
  EXPECT_STREQ(kiln_last_error(), "input \"input\" is not bound");
  int dummy = 0;
  EXPECT_EQ(kiln_context_enqueue(ctx, &dummy), KILN_ERROR_RUNTIME);
  std::vector<float> out(10);
  ASSERT_EQ(bind_all(out.data()), KILN_OK) << kiln_last_error();
  EXPECT_EQ(kiln_context_enqueue(ctx, &dummy), KILN_ERROR_RUNTIME);
  EXPECT_NE(std::string(kiln_last_error()).find("the engine runs on the CPU"), std::string::npos);
  ASSERT_EQ(kiln_context_run(ctx), KILN_OK) << kiln_last_error();
  EXPECT_EQ(out[0], want.data<float>()[0]);
}

TEST_F(CApi, BadPlansAndUnavailableGpu) {
  kiln_engine* e = nullptr;
  std::vector<uint8_t> junk(100, 7);
  EXPECT_EQ(kiln_engine_create_from_memory(junk.data(), junk.size(), KILN_BACKEND_AUTO, &e), KILN_ERROR_INVALID_PLAN);
  EXPECT_EQ(e, nullptr);
  EXPECT_EQ(std::string(kiln_last_error()),
            "plan in memory: not a kiln plan: magic is '" + std::string(8, '?') + "', expected 'KILNPLAN'");
  EXPECT_EQ(kiln_engine_create_from_file("/nonexistent/m.plan", KILN_BACKEND_AUTO, &e), KILN_ERROR_INVALID_PLAN);
  EXPECT_STREQ(kiln_last_error(), "/nonexistent/m.plan: cannot open plan file");
  EXPECT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_ERROR_UNAVAILABLE);
  EXPECT_NE(std::string(kiln_last_error()).find("the GPU backend is not available"), std::string::npos);
  EXPECT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), kiln_backend(7), &e),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_status_message(KILN_ERROR_INVALID_PLAN), "invalid plan");
}

TEST_F(CApi, ContextOutlivesItsEngineHandleAndThreadsShareOneEngine) {
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU, &e), KILN_OK);
  std::vector<std::vector<float>> outs(4, std::vector<float>(10, -1));
  std::vector<std::thread> threads;
  std::vector<kiln_status> st(4, KILN_ERROR_INTERNAL);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      kiln_context* c = nullptr;
      if (kiln_context_create(e, &c) != KILN_OK) return;
      int64_t in_shape[] = {1, 3, 32, 32}, out_shape[] = {1, 10};
      kiln_context_bind_input(c, "input", input.raw(), KILN_F32, in_shape, 4, KILN_MEMORY_HOST);
      kiln_context_bind_output(c, "probs", outs[t].data(), KILN_F32, out_shape, 2, KILN_MEMORY_HOST);
      st[t] = kiln_context_run(c);
      kiln_context_destroy(c);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(st[t], KILN_OK) << t;
    EXPECT_EQ(outs[t][9], want.data<float>()[9]) << t;
  }
  kiln_context* c = nullptr;
  ASSERT_EQ(kiln_context_create(e, &c), KILN_OK);
  kiln_engine_destroy(e);  // the context keeps the engine alive
  int64_t in_shape[] = {1, 3, 32, 32}, out_shape[] = {1, 10};
  std::vector<float> out(10);
  ASSERT_EQ(kiln_context_bind_input(c, "input", input.raw(), KILN_F32, in_shape, 4, KILN_MEMORY_HOST), KILN_OK);
  ASSERT_EQ(kiln_context_bind_output(c, "probs", out.data(), KILN_F32, out_shape, 2, KILN_MEMORY_HOST), KILN_OK);
  EXPECT_EQ(kiln_context_run(c), KILN_OK) << kiln_last_error();
  EXPECT_EQ(out[5], want.data<float>()[5]);
  kiln_context_destroy(c);
}

TEST_F(CApi, CppWrapperThrowsWithTheMessage) {
  kiln::Engine e = kiln::Engine::from_memory(bytes.data(), bytes.size());
  EXPECT_EQ(e.backend(), KILN_BACKEND_CPU);
  ASSERT_EQ(e.inputs().size(), 1u);
  EXPECT_EQ(e.inputs()[0].shape, (std::vector<int64_t>{1, 3, 32, 32}));
  EXPECT_EQ(e.outputs()[0].nbytes(), 40u);
  kiln::Context c(e);
  try {
    c.bind_input("nope", input.raw(), KILN_F32, {1});
    FAIL() << "no throw";
  } catch (const kiln::runtime_error& err) {
    EXPECT_EQ(err.status(), KILN_ERROR_NOT_FOUND);
    EXPECT_STREQ(err.what(), "not found: the model has no input named \"nope\" (inputs: \"input\")");
  }
  std::vector<float> out(10);
  c.bind_input("input", input.raw(), KILN_F32, {1, 3, 32, 32});
  c.bind_output("probs", out.data(), KILN_F32, {1, 10});
  c.run();
  EXPECT_EQ(out[2], want.data<float>()[2]);
  EXPECT_THROW(kiln::Engine::from_file("/nonexistent.plan"), kiln::runtime_error);
}

}  // namespace
}  // namespace kiln
