// `kiln run MODEL.plan --backend gpu` (tools/kiln/run_plan.cpp) through the C
// API on the strict fake CUDA driver (the plan's kernels run on the
// simulator): it says which launch variants ran as `--backend sim` says it,
// and every size the data decided in a GPU plan computed at the bounds,
// those of intermediate results that no output's shape shows among them
// (kiln_context_data_dependent_size).
#include <set>

#include "tests/runtime/bounded_size_plans.h"
#include "tests/runtime/fake_gpu_util.h"
#include "tests/unit/captured_output.h"
#include "tools/kiln/run_plan.h"

namespace kiln {
namespace {

using namespace fakegpu;

class FakeGpuRunPlan : public FakeGpu {
 protected:
  void SetUp() override {
    topk_plan();  // compiled before the fake driver is loaded (NVRTC)
    FakeGpu::SetUp();
  }
  static const plan::Plan& topk_plan() {
    static const plan::Plan p = bounded_plan(kFixedKTopk);
    return p;
  }
  // `kiln run PATH --backend B`: its standard output.
  static std::string run_plan(const std::string& path, const std::string& backend, PlanRunResult* result = nullptr) {
    RunPlanOptions o;
    o.backend = backend;
    int rc = -1;
    std::string error, out;
    {
      testing::CapturedOutput captured;
      try {
        rc = run_plan_command(PlanSource{path}, o, result);
      } catch (const std::exception& e) {
        error = e.what();
      }
      out = captured.text();
    }
    EXPECT_EQ(rc, 0) << backend << ": " << error << "\n" << out;
    return out;
  }
  static std::string line_starting(const std::string& out, const std::string& prefix) {
    size_t at = out.find("\n" + prefix);
    if (at == std::string::npos) return "";
    return out.substr(at + 1, out.find('\n', at + 1) - at - 1);
  }
};

// The CNN with launch variants for its opt shape (batch 3, the shape `kiln
// run` generates inputs at): the GPU run names the variants it issued, in
// the sim's words.
TEST_F(FakeGpuRunPlan, GpuRunSaysWhichLaunchVariantsRanAsSimDoes) {
  plan_for("profile_cnn_opt3");  // the fake driver's kernels
  const std::string path = ::testing::TempDir() + "/run_variants.plan";
  plan::write_plan_file(path, plans().at("profile_cnn_opt3"));
  const std::string gpu = run_plan(path, "gpu"), sim = run_plan(path, "sim");
  const std::string said = line_starting(gpu, "launch variants: ");
  EXPECT_NE(said.find("specialised for the opt shape of profile 0 (batch=3)"), std::string::npos) << gpu;
  EXPECT_EQ(said, line_starting(sim, "launch variants: ")) << gpu << "\n---\n" << sim;
  EXPECT_NE(gpu.find("backend: gpu ("), std::string::npos) << gpu;
}

// A NonZero count that only a TopK of fixed k reads: no output's dim. The
// run prints its value, which is the inputs' count over the threshold.
TEST_F(FakeGpuRunPlan, GpuRunPrintsAnIntermediateCountTheDataDecided) {
  plan_bytes(topk_plan());  // the fake driver's kernels
  const std::string path = ::testing::TempDir() + "/run_counts.plan";
  plan::write_plan_file(path, topk_plan());
  for (const std::string backend : {"gpu", "sim", "ref"}) {
    PlanRunResult r;
    const std::string out = run_plan(path, backend, &r);
    const Tensor& x = r.feed.at("x");
    const float t = r.feed.at("t").data<float>()[0];
    int selected = 0;
    for (int i = 0; i < 8; ++i) selected += x.data<float>()[i] > t;
    const std::string& node = topk_plan().bounded_sizes.counts.at(0).node;
    EXPECT_EQ(line_starting(out, "data-dependent sizes: "),
              fmt::format("data-dependent sizes: n={} (range [0, 8], {}) (the plan computed at the bounds; outputs "
                          "trimmed)",
                          selected, node))
        << backend << ":\n"
        << out;
  }
}

// The C API: the count's symbol, node, bound and value; before a run and for
// an index out of range, a status saying so.
TEST_F(FakeGpuRunPlan, TheCApiGivesEachCountAfterARun) {
  std::vector<uint8_t> bytes = plan_bytes(topk_plan());
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU, &e), KILN_OK)
      << kiln_last_error();
  int n = -1;
  ASSERT_EQ(kiln_engine_num_data_dependent_sizes(e, &n), KILN_OK);
  EXPECT_EQ(n, 1);
  kiln_context* c = nullptr;
  ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << kiln_last_error();
  kiln_data_dependent_size d{};
  EXPECT_EQ(kiln_context_data_dependent_size(c, 0, &d), KILN_ERROR_UNAVAILABLE);
  EXPECT_NE(std::string(kiln_last_error()).find("not known"), std::string::npos) << kiln_last_error();
  EXPECT_EQ(kiln_context_data_dependent_size(c, 1, &d), KILN_ERROR_NOT_FOUND);
  const float x[8] = {-5, 1, 2, 3, -1, 4, 0.5f, 6}, t = 0.7f;
  float top[2];
  int64_t ti[2];
  const int64_t eight = 8, two = 2;
  ASSERT_EQ(kiln_context_bind_input(c, "x", x, KILN_F32, &eight, 1, KILN_MEMORY_HOST), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_context_bind_input(c, "t", &t, KILN_F32, nullptr, 0, KILN_MEMORY_HOST), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_context_bind_output(c, "top", top, KILN_F32, &two, 1, KILN_MEMORY_HOST), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_context_bind_output(c, "ti", ti, KILN_I64, &two, 1, KILN_MEMORY_HOST), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_context_run(c), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_context_data_dependent_size(c, 0, &d), KILN_OK) << kiln_last_error();
  EXPECT_STREQ(d.symbol, "n");
  EXPECT_EQ(std::string(d.node), topk_plan().bounded_sizes.counts.at(0).node);
  EXPECT_EQ(d.bound, 8);
  EXPECT_EQ(d.value, 5);  // 1, 2, 3, 4 and 6 are over 0.7
  int variants = -1, ids[1] = {-1};
  EXPECT_EQ(kiln_context_launch_variants(c, ids, 1, &variants), KILN_OK);
  EXPECT_EQ(variants, 0) << "a static plan has no launch variants";
  EXPECT_EQ(ids[0], -1);
  kiln_context_destroy(c);
  kiln_engine_destroy(e);
}

}  // namespace
}  // namespace kiln
