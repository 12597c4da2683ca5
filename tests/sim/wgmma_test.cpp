// Self-tests of the simulator's warpgroup MMA (codegen/core/wgmma.cuh under
// KILN_SIM = backends/sim/warpgroup_mma.h): A and B stored in shared memory
// in each K-major layout the kernels may use (no swizzle, 32-, 64- and
// 128-byte swizzle), the warpgroup's product against a plain matrix product
// computed here, for N = 64, 128 and 256, f16 and bf16. Operands are small
// multiples of 1/8, so every product and sum is exact in f32 and results
// compare bit for bit: an element decoded from the wrong address or placed
// in the wrong thread's register shows. A corrupted descriptor (leading or
// stride byte offset, swizzle width) must give a different result, and a
// missing wgmma.fence or a partial warpgroup an error. The same kernels go
// through NVRTC for sm_90a.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "wgmma_kernels.h"

#ifdef KILN_SIM_TESTS_NVRTC
#include "codegen/core/kernel_text.h"
#include "codegen/emitters/gemm_conv/emit_gemm_wgmma.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#endif

namespace {

using kiln::sim::arg;
using kiln::sim::SimError;

enum Swizzle { kNone = 0, k128 = 1, k64 = 2, k32 = 3 };

int k_total(int swizzle) { return swizzle == kNone ? 32 : swizzle == k128 ? 64 : swizzle == k64 ? 32 : 16; }

std::vector<float> small_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-16, 16);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d(rng)) / 8.0f;
  return v;
}

std::vector<unsigned short> bits16(const std::vector<float>& v, bool bf16) {
  std::vector<unsigned short> b(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    b[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16(v[i])) : __half_as_ushort(__float2half(v[i]));
  return b;
}

struct Result {
  std::vector<float> got, want;
};

// Runs the test kernel for N with `warpgroups` warpgroups; want = A B^T + C per warpgroup.
Result run(int n, int swizzle, bool bf16, int warpgroups = 1, int wrong = 0, int skip_fence = 0, int threads = 0) {
  const int kt = k_total(swizzle);
  const size_t wgs = static_cast<size_t>(warpgroups);
  std::vector<float> a = small_values(wgs * 64 * kt, 1 + n), b = small_values(wgs * n * kt, 2 + n),
                     c = small_values(wgs * 64 * n, 3 + n);
  std::vector<unsigned short> ab = bits16(a, bf16), bb = bits16(b, bf16);
  Result r;
  r.got.assign(wgs * 64 * n, -1.0f);
  r.want.assign(wgs * 64 * n, 0.0f);
  for (size_t g = 0; g < wgs; ++g)
    for (int i = 0; i < 64; ++i)
      for (int j = 0; j < n; ++j) {
        double s = c[(g * 64 + i) * n + j];
        for (int k = 0; k < kt; ++k) s += double(a[(g * 64 + i) * kt + k]) * b[(g * n + j) * kt + k];
        r.want[(g * 64 + i) * n + j] = static_cast<float>(s);
      }
  auto round1k = [](size_t x) { return (x + 1023) / 1024 * 1024; };
  const size_t shared = wgs * (round1k(64 * kt * 2) + round1k(size_t(n) * kt * 2)) + 2048;
  auto kernel = n == 64 ? wgmma_n64 : n == 128 ? wgmma_n128 : wgmma_n256;
  KILN_SIM_LAUNCH(kernel, dim3(1), dim3(threads ? threads : 128 * warpgroups), shared,
                  arg<const unsigned short>(ab.data(), ab.size(), "A"),
                  arg<const unsigned short>(bb.data(), bb.size(), "B"), arg<const float>(c.data(), c.size(), "C"),
                  arg(r.got.data(), r.got.size(), "D"), bf16 ? 1 : 0, swizzle, wrong, skip_fence);
  return r;
}

const char* swizzle_name(int s) { return s == kNone ? "none" : s == k128 ? "128B" : s == k64 ? "64B" : "32B"; }

TEST(SimWgmma, EverySwizzleAndWidthAgainstMatrixProduct) {
  for (int swizzle : {kNone, k32, k64, k128})
    for (int n : {64, 128, 256})
      for (int bf16 = 0; bf16 < 2; ++bf16) {
        Result r = run(n, swizzle, bf16);
        for (size_t i = 0; i < r.got.size(); ++i)
          ASSERT_EQ(r.got[i], r.want[i]) << "swizzle " << swizzle_name(swizzle) << " N " << n << " bf16 " << bf16
                                         << " row " << i / n << " col " << i % n;
      }
}

// Two warpgroups in one block: each multiplies its own operands (warps 4-7
// form the second warpgroup; its accumulator rows start again at 0).
TEST(SimWgmma, TwoWarpgroupsPerBlock) {
  Result r = run(64, k128, false, 2);
  for (size_t i = 0; i < r.got.size(); ++i) ASSERT_EQ(r.got[i], r.want[i]) << "element " << i;
}

// A descriptor that does not describe the stored layout gives another result
// (so the tests above can fail): the leading byte offset (no swizzle), the
// swizzle width, the stride byte offset.
TEST(SimWgmma, WrongDescriptorGivesWrongResult) {
  struct Case {
    int swizzle, wrong;
    const char* what;
  };
  for (const Case& c : {Case{kNone, 1, "LBO + 16 bytes"}, Case{k128, 2, "64B swizzle for a 128B layout"},
                        Case{k64, 2, "128B swizzle for a 64B layout"}, Case{k64, 3, "SBO + 16 bytes"}}) {
    Result r = run(64, c.swizzle, false, 1, c.wrong);
    size_t differ = 0;
    for (size_t i = 0; i < r.got.size(); ++i) differ += r.got[i] != r.want[i];
    std::printf("%s: %zu of %zu elements differ\n", c.what, differ, r.got.size());
    EXPECT_GT(differ, r.got.size() / 4) << c.what;
  }
}

template <typename F>
void expect_sim_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const SimError& e) {
    std::printf("reported: %s\n", e.what());
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SimWgmma, MissingFenceIsAnError) {
  expect_sim_error([] { run(64, k128, false, 1, 0, 1); }, "without a wgmma.fence");
}

