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
  // Results stored as one kiln_vec (the others, whose elements a layout op moved apart, element by
  // element); -1: all of them when width > 1.
  int vector_stores = -1;
  bool reduce = false;  // the split's partial sums summed by a second, reduction kernel (which stores)
  std::unique_ptr<Graph> g;
  const Node* anchor = nullptr;
  std::vector<codegen::NodeKernel> kernels;
};

std::vector<VecCase> vec_cases() {
  std::vector<VecCase> cs;
  auto add = [&](std::string name, std::string text, int width, int split = 1, int vector_stores = -1) {
    cs.push_back(VecCase{std::move(name), std::move(text), width, split, vector_stores, false, nullptr, nullptr, {}});
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
  // The same split 3 ways with a reduction kernel (as ResNet-50's stage-3/4 convs): the reduction sums 8
  // columns per thread (two 16-byte partial loads per split) and stores them through the epilogue.
  add("f16 matmul + bias + residual + relu, split 3 with a reduction kernel", fmt::format(fmt::runtime(matmul), "f16"),
      8, 3);
  cs.back().reduce = true;
  add("f16 matmul to f32 + bias, split 2 with a reduction kernel",
      R"(graph @m(%a: f16[33,128], %b: f16[128,32], %c: f16[32]) -> (f32[33,32]) {
  %y = matmul(%a, %b) : f16[33,32]
  %z = add(%y, %c) : f16[33,32]
  %f = cast(%z) {to="f32"} : f32[33,32]
  return %f
})",
      4, 2);
  cs.back().reduce = true;
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
  // Not vectorized: a row of 36 f16 is not a multiple of 8.
  add("f16 matmul N=36 (element by element)",
      R"(graph @m(%a: f16[20,64], %b: f16[64,36], %c: f16[36]) -> (f16[20,36]) {
  %y = matmul(%a, %b) : f16[20,36]
  %z = add(%y, %c) : f16[20,36]
  return %z
})",
      1);
  // Layout ops after the anchor, decided per buffer: where the 8 columns stay next to each other in a
  // result (a transpose keeping the row's axis last, a split or slice cutting it at multiples of 8, a
  // one-index gather on another axis) they are stored as one vector; a transpose moving the GEMM's N
  // axis stores its result element by element (its bias still read as one vector).
  add("f16 matmul + bias + transpose moving N (vector loads, element stores)",
      R"(graph @m(%a: f16[32,64], %b: f16[64,64], %c: f16[64]) -> (f16[64,32]) {
  %y = matmul(%a, %b) : f16[32,64]
  %z = add(%y, %c) : f16[32,64]
  %t = transpose(%z) {perm=[1,0]} : f16[64,32]
  return %t
})",
      8, 1, 0);
  // ViT-B/16's QKV projection (torchvision's multi-head attention, sequence-first): [S,1,E] x [E,3E]
  // + bias, unflattened into (3, E), the 3 moved first, one gather per part, heads split and moved
  // before the sequence. 20 tokens (a partial tile), 4 heads of 16.
  add("f16 ViT QKV: bias, transposes, three gathers (three results)",
      R"(graph @m(%x: f16[20,1,64], %w: f16[64,192], %c: f16[192]) -> (f16[1,4,20,16], f16[1,4,20,16], f16[1,4,20,16]) {
  %i0 = const i64[] splat<0>
  %i1 = const i64[] splat<1>
  %i2 = const i64[] splat<2>
  %y = matmul(%x, %w) : f16[20,1,192]
  %z = add(%c, %y) : f16[20,1,192]
  %u = reshape(%z) {shape=[1,20,1,3,64]} : f16[1,20,1,3,64]
  %t = transpose(%u) {perm=[3,1,2,0,4]} : f16[3,20,1,1,64]
  %s = reshape(%t) {shape=[3,20,1,64]} : f16[3,20,1,64]
  %q = gather(%s, %i0) {axis=0} : f16[20,1,64]
  %k = gather(%s, %i1) {axis=0} : f16[20,1,64]
  %v = gather(%s, %i2) {axis=0} : f16[20,1,64]
  %q3 = reshape(%q) {shape=[20,4,16]} : f16[20,4,16]
  %k3 = reshape(%k) {shape=[20,4,16]} : f16[20,4,16]
  %v3 = reshape(%v) {shape=[20,4,16]} : f16[20,4,16]
  %qt = transpose(%q3) {perm=[1,0,2]} : f16[4,20,16]
  %kt = transpose(%k3) {perm=[1,0,2]} : f16[4,20,16]
  %vt = transpose(%v3) {perm=[1,0,2]} : f16[4,20,16]
  %qo = reshape(%qt) {shape=[1,4,20,16]} : f16[1,4,20,16]
  %ko = reshape(%kt) {shape=[1,4,20,16]} : f16[1,4,20,16]
  %vo = reshape(%vt) {shape=[1,4,20,16]} : f16[1,4,20,16]
  return %qo, %ko, %vo
})",
      8);
  // BERT's merged QKV GEMM: split along the row into three, each with its bias, heads moved before
  // the sequence; a folded split-K as in BERT's plan (the last block per tile stores the vectors).
  add("f16 BERT QKV: split along N, biases, transposes (three results)",
      R"(graph @m(%x: f16[1,24,128], %w: f16[128,192], %bq: f16[64], %bk: f16[64], %bv: f16[64]) -> (f16[1,4,24,16], f16[1,4,24,16], f16[1,4,24,16]) {
  %y = matmul(%x, %w) : f16[1,24,192]
  %q, %k, %v = split(%y) {axis=2, split=[64,64,64]} : f16[1,24,64], f16[1,24,64], f16[1,24,64]
  %qb = add(%q, %bq) : f16[1,24,64]
  %kb = add(%k, %bk) : f16[1,24,64]
  %vb = add(%v, %bv) : f16[1,24,64]
  %q4 = reshape(%qb) {shape=[1,24,4,16]} : f16[1,24,4,16]
  %k4 = reshape(%kb) {shape=[1,24,4,16]} : f16[1,24,4,16]
  %v4 = reshape(%vb) {shape=[1,24,4,16]} : f16[1,24,4,16]
  %qt = transpose(%q4) {perm=[0,2,1,3]} : f16[1,4,24,16]
  %kt = transpose(%k4) {perm=[0,2,1,3]} : f16[1,4,24,16]
  %vt = transpose(%v4) {perm=[0,2,1,3]} : f16[1,4,24,16]
  return %qt, %kt, %vt
})",
      8, 2);
  // Per buffer in one kernel: the row as computed (a vector), its transpose (element by element), a
  // slice of columns 16..47 (a vector, stored only by the threads holding them).
  add("f16 matmul: a vector, a transposed and a sliced result",
      R"(graph @m(%a: f16[20,64], %b: f16[64,64], %c: f16[64]) -> (f16[20,64], f16[64,20], f16[20,32]) {
  %y = matmul(%a, %b) : f16[20,64]
  %z = add(%y, %c) : f16[20,64]
  %t = transpose(%z) {perm=[1,0]} : f16[64,20]
  %s = slice(%z) {ends=[20,48], starts=[0,16], steps=[1,1]} : f16[20,32]
  return %z, %t, %s
})",
      8, 1, 2);
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
std::vector<Tensor> run(const VecCase& c, const std::map<std::string, codegen::SimEntry>& entries,
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
  for (int r = 0; r < n.num_outputs(); ++r) {
    const TensorType ot = n.output(r)->type();
    add(nullptr, ot.nbytes(), dtype_size(ot.dtype), ot.numel(), shift);
  }
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
  const codegen::NodeKernel& k0 = c.kernels.at(0);
  for (const Tensor& t : k0.extra) add(t.raw(), t.nbytes(), dtype_size(t.dtype()), t.numel(), shift);
  std::vector<float> ws(static_cast<size_t>(k0.workspace_f32), std::nanf(""));
  std::vector<unsigned> tickets(static_cast<size_t>(k0.tile_counters), 0u);
  if (k0.workspace_f32 > 0) {
    bufs.push_back(ws.data());
    counts.push_back(static_cast<long long>(ws.size()));
  }
  if (k0.tile_counters > 0) {
    bufs.push_back(tickets.data());
    counts.push_back(static_cast<long long>(tickets.size()));
  }
  for (const codegen::NodeKernel& k : c.kernels) {  // the GEMM, then a split's reduction (same buffers)
    sim::LaunchConfig cfg;
    cfg.kernel = k.name;
    cfg.grid = dim3(k.grid.x, k.grid.y, k.grid.z);
    cfg.block = dim3(k.block.x, k.block.y, k.block.z);
    cfg.shared_bytes = k.shared_bytes;
    codegen::sim_launch(entries.at(k.name), cfg, bufs, counts);
  }
  std::vector<Tensor> outs;
  for (int r = 0; r < n.num_outputs(); ++r) {
    outs.emplace_back(n.output(r)->type());
    std::memcpy(outs.back().raw(), bufs[static_cast<size_t>(r)], outs.back().nbytes());
  }
  return outs;
}

