// Plan format version 2 (runtime/plan_format.h, docs/plan_format.md): the
// CUBINs of more archs per kernel (portable plans) and the oldest CUDA driver
// a plan's code needs. Which code a GPU runs, the driver check's message, the
// PTX ISA -> driver table, and version 1 plans still loading.
#include <gtest/gtest.h>

#include <cstring>

#include "ir/error.h"
#include "runtime/plan_format.h"
#include "runtime/version.h"
#include "tests/unit/test_source_dir.h"

namespace kiln {
namespace {

// A two-kernel plan made by hand (no NVRTC): CUBINs for sm_80 and sm_90,
// sm_80's PTX, as a portable plan has them.
plan::Plan portable_plan() {
  plan::Plan p;
  p.meta.kiln_version = kKilnVersion;
  p.meta.target = "portable";
  p.meta.precision = "fp32";
  p.meta.archs = {"sm_80", "sm_90"};
  p.meta.gpu_kernels = true;
  p.meta.cubin_driver_version = 13000;
  p.meta.ptx_driver_version = 13000;
  p.graph_text = "graph @m(%x: f32[4]) -> (f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n";
  for (const char* name : {"k0", "k1"}) {
    plan::Kernel k{name, "extern \"C\" __global__ void k() {}", "sm_80", {1, 2, 3}, ".version 9.0\n.target sm_80\n"};
    k.registers = 16;
    k.more_cubins.push_back({"sm_90", {4, 5, 6, 7}, 18, 0, 0});
    p.kernels.push_back(std::move(k));
  }
  plan::Step s;
  s.grid = {1, 1, 1};
  s.block = {4, 1, 1};
  s.args = {{plan::BufferKind::Output, 0, 0, 16, 4}, {plan::BufferKind::Input, 0, 0, 16, 4}};
  p.steps.push_back(s);
  s.kernel = 1;
  p.steps.push_back(s);
  return p;
}

TEST(PlanMultiArch, RoundTripKeepsEveryCubinAndTheDriverVersions) {
  plan::Plan p = portable_plan();
  std::vector<uint8_t> b = plan::serialize(p);
  plan::Plan q = plan::deserialize(b.data(), b.size(), "p.plan");
  EXPECT_EQ(q.format_version, 2u);
  EXPECT_EQ(q.meta.cubin_driver_version, 13000);
  EXPECT_EQ(q.meta.ptx_driver_version, 13000);
  ASSERT_EQ(q.kernels.size(), 2u);
  ASSERT_EQ(q.kernels[1].more_cubins.size(), 1u);
  EXPECT_EQ(q.kernels[1].more_cubins[0].arch, "sm_90");
  EXPECT_EQ(q.kernels[1].more_cubins[0].image, (std::vector<uint8_t>{4, 5, 6, 7}));
  EXPECT_EQ(q.kernels[1].more_cubins[0].registers, 18);
  EXPECT_EQ(plan::serialize(q), b);
}

TEST(PlanMultiArch, EachGpuGetsItsOwnCubinABinaryCompatibleOneOrThePtx) {
  plan::Plan p = portable_plan();
  auto pick = [&](const char* arch) { return plan::select_code(p, arch).describe(); };
  EXPECT_EQ(pick("sm_80"), "CUBIN sm_80");
  EXPECT_EQ(pick("sm_86"), "CUBIN sm_80");  // same major arch, newer minor
  EXPECT_EQ(pick("sm_89"), "CUBIN sm_80");
  EXPECT_EQ(pick("sm_90"), "CUBIN sm_90");
  EXPECT_EQ(pick("sm_100"), "PTX JIT from sm_80");
  EXPECT_EQ(pick("sm_120"), "PTX JIT from sm_80");
  plan::CodeChoice c = plan::select_code(p, "sm_90");
  EXPECT_EQ(plan::code_image(p.kernels[0], c), p.kernels[0].more_cubins[0].image.data());
  c = plan::select_code(p, "sm_100");
  EXPECT_EQ(static_cast<const char*>(plan::code_image(p.kernels[0], c)), p.kernels[0].ptx);
  try {
    plan::select_code(p, "sm_75", "p.plan");
    FAIL() << "sm_75 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("p.plan: wrong GPU arch: the plan's kernels are for sm_80,sm_90, this GPU "
                                          "is sm_75",
                                          0),
              0u)
        << e.what();
  }
  // One kernel without sm_90's CUBIN: Hopper gets the PTX, not a mix.
  p.kernels[1].more_cubins.clear();
  EXPECT_EQ(pick("sm_90"), "PTX JIT from sm_80");
}

