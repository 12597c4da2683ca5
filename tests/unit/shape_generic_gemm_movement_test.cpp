// Shape-generic GEMMs and data movement (docs/dynamic_shapes.md
// "Shape-generic GPU kernels"): graphs with a symbolic batch and sequence
// compiled once into a GPU plan with a profile, their kernels compiled by
// NVRTC for sm_80 and sm_90, run on the simulator from the plan
// (plan-on-sim) at three shapes, each equal to the reference backend on the
// graph specialised to that shape.
#include <gtest/gtest.h>

#include "backends/compare.h"
#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

// The default pipeline, less recognize-patterns where `unfused_attention`:
// an attention node is not shape-generic yet, so the blocks below stay
// written out as matmuls and softmax.
std::unique_ptr<Graph> compiled(const char* text, const std::string& target, const std::string& precision = "fp32",
                                bool unfused_attention = false) {
  auto g = parse_graph(text, "m.kir");
  CompileOptions o;
  o.pass.target = target;
  o.pass.precision = precision;
  o.symbolic = true;
  if (unfused_attention) {
    o.passes = default_pipeline(o.pass);
    std::erase(o.passes, std::string("recognize-patterns"));
  }
  compile_graph(*g, o);
  return g;
}

plan::Plan gpu_plan(const Graph& g, const std::string& arch, const plan::Profile& profile) {
  PlanBuildOptions po{arch, "fp32", {}};
  po.profiles = {profile};
  po.source_name = "m.onnx";
  return build_plan(g, po);
}

// Every kernel of the plan compiled for its arch; how many launches run a
// shape-generic kernel (one taking kiln_syms) whose name starts with `prefix`.
int generic_kernels_named(const plan::Plan& p, const std::string& prefix) {
  EXPECT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  for (const plan::Kernel& k : p.kernels) EXPECT_FALSE(k.cubin.empty()) << k.name << " has no CUBIN";
  int n = 0;
  for (const plan::GenericLaunch& gl : p.generic_launches) {
    const plan::Kernel& k = p.kernels[p.steps[gl.step].kernel];
    EXPECT_NE(k.source.find("kiln_syms ks"), std::string::npos) << k.name;
    n += k.name.rfind(prefix, 0) == 0;
  }
  return n;
}

// Plan-on-sim at each (b, s) against the reference on the specialised graph.
void expect_sim_matches_reference(const plan::Plan& p, const Graph& g,
                                  const std::vector<std::pair<int64_t, int64_t>>& at, Tolerance tol) {
  for (auto [b, s] : at) {
    std::unique_ptr<Graph> spec = specialize_graph(g, {{"b", b}, {"s", s}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*spec, static_cast<uint64_t>(b * 100 + s));
    std::vector<Tensor> want = ReferenceExecutor(*spec).run(feed);
    std::vector<Tensor> got = run_plan_on_sim(p, g, feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].shape(), want[i].shape()) << "b=" << b << " s=" << s;
      EXPECT_EQ(compare_tensors(got[i], want[i], tol), "") << "b=" << b << " s=" << s << " output " << i;
    }
  }
}

// An attention block written out (no attention node): a projection of
// [b, s, 32] (A's batch folds into M), scores over a symbolic batch of heads
// with symbolic M and N (s x s), softmax over rows of the symbolic length s
// (the multi-pass kernel), and probs x V whose reduction length K is the
// symbolic s (guarded tails along k).
const char* kMatmuls =
    "graph @m(%x: f32[b,s,32], %w: f32[32,24], %q: f32[b,4,s,8], %k: f32[b,4,8,s], %v: f32[b,4,s,8])"
    " -> (f32[b,s,24], f32[b,4,s,8]) symbols(b in [1, 4], s in [1, 40]) {\n"
    "  %p = matmul(%x, %w) : f32[b,s,24]\n"
    "  %sc = matmul(%q, %k) : f32[b,4,s,s]\n"
    "  %pr = softmax(%sc) {axis=-1} : f32[b,4,s,s]\n"
    "  %c = matmul(%pr, %v) : f32[b,4,s,8]\n"
    "  return %p, %c\n"
    "}\n";

