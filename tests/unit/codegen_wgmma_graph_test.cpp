// The GEMM core on wgmma (codegen/emitters/gemm_conv/emit_gemm_wgmma_tiled.cpp): fused
// matmul / conv nodes with their epilogues (bias, residual, activation,
// cast; the vectorized store where the epilogue allows it) emitted with a
// wgmma tile (GemmTileConfig::wgmma), compiled by NVRTC for sm_90a without
// spills (the PTX holds the wgmma and no mma.sync), and run on the simulator
// against the reference backend: ragged M, N and K tails (partial tiles,
// K not a multiple of 64 or of 8), B [K, N] (element-wise transposing load)
// and [N, K], an NHWC conv (im2col), batches, one and two warpgroups.
// Also: the tile choice under the sm_90a opt-in (gemm_tiles_wgmma.h).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <random>

#include "backends/compare.h"
#include "backends/reference/executor.h"
#include "backends/sim/sim_module.h"
#include "codegen/emitter_table.h"
#include "codegen/emitters/gemm_conv/gemm_tile_cost.h"
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "codegen/emitters/gemm_conv/gemm_tiles_wgmma.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "passes/pass.h"

namespace kiln {
namespace {

struct WgCase {
  std::string name, text;
  int bm, bn, stages, width;  // the wgmma tile; the epilogue accesses' width the kernel must state
  std::unique_ptr<Graph> g;
  const Node* anchor = nullptr;
  std::vector<codegen::NodeKernel> kernels;
};

std::vector<WgCase> wg_cases() {
  std::vector<WgCase> cs;
  auto add = [&](std::string name, std::string text, int bm, int bn, int stages, int width) {
    cs.push_back(WgCase{std::move(name), std::move(text), bm, bn, stages, width, nullptr, nullptr, {}});
  };
  constexpr const char* dense =
      R"(graph @m(%a: {0}[70,200], %b: {0}[200,72], %c: {0}[72], %r: {0}[70,72]) -> ({0}[70,72]) {{
  %y = matmul(%a, %b) : {0}[70,72]
  %z = add(%y, %c) : {0}[70,72]
  %s = add(%z, %r) : {0}[70,72]
  %t = relu(%s) : {0}[70,72]
  return %t
}})";
  add("f16 matmul 70x72x200 + bias + residual + relu, tile 64x64", fmt::format(fmt::runtime(dense), "f16"), 64, 64, 3,
      8);
  add("bf16 matmul 70x72x200 + bias + residual + relu, tile 128x128", fmt::format(fmt::runtime(dense), "bf16"), 128,
      128, 2, 8);
  add("f16 matmul 130x256x136 to f32 + bias, tile 128x256",
      R"(graph @m(%a: f16[130,136], %b: f16[136,256], %c: f16[256]) -> (f32[130,256]) {
  %y = matmul(%a, %b) : f16[130,256]
  %z = add(%y, %c) : f16[130,256]
  %f = cast(%z) {to="f32"} : f32[130,256]
  return %f
})",
      128, 256, 2, 4);
  add("f16 matmul N=36 K=27 (element by element)",
      R"(graph @m(%a: f16[20,27], %b: f16[27,36], %c: f16[36]) -> (f16[20,36]) {
  %y = matmul(%a, %b) : f16[20,36]
  %z = add(%y, %c) : f16[20,36]
  return %z
})",
      64, 64, 2, 1);
  add("f16 gemm transB (B [N, K]) + bias",
      R"(graph @m(%a: f16[96,128], %b: f16[80,128], %c: f16[80]) -> (f16[96,80]) {
  %y = gemm(%a, %b, %c) {trans_b=1} : f16[96,80]
  return %y
})",
      64, 128, 3, 8);
  add("f16 batched matmul [6] 64x48x80",
      R"(graph @m(%a: f16[6,64,80], %b: f16[6,80,48]) -> (f16[6,64,48]) {
  %y = matmul(%a, %b) : f16[6,64,48]
  return %y
})",
      64, 64, 2, 8);
  add("f16 conv nhwc 3x3 + bias + residual + relu",
      R"(graph @m(%x: f16[1,6,6,32], %w: f16[64,3,3,32], %b: f16[64], %r: f16[1,6,6,64]{nhwc}) -> (f16[1,6,6,64]{nhwc}) {
  %c = conv(%x, %w, %b) {dilations=[1,1], layout="nhwc", pads=[1,1,1,1], strides=[1,1]} : f16[1,6,6,64]{nhwc}
  %a = add(%c, %r) : f16[1,6,6,64]{nhwc}
  %y = relu(%a) : f16[1,6,6,64]{nhwc}
  return %y
})",
      64, 64, 3, 8);
  return cs;
}

