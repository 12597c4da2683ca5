// The runtime API's lookups, plan getters, log callback and profiling on the
// CPU path (a CPU plan: no GPU, no compiler), through the C API and the C++
// wrapper. The GPU side of the same calls is in fake_gpu_api_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/kiln.hpp"
#include "tests/runtime/cpu_plan.h"

namespace {

std::vector<uint8_t> cnn_plan() { return kiln::testing::cpu_plan_bytes(kiln::testing::cnn_graph_text()); }

TEST(RuntimeApi, LooksUpInputsAndOutputsByName) {
  std::vector<uint8_t> bytes = cnn_plan();
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU, &e), KILN_OK);
  int i = -1;
  ASSERT_EQ(kiln_engine_input_index(e, "x", &i), KILN_OK) << kiln_last_error();
  EXPECT_EQ(i, 0);
  ASSERT_EQ(kiln_engine_output_index(e, "r", &i), KILN_OK) << kiln_last_error();
  EXPECT_EQ(i, 1);
  kiln_tensor_info info;
  ASSERT_EQ(kiln_engine_output(e, i, &info), KILN_OK);
  EXPECT_STREQ(info.name, "r");
  EXPECT_EQ(info.dtype, KILN_F32);
  EXPECT_EQ(std::vector<int64_t>(info.shape, info.shape + info.rank), (std::vector<int64_t>{2, 4, 8, 8}));
  EXPECT_EQ(kiln_engine_input_index(e, "y", &i), KILN_ERROR_NOT_FOUND);
  EXPECT_STREQ(kiln_last_error(), "the model has no input named \"y\" (inputs: \"x\")");
  EXPECT_EQ(kiln_engine_output_index(e, "x", &i), KILN_ERROR_NOT_FOUND);
  EXPECT_STREQ(kiln_last_error(), "the model has no output named \"x\" (outputs: \"s\", \"r\")");
  EXPECT_EQ(kiln_engine_input_index(e, nullptr, &i), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_engine_input_index(e, "x", nullptr), KILN_ERROR_INVALID_ARGUMENT);
  kiln_engine_destroy(e);

  kiln::Engine cpp = kiln::Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU);
  EXPECT_EQ(cpp.output_index("s"), 0);
  try {
    cpp.input_index("nope");
    ADD_FAILURE() << "no error for an unknown input";
  } catch (const kiln::runtime_error& err) {
    EXPECT_EQ(err.status(), KILN_ERROR_NOT_FOUND);
  }
}

TEST(RuntimeApi, TellsThePlansTargetAndPrecision) {
  std::vector<uint8_t> bytes = cnn_plan();
  kiln::Engine e = kiln::Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU);
  EXPECT_EQ(e.target(), "cpu");
  EXPECT_EQ(e.precision(), "fp32");
  const char* t = nullptr;
  EXPECT_EQ(kiln_engine_target(nullptr, &t), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_engine_precision(e.get(), nullptr), KILN_ERROR_INVALID_ARGUMENT);
}

TEST(RuntimeApi, ACpuEngineHasNoCudaDevice) {
  std::vector<uint8_t> bytes = cnn_plan();
  kiln::Engine e = kiln::Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU);
  EXPECT_EQ(e.device(), -1);
  int d = 0;
  EXPECT_EQ(kiln_engine_device(nullptr, &d), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_engine_device(e.get(), nullptr), KILN_ERROR_INVALID_ARGUMENT);
}

struct Logged {
  std::vector<std::pair<kiln_log_level, std::string>> lines;
};

void collect(kiln_log_level level, const char* message, void* user) {
  static_cast<Logged*>(user)->lines.emplace_back(level, message);
}