TEST(PlanMultiArch, ADriverOlderThanTheCodeNeedsIsAnErrorNamingBothVersions) {
  plan::Plan p = portable_plan();
  p.meta.ptx_driver_version = 13010;
  plan::CodeChoice cubin = plan::select_code(p, "sm_90");
  plan::CodeChoice ptx = plan::select_code(p, "sm_100");
  EXPECT_NO_THROW(plan::check_driver_version(cubin, 13000, "p.plan"));
  EXPECT_NO_THROW(plan::check_driver_version(ptx, 13010, "p.plan"));
  EXPECT_NO_THROW(plan::check_driver_version(cubin, 0, "p.plan"));  // the driver's version unknown
  try {
    plan::check_driver_version(cubin, 12080, "p.plan");
    FAIL() << "a 12.8 driver accepted CUDA 13 CUBINs";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "p.plan: the plan's kernels (CUBIN sm_90) need a CUDA driver of version 13.0 or newer, this driver "
                 "is version 12.8 (update the NVIDIA driver, or recompile the model with a kiln whose NVRTC is at "
                 "most CUDA 12.8)");
  }
  try {
    plan::check_driver_version(ptx, 13000, "p.plan");
    FAIL() << "a 13.0 driver accepted ISA 9.1 PTX";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(PTX JIT from sm_80) need a CUDA driver of version 13.1 or newer, this "
                                         "driver is version 13.0"),
              std::string::npos)
        << e.what();
  }
}

TEST(PlanMultiArch, PtxIsaToDriverVersion) {
  EXPECT_EQ(plan::ptx_driver_version("//\n.version 9.0\n.target sm_80\n"), 13000);
  EXPECT_EQ(plan::ptx_driver_version(".version 9.1\n"), 13010);
  EXPECT_EQ(plan::ptx_driver_version(".version 8.8\n"), 12090);
  EXPECT_EQ(plan::ptx_driver_version(".version 8.7\n"), 12080);
  EXPECT_EQ(plan::ptx_driver_version(".version 8.5\n"), 12050);
  EXPECT_EQ(plan::ptx_driver_version(".version 8.0\n"), 12000);
  EXPECT_EQ(plan::ptx_driver_version(".version 7.8\n"), 11080);
  EXPECT_EQ(plan::ptx_driver_version("no version line"), 0);
  EXPECT_EQ(plan::driver_version_name(12080), "12.8");
  EXPECT_EQ(plan::driver_version_name(13000), "13.0");
}

TEST(PlanMultiArch, Version1PlansStillLoadWithTheDriverVersionsUnknown) {
  // Written by kiln before format version 2 (tests/fuzz/corpus/plan_load).
  std::string path = test_source_dir() + "/tests/fuzz/corpus/plan_load/relu_sm90.plan";
  plan::Plan p = plan::read_plan_file(path);
  EXPECT_EQ(p.format_version, 1u);
  EXPECT_EQ(p.meta.cubin_driver_version, 0);
  EXPECT_EQ(p.meta.ptx_driver_version, 0);
  ASSERT_TRUE(p.meta.gpu_kernels);
  for (const plan::Kernel& k : p.kernels) EXPECT_TRUE(k.more_cubins.empty());
  EXPECT_EQ(plan::select_code(p, "sm_90").describe(), "CUBIN sm_90");
  EXPECT_NO_THROW(plan::check_driver_version(plan::select_code(p, "sm_90"), 12000, path));
}

TEST(PlanMultiArch, ANewerFormatVersionIsRefusedNamingTheVersionsRead) {
  std::vector<uint8_t> b = plan::serialize(portable_plan());
  uint32_t v = 3;
  std::memcpy(b.data() + 8, &v, 4);
  try {
    plan::deserialize(b.data(), b.size(), "p.plan");
    FAIL() << "version 3 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "p.plan: plan format version 3, this runtime reads versions 1 to 2 (recompile the model with this "
                 "kiln)");
  }
}

}  // namespace
}  // namespace kiln