std::map<std::string, Tensor> random_inputs(const Graph& g, uint64_t seed) {
  std::map<std::string, Tensor> feed;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (Value* in : g.inputs()) {
    Tensor t(in->type());
    for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, u(rng));
    feed[in->name()] = std::move(t);
  }
  return feed;
}

// The anchor's one kernel on the simulator (16-byte aligned buffers, as the arena gives them).
Tensor run(const WgCase& c, const std::map<std::string, codegen::SimEntry>& entries,
           const std::map<std::string, Tensor>& feed) {
  const Node& n = *c.anchor;
  std::vector<std::vector<unsigned char>> storage;
  std::vector<void*> bufs;
  std::vector<long long> counts;
  auto add = [&](const void* data, size_t bytes, long long count) {
    storage.emplace_back(bytes + 64);
    unsigned char* base = storage.back().data();
    base += (16 - reinterpret_cast<uintptr_t>(base) % 16) % 16;
    if (data) std::memcpy(base, data, bytes);
    bufs.push_back(base);
    counts.push_back(count);
  };
  const TensorType ot = n.output(0)->type();
  add(nullptr, ot.nbytes(), ot.numel());
  for (Value* v : n.inputs()) {
    const Tensor& t = v->is_constant() ? v->data() : feed.at(v->name());
    add(t.raw(), t.nbytes(), t.numel());
  }
  const codegen::NodeKernel& k = c.kernels.at(0);
  for (const Tensor& t : k.extra) add(t.raw(), t.nbytes(), t.numel());
  sim::LaunchConfig cfg;
  cfg.kernel = k.name;
  cfg.grid = dim3(k.grid.x, k.grid.y, k.grid.z);
  cfg.block = dim3(k.block.x, k.block.y, k.block.z);
  cfg.shared_bytes = k.shared_bytes;
  codegen::sim_launch(entries.at(k.name), cfg, bufs, counts);
  Tensor out(ot);
  std::memcpy(out.raw(), bufs[0], ot.nbytes());
  return out;
}

