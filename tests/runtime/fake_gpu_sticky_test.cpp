// What the runtime does after a sticky CUDA error (FakeGpuSticky). It leaves
// the process's GPU unusable, as CUDA does, so this file is the last of
// kiln_fake_gpu_tests' sources (tests/CMakeLists.txt): its suite runs after
// the others when the whole executable runs.
#include "tests/runtime/fake_gpu_util.h"

namespace kiln {
namespace {

using namespace fakegpu;

// The runtime after a sticky error: the run that met it and every later call
// on the engine or its contexts fail with KILN_ERROR_DEVICE_LOST and a
// message saying so; a new GPU engine on the device fails the same way, an
// Auto engine falls back to the CPU and says why; destroying everything
// neither throws nor leaks. The process's GPU stays unusable (CUDA's rule),
// which is why this suite is the executable's last.
using FakeGpuSticky = FakeGpu;
TEST_F(FakeGpuSticky, AStickyErrorMakesTheEngineUnusableWithAClearStatus) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK)
      << kiln_last_error();
  kiln_context* c = nullptr;
  ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << kiln_last_error();
  auto feed = testing::random_inputs(*graph, 101);
  std::vector<Tensor> outs;
  for (const Value* v : graph->outputs()) outs.emplace_back(v->type());
  for (const Value* v : graph->inputs()) {
    const TensorType& t = v->type();
    ASSERT_EQ(kiln_context_bind_input(c, v->name().c_str(), feed.at(v->name()).raw(), kiln_dtype(t.dtype),
                                      t.shape.data(), t.rank(), KILN_MEMORY_HOST),
              KILN_OK);
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const TensorType& t = outs[i].type();
    ASSERT_EQ(kiln_context_bind_output(c, graph->outputs()[i]->name().c_str(), outs[i].raw(), kiln_dtype(t.dtype),
                                       t.shape.data(), t.rank(), KILN_MEMORY_HOST),
              KILN_OK);
  }
  ASSERT_EQ(kiln_context_run(c), KILN_OK) << kiln_last_error();
  expect_reference(outs, feed);

  launches_to_fail = 1;  // a kernel of the graph fails: CUDA_ERROR_LAUNCH_FAILED, sticky
  EXPECT_EQ(kiln_context_run(c), KILN_ERROR_DEVICE_LOST);
  const std::string lost = kiln_last_error();
  EXPECT_EQ(lost.rfind("the GPU (CUDA device 0) is unusable: CUDA: ", 0), 0u) << lost;
  EXPECT_NE(lost.find(": unspecified launch failure (error 719); CUDA reports this error to every later call in "
                      "this process (restart the process to use the GPU again)"),
            std::string::npos)
      << lost;
  EXPECT_EQ(kiln_context_run(c), KILN_ERROR_DEVICE_LOST);
  EXPECT_EQ(kiln_last_error(), lost);
  EXPECT_EQ(kiln_context_submit(c), KILN_ERROR_DEVICE_LOST);
  kiln_context* c2 = nullptr;
  EXPECT_EQ(kiln_context_create(e, &c2), KILN_ERROR_DEVICE_LOST);
  EXPECT_EQ(c2, nullptr);
  kiln_engine* e2 = nullptr;
  EXPECT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e2), KILN_ERROR_DEVICE_LOST);
  EXPECT_EQ(kiln_last_error(), "plan in memory: " + lost);
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_AUTO, &e2), KILN_OK);
  const char* info = nullptr;
  ASSERT_EQ(kiln_engine_info(e2, &info), KILN_OK);
  EXPECT_EQ(std::string(info), "CPU reference path (" + lost + ")");
  EXPECT_STREQ(kiln_status_message(KILN_ERROR_DEVICE_LOST), "GPU unusable (sticky CUDA error)");
  kiln_engine_destroy(e2);
  kiln_context_destroy(c);
  kiln_engine_destroy(e);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
  EXPECT_EQ(stats()[6], 0) << "pinned allocations leaked";
  fake().clear_sticky();
}

}  // namespace
}  // namespace kiln