plan::Profile matmul_profile() {
  return {{{"x", {1, 1, 32}, {4, 40, 32}, {4, 40, 32}},
           {"q", {1, 4, 1, 8}, {4, 4, 40, 8}, {4, 4, 40, 8}},
           {"k", {1, 4, 8, 1}, {4, 4, 8, 40}, {4, 4, 8, 40}},
           {"v", {1, 4, 1, 8}, {4, 4, 40, 8}, {4, 4, 40, 8}}}};
}

TEST(ShapeGenericKernels, BatchedMatmulsWithSymbolicBatchMNKOnSimAtThreeShapes) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(kMatmuls, arch, "fp32", true);
    plan::Plan p = gpu_plan(*g, arch, matmul_profile());
    EXPECT_EQ(generic_kernels_named(p, "kiln_matmul_"), 3) << arch;
    EXPECT_EQ(generic_kernels_named(p, "kiln_sm_softmax_"), 1) << arch;
    // The scores' grid: row tiles x column tiles x 4*b heads, per shape.
    bool three_axes = false;
    for (const plan::GenericLaunch& gl : p.generic_launches)
      three_axes = three_axes || plan::eval_grid_axis(gl.grid[2], {{"b", 3}, {"s", 5}}) == 12;
    EXPECT_TRUE(three_axes) << arch << ": no launch with z = 4*b";
    if (arch != "sm_90") continue;
    // s = 1 (one row and one column), 17 (a tail in every tile and along k), 40 (the max).
    expect_sim_matches_reference(p, *g, {{1, 1}, {3, 17}, {4, 40}}, {1e-5, 1e-4});
  }
}

// The same in f16 on tensor cores (mma.sync): cp.async rows of A where K is
// static, element loads where it is s, the k-tile count computed per shape.
TEST(ShapeGenericKernels, TensorCoreMatmulsWithSymbolicBatchMNKOnSimAtThreeShapes) {
  std::string text = kMatmuls;
  for (size_t at = text.find("f32"); at != std::string::npos; at = text.find("f32", at)) text.replace(at, 3, "f16");
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(text.c_str(), arch, "fp16", true);
    PlanBuildOptions po{arch, "fp16", {}};
    po.profiles = {matmul_profile()};
    po.source_name = "m.onnx";
    plan::Plan p = build_plan(*g, po);
    EXPECT_EQ(generic_kernels_named(p, "kiln_matmul_mma_"), 3) << arch;
    EXPECT_EQ(generic_kernels_named(p, "kiln_sm_softmax_"), 1) << arch;
    if (arch != "sm_90") continue;
    expect_sim_matches_reference(p, *g, {{1, 1}, {3, 17}, {4, 40}}, {2.5e-3, 1e-3});
  }
}

// Fused epilogues over symbolic shapes: a projection with a bias, GELU
// (erf) and a residual, the scores scaled with a per-batch mask broadcast
// over heads and rows, and a gemm over [b*s, 32] with a bias and a relu: one
// gemm_epilogue kernel each, in f32 (SIMT) and f16 (tensor cores).
const char* kEpilogues =
    "graph @m(%x: f32[b,s,32], %w: f32[32,24], %bias: f32[24], %res: f32[b,s,24], %q: f32[b,4,s,8],"
    " %k: f32[b,4,8,s], %mask: f32[b,1,1,s], %w2: f32[32,16], %c2: f32[16])"
    " -> (f32[b,s,24], f32[b,4,s,s], f32[b*s,16]) symbols(b in [1, 4], s in [1, 40]) {\n"
    "  %p = matmul(%x, %w) : f32[b,s,24]\n"
    "  %pb = add(%p, %bias) : f32[b,s,24]\n"
    "  %g = gelu(%pb) {approximate=\"none\"} : f32[b,s,24]\n"
    "  %y = add(%g, %res) : f32[b,s,24]\n"
    "  %sc = matmul(%q, %k) : f32[b,4,s,s]\n"
    "  %half = const f32[] dense<[0.5]>\n"
    "  %ss = mul(%sc, %half) : f32[b,4,s,s]\n"
    "  %sm = add(%ss, %mask) : f32[b,4,s,s]\n"
    "  %x2 = reshape(%x) {shape=[b*s,32]} : f32[b*s,32]\n"
    "  %l = gemm(%x2, %w2, %c2) : f32[b*s,16]\n"
    "  %lr = relu(%l) : f32[b*s,16]\n"
    "  return %y, %sm, %lr\n"
    "}\n";

