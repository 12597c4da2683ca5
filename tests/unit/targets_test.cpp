// compiler/targets.h: what `--target auto` (the default of kiln compile,
// kiln.compile and the builder API) resolves to -- the local GPU's arch, or a
// portable GPU plan, never "cpu" -- and which archs each target builds.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "compiler/targets.h"
#include "ir/error.h"

namespace kiln {
namespace {

LocalGpu gpu(const std::string& arch) {
  LocalGpu g;
  g.present = true;
  g.name = "Test GPU";
  g.arch = arch;
  return g;
}

TEST(Targets, AutoIsTheLocalGpusArchWhenKilnBuildsForIt) {
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    ResolvedTarget r = resolve_target("auto", gpu(arch));
    EXPECT_EQ(r.target, arch);
    EXPECT_EQ(r.why, fmt::format("target auto: the local GPU, Test GPU ({})", arch));
  }
}

TEST(Targets, AutoWithoutAGpuIsAPortableGpuPlanNeverCpu) {
  LocalGpu none;
  none.why = "no CUDA driver (dlopen libcuda.so.1: not found)";
  ResolvedTarget r = resolve_target("auto", none);
  EXPECT_EQ(r.target, "portable");
  EXPECT_EQ(r.why,
            "target auto: no local GPU (no CUDA driver (dlopen libcuda.so.1: not found)): a portable GPU plan (CUBINs "
            "for sm_80 and sm_90, PTX for newer GPUs)");
  // A GPU kiln has no CUBIN target for: newer ones run the portable plan's
  // PTX; an older one is named (it runs none of kiln's plans).
  for (const char* arch : {"sm_100", "sm_120", "sm_75"}) {
    ResolvedTarget o = resolve_target("auto", gpu(arch));
    EXPECT_EQ(o.target, "portable") << arch;
    EXPECT_NE(o.why.find(fmt::format("the local GPU, Test GPU ({}), is not an arch kiln builds CUBINs for", arch)),
              std::string::npos)
        << o.why;
  }
}

TEST(Targets, AnExplicitTargetIsKeptAndCheckedWithoutProbing) {
  for (const char* t : {"cpu", "portable", "sm_80", "sm_90"}) {
    ResolvedTarget r = resolve_target(t, gpu("sm_86"));
    EXPECT_EQ(r.target, t);
    EXPECT_EQ(r.why, "");
  }
  try {
    resolve_target("sm_75", gpu("sm_86"));
    FAIL() << "sm_75 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "target \"sm_75\": expected one of auto, cpu, portable, sm_80, sm_86, sm_89, sm_90, sm_90a");
  }
}

TEST(Targets, ArchsOfEachTarget) {
  EXPECT_TRUE(target_archs("cpu").empty());
  EXPECT_FALSE(is_gpu_target("cpu"));
  EXPECT_EQ(target_archs("portable"), (std::vector<std::string>{"sm_80", "sm_90"}));
  EXPECT_EQ(target_archs("sm_86"), (std::vector<std::string>{"sm_86"}));
  EXPECT_TRUE(is_gpu_target("portable"));
  EXPECT_THROW(target_archs("auto"), Error);
}

// sm_90a: Hopper's arch-specific target (the wgmma opt-in) is only ever named;
// its plans run on sm_90 devices alone, and no other target's launches are
// checked against it.
TEST(Targets, Sm90aIsAnExplicitOptInOnly) {
  EXPECT_EQ(target_archs("sm_90a"), (std::vector<std::string>{"sm_90a"}));
  EXPECT_EQ(archs_running_target("sm_90a"), (std::vector<std::string>{"sm_90a"}));
  EXPECT_EQ(archs_running_target("sm_90"), (std::vector<std::string>{"sm_90"}));
  EXPECT_EQ(resolve_target("auto", gpu("sm_90")).target, "sm_90");
  EXPECT_EQ(resolve_target("sm_90a", gpu("sm_86")).target, "sm_90a");
}

}  // namespace
}  // namespace kiln
