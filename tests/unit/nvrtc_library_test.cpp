// NVRTC is loaded at run time (codegen/nvrtc/nvrtc_library.h): where it is
// searched, and that the loaded library is the one compiling kernels. The
// "not found" path is tested end to end by tests/cli/nvrtc_missing_test.sh
// (the library is loaded once per process, so a unit test cannot unload it).
#include <gtest/gtest.h>

#include <cstdlib>

#include "codegen/nvrtc/nvrtc_compiler.h"
#include "codegen/nvrtc/nvrtc_library.h"

namespace kiln::codegen {
namespace {

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  std::string old;
  bool had;
  ScopedEnv(const char* n, const char* v) : name(n) {
    const char* o = std::getenv(n);
    had = o != nullptr;
    if (had) old = o;
    if (v) setenv(n, v, 1);
    else unsetenv(n);
  }
  ~ScopedEnv() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};

TEST(NvrtcLibrary, AnExplicitPathIsTheOnlyCandidate) {
  ScopedEnv e("KILN_NVRTC_LIBRARY", "/opt/nvrtc/libnvrtc.so.13");
  EXPECT_EQ(nvrtc_search_paths(), std::vector<std::string>{"/opt/nvrtc/libnvrtc.so.13"});
}

TEST(NvrtcLibrary, CudaPathComesBeforeTheLoadersOwnSearch) {
  ScopedEnv none("KILN_NVRTC_LIBRARY", nullptr);
  ScopedEnv cuda("CUDA_PATH", "/opt/cuda-x");
  std::vector<std::string> p = nvrtc_search_paths();
  ASSERT_GE(p.size(), 2u);
  EXPECT_EQ(p.front(), "/opt/cuda-x/lib64/libnvrtc.so.13");
  EXPECT_EQ(p.back(), "libnvrtc.so.13");  // the dynamic loader's search comes last
}

TEST(NvrtcLibrary, TheLoadedLibraryReportsItsVersionAndCompiles) {
  std::string why;
  ASSERT_TRUE(nvrtc_available(&why)) << why;  // the build machine has the toolkit
  const NvrtcLibrary& nv = nvrtc_library();
  EXPECT_FALSE(nv.path.empty());
  EXPECT_GE(nv.major, 12);
  EXPECT_EQ(nvrtc_version(), std::to_string(nv.major) + "." + std::to_string(nv.minor));
  KernelCompiler c("sm_90");
  auto k = c.compile({{"k", "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }"}});
  ASSERT_EQ(k.size(), 1u);
  EXPECT_FALSE(k[0].cubin.empty());
  EXPECT_NE(k[0].ptx.find(".entry k"), std::string::npos);
}

}  // namespace
}  // namespace kiln::codegen