plan::Profile epilogue_profile() {
  return {{{"x", {1, 1, 32}, {4, 40, 32}, {4, 40, 32}},
           {"res", {1, 1, 24}, {4, 40, 24}, {4, 40, 24}},
           {"q", {1, 4, 1, 8}, {4, 4, 40, 8}, {4, 4, 40, 8}},
           {"k", {1, 4, 8, 1}, {4, 4, 8, 40}, {4, 4, 8, 40}},
           {"mask", {1, 1, 1, 1}, {4, 1, 1, 40}, {4, 1, 1, 40}}}};
}

TEST(ShapeGenericKernels, GemmEpiloguesOverSymbolicShapesOnSimAtThreeShapes) {
  for (const std::string prec : {"fp32", "fp16"}) {
    for (const std::string arch : {"sm_80", "sm_90"}) {
      auto g = parse_graph(kEpilogues, "m.kir");
      CompileOptions o;
      o.pass.target = arch;
      o.pass.precision = prec;
      o.symbolic = true;
      compile_graph(*g, o);
      int fused = 0;
      for (const auto& n : g->nodes())
        fused += n->op() == "fused" && n->attrs().get_string("kind", "") == "gemm_epilogue";
      EXPECT_EQ(fused, 3) << prec << " " << arch;
      PlanBuildOptions po{arch, prec, {}};
      po.profiles = {epilogue_profile()};
      po.source_name = "m.onnx";
      plan::Plan p = build_plan(*g, po);
      // f16: the casts of the static weights are static kernels.
      EXPECT_EQ(generic_kernels_named(p, prec == "fp16" ? "kiln_matmul_mma_" : "kiln_matmul_"), 2) << prec << arch;
      EXPECT_EQ(generic_kernels_named(p, prec == "fp16" ? "kiln_gemm_mma_" : "kiln_gemm_"), 1) << prec << arch;
      if (arch != "sm_90") continue;
      const Tolerance tol = prec == "fp16" ? Tolerance{2.5e-3, 1e-3} : Tolerance{1e-5, 1e-4};
      expect_sim_matches_reference(p, *g, {{1, 1}, {3, 17}, {4, 40}}, tol);
    }
  }
}

// Gemm (ONNX Gemm, 2-D) with symbolic N and K, either operand transposed:
// scores written as a Gemm with trans_b (N = s, a bias C of length s, alpha),
// probabilities times values (K = s), and trans_a over a symbolic K. In f32
// on SIMT and with tf32 allowed on tensor cores (mma.sync, f32 staged and
// rounded per fragment), where the sizes decide no vector width: element
// loads along every symbolic extent, scalar stores along a symbolic N; and
// a batched matmul of scores (symbolic batch, M and N) with tf32.
const char* kGemms =
    "graph @m(%a: f32[b*s,32], %bt: f32[s,32], %c: f32[s], %p: f32[16,s], %v: f32[s,24], %at: f32[s,b],"
    " %q: f32[b,2,s,8], %kt: f32[b,2,8,s]) -> (f32[b*s,s], f32[16,24], f32[b,24], f32[b,2,s,s]) symbols(b in [1, 4], s in [1, 40]) {\n"
    "  %y1 = gemm(%a, %bt, %c) {alpha=0.5, trans_b=1} : f32[b*s,s]\n"
    "  %y2 = gemm(%p, %v) : f32[16,24]\n"
    "  %y3 = gemm(%at, %v) {trans_a=1} : f32[b,24]\n"
    "  %y4 = matmul(%q, %kt) : f32[b,2,s,s]\n"
    "  return %y1, %y2, %y3, %y4\n"
    "}\n";

plan::Profile gemm_profile() {
  return {{{"a", {1, 32}, {160, 32}, {160, 32}},
           {"bt", {1, 32}, {40, 32}, {40, 32}},
           {"c", {1}, {40}, {40}},
           {"p", {16, 1}, {16, 40}, {16, 40}},
           {"v", {1, 24}, {40, 24}, {40, 24}},
           {"at", {1, 1}, {40, 4}, {40, 4}},
           {"q", {1, 2, 1, 8}, {4, 2, 40, 8}, {4, 2, 40, 8}},
           {"kt", {1, 2, 8, 1}, {4, 2, 8, 40}, {4, 2, 8, 40}}}};
}

