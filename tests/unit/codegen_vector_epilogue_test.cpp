// Vectorized GEMM/conv epilogues (codegen/emitters/gemm_conv/emit_epilogue_vector.cpp,
// docs/codegen.md "Vectorized GEMM/conv epilogues"): the tensor-core kernel
// hands the epilogue 8 f16 (4 f32) consecutive columns per thread, which loads
// its bias/residual and stores its results in one kiln_vec access each where the
// address allows. For each case:
// - the kernel states the width the model charges ("// epilogue: 8-element
//   accesses") and its source has the vector stores, or, where the epilogue
//   or the shape does not allow it, the element-by-element store (width 1);
// - it compiles for sm_80 and sm_90 without spills, and the sm_80 PTX has
//   128-bit global stores (st.global.v4) where vectorized;
// - on the simulator it matches the reference; and again with the output
//   and every operand buffer moved off their 16-byte alignment by one
//   element (each tensor falls back to element-by-element access).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
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

struct VecCase {
  std::string name, text;
  int width;      // the epilogue accesses' width the kernel must state
  int split = 1;  // a folded split-K (the tail stores through the epilogue)
  std::unique_ptr<Graph> g;
  const Node* anchor = nullptr;
  std::vector<codegen::NodeKernel> kernels;
};

std::vector<VecCase> vec_cases() {
  std::vector<VecCase> cs;
  auto add = [&](std::string name, std::string text, int width, int split = 1) {
    cs.push_back(VecCase{std::move(name), std::move(text), width, split, nullptr, nullptr, {}});
  };
  // BERT's dense layers: bias [N] read along the row, the residual in the same width; 70 rows (a partial tile).
  constexpr const char* matmul =
      R"(graph @m(%a: {0}[70,96], %b: {0}[96,64], %c: {0}[64], %r: {0}[70,64]) -> ({0}[70,64]) {{
  %y = matmul(%a, %b) : {0}[70,64]
  %z = add(%y, %c) : {0}[70,64]
  %s = add(%z, %r) : {0}[70,64]
  %t = relu(%s) : {0}[70,64]
  return %t
}})";
  add("f16 matmul + bias + residual + relu", fmt::format(fmt::runtime(matmul), "f16"), 8);
  add("bf16 matmul + bias + residual + relu", fmt::format(fmt::runtime(matmul), "bf16"), 8);
  // The same in a folded split-K: the last block's tail sums 8 columns and stores them at once.
  add("f16 matmul, folded split 3",
      R"(graph @m(%a: f16[40,512], %b: f16[512,64], %c: f16[64]) -> (f16[40,64]) {
  %y = matmul(%a, %b) : f16[40,64]
  %z = add(%y, %c) : f16[40,64]
  return %z
})",
      8, 3);
  // ResNet's bottleneck end: an NHWC conv whose bias (the anchor's) is read as one vector, a residual, relu.
  add("f16 conv nhwc + bias + residual + relu",
      R"(graph @m(%x: f16[1,6,6,32], %w: f16[64,3,3,32], %b: f16[64], %r: f16[1,6,6,64]{nhwc}) -> (f16[1,6,6,64]{nhwc}) {
  %c = conv(%x, %w, %b) {dilations=[1,1], layout="nhwc", pads=[1,1,1,1], strides=[1,1]} : f16[1,6,6,64]{nhwc}
  %a = add(%c, %r) : f16[1,6,6,64]{nhwc}
  %y = relu(%a) : f16[1,6,6,64]{nhwc}
  return %y
})",
      8);
  // An f32 result: 4 per access; the f16 bias is read 4 at a time too (8 bytes).
  add("f16 matmul to f32 + bias",
      R"(graph @m(%a: f16[33,64], %b: f16[64,32], %c: f16[32]) -> (f32[33,32]) {
  %y = matmul(%a, %b) : f16[33,32]
  %z = add(%y, %c) : f16[33,32]
  %f = cast(%z) {to="f32"} : f32[33,32]
  return %f
})",
      4);
  // Not vectorized: a row of 36 f16 is not a multiple of 8; a transpose in the epilogue.
  add("f16 matmul N=36 (element by element)",
      R"(graph @m(%a: f16[20,64], %b: f16[64,36], %c: f16[36]) -> (f16[20,36]) {
  %y = matmul(%a, %b) : f16[20,36]
  %z = add(%y, %c) : f16[20,36]
  return %z
})",
      1);
  add("f16 matmul + transpose (element by element)",
      R"(graph @m(%a: f16[32,64], %b: f16[64,64], %c: f16[64]) -> (f16[64,32]) {
  %y = matmul(%a, %b) : f16[32,64]
  %z = add(%y, %c) : f16[32,64]
  %t = transpose(%z) {perm=[1,0]} : f16[64,32]
  return %t
})",
      1);
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

