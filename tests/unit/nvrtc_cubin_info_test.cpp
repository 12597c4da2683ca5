// runtime/cubin_info.h on CUBINs that NVRTC makes: the registers read from
// .nv.info equal what ptxas reported, for several kernels and archs; a
// kernel whose volatile local array lives in local memory has a stack frame;
// a name the CUBIN lacks is an error naming it; a kernel's __launch_bounds__
// and parameter bytes come back from its own .nv.info.<kernel> section.
#include <gtest/gtest.h>

#include "codegen/nvrtc/nvrtc_compiler.h"
#include "ir/error.h"
#include "runtime/cubin_info.h"

namespace kiln {
namespace {

const char* kSmall = R"(extern "C" __global__ void small_k(float* y, const float* x, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 2.0f + 1.0f;
})";

// Many live values: more registers than small_k.
const char* kWide = R"(extern "C" __global__ void wide_k(float* y, const float* x, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc[24];
#pragma unroll
  for (int j = 0; j < 24; ++j) acc[j] = x[(i + j * 97) % n];
  float s = 0;
#pragma unroll
  for (int j = 0; j < 24; ++j) s += acc[j] * acc[(j + 5) % 24];
  y[i] = s;
})";

const char* kLocal = R"(extern "C" __global__ void local_k(float* y, const float* x, long long n) {
  volatile float a[64];
  int t = threadIdx.x;
  a[t % 64] = x[t];
  y[t] = a[(t * 7) % 64];
})";

TEST(CubinInfo, RegistersMatchPtxasReport) {
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, nullptr);
    std::vector<codegen::CompiledKernel> ks =
        compiler.compile({{"small_k", kSmall}, {"wide_k", kWide}, {"local_k", kLocal}});
    ASSERT_EQ(ks.size(), 3u);
    for (const auto& k : ks) {
      plan::CubinKernelInfo ci = plan::cubin_kernel_info(k.cubin, k.name);
      EXPECT_GT(ci.registers, 0) << k.name << " " << arch;
      EXPECT_EQ(ci.registers, k.registers) << k.name << " " << arch << "\n" << k.log;
      EXPECT_GE(ci.frame_bytes, 0) << k.name << " " << arch;
    }
    EXPECT_GT(ks[1].registers, ks[0].registers) << arch;
    EXPECT_EQ(plan::cubin_kernel_info(ks[0].cubin, "small_k").frame_bytes, 0) << arch;
    EXPECT_GE(plan::cubin_kernel_info(ks[2].cubin, "local_k").frame_bytes, 256) << arch;  // 64 floats
    try {
      plan::cubin_kernel_info(ks[0].cubin, "wide_k");
      ADD_FAILURE() << "a kernel the CUBIN lacks was found";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "CUBIN: no symbol named wide_k (the kernel is not in this CUBIN)");
    }
  }
}

TEST(CubinInfo, LaunchBoundAndParameterBytes) {
  const char* bounded = R"(extern "C" __global__ void __launch_bounds__(256) bounded_k(float* y, const float* x) {
  y[threadIdx.x] = x[threadIdx.x];
})";
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, nullptr);
    std::vector<codegen::CompiledKernel> ks = compiler.compile({{"bounded_k", bounded}, {"small_k", kSmall}});
    plan::CubinKernelInfo b = plan::cubin_kernel_info(ks[0].cubin, "bounded_k");
    EXPECT_EQ(b.max_threads, 256) << arch;
    EXPECT_EQ(b.param_bytes, 16) << arch;  // two pointers
    plan::CubinKernelInfo s = plan::cubin_kernel_info(ks[1].cubin, "small_k");
    EXPECT_EQ(s.max_threads, -1) << arch;  // no bound
    EXPECT_EQ(s.param_bytes, 24) << arch;  // two pointers and a long long
    EXPECT_GT(s.registers, 0) << arch;
  }
}

}  // namespace
}  // namespace kiln