TEST(RuntimeApi, LogCallbackHearsWhichPathAnEngineTookAndWhy) {
  std::vector<uint8_t> bytes = cnn_plan();
  Logged logged;
  kiln_set_log_callback(collect, &logged);
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_AUTO, &e), KILN_OK);
  kiln_engine_destroy(e);
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU, &e), KILN_OK);
  kiln_engine_destroy(e);
  kiln_set_log_callback(nullptr, nullptr);
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_AUTO, &e), KILN_OK);
  kiln_engine_destroy(e);
  ASSERT_EQ(logged.lines.size(), 2u);  // nothing after the callback was removed
  // AUTO on the CPU: a warning with the reason (a CPU plan has no GPU kernels).
  EXPECT_EQ(logged.lines[0].first, KILN_LOG_WARNING);
  EXPECT_EQ(logged.lines[0].second,
            "plan in memory: the AUTO backend runs on the CPU reference path (the plan has no GPU kernels: a CPU "
            "plan written by the runtime tests)");
  // The CPU asked for: information only.
  EXPECT_EQ(logged.lines[1].first, KILN_LOG_INFO);
  EXPECT_EQ(logged.lines[1].second, "plan in memory: runs on the CPU reference path (the CPU backend was requested)");

  // The C++ form takes any callable.
  std::vector<std::string> seen;
  kiln::set_log_callback([&](kiln_log_level, const std::string& m) { seen.push_back(m); });
  kiln::Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU);
  kiln::set_log_callback(nullptr);
  kiln::Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], "plan in memory: runs on the CPU reference path (the CPU backend was requested)");
}

TEST(RuntimeApi, ProfilesEachNodeOnTheCpuAndWritesTheOutputs) {
  std::vector<uint8_t> bytes = cnn_plan();
  kiln::Engine e = kiln::Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU);
  kiln::Context ctx(e);
  std::vector<float> x(2 * 3 * 8 * 8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 17) - 8) / 8.0f;
  ctx.bind_input("x", x.data(), KILN_F32, {2, 3, 8, 8});
  std::vector<float> s(20), r(2 * 4 * 8 * 8), s_ref(20), r_ref(r.size());
  ctx.bind_output("s", s_ref.data(), KILN_F32, {2, 10});
  ctx.bind_output("r", r_ref.data(), KILN_F32, {2, 4, 8, 8});
  ctx.run();
  ctx.bind_output("s", s.data(), KILN_F32, {2, 10});
  ctx.bind_output("r", r.data(), KILN_F32, {2, 4, 8, 8});
  std::vector<kiln::ProfileEntry> p = ctx.profile();
  EXPECT_EQ(s, s_ref);  // a profiled run is a run
  EXPECT_EQ(r, r_ref);
  // One entry per computing node, in run order (the constants are no work).
  std::vector<std::string> ops;
  for (const kiln::ProfileEntry& pe : p) {
    ops.push_back(pe.op);
    EXPECT_GE(pe.ms, 0.0f) << pe.name;
    EXPECT_FALSE(pe.name.empty());
  }
  EXPECT_EQ(ops, (std::vector<std::string>{"conv", "relu", "reshape", "matmul", "add", "softmax"}));

  // Unbound outputs are refused as by run().
  kiln::Context fresh(e);
  const kiln_profile_entry* entries = nullptr;
  int n = -1;
  EXPECT_EQ(kiln_context_profile(fresh.get(), &entries, &n), KILN_ERROR_RUNTIME);
  EXPECT_STREQ(kiln_last_error(), "input \"x\" is not bound");
  EXPECT_EQ(n, 0);
}

TEST(RuntimeApi, ZeroCopyDeviceBindingIsRefusedOnTheCpu) {
  std::vector<uint8_t> bytes = cnn_plan();
  kiln::Engine e = kiln::Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU);
  kiln::Context ctx(e);
  EXPECT_EQ(kiln_context_bind_input_device(ctx.get(), "x", 0x1000), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(kiln_last_error())
                .rfind("input \"x\": zero-copy device binding but the engine runs on the "
                       "CPU (CPU reference path (",
                       0),
            0u)
      << kiln_last_error();
  EXPECT_EQ(kiln_context_bind_output_device(ctx.get(), "nope", 0x1000), KILN_ERROR_NOT_FOUND);
}

}  // namespace
