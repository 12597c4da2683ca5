// The kernel parameter space as the plan builder counts it
// (compiler/plan_launch_check.h, codegen/launch_fit.h): the driver lays out
// every parameter the kernel's image declares, so a shape-generic kernel's
// by-value `kiln_syms` (64 bytes) counts with its buffer pointers. 32,764
// bytes on Volta and newer with a CUDA 12.1+ driver; kiln's plans need a
// 13.0 driver anyway (their NVRTC 13 code), so the old 4,096-byte space never
// applies (docs/testing.md, the fake driver's `params` rule).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "codegen/launch_fit.h"
#include "codegen/param_table.h"
#include "compiler/plan_launch_check.h"
#include "ir/parser.h"

namespace kiln {
namespace {

// A shape-generic kernel's text with `buffers` pointer parameters and the
// by-value kiln_syms after them, as the emitters write it.
std::string generic_kernel(int buffers) {
  std::string params;
  for (int i = 0; i < buffers; ++i) params += fmt::format("KILN_PTR(float) b{}, ", i);
  return "__global__ void __launch_bounds__(32) k(" + params + "kiln_syms ks) {}\n";
}

plan::Step launch_of(int buffers) {
  plan::Step s;
  s.kind = plan::StepKind::Kernel;
  s.grid = {1, 1, 1};
  s.block = {32, 1, 1};
  s.args.resize(static_cast<size_t>(buffers));
  return s;
}

TEST(ParamSpace, ASignaturesBytesCountTheByValueKilnSyms) {
  EXPECT_EQ(codegen::kernel_param_bytes(generic_kernel(3), "k"), 3 * 8 + codegen::kKilnSymsBytes);
  EXPECT_EQ(codegen::kernel_param_bytes("__global__ void k(KILN_PTR(float) a, KILN_PTR(const float) b) {}", "k"), 16);
  EXPECT_EQ(codegen::kernel_param_bytes("__global__ void other(int a) {}", "k"), -1);
}

// 4,087 pointers and the 64-byte kiln_syms are 32,760 bytes: the last launch
// that fits. One more pointer is 32,768, over the 32,764 (leaving out the
// kiln_syms, 32,704 bytes looked as if they fit).
TEST(ParamSpace, AShapeGenericLaunchRightAtTheLimitFitsAndOneMorePointerDoesNot) {
  auto g = parse_graph("graph @m(%x: f32[4]) -> (f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n", "p.kir");
  const Node& n = *g->nodes().front();
  PlanBuildOptions o{"sm_90", "fp32", {}};
  o.source_name = "p.onnx";
  constexpr int kFits = (32764 - 64) / 8;  // 4087
  EXPECT_EQ(kFits * 8 + codegen::kKilnSymsBytes, 32760);
  EXPECT_NO_THROW(planbuild::check_launch_fits(launch_of(kFits), n, generic_kernel(kFits), "k", -1, -1, "", o));
  try {
    planbuild::check_launch_fits(launch_of(kFits + 1), n, generic_kernel(kFits + 1), "k", -1, -1, "", o);
    ADD_FAILURE() << "a launch of 32,768 parameter bytes was taken";
  } catch (const planbuild::LaunchMisfit& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("p.onnx"), std::string::npos) << what;
    EXPECT_NE(what.find("32768 bytes of kernel parameters, over sm_90's 32764-byte parameter space"), std::string::npos)
        << what;
    EXPECT_FALSE(e.fewer_threads_may_fit);
  }
  // The same number of buffers without kiln_syms (a static kernel) fits.
  std::string static_kernel = generic_kernel(kFits + 1);
  static_kernel.replace(static_kernel.find(", kiln_syms ks"), 14, "");
  EXPECT_NO_THROW(planbuild::check_launch_fits(launch_of(kFits + 1), n, static_kernel, "k", -1, -1, "", o));
}

}  // namespace
}  // namespace kiln