// Runs the anchor's kernels on the simulator; `shift` moves the result and
// every epilogue operand one element off the start of its (aligned)
// allocation (not the GEMM operands: the k-loop's cp.async needs them
// 16-byte aligned, as the arena gives them).
Tensor run(const VecCase& c, const std::map<std::string, codegen::SimEntry>& entries,
           const std::map<std::string, Tensor>& feed, bool shift) {
  const Node& n = *c.anchor;
  std::vector<std::vector<unsigned char>> storage;  // each buffer, copied (shifted) into its own allocation
  std::vector<void*> bufs;
  std::vector<long long> counts;
  auto add = [&](const void* data, size_t bytes, size_t elem, long long count, bool shift) {
    storage.emplace_back(bytes + 64);
    unsigned char* base = storage.back().data();
    base += (16 - reinterpret_cast<uintptr_t>(base) % 16) % 16;  // 16-byte aligned ...
    if (shift) base += elem;                                     // ... or one element off
    if (data) std::memcpy(base, data, bytes);
    bufs.push_back(base);
    counts.push_back(count);
  };
  const TensorType ot = n.output(0)->type();
  add(nullptr, ot.nbytes(), dtype_size(ot.dtype), ot.numel(), shift);
  // The body's anchor (the conv or matmul) reads its first two operands from these node inputs.
  std::vector<const Value*> gemm_operands;
  for (const auto& bn : n.body()->nodes())
    if (bn->op() == "conv" || bn->op() == "matmul")
      for (int i : {0, 1})
        for (size_t j = 0; j < n.body()->inputs().size(); ++j)
          if (n.body()->inputs()[j] == bn->input(i)) gemm_operands.push_back(n.input(static_cast<int>(j)));
  for (Value* v : n.inputs()) {
    const Tensor& t = v->is_constant() ? v->data() : feed.at(v->name());
    const bool operand = std::find(gemm_operands.begin(), gemm_operands.end(), v) != gemm_operands.end();
    add(t.raw(), t.nbytes(), dtype_size(t.dtype()), t.numel(), shift && !operand);
  }
  const codegen::NodeKernel& k = c.kernels.at(0);
  for (const Tensor& t : k.extra) add(t.raw(), t.nbytes(), dtype_size(t.dtype()), t.numel(), shift);
  std::vector<float> ws(static_cast<size_t>(k.workspace_f32), std::nanf(""));
  std::vector<unsigned> tickets(static_cast<size_t>(k.tile_counters), 0u);
  if (k.workspace_f32 > 0) {
    bufs.push_back(ws.data());
    counts.push_back(static_cast<long long>(ws.size()));
  }
  if (k.tile_counters > 0) {
    bufs.push_back(tickets.data());
    counts.push_back(static_cast<long long>(tickets.size()));
  }
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

TEST(CodegenVectorEpilogue, WideLoadsAndStoresMatchReferenceAlignedOrNot) {
  std::vector<VecCase> cases = vec_cases();
  std::vector<codegen::KernelSource> sources;
  for (VecCase& c : cases) {
    SCOPED_TRACE(c.name);
    c.g = parse_graph(c.text, "vec.kir");
    ASSERT_NO_THROW(verify_graph(*c.g, op_registry()));
    PassStats st;
    create_pass("fuse")->run(*c.g, PassOptions{}, st);
    ASSERT_EQ(c.g->nodes().size(), 1u) << "one fused anchor node";
    c.anchor = c.g->nodes().front().get();
    // The default tile, unsplit or folded `split` ways (both store through the epilogue).
    codegen::ScopedGemmTileChooser ch([&](const codegen::GemmProblem& p) {
      codegen::GemmTileConfig t = codegen::default_gemm_tile(p);
      t.split_k = c.split;
      t.fold_split = c.split > 1;
      return std::optional<codegen::GemmTileConfig>(t);
    });
    ASSERT_NO_THROW(c.kernels = codegen::emitter_for(*c.anchor)->emit(*c.anchor));
    ASSERT_EQ(c.kernels.size(), 1u);
    const std::string& src = c.kernels[0].source;
    EXPECT_NE(src.find(fmt::format("// epilogue: {}-element accesses", c.width)), std::string::npos) << src;
    EXPECT_EQ(src.find("*KILN_PTR_CAST(e_o0_t, out0 + e_p0) = w;") != std::string::npos, c.width > 1);
    sources.push_back({c.kernels[0].name, src});
  }
  codegen::KernelCache cache;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks;
    ASSERT_NO_THROW(ks = compiler.compile(sources)) << arch;
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_EQ(ks[i].spill_bytes, 0) << cases[i].name << " " << arch;
      // 16-byte stores of the result (f16 x 8 or f32 x 4).
      if (arch == "sm_80" && cases[i].width > 1)
        EXPECT_NE(ks[i].ptx.find("st.global.v4"), std::string::npos) << cases[i].name;
    }
  }
  codegen::SimCompiler sim;
  const std::map<std::string, codegen::SimEntry> entries = sim.compile(sources);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const VecCase& c = cases[ci];
    SCOPED_TRACE(c.name);
    const auto feed = random_inputs(*c.g, 7 + ci);
    const Tensor want = ReferenceExecutor(*c.g).run(feed).at(0);
    const Tolerance tol = default_tolerance(want.dtype() == DType::BF16 ? DType::BF16 : DType::F16);
    const Tensor aligned = run(c, entries, feed, false);
    EXPECT_EQ(compare_tensors(aligned, want, tol), "");
    const Tensor shifted = run(c, entries, feed, true);
    EXPECT_TRUE(shifted.same_bytes(aligned)) << "the element-by-element fallback gives other bits";
  }
}

}  // namespace
}  // namespace kiln
