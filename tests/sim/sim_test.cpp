// Self-tests of the kernel simulator: each launches a kernel of kernels.cu.cpp
// and checks its output against values computed here on the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ir/dtype.h"
#include "kernels.h"

namespace {

using kiln::sim::arg;
using kiln::sim::LaunchConfig;
using kiln::sim::SimError;

// Runs `f`, expects a SimError whose message contains `needle`.
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

TEST(Sim, BarrierOrdersSharedMemory) {
  const int blocks = 3, n = 128;
  std::vector<int> out(blocks * n, -1);
  KILN_SIM_LAUNCH(barrier_rotate, dim3(blocks), dim3(n), 0, arg(out.data(), out.size(), "out"));
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < n; ++t) EXPECT_EQ(out[b * n + t], (t + 3) % n + 1000 * b) << b << " " << t;
}

// design.md section 6: 64 blocks x 256 threads, max of each row.
void run_row_max(int workers) {
  const int rows = 64, cols = 1000;
  std::vector<float> x(rows * cols);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-100.f, 100.f);
  for (auto& v : x) v = u(rng);
  std::vector<float> out(rows, 0.f);
  LaunchConfig cfg;
  cfg.kernel = "row_max";
  cfg.grid = dim3(rows);
  cfg.block = dim3(256);
  cfg.workers = workers;
  auto t0 = std::chrono::steady_clock::now();
  kiln::sim::launch(cfg, row_max, arg(x.data(), x.size(), "x"), arg(out.data(), out.size(), "out"), cols);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("row_max 64x256 on %d worker(s): %.1f ms\n", workers, ms);
  for (int r = 0; r < rows; ++r)
    EXPECT_EQ(out[r], *std::max_element(x.begin() + r * cols, x.begin() + (r + 1) * cols)) << r;
}
TEST(Sim, SharedMemoryBlockReduction) { run_row_max(1); }
TEST(Sim, SharedMemoryBlockReductionParallelBlocks) { run_row_max(4); }

TEST(Sim, WarpShuffles) {
  const int n = 128;
  std::vector<int> x(n);
  for (int i = 0; i < n; ++i) x[i] = (i * 37) % 11 - 5;
  std::vector<int> xs(n), ds(n / 32), scan(n), bc(n);
  KILN_SIM_LAUNCH(warp_ops, dim3(2), dim3(64), 0, arg<const int>(x.data(), n, "x"), arg(xs.data(), n, "xor_sum"),
                  arg(ds.data(), n / 32, "down_sum"), arg(scan.data(), n, "scan"), arg(bc.data(), n, "bcast"));
  for (int w = 0; w < n / 32; ++w) {
    int sum = 0;
    for (int l = 0; l < 32; ++l) {
      sum += x[w * 32 + l];
      EXPECT_EQ(scan[w * 32 + l], sum) << w << " " << l;
      EXPECT_EQ(bc[w * 32 + l], x[w * 32 + l / 8 * 8 + 3]) << w << " " << l;
    }
    EXPECT_EQ(ds[w], sum);
    for (int l = 0; l < 32; ++l) EXPECT_EQ(xs[w * 32 + l], sum);
  }
}

