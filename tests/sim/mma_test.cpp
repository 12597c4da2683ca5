// Self-tests of the simulator's tensor-core ops (codegen/core/mma.cuh under
// KILN_SIM = backends/sim/warp_mma.h): each fragment op against a plain matrix
// product computed here. Operands are small multiples of 1/4 or 1/8 drawn at
// random, so every product and sum is exact in f32 and results compare
// bit for bit; a fragment element in the wrong lane or register shows.
// The same kernels (mma_kernels.cuh) also go through NVRTC for sm_80/sm_90.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "mma_kernels.h"

#ifdef KILN_SIM_TESTS_NVRTC
#include "codegen/emitters/gemm_conv/emit_gemm_tc.h"
#include "codegen/core/kernel_text.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#endif

namespace {

using kiln::sim::arg;
using kiln::sim::SimError;

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

// n values k/8 with k in [-16, 16]: exact in f16, bf16 and tf32.
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

// D (m x n) = A (m x k) B (k x n) + C, row-major, in double.
std::vector<float> matmul(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>* c, int m,
                          int n, int k) {
  std::vector<float> d(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = c ? (*c)[i * n + j] : 0.0;
      for (int l = 0; l < k; ++l) s += static_cast<double>(a[i * k + l]) * b[l * n + j];
      d[i * n + j] = static_cast<float>(s);
    }
  return d;
}

void run_m16n8k16(bool bf16) {
  const int warps = 2;
  std::vector<float> a = small_values(256 * warps, 1), b = small_values(128 * warps, 2),
                     c = small_values(128 * warps, 3);
  std::vector<unsigned short> ab = bits16(a, bf16), bb = bits16(b, bf16);
  std::vector<float> d(128 * warps, -1.0f);
  KILN_SIM_LAUNCH(mma_m16n8k16_direct, dim3(1), dim3(32 * warps), 0,
                  arg<const unsigned short>(ab.data(), ab.size(), "A"),
                  arg<const unsigned short>(bb.data(), bb.size(), "B"), arg<const float>(c.data(), c.size(), "C"),
                  arg(d.data(), d.size(), "D"), bf16 ? 1 : 0);
  for (int w = 0; w < warps; ++w) {
    std::vector<float> aw(a.begin() + w * 256, a.begin() + (w + 1) * 256),
        bw(b.begin() + w * 128, b.begin() + (w + 1) * 128), cw(c.begin() + w * 128, c.begin() + (w + 1) * 128);
    std::vector<float> want = matmul(aw, bw, &cw, 16, 8, 16);
    for (int i = 0; i < 128; ++i)
      ASSERT_EQ(d[w * 128 + i], want[i]) << "warp " << w << " row " << i / 8 << " col " << i % 8;
  }
}

TEST(SimMma, M16N8K16F16AgainstMatrixProduct) { run_m16n8k16(false); }
TEST(SimMma, M16N8K16Bf16AgainstMatrixProduct) { run_m16n8k16(true); }

// kiln_mma_tile<2, 3>: six products in one call, twice (the second call
// accumulates onto the first's result, which exercises the warp's cache).
TEST(SimMma, MmaTileAgainstMatrixProduct) {
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    std::vector<float> a = small_values(32 * 16, 11), b = small_values(16 * 24, 12), c = small_values(32 * 24, 13);
    std::vector<unsigned short> ab = bits16(a, bf16), bb = bits16(b, bf16);
    std::vector<float> d(32 * 24, -1.0f), d2(32 * 24, -1.0f);
    KILN_SIM_LAUNCH(mma_tile_direct, dim3(1), dim3(32), 0, arg<const unsigned short>(ab.data(), ab.size(), "A"),
                    arg<const unsigned short>(bb.data(), bb.size(), "B"), arg<const float>(c.data(), c.size(), "C"),
                    arg(d.data(), d.size(), "D"), bf16);
    const std::vector<float> want = matmul(a, b, &c, 32, 24, 16);
    for (int i = 0; i < 32 * 24; ++i)
      ASSERT_EQ(d[i], want[i]) << "bf16 " << bf16 << " row " << i / 24 << " col " << i % 24;
    KILN_SIM_LAUNCH(mma_tile_direct, dim3(1), dim3(32), 0, arg<const unsigned short>(ab.data(), ab.size(), "A"),
                    arg<const unsigned short>(bb.data(), bb.size(), "B"), arg<const float>(d.data(), d.size(), "C"),
                    arg(d2.data(), d2.size(), "D"), bf16);
    const std::vector<float> want2 = matmul(a, b, &want, 32, 24, 16);
    for (int i = 0; i < 32 * 24; ++i)
      ASSERT_EQ(d2[i], want2[i]) << "bf16 " << bf16 << " row " << i / 24 << " col " << i % 24;
  }
}

