// The CLI's `kiln bench MODEL.plan` on the GPU path, against the strict fake
// CUDA driver (tests/runtime/fake_gpu_util.h runs the plan's kernels on the
// simulator). A test of the CLI itself, so it lives with the CLI: nothing
// outside tools/ includes tools/kiln/*.
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "tests/runtime/fake_gpu_util.h"
#include "tests/unit/captured_output.h"
#include "tools/kiln/bench.h"
#include "tools/kiln/bench_plan.h"

namespace kiln {
namespace {

using namespace fakegpu;

// `kiln bench MODEL.plan --backend gpu` (tools/kiln/bench_plan.cpp) through the
// C API on the fake driver: the GPU backend is named, GPU Compute Time is each
// run's event time (the fake clock's sum over the launch list), and --profile
// says plainly that no per-kernel times exist instead of printing a table.
TEST_F(FakeGpu, BenchOfAPlanReportsTheGpuComputeTimeOfEveryRun) {
  plan_for("sm_90");  // the fake driver's kernels
  std::string dir = ::testing::TempDir();
  std::string path = dir + "/bench_fake.plan", json = dir + "/bench_fake.json";
  plan::write_plan_file(path, plans().at("sm_90"));
  BenchOptions o;
  o.model = path;
  o.backend = "gpu";
  o.iterations = 4;
  o.warmup_ms = 0;
  o.profile = true;
  o.json_path = json;
  int rc = -1;
  std::string out;
  {
    testing::CapturedOutput captured;  // ended even when the bench throws
    rc = run_bench_plan(o, PlanSource{o.model});
    out = captured.text();
  }
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("Backend: gpu (GPU sm_90 (CUBIN, "), std::string::npos) << out;
  EXPECT_NE(out.find("GPU Compute Time: min = "), std::string::npos) << out;
  // --profile: per kernel, from the runtime's profiling runs (events around un-captured launches).
  EXPECT_NE(out.find(" kernels, 4 iterations) ===\n(per kernel from CUDA events"), std::string::npos) << out;
  double want_compute = 0;
  for (const plan::Step& st : plans().at("sm_90").steps)
    want_compute += st.kind == plan::StepKind::Copy ? double(st.args[0].nbytes) / 1e7
                                                    : 0.005 + 0.001 * double(st.grid.x) * st.grid.y * st.grid.z;
  std::ifstream f(json);
  nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["backend"], "gpu");
  EXPECT_EQ(j["backend_kind"], "gpu");
  ASSERT_EQ(j["gpu_compute_samples_ms"].size(), 4u);
  for (const auto& v : j["gpu_compute_samples_ms"]) EXPECT_NEAR(v.get<double>(), want_compute, 1e-4);
  EXPECT_NEAR(j["gpu_compute_ms"]["median"].get<double>(), want_compute, 1e-4);
  EXPECT_EQ(j["latency_samples_ms"].size(), 4u);
  // Each step's time is the fake clock's cost of that kernel or copy: the
  // profile's total over 4 runs is 4 graph replays' compute time.
  std::set<std::string> kernel_names;
  for (const plan::Kernel& k : plans().at("sm_90").kernels) kernel_names.insert(k.name);
  double profiled = 0;
  ASSERT_GT(j["profile"].size(), 0u);
  for (const auto& row : j["profile"]) {
    std::string name = row["name"];
    EXPECT_TRUE(kernel_names.count(name) || name.rfind("copy (step ", 0) == 0) << name;
    EXPECT_EQ(row["calls"].get<int>() % 4, 0) << name;
    profiled += row["total_ms"].get<double>();
  }
  EXPECT_NEAR(profiled, 4 * want_compute, 1e-3);
  EXPECT_EQ(stats()[5], 0) << "device allocations leaked";
}

}  // namespace
}  // namespace kiln