TEST(ShapeGenericKernels, GemmsWithSymbolicNAndKOnSimtAndTf32AtThreeShapes) {
  for (const std::string prec : {"fp32", "tf32"}) {
    for (const std::string arch : {"sm_80", "sm_90"}) {
      auto g = compiled(kGemms, arch, prec);
      PlanBuildOptions po{arch, prec, {}};
      po.profiles = {gemm_profile()};
      po.source_name = "m.onnx";
      plan::Plan p = build_plan(*g, po);
      EXPECT_EQ(generic_kernels_named(p, prec == "tf32" ? "kiln_gemm_mma_" : "kiln_gemm_"), 3) << prec << arch;
      EXPECT_EQ(generic_kernels_named(p, prec == "tf32" ? "kiln_matmul_mma_" : "kiln_matmul_"), 1) << prec << arch;
      if (prec == "tf32")
        for (const plan::Kernel& k : p.kernels)
          EXPECT_NE(k.source.find("kiln_mma_m16n8k8_tf32"), std::string::npos) << k.name;
      if (arch != "sm_90") continue;
      // tf32 keeps 10 bits of mantissa in each product.
      const Tolerance tol = prec == "tf32" ? Tolerance{5e-3, 5e-3} : Tolerance{1e-5, 1e-4};
      expect_sim_matches_reference(p, *g, {{1, 1}, {3, 17}, {4, 40}}, tol);
    }
  }
}

// The embedding lookup and head split of an encoder and the other data
// movement of the family: gather with symbolic index dims, reshape as a
// view, transposes of [b, s, 2, 4], a concat along the symbolic s (each
// part's length symbolic), a split along a static axis, a strided slice and
// an expand over symbolic outer dims.
const char* kMovement =
    "graph @m(%ids: i64[b,s], %emb: f32[5,8], %y: f32[b,s,8], %r: f32[1,s,1])"
    " -> (f32[b,2,s,4], f32[b,2*s,8], f32[b,s,3], f32[b,s,5], f32[b,s,4], f32[b,s,8], f32[b,4,2,s])"
    " symbols(b in [1, 4], s in [1, 40]) {\n"
    "  %e = gather(%emb, %ids) {axis=0} : f32[b,s,8]\n"
    "  %h = reshape(%e) {shape=[b,s,2,4]} : f32[b,s,2,4]\n"
    "  %t = transpose(%h) {perm=[0,2,1,3]} : f32[b,2,s,4]\n"
    "  %u = transpose(%h) {perm=[0,3,2,1]} : f32[b,4,2,s]\n"
    "  %c = concat(%e, %y) {axis=1} : f32[b,2*s,8]\n"
    "  %p, %q = split(%y) {axis=2, split=[3,5]} : f32[b,s,3], f32[b,s,5]\n"
    "  %sl = slice(%y) {ends=[b,s,8], starts=[0,0,1], steps=[1,1,2]} : f32[b,s,4]\n"
    "  %x = expand(%r) {shape=[b,s,8]} : f32[b,s,8]\n"
    "  return %t, %c, %p, %q, %sl, %x, %u\n"
    "}\n";

plan::Profile movement_profile() {
  return {{{"ids", {1, 1}, {4, 40}, {4, 40}},
           {"y", {1, 1, 8}, {4, 40, 8}, {4, 40, 8}},
           {"r", {1, 1, 1}, {1, 40, 1}, {1, 40, 1}}}};
}

TEST(ShapeGenericKernels, DataMovementWithSymbolicOuterDimsOnSimAtThreeShapes) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(kMovement, arch);
    plan::Plan p = gpu_plan(*g, arch, movement_profile());
    EXPECT_GE(generic_kernels_named(p, "kiln_inj_"), 7) << arch;
    if (arch != "sm_90") continue;
    // random_inputs gives indices in [0, 5): every row of the table.
    expect_sim_matches_reference(p, *g, {{1, 1}, {2, 9}, {4, 40}}, {0, 0});
  }
}

}  // namespace
}  // namespace kiln
