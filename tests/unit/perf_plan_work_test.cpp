// perf/plan_work.h: what each step of a plan asks of the GPU, read from a
// hand-built graph and launch list: a gather reading an embedding table (only
// the rows it writes count as bytes), a matmul (2 x M x N x K FLOPs, fp16
// tensor cores, the tile loop from its source) and an output copy.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/graph.h"
#include "perf/plan_estimate.h"
#include "perf/plan_work.h"

namespace kiln::perf {
namespace {

plan::BufferRef buffer(plan::BufferKind kind, uint32_t index, uint64_t nbytes) {
  plan::BufferRef b;
  b.kind = kind;
  b.index = index;
  b.nbytes = nbytes;
  return b;
}

struct Fixture {
  Graph g;
  plan::Plan p;
  Fixture() {
    Value* ids = g.add_input("ids", TensorType(DType::I64, {8}));
    Value* table = g.add_constant_ref("table", TensorType(DType::F16, {30522, 768}), 1);
    Value* w = g.add_constant_ref("w", TensorType(DType::F16, {768, 256}), 2);
    Node* gather = g.add_node("gather", {table, ids}, {TensorType(DType::F16, {8, 768})}, {}, "embed");
    Node* mm = g.add_node("matmul", {gather->output(0), w}, {TensorType(DType::F16, {8, 256})}, {}, "proj");
    g.set_outputs({mm->output(0)});
    p.kernels.resize(2);
    p.kernels[0].name = "kiln_gather";
    p.kernels[0].registers = 24;
    p.kernels[1].name = "kiln_mm";
    p.kernels[1].registers = 96;
    p.kernels[1].static_shared_bytes = 0;
    p.kernels[1].source =
        "// proj: batch 1 x [8 x 256] = [8 x 768] [768 x 256] on tensor cores (f16); tile 64x64x32 w2x2 s3\n"
        "  constexpr int BM = 64, BN = 64, BK = 32, STAGES = 3, LDA = 40, LDB = 72;\n"
        "  constexpr int A_STAGE = 2560, B_STAGE = 2304, KT = 24, WTM = 32, WTN = 32, MI = 2, NI = 4;\n";
    plan::Step s0;
    s0.node = 0;
    s0.kernel = 0;
    s0.grid = {6, 1, 1};
    s0.block = {256, 1, 1};
    s0.args = {buffer(plan::BufferKind::Arena, 0, 8 * 768 * 2), buffer(plan::BufferKind::Weight, 0, 30522 * 768 * 2),
               buffer(plan::BufferKind::Input, 0, 64)};
    plan::Step s1;
    s1.node = 1;
    s1.kernel = 1;
    s1.grid = {4, 1, 1};
    s1.block = {128, 1, 1};
    s1.shared_bytes = 29184;
    s1.args = {buffer(plan::BufferKind::Output, 0, 8 * 256 * 2), buffer(plan::BufferKind::Arena, 0, 8 * 768 * 2),
               buffer(plan::BufferKind::Weight, 1, 768 * 256 * 2)};
    plan::Step s2;
    s2.kind = plan::StepKind::Copy;
    s2.node = UINT32_MAX;
    s2.args = {buffer(plan::BufferKind::Output, 0, 4096), buffer(plan::BufferKind::Arena, 0, 4096)};
    p.steps = {s0, s1, s2};
  }
};

TEST(PerfPlanWork, GatherMatmulAndCopy) {
  Fixture f;
  std::vector<StepWork> w = plan_work(f.p, f.g);
  ASSERT_EQ(w.size(), 3u);
  // The gather: 8 rows of the 47 MB table are read, as many bytes as it writes.
  EXPECT_EQ(w[0].node, "#0 embed (gather)");
  EXPECT_EQ(w[0].work.kind, WorkKind::Other);
  EXPECT_EQ(w[0].work.bytes, 8 * 768 * 2 + 8 * 768 * 2 + 64);
  EXPECT_EQ(w[0].work.blocks, 6);
  EXPECT_EQ(w[0].work.threads, 256);
  EXPECT_EQ(w[0].work.registers, 24);
  EXPECT_EQ(w[0].work.tile.k_tiles, 0);
  // The matmul: 2 x 8 x 256 x 768 FLOPs on fp16 tensor cores; shared
  // memory = static (0) + the launch's dynamic bytes; tiles 64 x 64 x 32,
  // 24 k-tiles, so one block does 2 x 64 x 64 x 768 padded FLOPs.
  const LaunchWork& mm = w[1].work;
  EXPECT_EQ(w[1].anchor, "matmul");
  EXPECT_EQ(mm.kind, WorkKind::Gemm);
  EXPECT_EQ(mm.math, Math::F16Tensor);
  EXPECT_DOUBLE_EQ(mm.flops, 2.0 * 8 * 256 * 768);
  EXPECT_EQ(mm.smem_bytes, 29184);
  EXPECT_EQ(mm.tile.k_tiles, 24);
  EXPECT_EQ(mm.tile.stages, 3);
  EXPECT_EQ(mm.tile.split, 1);
  EXPECT_DOUBLE_EQ(mm.block_flops, 2.0 * 64 * 64 * 768);
  EXPECT_EQ(mm.bytes, 8 * 256 * 2 + 8 * 768 * 2 + 768 * 256 * 2);
  // Through L2: each of the 4 blocks streams its 64 x 768 A panel and its
  // 768 x 64 B panel of f16 (the rows past M = 8 are padding it still loads).
  EXPECT_DOUBLE_EQ(mm.l2_bytes, 4.0 * 2 * 768 * (64 + 64));
  // The copy reads and writes its bytes.
  EXPECT_EQ(w[2].work.kind, WorkKind::Copy);
  EXPECT_EQ(w[2].work.bytes, 2 * 4096);
  EXPECT_EQ(plan_batch(f.g), 8);
}

// A split-K matmul (codegen/emitters/gemm_conv/emit_gemm_mma.cpp): the GEMM
// launch is the heavy one (its per-split k-tiles, its operand and workspace
// bytes only), the reduction launch an "other" one (its workspace and result
// bytes only, one add per partial value).
TEST(PerfPlanWork, SplitKGemmAndReduction) {
  Fixture f;
  plan::Kernel gemm = f.p.kernels[1], red;
  gemm.name = "kiln_mm_split";
  gemm.source =
      "// proj: batch 1 x [8 x 256] = [8 x 768] [768 x 256] on tensor cores (f16); tile 64x64x32 w2x2 s3 split8; "
      "split-K partial sums of 8 x 3 k-tiles to the workspace\n// buffers: 1 2 3\n"
      "  constexpr int BM = 64, BN = 64, BK = 32, STAGES = 3, LDA = 40, LDB = 72;\n"
      "  constexpr int A_STAGE = 2560, B_STAGE = 2304, KT = 3, WTM = 32, WTN = 32, MI = 2, NI = 4;\n";
  red.name = "kiln_mm_reduce";
  red.registers = 30;
  red.source =
      "// proj: split-K reduction of 8 partial sums, batch 1 x [8 x 256], 4 per thread; then the epilogue\n"
      "// buffers: 0 3\n";
  f.p.kernels = {f.p.kernels[0], gemm, red};
  const plan::BufferRef ws = buffer(plan::BufferKind::Arena, 0, 8 * 8 * 256 * 4);
  plan::Step s1 = f.p.steps[1], s2 = f.p.steps[1];
  plan::BufferRef ws_at = ws;
  ws_at.offset = 1 << 20;
  s1.grid = {32, 1, 1};
  s1.args.push_back(ws_at);
  s2.kernel = 2;
  s2.grid = {2, 1, 1};
  s2.block = {256, 1, 1};
  s2.shared_bytes = 0;
  s2.args = s1.args;
  f.p.steps = {f.p.steps[0], s1, s2};
  std::vector<StepWork> w = plan_work(f.p, f.g);
  ASSERT_EQ(w.size(), 3u);
  const LaunchWork& mm = w[1].work;
  EXPECT_EQ(mm.kind, WorkKind::Gemm);
  EXPECT_DOUBLE_EQ(mm.flops, 2.0 * 8 * 256 * 768);
  EXPECT_EQ(mm.tile.k_tiles, 3);
  EXPECT_EQ(mm.tile.split, 8);
  EXPECT_DOUBLE_EQ(mm.block_flops, 2.0 * 64 * 64 * 96);
  EXPECT_EQ(mm.blocks, 32);
  EXPECT_DOUBLE_EQ(mm.l2_bytes, 32.0 * 2 * 96 * (64 + 64));            // each split's 3 k-tiles of both panels
  EXPECT_EQ(mm.bytes, 8 * 768 * 2 + 768 * 256 * 2 + 8 * 8 * 256 * 4);  // A, B and the partial sums, not the result
  EXPECT_EQ(w[2].anchor, "split-K reduction");
  EXPECT_EQ(w[2].work.kind, WorkKind::Other);
  EXPECT_EQ(w[2].work.tile.k_tiles, 0);
  EXPECT_DOUBLE_EQ(w[2].work.flops, 8.0 * 8 * 256);
  EXPECT_EQ(w[2].work.bytes, 8 * 256 * 2 + 8 * 8 * 256 * 4);  // the result and the partial sums
}

// A folded split-K: one launch; its k-loops touch the operands and the
// partial sums ("// buffers:"), its tail -- the last block of each of the 4
// tiles -- the partial sums and the result ("// tail buffers:").
TEST(PerfPlanWork, FoldedSplitKGemmHasATail) {
  Fixture f;
  plan::Kernel gemm = f.p.kernels[1];
  gemm.name = "kiln_mm_fold";
  gemm.source =
      "// proj: batch 1 x [8 x 256] = [8 x 768] [768 x 256] on tensor cores (f16); tile 64x64x32 w2x2 s3 split8 fold; "
      "split-K partial sums of 8 x 3 k-tiles to the workspace, summed by the last block of each tile\n"
      "// buffers: 1 2 3\n// tail buffers: 0 3\n"
      "  constexpr int BM = 64, BN = 64, BK = 32, STAGES = 3, LDA = 40, LDB = 72;\n"
      "  constexpr int A_STAGE = 2560, B_STAGE = 2304, KT = 3, WTM = 32, WTN = 32, MI = 2, NI = 4;\n";
  f.p.kernels = {f.p.kernels[0], gemm};
  plan::BufferRef ws = buffer(plan::BufferKind::Arena, 0, 8 * 8 * 256 * 4),
                  tickets = buffer(plan::BufferKind::Arena, 0, 16);
  ws.offset = 1 << 20;
  tickets.offset = 2 << 20;
  plan::Step s1 = f.p.steps[1];
  s1.grid = {32, 1, 1};
  s1.args.push_back(ws);
  s1.args.push_back(tickets);
  f.p.steps = {f.p.steps[0], s1};
  std::vector<StepWork> w = plan_work(f.p, f.g);
  ASSERT_EQ(w.size(), 2u);
  const LaunchWork& mm = w[1].work;
  EXPECT_EQ(mm.kind, WorkKind::Gemm);
  EXPECT_EQ(mm.tile.split, 8);
  EXPECT_EQ(mm.bytes, 8 * 768 * 2 + 768 * 256 * 2 + 8 * 8 * 256 * 4);  // A, B and the partial sums
  EXPECT_EQ(mm.tail_blocks, 4);                                        // 32 blocks / 8 splits
  EXPECT_EQ(mm.tail_bytes, 8 * 256 * 2 + 8 * 8 * 256 * 4);             // the result and the partial sums
}

// "Filling a wave" (docs/performance.md): a conv/GEMM/attention grid of at
// least SMs x the blocks one SM holds at the occupancy the kernel's own
// registers and shared memory allow -- not merely one block per SM (counted
// apart). The matmul: 96 registers, 29,184 + 1,024 bytes of shared memory,
// 4 warps: 5 blocks per SM (registers), a wave of 132 x 5 = 660 blocks on an
// H100; with 200 registers 2 per SM, a wave of 264.
TEST(PerfPlanWork, FillingAWaveUsesTheKernelsOwnOccupancy) {
  const GpuSpec& h100 = *find_gpu("h100");
  auto counts = [&](uint32_t blocks, int registers) {
    Fixture f;
    f.p.kernels[1].registers = registers;
    f.p.steps[1].grid = {blocks, 1, 1};
    const PlanEstimate pe = estimate_plan(f.p, f.g, h100);
    EXPECT_EQ(pe.heavy, 1);
    return std::pair{pe.heavy_full_wave, pe.heavy_every_sm};
  };
  EXPECT_EQ(counts(660, 96), std::pair(1, 1));
  EXPECT_EQ(counts(659, 96), std::pair(0, 1));
  EXPECT_EQ(counts(132, 96), std::pair(0, 1));
  EXPECT_EQ(counts(131, 96), std::pair(0, 0));
  EXPECT_EQ(counts(264, 200), std::pair(1, 1));
  EXPECT_EQ(counts(263, 200), std::pair(0, 1));
}

TEST(PerfPlanWork, StepOutsideTheGraphIsAnError) {
  Fixture f;
  f.p.steps[1].node = 7;
  EXPECT_THROW(plan_work(f.p, f.g), Error);
}

}  // namespace
}  // namespace kiln::perf
