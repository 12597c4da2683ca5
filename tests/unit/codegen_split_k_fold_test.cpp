// A folded split-K (codegen/emitters/gemm_conv/emit_gemm_mma.cpp,
// GemmTileConfig::fold_split): one kernel whose last block per tile sums the
// tile's partial sums and runs the epilogue, instead of a reduction kernel.
// For each case the same split is emitted both ways and checked:
// - the folded variant is one kernel binding tile counters (one per tile)
//   after its workspace, and compiles for sm_80 and sm_90 without spills;
// - on the simulator (workspace filled with NaN) its result is the same bits
//   as the two-kernel split's (both sum the splits in split order, so which
//   block arrives last cannot change the result) and matches the reference;
// - it leaves the counters zero, so a second run with the same counters gives
//   the same bits again (the counters clean themselves);
// - counters that do not start at zero give a wrong result (what the runtime's
//   once-per-context zeroing prevents).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>

#include "backends/compare.h"
#include "backends/reference/executor.h"
#include "backends/sim/sim_module.h"
#include "codegen/emitter_table.h"
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "passes/pass.h"

namespace kiln {
namespace {

struct FoldCase {
  std::string name;
  std::string text;
  bool fuse = false;
  int split = 0;  // the split both variants use
  std::unique_ptr<Graph> g;
  const Node* anchor = nullptr;
  std::vector<codegen::NodeKernel> folded, two_kernels;
};

std::vector<FoldCase> fold_cases() {
  std::vector<FoldCase> cs;
  auto add = [&](std::string name, std::string text, int split, bool fuse = false) {
    FoldCase c;
    c.name = std::move(name);
    c.text = std::move(text);
    c.split = split;
    c.fuse = fuse;
    cs.push_back(std::move(c));
  };
  for (const char* dt : {"f16", "bf16"}) {
    // 2 tiles x 32 k-tiles in 11 splits (the last shorter); N % 4 == 0: 16-byte partial loads in the tail.
    add(fmt::format("{} matmul 40x1024 x 1024x72", dt),
        fmt::format("graph @m(%a: {0}[40,1024], %b: {0}[1024,72]) -> ({0}[40,72]) {{\n"
                    "  %y = matmul(%a, %b) : {0}[40,72]\n  return %y\n}}",
                    dt),
        11);
    // 2 batches, K = 2000 (a partial last k-tile), odd N: scalar partial stores and sums.
    add(fmt::format("{} batched matmul 2x24x2000 x 2000x21", dt),
        fmt::format("graph @m(%a: {0}[2,24,2000], %b: {0}[2,2000,21]) -> ({0}[2,24,21]) {{\n"
                    "  %y = matmul(%a, %b) : {0}[2,24,21]\n  return %y\n}}",
                    dt),
        21);
  }
  // An NHWC conv epilogue: the last block adds the bias and the residual, applies relu and casts.
  add("f16 conv_epilogue nhwc: bias, residual, relu, cast to f32",
      R"(graph @m(%x: f16[1,4,4,64], %w: f16[32,3,3,64], %b: f16[32], %r: f16[1,4,4,32]{nhwc}) -> (f32[1,4,4,32]{nhwc}) {
  %c = conv(%x, %w, %b) {dilations=[1,1], layout="nhwc", pads=[1,1,1,1], strides=[1,1]} : f16[1,4,4,32]{nhwc}
  %a = add(%c, %r) : f16[1,4,4,32]{nhwc}
  %y = relu(%a) : f16[1,4,4,32]{nhwc}
  %z = cast(%y) {to="f32"} : f32[1,4,4,32]{nhwc}
  return %z
})",
      6, true);
  return cs;
}