TEST(Sim, Votes) {
  const int n = 96;  // three warps: mixed, all positive, none positive
  std::vector<float> x(n);
  unsigned expect0 = 0;
  for (int l = 0; l < 32; ++l) {
    x[l] = (l % 3 == 0) ? 1.f : -1.f;
    if (l % 3 == 0) expect0 |= 1u << l;
    x[32 + l] = 2.f;
    x[64 + l] = -2.f;
  }
  std::vector<unsigned> ballot(3);
  std::vector<int> any(3, -1), all(3, -1);
  KILN_SIM_LAUNCH(votes, dim3(1), dim3(n), 0, arg<const float>(x.data(), n, "x"), arg(ballot.data(), 3, "ballot"),
                  arg(any.data(), 3, "any"), arg(all.data(), 3, "all"));
  EXPECT_EQ(ballot, (std::vector<unsigned>{expect0, 0xffffffffu, 0u}));
  EXPECT_EQ(any, (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(all, (std::vector<int>{0, 1, 0}));
}

TEST(Sim, AtomicsFromManyBlocks) {
  const int blocks = 200, threads = 128, n = blocks * threads;
  int total = 0, maxv = -1;
  unsigned long long wide = 0;
  float fsum = 0.f;
  LaunchConfig cfg;
  cfg.kernel = "atomic_count";
  cfg.grid = dim3(blocks);
  cfg.block = dim3(threads);
  cfg.workers = 4;
  kiln::sim::launch(cfg, atomic_count, arg(&total, 1, "total"), arg(&wide, 1, "wide"), arg(&fsum, 1, "fsum"),
                    arg(&maxv, 1, "maxv"));
  int expect = 0, expect_max = 0;
  for (int t = 0; t < n; ++t) {
    expect += t % 7 + 1;
    expect_max = std::max(expect_max, (t * 7919) % 100003);
  }
  EXPECT_EQ(total, expect);
  EXPECT_EQ(wide, static_cast<unsigned long long>(n) << 20);
  EXPECT_EQ(fsum, static_cast<float>(n));  // n < 2^24: every partial sum is exact
  EXPECT_EQ(maxv, expect_max);
}

// The toolkit's conversions must agree bit for bit with kiln's (ir/dtype.h).
TEST(Sim, HalfAndBfloat16MatchKiln) {
  std::vector<float> x = {0.f,    -0.f,     1.f,      -1.5f,       65504.f,       65520.f,        1e6f,
                          6e-8f,  2.98e-8f, 1e-10f,   3.14159265f, 1.0009765625f, 1.00048828125f, 1.00146484375f,
                          256.5f, -7.0e-5f, INFINITY, -INFINITY,   NAN,           3.0e38f,        1.1754944e-38f};
  std::mt19937 rng(3);
  for (int i = 0; i < 20000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    x.push_back(f);
  }
  const int n = static_cast<int>(x.size());
  std::vector<unsigned short> hb(n), bb(n);
  std::vector<float> hf(n), bf(n);
  KILN_SIM_LAUNCH(convert16, dim3((n + 255) / 256), dim3(256), 0, arg<const float>(x.data(), n, "x"),
                  arg(hb.data(), n, "h_bits"), arg(hf.data(), n, "h_back"), arg(bb.data(), n, "b_bits"),
                  arg(bf.data(), n, "b_back"), n);
  for (int i = 0; i < n; ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(kiln::half_to_float(hb[i])) && std::isnan(hf[i])) << i;
      EXPECT_TRUE(std::isnan(kiln::bf16_to_float(bb[i])) && std::isnan(bf[i])) << i;
      continue;
    }
    ASSERT_EQ(hb[i], kiln::float_to_half(x[i])) << "f16 of " << x[i];
    ASSERT_EQ(bb[i], kiln::float_to_bf16(x[i])) << "bf16 of " << x[i];
    ASSERT_EQ(hf[i], kiln::half_to_float(hb[i])) << x[i];
    ASSERT_EQ(bf[i], kiln::bf16_to_float(bb[i])) << x[i];
  }
}

TEST(Sim, OutOfBoundsWriteIsCaught) {
  const int n = 256;
  std::vector<float> buf(n + 1, 0.f);  // one guard element the kernel must not touch
  expect_sim_error([&] { KILN_SIM_LAUNCH(oob_write, dim3(2), dim3(128), 0, arg(buf.data(), n, "out"), n); },
                   "kernel oob_write: argument out: index 256 out of bounds [0, 256)");
  EXPECT_EQ(buf[n], 0.f);
}

TEST(Sim, DivergentBarrierIsReported) {
  std::vector<int> out(64);
  expect_sim_error([&] { KILN_SIM_LAUNCH(divergent_barrier, dim3(1), dim3(64), 0, arg(out.data(), 64, "out")); },
                   "kernel divergent_barrier: divergent __syncthreads");
  expect_sim_error([&] { KILN_SIM_LAUNCH(split_barriers, dim3(1), dim3(64), 0, arg(out.data(), 64, "out")); },
                   "kernel split_barriers: divergent __syncthreads: this thread is at");
  expect_sim_error([&] { KILN_SIM_LAUNCH(divergent_shuffle, dim3(1), dim3(32), 0, arg(out.data(), 64, "out")); },
                   "divergent __shfl_down_sync");
}