TEST(CodegenVectorEpilogue, WideLoadsAndStoresMatchReferenceAlignedOrNot) {
  std::vector<VecCase> cases = vec_cases();
  std::vector<codegen::KernelSource> sources;
  std::vector<int> storer;  // per source: the case whose results it stores, or -1 (a split's partial GEMM)
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
      t.fold_split = c.split > 1 && !c.reduce;
      return std::optional<codegen::GemmTileConfig>(t);
    });
    ASSERT_NO_THROW(c.kernels = codegen::emitter_for(*c.anchor)->emit(*c.anchor));
    ASSERT_EQ(c.kernels.size(), c.reduce ? 2u : 1u);
    // The kernel that stores: the GEMM, or the split's reduction.
    const std::string& src = c.kernels.back().source;
    if (c.reduce)
      EXPECT_NE(src.find(fmt::format("{} per thread; then the epilogue ({} per access)", c.width, c.width)),
                std::string::npos)
          << src;
    else EXPECT_NE(src.find(fmt::format("// epilogue: {}-element accesses", c.width)), std::string::npos) << src;
    int stores = 0;
    for (int r = 0; r < c.anchor->num_outputs(); ++r)
      stores += src.find(fmt::format("*KILN_PTR_CAST(e_o{}_t, out{} + ", r, r)) != std::string::npos;
    EXPECT_EQ(stores, c.vector_stores >= 0 ? c.vector_stores : c.width > 1 ? c.anchor->num_outputs() : 0) << src;
    for (const codegen::NodeKernel& k : c.kernels) {
      sources.push_back({k.name, k.source});
      storer.push_back(&k == &c.kernels.back() ? static_cast<int>(&c - cases.data()) : -1);
    }
  }
  codegen::KernelCache cache;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks;
    ASSERT_NO_THROW(ks = compiler.compile(sources)) << arch;
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_EQ(ks[i].spill_bytes, 0) << sources[i].name << " " << arch;
      if (storer[i] < 0) continue;
      // 16-byte stores of the result (f16 x 8 or f32 x 4); where every result is stored element by
      // element, the bias is still one 16-byte load.
      const VecCase& c = cases[static_cast<size_t>(storer[i])];
      if (arch == "sm_80" && c.width > 1 && c.vector_stores != 0)
        EXPECT_NE(ks[i].ptx.find("st.global.v4"), std::string::npos) << c.name;
      if (arch == "sm_80" && c.width > 1 && c.vector_stores == 0)
        EXPECT_TRUE(ks[i].ptx.find("ld.global.nc.v4") != std::string::npos ||
                    ks[i].ptx.find("ld.global.v4") != std::string::npos)
            << c.name;
    }
  }
  codegen::SimCompiler sim;
  const std::map<std::string, codegen::SimEntry> entries = sim.compile(sources);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const VecCase& c = cases[ci];
    SCOPED_TRACE(c.name);
    const auto feed = random_inputs(*c.g, 7 + ci);
    const std::vector<Tensor> want = ReferenceExecutor(*c.g).run(feed);
    const std::vector<Tensor> aligned = run(c, entries, feed, false);
    const std::vector<Tensor> shifted = run(c, entries, feed, true);
    ASSERT_EQ(aligned.size(), want.size());
    for (size_t r = 0; r < want.size(); ++r) {
      const Tolerance tol = default_tolerance(want[r].dtype() == DType::BF16 ? DType::BF16 : DType::F16);
      EXPECT_EQ(compare_tensors(aligned[r], want[r], tol), "") << "result " << r;
      EXPECT_TRUE(shifted[r].same_bytes(aligned[r])) << "result " << r << ": the element-by-element fallback differs";
    }
  }
}

}  // namespace
}  // namespace kiln