// The kernels of `n` with the default tile split `split` ways, folded or not.
std::vector<codegen::NodeKernel> emit_split(const Node& n, int split, bool fold) {
  codegen::ScopedGemmTileChooser ch([&](const codegen::GemmProblem& p) {
    codegen::GemmTileConfig c = codegen::default_gemm_tile(p);
    c.bk = p.math == codegen::GemmMath::Tf32 ? 16 : 32;  // the depth the cases' splits are counted in
    c.split_k = split;
    c.fold_split = fold;
    return std::optional<codegen::GemmTileConfig>(c);
  });
  return codegen::emitter_for(n)->emit(n);
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

// Runs the anchor's kernels once on the simulator with `counters` (grown and
// zeroed if too small) and a NaN-filled workspace; returns the result.
Tensor run_anchor(const FoldCase& c, const std::vector<codegen::NodeKernel>& ks,
                  const std::map<std::string, codegen::SimEntry>& entries, const std::map<std::string, Tensor>& feed,
                  Tensor& counters) {
  const Node& n = *c.anchor;
  Tensor out(n.output(0)->type());
  Tensor ws(TensorType(DType::F32, {codegen::node_workspace_bytes(ks) / 4}));
  for (int64_t i = 0; i < ws.numel(); ++i) ws.set_double(i, std::nan(""));
  const int64_t need = codegen::node_tile_counters(ks);
  if (counters.numel() < need) counters = Tensor(TensorType(DType::U32, {need}));
  for (const codegen::NodeKernel& k : ks) {
    std::vector<void*> bufs;
    std::vector<long long> counts;
    auto add = [&](const Tensor& t) {
      bufs.push_back(const_cast<void*>(t.raw()));
      counts.push_back(t.numel());
    };
    add(out);
    for (Value* v : n.inputs()) add(v->is_constant() ? v->data() : feed.at(v->name()));
    for (const Tensor& t : k.extra) add(t);
    if (k.workspace_f32 > 0) add(ws);
    if (k.tile_counters > 0) add(counters);
    sim::LaunchConfig cfg;
    cfg.kernel = k.name;
    cfg.grid = dim3(k.grid.x, k.grid.y, k.grid.z);
    cfg.block = dim3(k.block.x, k.block.y, k.block.z);
    cfg.shared_bytes = k.shared_bytes;
    codegen::sim_launch(entries.at(k.name), cfg, bufs, counts);
  }
  return out;
}

bool all_zero(const Tensor& t) {
  const auto* p = t.data<uint32_t>();
  return std::all_of(p, p + t.numel(), [](uint32_t v) { return v == 0; });
}

TEST(CodegenSplitKFold, OneKernelSameBitsAsTheReductionKernelAndCountersCleanThemselves) {
  std::vector<FoldCase> cases = fold_cases();
  std::vector<codegen::KernelSource> sources;
  for (FoldCase& c : cases) {
    SCOPED_TRACE(c.name);
    c.g = parse_graph(c.text, "fold.kir");
    ASSERT_NO_THROW(verify_graph(*c.g, op_registry()));
    if (c.fuse) {
      PassStats st;
      create_pass("fuse")->run(*c.g, PassOptions{}, st);
    }
    ASSERT_EQ(c.g->nodes().size(), 1u) << "one anchor node";
    c.anchor = c.g->nodes().front().get();
    ASSERT_NO_THROW(c.folded = emit_split(*c.anchor, c.split, true));
    ASSERT_NO_THROW(c.two_kernels = emit_split(*c.anchor, c.split, false));
    ASSERT_EQ(c.folded.size(), 1u) << "a folded split has no reduction kernel";
    ASSERT_EQ(c.two_kernels.size(), 2u);
    const codegen::NodeKernel& k = c.folded[0];
    EXPECT_NE(k.source.find(fmt::format(" split{} fold", c.split)), std::string::npos);
    EXPECT_NE(k.source.find("summed by the last block of each tile"), std::string::npos);
    EXPECT_EQ(k.source.find("split-K reduction of"), std::string::npos);
    EXPECT_EQ(k.workspace_f32, c.two_kernels[0].workspace_f32);
    // One counter per output tile: the grid is tiles x splits.
    EXPECT_EQ(k.tile_counters * c.split, static_cast<int64_t>(k.grid.count())) << k.grid.count();
    EXPECT_EQ(c.two_kernels[0].tile_counters, 0);
    for (const auto* ks : {&c.folded, &c.two_kernels})
      for (const codegen::NodeKernel& x : *ks) sources.push_back({x.name, x.source});
  }

  codegen::KernelCache cache;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks;
    ASSERT_NO_THROW(ks = compiler.compile(sources)) << arch;
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_FALSE(ks[i].cubin.empty()) << sources[i].name;
      EXPECT_EQ(ks[i].spill_bytes, 0) << sources[i].name << " " << arch;
      // The tail reads the other SMs' partial sums from L2.
      if (sources[i].source.find(" fold") != std::string::npos && arch == "sm_80") {
        EXPECT_NE(ks[i].ptx.find("atom.global.add.u32"), std::string::npos) << sources[i].name;
        EXPECT_NE(ks[i].ptx.find("ld.global.cg"), std::string::npos) << sources[i].name;
      }
    }
  }

  codegen::SimCompiler sim;
  const std::map<std::string, codegen::SimEntry> entries = sim.compile(sources);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const FoldCase& c = cases[ci];
    SCOPED_TRACE(c.name);
    const auto feed = random_inputs(*c.g, 100 + ci);
    const Tensor want = ReferenceExecutor(*c.g).run(feed).at(0);
    Tensor counters(TensorType(DType::U32, {0}));
    Tensor two = run_anchor(c, c.two_kernels, entries, feed, counters);
    Tensor first = run_anchor(c, c.folded, entries, feed, counters);
    EXPECT_TRUE(all_zero(counters)) << "the folded kernel must leave its tile counters zero";
    Tensor second = run_anchor(c, c.folded, entries, feed, counters);
    EXPECT_TRUE(all_zero(counters));
    EXPECT_EQ(compare_tensors(first, want, default_tolerance(want.dtype() == DType::BF16 ? DType::BF16 : DType::F16)),
              "");
    EXPECT_TRUE(first.same_bytes(two)) << "folded and two-kernel split differ";
    EXPECT_TRUE(second.same_bytes(first)) << "a second run with the same counters differs";
    // Counters left at splits - 1 (as if never zeroed): the first block of each tile to arrive takes
    // the last ticket and sums partial tiles that are not written yet (NaN).
    for (int64_t i = 0; i < counters.numel(); ++i) counters.data<uint32_t>()[i] = uint32_t(c.split - 1);
    Tensor stale = run_anchor(c, c.folded, entries, feed, counters);
    EXPECT_FALSE(stale.same_bytes(first)) << "counters that do not start at zero went unnoticed";
  }
}

}  // namespace
}  // namespace kiln
