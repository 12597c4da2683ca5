// The tensor-core GEMM emitter (codegen/emitters/gemm_conv/emit_gemm_tc.h): every kernel
// compiles with NVRTC for sm_80 and sm_90 without spills, and runs on the
// simulator (mma.sync / ldmatrix / cp.async with the PTX fragment layouts)
// matching a double-precision reference on transformer shapes, odd sizes
// (partial tiles, K not a multiple of 8: the scalar-load path), batches,
// every tile configuration and a custom epilogue.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "codegen/emitters/gemm_conv/emit_gemm_tc.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_module.h"
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
  c.spec.label = fmt::format("t{}x{}x{}x{}", batch, m, n, k);
  return c;
}

// Random values in [-1, 1) rounded to the dtype: no two layouts agree.
Tensor random_tensor(DType dt, Shape shape, unsigned seed) {
  Tensor t(dt, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, u(rng));
  return t;
}

TEST(CodegenGemmTc, MatchesReferenceOnSimulator) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  std::vector<Case> cases = {
      make_case(DType::F16, DType::F32, 1, 128, 128, 64, false),
      make_case(DType::F16, DType::F32, 1, 128, 128, 64, true, 128, 128),        // 8 warps, 64x32 per warp
      make_case(DType::BF16, DType::F16, 1, 1, 768, 768, true),                  // one row: a linear layer's GEMV
      make_case(DType::F16, DType::F32, 1, 197, 768, 2304, false, 128, 128, 4),  // ViT, partial M tile
      make_case(DType::BF16, DType::BF16, 1, 128, 3072, 768, true, 128, 64),
      make_case(DType::F16, DType::F16, 1, 128, 3072, 768, false, 64, 128, 2),
      make_case(DType::F16, DType::F32, 1, 33, 65, 24, false),    // partial tiles; N % 8 != 0: scalar B loads
      make_case(DType::BF16, DType::F32, 1, 33, 65, 27, true),    // K % 8 != 0: scalar A and B loads
      make_case(DType::F16, DType::F32, 1, 33, 65, 27, false),    // K % 8 != 0, B [K, N]
      make_case(DType::F16, DType::F32, 12, 128, 64, 128, true),  // batched (attention scores)
      make_case(DType::BF16, DType::F32, 12, 128, 64, 128, false),
  };
  {  // one B shared by every batch (a weight), K tail of 8
    Case c = make_case(DType::F16, DType::F32, 3, 70, 40, 40, false);
    c.spec.b_batch_stride = 0;
    cases.push_back(c);
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
    cases.push_back(c);
  }
  std::vector<codegen::KernelSource> sources;
  for (Case& c : cases) {
    c.kernel = codegen::emit_gemm_tc(c.spec);
    c.text =
        fmt::format("[{}] {}x{}x{} {}{} -> {} tile {}x{} {} stages {} warps{}", c.spec.batch, c.spec.m, c.spec.n,
                    c.spec.k, dtype_name(c.spec.dtype), c.spec.b_transposed ? " B^T" : "", dtype_name(c.spec.out_dtype),
                    c.kernel.bm, c.kernel.bn, c.kernel.stages, c.kernel.warps, c.bias_relu ? " bias+relu" : "");
    sources.push_back({c.kernel.name, c.kernel.source});
  }
  auto t1 = clock::now();

  codegen::KernelCache cache;
  int spills = 0;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks = compiler.compile(sources);
    for (size_t i = 0; i < ks.size(); ++i) {
      fmt::print("  {} {}: {} registers, {} spill bytes, {} B dynamic shared\n", arch, cases[i].text, ks[i].registers,
                 ks[i].spill_bytes, cases[i].kernel.shared_bytes);
      EXPECT_FALSE(ks[i].cubin.empty()) << cases[i].text;
      EXPECT_GT(ks[i].registers, 0) << cases[i].text;
      EXPECT_NE(ks[i].ptx.find("mma.sync.aligned.m16n8k16"), std::string::npos) << cases[i].text;
      spills += ks[i].spill_bytes > 0;
      if (ks[i].log.find("arning") != std::string::npos) ADD_FAILURE() << cases[i].text << ": " << ks[i].log;
    }
  }
  EXPECT_EQ(spills, 0);
  auto t2 = clock::now();

  codegen::SimCompiler sim;
  std::map<std::string, codegen::SimEntry> entries = sim.compile(sources);
  auto t3 = clock::now();
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
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
    auto r0 = clock::now();
    ASSERT_NO_THROW(codegen::sim_launch(entries.at(c.kernel.name), cfg, bufs, counts)) << c.text;
    const double run_s = std::chrono::duration<double>(clock::now() - r0).count();
    // The reference in double: operands as [batch][m][k] and [batch][n][k].
    std::vector<double> ad(static_cast<size_t>(a.numel())), bd(static_cast<size_t>(b.numel()));
    for (int64_t i = 0; i < a.numel(); ++i) ad[i] = a.get_double(i);
    for (int64_t bi = 0; bi < b_batches; ++bi)
      for (int64_t l = 0; l < s.k; ++l)
        for (int64_t j = 0; j < s.n; ++j) {
          const int64_t src = s.b_transposed ? (bi * s.n + j) * s.k + l : (bi * s.k + l) * s.n + j;
          bd[(bi * s.n + j) * s.k + l] = b.get_double(src);
        }
    int bad = 0;
    std::string first;
    double max_err = 0;
    for (int64_t bi = 0; bi < s.batch; ++bi)
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          const double* x = &ad[((a_batches == 1 ? 0 : bi) * s.m + i) * s.k];
          const double* y = &bd[((b_batches == 1 ? 0 : bi) * s.n + j) * s.k];
          // Four partial sums (the order does not matter in double; it lets the compiler vectorize).
          double r4[4] = {0, 0, 0, 0}, m4[4] = {0, 0, 0, 0};
          int64_t l = 0;
          for (; l + 4 <= s.k; l += 4)
            for (int q = 0; q < 4; ++q) {
              r4[q] += x[l + q] * y[l + q];
              m4[q] += std::abs(x[l + q] * y[l + q]);
            }
          for (; l < s.k; ++l) {
            r4[0] += x[l] * y[l];
            m4[0] += std::abs(x[l] * y[l]);
          }
          double ref = (r4[0] + r4[1]) + (r4[2] + r4[3]), mag = (m4[0] + m4[1]) + (m4[2] + m4[3]);
          if (c.bias_relu) ref = std::max(0.0, ref + bias.get_double(j));
          // f32 accumulation over K terms, then rounding to the output dtype.
          double tol = 1e-5 * mag + 1e-6;
          if (s.out_dtype == DType::F16) tol += std::abs(ref) * 0x1p-11;
          if (s.out_dtype == DType::BF16) tol += std::abs(ref) * 0x1p-8;
          const double v = got.get_double((bi * s.m + i) * s.n + j), err = std::abs(v - ref);
          max_err = std::max(max_err, err);
          if (!(err <= tol) && bad++ == 0)
            first = fmt::format("batch {} row {} col {}: got {} want {} (tolerance {})", bi, i, j, v, ref, tol);
        }
    fmt::print("  sim {}: {:.2f} s, max abs error {:.3g}\n", c.text, run_s, max_err);
    EXPECT_EQ(bad, 0) << c.text << ": " << first;
  }
  auto t4 = clock::now();
  auto secs = [](auto x, auto y) { return std::chrono::duration<double>(y - x).count(); };
  fmt::print("codegen gemm_tc: {} kernels; times: emit {:.2f}s, nvrtc {:.2f}s, sim build {:.2f}s, run {:.2f}s\n",
             cases.size(), secs(t0, t1), secs(t1, t2), secs(t2, t3), secs(t3, t4));
}