TEST(CodegenWgmmaGraph, FusedGemmsMatchReferenceOnSimulatorAndCompileForSm90a) {
  std::vector<WgCase> cases = wg_cases();
  std::vector<codegen::KernelSource> sources;
  for (WgCase& c : cases) {
    SCOPED_TRACE(c.name);
    c.g = parse_graph(c.text, "wgmma.kir");
    ASSERT_NO_THROW(verify_graph(*c.g, op_registry()));
    PassStats st;
    create_pass("fuse")->run(*c.g, PassOptions{}, st);
    ASSERT_EQ(c.g->nodes().size(), 1u) << "one fused anchor node";
    c.anchor = c.g->nodes().front().get();
    codegen::ScopedGemmTileChooser ch([&](const codegen::GemmProblem&) {
      codegen::GemmTileConfig t;
      t.wgmma = true;
      t.bm = c.bm;
      t.bn = c.bn;
      t.bk = 64;
      t.warps_m = c.bm / 16;
      t.warps_n = 1;
      t.stages = c.stages;
      return std::optional<codegen::GemmTileConfig>(t);
    });
    ASSERT_NO_THROW(c.kernels = codegen::emitter_for(*c.anchor)->emit(*c.anchor));
    ASSERT_EQ(c.kernels.size(), 1u);
    const std::string& src = c.kernels[0].source;
    EXPECT_NE(src.find(", wgmma sm_90a); tile "), std::string::npos) << src;
    EXPECT_NE(src.find(fmt::format("// epilogue: {}-element accesses", c.width)), std::string::npos) << src;
    EXPECT_EQ(c.kernels[0].block.x, unsigned(c.bm / 64 * 128));
    sources.push_back({c.kernels[0].name, src});
  }
  codegen::KernelCache cache;
  codegen::KernelCompiler compiler("sm_90a", &cache);
  std::vector<codegen::CompiledKernel> ks;
  ASSERT_NO_THROW(ks = compiler.compile(sources));
  for (size_t i = 0; i < ks.size(); ++i) {
    fmt::print("  sm_90a {}: {} registers, {} spill bytes, {} B dynamic shared\n", cases[i].name, ks[i].registers,
               ks[i].spill_bytes, cases[i].kernels[0].shared_bytes);
    EXPECT_EQ(ks[i].spill_bytes, 0) << cases[i].name;
    EXPECT_NE(ks[i].ptx.find(fmt::format("wgmma.mma_async.sync.aligned.m64n{}k16.f32", cases[i].bn)), std::string::npos)
        << cases[i].name;
    EXPECT_EQ(ks[i].ptx.find("mma.sync"), std::string::npos) << cases[i].name;
    if (ks[i].log.find("arning") != std::string::npos) ADD_FAILURE() << cases[i].name << ": " << ks[i].log;
  }
  codegen::SimCompiler sim;
  const std::map<std::string, codegen::SimEntry> entries = sim.compile(sources);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const WgCase& c = cases[ci];
    SCOPED_TRACE(c.name);
    const auto feed = random_inputs(*c.g, 11 + ci);
    const Tensor want = ReferenceExecutor(*c.g).run(feed).at(0);
    const Tolerance tol = default_tolerance(c.name.rfind("bf16", 0) == 0 ? DType::BF16 : DType::F16);
    Tensor got;
    ASSERT_NO_THROW(got = run(c, entries, feed));
    EXPECT_EQ(compare_tensors(got, want, tol), "");
  }
}

// The opt-in: without it no wgmma tile is chosen; with it, a GEMM that fills
// the GPU (BERT-base's FFN at batch 8 x seq 128) gets one (kiln's model puts
// wgmma's rate above mma.sync's), and a tiny one keeps its mma.sync tile.
TEST(CodegenWgmmaGraph, TileChoiceOnlyUnderTheOptIn) {
  const codegen::GemmProblem big{codegen::GemmMath::F16, 1, 1024, 3072, 768, 0};
  const codegen::GemmProblem tiny{codegen::GemmMath::F16, 1, 16, 32, 32, 0};
  EXPECT_FALSE(codegen::choose_gemm_tile_config(big).wgmma);
  {
    const codegen::ScopedSm90Wgmma on(true);
    const codegen::GemmTileConfig c = codegen::choose_gemm_tile_config(big);
    EXPECT_TRUE(c.wgmma) << codegen::gemm_tile_name(c);
    EXPECT_EQ(codegen::gemm_tile_invalid(c, big), "");
    EXPECT_LT(codegen::gemm_tile_cost_us(big, c), codegen::gemm_tile_cost_us(big, codegen::default_gemm_tile(big)));
    fmt::print("big: {} ({:.1f} us) vs mma.sync {} ({:.1f} us)\n", codegen::gemm_tile_name(c),
               codegen::gemm_tile_cost_us(big, c), codegen::gemm_tile_name(codegen::default_gemm_tile(big)),
               codegen::gemm_tile_cost_us(big, codegen::default_gemm_tile(big)));
    EXPECT_FALSE(codegen::choose_gemm_tile_config(tiny).wgmma);
    // Not for f32 / tf32 / integer GEMMs.
    EXPECT_FALSE(codegen::choose_gemm_tile_config({codegen::GemmMath::Tf32, 1, 1024, 3072, 768, 0}).wgmma);
  }
  EXPECT_FALSE(codegen::choose_gemm_tile_config(big).wgmma);
}

}  // namespace
}  // namespace kiln