TEST(SimWgmma, PartialWarpgroupIsAnError) {
  expect_sim_error([] { run(64, k128, false, 1, 0, 0, 96); }, "needs all 128 threads of a warpgroup");
}

#ifdef KILN_SIM_TESTS_NVRTC
constexpr std::string_view kWgmmaKernels =
#include "wgmma_kernels.inc"
    ;

// The same kernels through NVRTC for sm_90a (wgmma exists only on the
// arch-specific target): the inline PTX must be accepted and appear in the PTX.
TEST(SimWgmma, NvrtcAcceptsTheTestKernelsForSm90a) {
  std::string src = std::string(kiln::codegen::kKernelPrelude) + std::string(kiln::codegen::wgmma_prelude()) +
                    std::string(kWgmmaKernels);
  kiln::codegen::KernelCompiler compiler("sm_90a");
  std::vector<kiln::codegen::CompiledKernel> out = compiler.compile({{"wgmma_test_kernels", src}});
  ASSERT_EQ(out.size(), 1u);
  std::printf("sm_90a: wgmma test kernels: %d registers (max), %d spill bytes, %zu bytes of PTX, %zu of CUBIN\n",
              out[0].registers, out[0].spill_bytes, out[0].ptx.size(), out[0].cubin.size());
  EXPECT_GT(out[0].registers, 0);
  EXPECT_FALSE(out[0].cubin.empty());
  for (const char* insn :
       {"wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned", "fence.proxy.async.shared::cta",
        ".target sm_90a"})
    EXPECT_NE(out[0].ptx.find(insn), std::string::npos) << "no " << insn << " in the PTX";
}

// Plain sm_90 has no wgmma: NVRTC must refuse the same source (which is why
// kiln compiles wgmma kernels for sm_90a).
TEST(SimWgmma, NvrtcRefusesWgmmaForPlainSm90) {
  std::string src = std::string(kiln::codegen::kKernelPrelude) + std::string(kiln::codegen::wgmma_prelude()) +
                    std::string(kWgmmaKernels);
  kiln::codegen::KernelCompiler compiler("sm_90");
  EXPECT_THROW(compiler.compile({{"wgmma_test_kernels", src}}), kiln::Error);
}
#endif

}  // namespace