float tf32_truncate(float x) { return std::bit_cast<float>(std::bit_cast<unsigned>(x) & 0xffffe000u); }
float tf32_round_away(float x) { return std::bit_cast<float>((std::bit_cast<unsigned>(x) + 0x1000u) & 0xffffe000u); }

// tf32: exact operands plus 3/4 of a tf32 ulp, which the tensor cores drop
// (truncation of the f32 bits) and cvt.rna rounds up.
TEST(SimMma, M16N8K8Tf32AgainstMatrixProduct) {
  const int warps = 2;
  std::vector<float> a = small_values(128 * warps, 4), b = small_values(64 * warps, 5),
                     c = small_values(128 * warps, 6);
  for (std::vector<float>* v : {&a, &b})
    for (float& x : *v)
      if (x != 0.0f) {
        int e;
        std::frexp(x, &e);  // |x| in [2^(e-1), 2^e): a tf32 ulp is 2^(e-11)
        x += std::copysign(std::ldexp(0.75f, e - 11), x);
      }
  for (int round = 0; round < 2; ++round) {
    std::vector<float> d(128 * warps, -1.0f);
    KILN_SIM_LAUNCH(mma_m16n8k8_tf32_direct, dim3(1), dim3(32 * warps), 0, arg<const float>(a.data(), a.size(), "A"),
                    arg<const float>(b.data(), b.size(), "B"), arg<const float>(c.data(), c.size(), "C"),
                    arg(d.data(), d.size(), "D"), round);
    for (int w = 0; w < warps; ++w) {
      std::vector<float> aw(a.begin() + w * 128, a.begin() + (w + 1) * 128),
          bw(b.begin() + w * 64, b.begin() + (w + 1) * 64), cw(c.begin() + w * 128, c.begin() + (w + 1) * 128);
      for (float& x : aw) x = round ? tf32_round_away(x) : tf32_truncate(x);
      for (float& x : bw) x = round ? tf32_round_away(x) : tf32_truncate(x);
      // The products are exact; their f32 sum may round, against the double sum here.
      std::vector<float> want = matmul(aw, bw, &cw, 16, 8, 8);
      for (int i = 0; i < 128; ++i)
        ASSERT_NEAR(d[w * 128 + i], want[i], 1e-5)
            << "round " << round << " warp " << w << " row " << i / 8 << " col " << i % 8;
      // The other rounding gives a different product: the test tells them apart.
      std::vector<float> ao(a.begin() + w * 128, a.begin() + (w + 1) * 128),
          bo(b.begin() + w * 64, b.begin() + (w + 1) * 64);
      for (float& x : ao) x = round ? tf32_truncate(x) : tf32_round_away(x);
      for (float& x : bo) x = round ? tf32_truncate(x) : tf32_round_away(x);
      std::vector<float> other = matmul(ao, bo, &cw, 16, 8, 8);
      int differ = 0;
      for (int i = 0; i < 128; ++i) differ += std::abs(other[i] - want[i]) > 1e-4f;
      EXPECT_GT(differ, 64);
    }
  }
}

// Every ldmatrix form against its definition: register m of lane l holds
// elements (l>>2, 2(l%4)) and (l>>2, 2(l%4)+1) of matrix m (low half first);
// .trans: elements (2(l%4), l>>2) and (2(l%4)+1, l>>2).
TEST(SimMma, LdmatrixForms) {
  std::vector<unsigned short> mats(256);
  for (int i = 0; i < 256; ++i) mats[i] = static_cast<unsigned short>(1000 + i * 7);
  for (int mode = 0; mode < 4; ++mode) {
    const bool trans = mode == 1 || mode == 3;
    const int count = mode < 2 ? 4 : 2;
    std::vector<unsigned> r(128, 0xdeadbeefu);
    KILN_SIM_LAUNCH(ldmatrix_raw, dim3(1), dim3(32), 32 * 24 * 2, arg<const unsigned short>(mats.data(), 256, "M"),
                    arg(r.data(), r.size(), "R"), mode);
    for (int l = 0; l < 32; ++l)
      for (int m = 0; m < 4; ++m) {
        const int g = l >> 2, t = l % 4;
        auto at = [&](int row, int col) { return static_cast<unsigned>(mats[m * 64 + row * 8 + col]); };
        unsigned want = 0;
        if (m < count) want = trans ? (at(2 * t, g) | at(2 * t + 1, g) << 16) : (at(g, 2 * t) | at(g, 2 * t + 1) << 16);
        EXPECT_EQ(r[l * 4 + m], want) << "mode " << mode << " lane " << l << " register " << m;
      }
  }
}

