// A plan of the sm_90a target with a wgmma GEMM (codegen/emitters/gemm_conv/
// emit_gemm_wgmma_tiled.cpp) on the strict fake driver, its kernels run on the
// simulator: the plan records sm_90a for every kernel; on an sm_90 device the
// runtime takes the sm_90a CUBINs and the result equals the reference; on
// sm_80 the plan is refused (wrong GPU arch), and on a newer arch too (no
// PTX JIT of compute_90a elsewhere). The driver itself refuses the sm_90a
// CUBIN on sm_80 and its PTX on sm_100, as the real one does.
#include <gtest/gtest.h>

#include "tests/runtime/fake_gpu_util.h"

namespace kiln::fakegpu {
namespace {

using FakeGpuWgmma = FakeGpu;

TEST_F(FakeGpuWgmma, Sm90aPlanRunsOnHopperOnlyAndEqualsTheReference) {
  const plan::Plan& p = plans().at("sm_90a_wgmma");
  EXPECT_EQ(p.meta.archs, (std::vector<std::string>{"sm_90a"}));
  int wgmma = 0;
  for (const plan::Kernel& k : p.kernels) {
    EXPECT_EQ(k.arch, "sm_90a") << k.name;
    EXPECT_FALSE(k.cubin.empty()) << k.name;
    EXPECT_NE(k.ptx.find(".target sm_90a"), std::string::npos) << k.name;
    if (k.source.find(", wgmma sm_90a); tile ") != std::string::npos) {
      ++wgmma;
      EXPECT_NE(k.ptx.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"), std::string::npos);
    }
  }
  EXPECT_EQ(wgmma, 1);
  std::unique_ptr<Graph> g = compiled_text(kWgmmaGemm);
  const std::map<std::string, Tensor> feed = testing::random_inputs(*g, 31);
  std::vector<uint8_t> bytes = plan_for("sm_90a_wgmma");
  fake().set_arch(9, 0);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "wgmma.plan", rt::Backend::Gpu);
  ASSERT_TRUE(e->on_gpu()) << e->info();
  EXPECT_NE(e->info().find("(CUBIN sm_90a, "), std::string::npos) << e->info();
  rt::Context ctx(e);
  const std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  const std::vector<Tensor> got = run(ctx, feed);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(compare_tensors(got[0], want[0], default_tolerance(DType::F16)), "");
  for (auto [major, minor] : {std::pair{8, 0}, std::pair{8, 9}, std::pair{10, 0}}) {
    fake().set_arch(major, minor);
    try {
      rt::Engine::load(bytes.data(), bytes.size(), "wgmma.plan", rt::Backend::Gpu);
      ADD_FAILURE() << "an sm_90a plan loaded on sm_" << major << minor;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("wrong GPU arch: the plan's kernels are for sm_90a"), std::string::npos)
          << err.what();
    }
  }
  fake().set_arch(9, 0);
}

}  // namespace
}  // namespace kiln::fakegpu