TEST(CodegenGemmTc, TileHeuristicAndErrors) {
  GemmTcSpec s;
  s.m = 3136;  // ResNet-50's first 1x1 convolutions as GEMMs: plenty of 128x128 tiles
  s.n = 1024;
  s.k = 64;
  GemmTcKernel k = codegen::emit_gemm_tc(s);
  EXPECT_EQ(k.bm, 128);
  EXPECT_EQ(k.bn, 128);
  EXPECT_EQ(k.block, 256u);
  EXPECT_EQ(k.grid[0], 8u);
  EXPECT_EQ(k.grid[1], 25u);
  // 3 stages of A [128][40] and B [32][136] halves.
  EXPECT_EQ(k.shared_bytes, size_t{3} * (128 * 40 + 32 * 136) * 2);
  s.n = 512;  // 4 x 25 tiles of 128x128, fewer than one wave: N tiles shrink to 64
  k = codegen::emit_gemm_tc(s);
  EXPECT_EQ(k.bm, 128);
  EXPECT_EQ(k.bn, 64);
  EXPECT_EQ(k.block, 128u);
  s.m = 1;  // one block row: 64x64
  k = codegen::emit_gemm_tc(s);
  EXPECT_EQ(k.bm, 64);
  EXPECT_EQ(k.bn, 64);
  EXPECT_EQ(k.block, 128u);
  // Same spec, same kernel name; a different shape, a different one.
  EXPECT_EQ(codegen::emit_gemm_tc(s).name, k.name);
  s.k = 65;
  EXPECT_NE(codegen::emit_gemm_tc(s).name, k.name);

  s.dtype = DType::F32;
  EXPECT_THROW(codegen::emit_gemm_tc(s), Unsupported);
  s.dtype = DType::F16;
  s.m = 0;
  EXPECT_THROW(codegen::emit_gemm_tc(s), Error);
  s.m = 70000;
  s.k = 70000;
  EXPECT_THROW(codegen::emit_gemm_tc(s), Unsupported);
  s.m = 65536 * 128 + 1;  // more M tiles than grid.y holds (the matrices themselves are small enough)
  s.n = s.k = 8;
  try {
    codegen::emit_gemm_tc(s);
    ADD_FAILURE() << "no error for 65537 M tiles";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("65535 tiles"), std::string::npos) << e.what();
  }
  s.m = s.k = 64;
  s.epilogue.operands = {{"bias", DType::F32, 64}};  // operands without the code that reads them
  EXPECT_THROW(codegen::emit_gemm_tc(s), Error);
  s.epilogue = {};
  s.bm = 32;  // not a tile the kernel has
  EXPECT_THROW(codegen::emit_gemm_tc(s), Error);
}

}  // namespace
}  // namespace kiln