// The whole path a GEMM takes: shared memory -> ldmatrix -> mma, for each B form.
TEST(SimMma, MmaThroughLdmatrix) {
  std::vector<float> a = small_values(256, 7), b = small_values(256, 8);
  const std::vector<float> want = matmul(a, b, nullptr, 16, 16, 16);
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    std::vector<unsigned short> ab = bits16(a, bf16), bb = bits16(b, bf16);
    for (int b_mode = 0; b_mode < 4; ++b_mode) {
      std::vector<float> d(256, -1.0f);
      KILN_SIM_LAUNCH(mma_via_ldmatrix, dim3(1), dim3(32), 2 * 16 * 24 * 2,
                      arg<const unsigned short>(ab.data(), 256, "A"), arg<const unsigned short>(bb.data(), 256, "B"),
                      arg(d.data(), 256, "D"), bf16, b_mode);
      for (int i = 0; i < 256; ++i)
        ASSERT_EQ(d[i], want[i]) << "bf16 " << bf16 << " b_mode " << b_mode << " row " << i / 16 << " col " << i % 16;
    }
  }
}

TEST(SimMma, CpAsyncGroupsLandAtTheirWait) {
  std::vector<float> src(3 * 128 + 4);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) + 0.5f;
  std::vector<float> early(128), pending(128), late(256);
  KILN_SIM_LAUNCH(cp_async_groups, dim3(1), dim3(32), 3 * 128 * 4, arg<const float>(src.data(), src.size(), "src"),
                  arg(early.data(), 128, "early"), arg(pending.data(), 128, "pending"), arg(late.data(), 256, "late"),
                  8, 0);
  for (int t = 0; t < 32; ++t)
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(early[t * 4 + i], src[t * 4 + i]);
      // The simulator lands a group at the wait that retires it, so reading
      // the second group after wait_group 2 still sees the old contents.
      EXPECT_EQ(pending[t * 4 + i], -1.0f);
      EXPECT_EQ(late[t * 8 + i], src[128 + t * 4 + i]);
      // zfill with 8 source bytes: two floats copied, two zeros.
      EXPECT_EQ(late[t * 8 + 4 + i], i < 2 ? src[256 + t * 4 + i] : 0.0f);
    }
}

TEST(SimMma, CpAsyncChecksAlignmentAndBounds) {
  std::vector<float> src(3 * 128 + 4), out(256);
  expect_sim_error(
      [&] {
        KILN_SIM_LAUNCH(cp_async_groups, dim3(1), dim3(32), 3 * 128 * 4,
                        arg<const float>(src.data(), src.size(), "src"), arg(out.data(), 128, "early"),
                        arg(out.data(), 128, "pending"), arg(out.data(), 256, "late"), 16, 1);
      },
      "not 16-byte aligned");
  expect_sim_error(
      [&] {
        KILN_SIM_LAUNCH(cp_async_groups, dim3(1), dim3(32), 3 * 128 * 4, arg<const float>(src.data(), 300, "src"),
                        arg(out.data(), 128, "early"), arg(out.data(), 128, "pending"), arg(out.data(), 256, "late"),
                        16, 0);
      },
      "argument src: index");
}

TEST(SimMma, PartialWarpIsAnError) {
  std::vector<unsigned short> ab(256), bb(128);
  std::vector<float> c(128), d(128);
  expect_sim_error(
      [&] {
        KILN_SIM_LAUNCH(mma_m16n8k16_direct, dim3(1), dim3(16), 0, arg<const unsigned short>(ab.data(), 256, "A"),
                        arg<const unsigned short>(bb.data(), 128, "B"), arg<const float>(c.data(), 128, "C"),
                        arg(d.data(), 128, "D"), 0);
      },
      "needs all 32 lanes");
}

#ifdef KILN_SIM_TESTS_NVRTC
// The same kernels through NVRTC: the inline PTX must be accepted for sm_80 and sm_90.
constexpr std::string_view kMmaKernels =
#include "mma_kernels.inc"
    ;

TEST(SimMma, NvrtcAcceptsTheTestKernels) {
  std::string src = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" + std::string(kiln::codegen::kKernelPrelude) +
                    std::string(kiln::codegen::mma_prelude()) + std::string(kMmaKernels);
  for (const char* arch : {"sm_80", "sm_90"}) {
    kiln::codegen::KernelCompiler compiler(arch);
    std::vector<kiln::codegen::CompiledKernel> out = compiler.compile({{"mma_test_kernels", src}});
    ASSERT_EQ(out.size(), 1u);
    std::printf("%s: mma test kernels: %d registers (max), %d spill bytes, %zu bytes of PTX\n", arch, out[0].registers,
                out[0].spill_bytes, out[0].ptx.size());
    EXPECT_GT(out[0].registers, 0);
    EXPECT_EQ(out[0].spill_bytes, 0);
    EXPECT_EQ(out[0].log.find("arning"), std::string::npos) << out[0].log;
    for (const char* insn :
         {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
          "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
          "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16", "cp.async.cg.shared.global", "cp.async.wait_group",
          "cvt.rna.tf32.f32"})
      EXPECT_NE(out[0].ptx.find(insn), std::string::npos) << arch << ": no " << insn << " in the PTX";
  }
}
#endif

}  // namespace
