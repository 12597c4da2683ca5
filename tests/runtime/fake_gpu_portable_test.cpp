// Portable plans and the minimum driver version (issue 14) on the strict fake
// driver: a portable plan (CUBINs for sm_80 and sm_90, sm_80's PTX) runs
// sm_80's CUBIN on Ampere and Ada GPUs, sm_90's on Hopper and the PTX on a
// newer arch, each equal to the reference; a driver older than the plan's
// code needs is refused naming both versions (KILN_BACKEND_GPU never falls
// back), and the AUTO backend's warning says so.
#include "tests/runtime/fake_gpu_util.h"

namespace kiln {
namespace {

using namespace fakegpu;

struct Logged {
  std::vector<std::pair<kiln_log_level, std::string>> lines;
};
void collect(kiln_log_level level, const char* message, void* user) {
  static_cast<Logged*>(user)->lines.emplace_back(level, message);
}

TEST_F(FakeGpu, PortablePlanPicksEachGpusCodeAndEqualsTheReference) {
  std::vector<uint8_t> bytes = plan_for("portable");
  const plan::Plan& p = plans().at("portable");
  ASSERT_EQ(p.meta.archs, (std::vector<std::string>{"sm_80", "sm_90"}));
  EXPECT_EQ(p.meta.cubin_driver_version, 13000);
  EXPECT_GE(p.meta.ptx_driver_version, 13000);
  for (const plan::Kernel& k : p.kernels) {
    EXPECT_EQ(k.arch, "sm_80");
    ASSERT_EQ(k.more_cubins.size(), 1u);
    EXPECT_EQ(k.more_cubins[0].arch, "sm_90");
    EXPECT_FALSE(k.more_cubins[0].image.empty());
  }
  struct Case {
    int major, minor;
    const char* code;  // in the engine's info
  };
  for (Case c : {Case{8, 0, "(CUBIN, "}, Case{8, 6, "(CUBIN sm_80, "}, Case{8, 9, "(CUBIN sm_80, "},
                 Case{9, 0, "(CUBIN, "}, Case{10, 0, "(PTX JIT, "}}) {
    fake().set_arch(c.major, c.minor);
    auto e = rt::Engine::load(bytes.data(), bytes.size(), "p.plan", rt::Backend::Gpu);
    ASSERT_TRUE(e->on_gpu()) << e->info();
    EXPECT_NE(e->info().find(c.code), std::string::npos) << c.major << "." << c.minor << ": " << e->info();
    rt::Context ctx(e);
    auto feed = testing::random_inputs(*graph, 20 + c.major * 10 + c.minor);
    expect_reference(run(ctx, feed), feed);
  }
  // Older than every arch kiln builds for: no code runs there.
  fake().set_arch(7, 5);
  try {
    rt::Engine::load(bytes.data(), bytes.size(), "p.plan", rt::Backend::Gpu);
    ADD_FAILURE() << "a portable plan loaded on sm_75";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("wrong GPU arch: the plan's kernels are for sm_80,sm_90, this GPU is sm_75"),
              std::string::npos)
        << err.what();
  }
  fake().set_arch(9, 0);
}

TEST_F(FakeGpu, ADriverOlderThanThePlansCodeIsRefusedNamingBothVersions) {
  std::vector<uint8_t> bytes = plan_for("sm_90");
  fake().set_driver_version(12080);  // CUDA 12.8: R570
  const std::string want =
      "m.plan: the plan's kernels (CUBIN sm_90) need a CUDA driver of version 13.0 or newer, this driver is version "
      "12.8";
  // KILN_BACKEND_GPU never falls back to the CPU.
  try {
    rt::Engine::load(bytes.data(), bytes.size(), "m.plan", rt::Backend::Gpu);
    ADD_FAILURE() << "an old driver ran the plan";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find(want), std::string::npos) << err.what();
  }
  kiln_engine* ce = nullptr;
  EXPECT_NE(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &ce), KILN_OK);
  EXPECT_EQ(ce, nullptr);
  EXPECT_NE(std::string(kiln_last_error())
                .find("need a CUDA driver of version 13.0 or newer, this driver is version "
                      "12.8"),
            std::string::npos)
      << kiln_last_error();
  // AUTO runs on the CPU and says why, as a warning through the log callback.
  Logged logged;
  kiln_set_log_callback(collect, &logged);
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_AUTO, &ce), KILN_OK);
  kiln_backend b;
  ASSERT_EQ(kiln_engine_backend(ce, &b), KILN_OK);
  EXPECT_EQ(b, KILN_BACKEND_CPU);
  kiln_engine_destroy(ce);
  kiln_set_log_callback(nullptr, nullptr);
  ASSERT_EQ(logged.lines.size(), 1u);
  EXPECT_EQ(logged.lines[0].first, KILN_LOG_WARNING);
  EXPECT_NE(logged.lines[0].second.find("plan in memory: the AUTO backend runs on the CPU reference path (plan in "
                                        "memory: the plan's kernels (CUBIN sm_90) need a CUDA driver of version "
                                        "13.0 or newer, this driver is version 12.8"),
            std::string::npos)
      << logged.lines[0].second;
  // The PTX path needs its ISA's driver: 13.0's PTX on a 13.0 driver loads.
  fake().set_driver_version(13000);
  auto ok = rt::Engine::load(bytes.data(), bytes.size(), "m.plan", rt::Backend::Gpu);
  EXPECT_TRUE(ok->on_gpu()) << ok->info();
}

}  // namespace
}  // namespace kiln