TEST(Sim, DeadlockIsReported) {
  std::vector<int> out(64);
  expect_sim_error([&] { KILN_SIM_LAUNCH(deadlock, dim3(1), dim3(64), 0, arg(out.data(), 64, "out")); },
                   "kernel deadlock: deadlock in block (0,0,0); thread (0,0,0) at __syncthreads");
}

TEST(Sim, HalfBfloat16AndPartialWarps) {
  std::vector<__half> x(48);
  float sum[2] = {0, 0}, mx[2] = {-1e9f, -1e9f};
  int positive = 0;
  for (int t = 0; t < 48; ++t) {
    float v = static_cast<float>(t % 7 - 3) * 0.5f;
    x[t] = __float2half(v);
    sum[t / 32] += v + 1.0f;
    mx[t / 32] = std::max(mx[t / 32], v);
    positive += v > 0;
  }
  std::vector<__half> hsum(2);
  std::vector<__nv_bfloat16> bmax(2);
  std::vector<int> counts(4, -1);
  KILN_SIM_LAUNCH(half_ops, dim3(1), dim3(48), 0, arg<const __half>(x.data(), 48, "x"), arg(hsum.data(), 2, "hsum"),
                  arg(bmax.data(), 2, "bmax"), arg(counts.data(), 4, "counts"));
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(__half2float(hsum[w]), sum[w]) << w;
    EXPECT_EQ(__bfloat162float(bmax[w]), mx[w]) << w;
  }
  EXPECT_EQ(counts, (std::vector<int>{positive, 1, 0, 1}));
}

TEST(Sim, DynamicSharedMemoryAnd2DBlocks) {
  const int n = 64;
  std::vector<float> in(n * n), out(n * n, 0.f);
  for (int i = 0; i < n * n; ++i) in[i] = static_cast<float>(i);
  KILN_SIM_LAUNCH(transpose_tile, dim3(n / 16, n / 16), dim3(16, 16), 16 * 17 * sizeof(float),
                  arg<const float>(in.data(), n * n, "in"), arg(out.data(), n * n, "out"), n);
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) ASSERT_EQ(out[y * n + x], in[x * n + y]) << y << " " << x;
}

TEST(Sim, VectorCastOfCheckedPointer) {
  std::vector<float> d(40);
  for (int i = 0; i < 40; ++i) d[i] = static_cast<float>(i);
  KILN_SIM_LAUNCH(scale4, dim3(1), dim3(32), 0, arg(d.data(), 40, "data"), 2.f, 10);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(d[i], 2.f * i);
  // Ten float4 fit in 40 floats; the eleventh is out of bounds in float4 units.
  expect_sim_error([&] { KILN_SIM_LAUNCH(scale4, dim3(1), dim3(32), 0, arg(d.data(), 40, "data"), 2.f, 11); },
                   "argument data: index 10 out of bounds [0, 10)");
}

// As on a GPU, a vector access needs an aligned address, not only an offset
// that is a multiple of the vector: a buffer starting 4 bytes past a 16-byte
// boundary cannot be read as float4 (the kernels test KILN_PTR_ADDR first).
TEST(Sim, VectorCastOfMisalignedAddressIsAnError) {
  alignas(16) float d[44] = {};
  EXPECT_EQ(::kiln::sim::ptr_address(arg(d + 1, 40, "data")) % 16, 4u);
  expect_sim_error([&] { KILN_SIM_LAUNCH(scale4, dim3(1), dim3(32), 0, arg(d + 1, 40, "data"), 2.f, 10); },
                   "not aligned");
}

TEST(Sim, InvalidLaunchIsAnError) {
  std::vector<int> out(64);
  expect_sim_error([&] { KILN_SIM_LAUNCH(barrier_rotate, dim3(1), dim3(2048), 0, arg(out.data(), 64, "out")); },
                   "invalid launch");
}

}  // namespace
