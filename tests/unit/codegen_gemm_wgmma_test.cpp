// The sm_90a wgmma GEMM emitter (codegen/emitters/gemm_conv/emit_gemm_wgmma.h): every
// kernel compiles with NVRTC for sm_90a without spills (ptxas registers and
// shared memory printed), and runs on the simulator (wgmma with the PTX
// descriptor, swizzle and accumulator layouts; cp.async) matching a
// double-precision reference: transformer shapes, ragged M/N/K tails (partial
// tiles, K not a multiple of 8: the element-wise load path), B stored [K, N]
// and [N, K], batches, a shared weight, every tile shape and a custom
// epilogue.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "backends/sim/sim_module.h"
#include "codegen/emitters/gemm_conv/emit_gemm_wgmma.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "ir/error.h"
#include "ir/tensor.h"

namespace kiln {
namespace {

using codegen::GemmTcKernel;
using codegen::GemmTcSpec;

struct Case {
  GemmTcSpec spec;
  bool bias_relu = false;  // custom epilogue: relu(acc + bias[col])
  GemmTcKernel kernel;
  std::string text;
};

Case make_case(DType dt, DType out, int64_t batch, int64_t m, int64_t n, int64_t k, bool bt, int bm = 0, int bn = 0,
               int stages = 0) {
  Case c;
  c.spec.dtype = dt;
  c.spec.out_dtype = out;
  c.spec.batch = batch;
  c.spec.m = m;
  c.spec.n = n;
  c.spec.k = k;
  c.spec.b_transposed = bt;
  c.spec.bm = bm;
  c.spec.bn = bn;
  c.spec.stages = stages;
  c.spec.label = fmt::format("w{}x{}x{}x{}", batch, m, n, k);
  return c;
}

Tensor random_tensor(DType dt, Shape shape, unsigned seed) {
  Tensor t(dt, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, u(rng));
  return t;
}

std::vector<Case> cases() {
  std::vector<Case> cs = {
      make_case(DType::F16, DType::F32, 1, 128, 128, 128, true),                // two warpgroups, cp.async A and B
      make_case(DType::BF16, DType::F32, 1, 64, 64, 64, true),                  // one warpgroup, one k-tile
      make_case(DType::F16, DType::F16, 1, 128, 256, 192, true, 64, 256, 3),    // N 256
      make_case(DType::F16, DType::F32, 1, 197, 200, 320, false, 128, 128, 2),  // ViT-like, B [K, N], partial tiles
      make_case(DType::BF16, DType::BF16, 1, 100, 72, 136, true, 128, 64, 6),
      make_case(DType::F16, DType::F32, 1, 33, 65, 24, false),  // ragged everywhere, N % 8 != 0
      make_case(DType::BF16, DType::F32, 1, 33, 65, 27, true),  // K % 8 != 0: element-wise A and B
      make_case(DType::F16, DType::F32, 1, 1, 96, 200, true),   // one row (a GEMV), K tail of 8
      make_case(DType::F16, DType::F32, 3, 80, 64, 96, true),   // batched
      make_case(DType::BF16, DType::F32, 2, 64, 40, 72, false),
  };
  {  // one B shared by every batch (a weight)
    Case c = make_case(DType::F16, DType::F32, 3, 70, 40, 40, false);
    c.spec.b_batch_stride = 0;
    cs.push_back(c);
  }
  {  // epilogue hook: bias + relu into f16
    Case c = make_case(DType::F16, DType::F16, 2, 64, 96, 40, true);
    c.bias_relu = true;
    c.spec.epilogue.code =
        "__device__ __forceinline__ void kiln_epilogue(KILN_PTR(__half) out, long long batch, int row, int col, "
        "float acc, KILN_PTR(const float) bias) {\n"
        "  const float v = acc + bias[col];\n"
        "  out[(batch * kM + row) * kN + col] = __float2half_rn(v > 0.0f ? v : 0.0f);\n}\n";
    c.spec.epilogue.operands = {{"bias", DType::F32, 96}};
    cs.push_back(c);
  }
  for (Case& c : cs) {
    c.kernel = codegen::emit_gemm_wgmma(c.spec);
    c.text = fmt::format("[{}] {}x{}x{} {}{} -> {} tile {}x{} {} stages{}", c.spec.batch, c.spec.m, c.spec.n, c.spec.k,
                         dtype_name(c.spec.dtype), c.spec.b_transposed ? " B^T" : "", dtype_name(c.spec.out_dtype),
                         c.kernel.bm, c.kernel.bn, c.kernel.stages, c.bias_relu ? " bias+relu" : "");
  }
  return cs;
}

TEST(CodegenGemmWgmma, NvrtcCompilesForSm90a) {
  std::vector<Case> cs = cases();
  std::vector<codegen::KernelSource> sources;
  for (const Case& c : cs) sources.push_back({c.kernel.name, c.kernel.source});
  codegen::KernelCompiler compiler(std::string(codegen::kWgmmaArch));
  std::vector<codegen::CompiledKernel> ks = compiler.compile(sources);
  ASSERT_EQ(ks.size(), cs.size());
  for (size_t i = 0; i < ks.size(); ++i) {
    fmt::print("  sm_90a {}: {} registers, {} spill bytes, {} B dynamic shared\n", cs[i].text, ks[i].registers,
               ks[i].spill_bytes, cs[i].kernel.shared_bytes);
    EXPECT_FALSE(ks[i].cubin.empty()) << cs[i].text;
    EXPECT_EQ(ks[i].spill_bytes, 0) << cs[i].text;
    EXPECT_NE(ks[i].ptx.find(fmt::format("wgmma.mma_async.sync.aligned.m64n{}k16.f32", cs[i].kernel.bn)),
              std::string::npos)
        << cs[i].text;
    EXPECT_EQ(ks[i].ptx.find("mma.sync"), std::string::npos) << cs[i].text;
    if (ks[i].log.find("arning") != std::string::npos) ADD_FAILURE() << cs[i].text << ": " << ks[i].log;
  }
  // Plain sm_90 has no wgmma: the same kernel does not compile there.
  codegen::KernelCompiler sm90("sm_90");
  EXPECT_THROW(sm90.compile({sources[0]}), Error);
}

TEST(CodegenGemmWgmma, MatchesReferenceOnSimulator) {
  std::vector<Case> cs = cases();
  std::vector<codegen::KernelSource> sources;
  for (const Case& c : cs) sources.push_back({c.kernel.name, c.kernel.source});
  codegen::SimCompiler sim;
  std::map<std::string, codegen::SimEntry> entries = sim.compile(sources);
  for (size_t ci = 0; ci < cs.size(); ++ci) {
    const Case& c = cs[ci];
    const GemmTcSpec& s = c.spec;
    const int64_t a_batches = s.a_batch_stride == 0 ? 1 : s.batch, b_batches = s.b_batch_stride == 0 ? 1 : s.batch;
    Tensor a = random_tensor(s.dtype, {a_batches, s.m, s.k}, static_cast<unsigned>(2 * ci + 1));
    Tensor b = random_tensor(s.dtype, s.b_transposed ? Shape{b_batches, s.n, s.k} : Shape{b_batches, s.k, s.n},
                             static_cast<unsigned>(2 * ci + 2));
    Tensor bias = random_tensor(DType::F32, {s.n}, 99);
    Tensor got(s.out_dtype, {s.batch, s.m, s.n});
    std::memset(got.raw(), 0xa5, got.nbytes());
    ASSERT_EQ(c.kernel.counts[0], got.numel()) << c.text;
    ASSERT_EQ(c.kernel.counts[1], a.numel()) << c.text;
    ASSERT_EQ(c.kernel.counts[2], b.numel()) << c.text;
    sim::LaunchConfig cfg;
    cfg.kernel = c.kernel.name;
    cfg.grid = dim3(c.kernel.grid[0], c.kernel.grid[1], c.kernel.grid[2]);
    cfg.block = dim3(c.kernel.block);
    cfg.shared_bytes = c.kernel.shared_bytes;
    std::vector<void*> bufs = {got.raw(), a.raw(), b.raw()};
    std::vector<long long> counts = {got.numel(), a.numel(), b.numel()};
    if (c.bias_relu) {
      bufs.push_back(bias.raw());
      counts.push_back(bias.numel());
    }
    ASSERT_NO_THROW(codegen::sim_launch(entries.at(c.kernel.name), cfg, bufs, counts)) << c.text;
    int bad = 0;
    std::string first;
    double max_err = 0;
    for (int64_t bi = 0; bi < s.batch; ++bi)
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double ref = 0, mag = 0;
          for (int64_t l = 0; l < s.k; ++l) {
            const int64_t ab = a_batches == 1 ? 0 : bi, bb = b_batches == 1 ? 0 : bi;
            const double x = a.get_double((ab * s.m + i) * s.k + l);
            const double y = b.get_double(s.b_transposed ? (bb * s.n + j) * s.k + l : (bb * s.k + l) * s.n + j);
            ref += x * y;
            mag += std::abs(x * y);
          }
          if (c.bias_relu) ref = std::max(0.0, ref + bias.get_double(j));
          double tol = 1e-5 * mag + 1e-6;                                 // f32 accumulation over K terms ...
          if (s.out_dtype == DType::F16) tol += std::abs(ref) * 0x1p-11;  // ... then the output's rounding
          if (s.out_dtype == DType::BF16) tol += std::abs(ref) * 0x1p-8;
          const double v = got.get_double((bi * s.m + i) * s.n + j), err = std::abs(v - ref);
          max_err = std::max(max_err, err);
          if (!(err <= tol) && bad++ == 0)
            first = fmt::format("batch {} row {} col {}: got {} want {} (tolerance {})", bi, i, j, v, ref, tol);
        }
    fmt::print("  sim {}: max abs error {:.3g}\n", c.text, max_err);
    EXPECT_EQ(bad, 0) << c.text << ": " << first;
  }
}

TEST(CodegenGemmWgmma, RejectsWhatItCannotBuild) {
  GemmTcSpec s;
  s.m = s.n = s.k = 64;
  s.dtype = DType::F32;
  EXPECT_THROW(codegen::emit_gemm_wgmma(s), Unsupported);
  s.dtype = DType::F16;
  s.bm = 32;
  EXPECT_THROW(codegen::emit_gemm_wgmma(s), Error);
  s.bm = 128;
  s.bn = 256;
  s.stages = 6;  // 6 x (128 + 256) x 64 x 2 bytes: past 227 KiB
  EXPECT_THROW(codegen::emit_gemm_wgmma(s), Error);
  s.stages = 4;
  EXPECT_NO_THROW(codegen::emit_gemm_wgmma(s));
}

}  // namespace
}  // namespace kiln
