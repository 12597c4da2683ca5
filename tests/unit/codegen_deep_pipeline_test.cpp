// The GEMM core's deeper pipelines (codegen/emitters/gemm_conv/gemm_tiles.h:
// 64-deep k-tiles, rings of up to kMaxGemmStages stages within
// kMaxGemmRingBytes) on the simulator against the reference backend, and the
// limits gemm_tile_invalid puts on them.
#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "backends/compare.h"
#include "backends/reference/executor.h"
#include "backends/sim/sim_executor.h"
#include "codegen/emitter_table.h"
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "ir/parser.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

// The deeper pipelines the chooser may take (64-deep k-tiles, rings of 5 and 6 stages, split or
// folded) stay exact on the simulator where K is not a multiple of the k-tile (K = 200: a 64-deep
// k-tile's last trip loads 8 real columns and zero-fills the rest) and across both B layouts; a ring
// over the 96 KiB cap, 7 stages or a 64-deep tf32 tile are refused.
TEST(CodegenTensorCore, DeepPipelinesMatchReferenceOnSim) {
  for (const char* text : {R"(graph @m(%a: f16[40,200], %b: f16[200,72]) -> (f16[40,72]) {
    %y = matmul(%a, %b) : f16[40,72]
    return %y
  })",
                           R"(graph @m(%a: bf16[40,200], %b: bf16[72,200]) -> (bf16[40,72]) {
    %y = gemm(%a, %b) {trans_b=1} : bf16[40,72]
    return %y
  })"}) {
    auto g = parse_graph(text, "t.kir");
    const Node& n = *g->nodes().front();
    const codegen::KernelEmitter* e = codegen::emitter_for(n);
    ASSERT_NE(e, nullptr);
    std::map<std::string, Tensor> feed = testing::random_inputs(*g, 7);
    std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
    const DType dt = g->outputs().at(0)->type().dtype;
    for (codegen::GemmTileConfig c :
         {codegen::GemmTileConfig{32, 32, 64, 1, 1, 6}, codegen::GemmTileConfig{64, 64, 64, 2, 2, 5},
          codegen::GemmTileConfig{16, 32, 64, 1, 1, 4, 2}, codegen::GemmTileConfig{32, 32, 32, 1, 1, 6, 3},
          codegen::GemmTileConfig{32, 32, 64, 1, 1, 5, 2, true}}) {
      codegen::ScopedGemmTileChooser ch([&](const codegen::GemmProblem&) { return std::optional(c); });
      std::vector<codegen::NodeKernel> ks = e->emit(n);
      EXPECT_NE(ks.at(0).source.find("tile " + codegen::gemm_tile_name(c)), std::string::npos)
          << codegen::gemm_tile_name(c);
      codegen::SimExecutor sim(*g);
      std::vector<Tensor> got = sim.run(feed);
      EXPECT_EQ(compare_tensors(got.at(0), want.at(0), default_tolerance(dt)), "")
          << codegen::gemm_tile_name(c) << " " << dtype_name(dt);
    }
  }
  const codegen::GemmProblem p{codegen::GemmMath::F16, 1, 512, 512, 4096};
  EXPECT_EQ(codegen::gemm_tile_invalid({64, 64, 64, 2, 2, 5}, p), "");  // 5 x 18 KiB
  EXPECT_NE(codegen::gemm_tile_invalid({64, 64, 64, 2, 2, 6}, p).find("at most 98304"), std::string::npos);
  EXPECT_NE(codegen::gemm_tile_invalid({64, 64, 32, 2, 2, 7}, p).find("2 to 6 pipeline stages"), std::string::npos);
  EXPECT_NE(codegen::gemm_tile_invalid({64, 64, 64, 2, 2, 3}, {codegen::GemmMath::Tf32, 1, 512, 512, 4096}), "");
}

}  // namespace
}  // namespace kiln
