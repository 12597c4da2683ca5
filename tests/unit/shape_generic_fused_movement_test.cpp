// Fused groups mixing pointwise ops with data movement as shape-generic GPU
// kernels (docs/dynamic_shapes.md "Shape-generic GPU kernels", issue 19):
// the rotary embedding (slices, a negation, a concat and the cos/sin
// products), an embedding lookup with its scale, a head split with a scale
// a decoder's causal mask at offset `past` and an embedding gather feeding
// RMSNorm's reduction each compile, with a profile,
// into as many launches as the static plan at one shape, every launch
// shape-generic; compiled by NVRTC for sm_80 and sm_90 and run from the plan
// on the simulator at three shapes, each equal to the reference backend on
// the graph specialised to that shape.
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

std::unique_ptr<Graph> compiled(std::unique_ptr<Graph> g, const std::string& arch) {
  CompileOptions o;
  o.pass.target = arch;
  o.symbolic = true;
  compile_graph(*g, o);
  return g;
}

// The graph compiled with its symbols, and its plan with `profile`.
struct GenericPlan {
  std::unique_ptr<Graph> graph;
  plan::Plan plan;
};

GenericPlan generic_plan(const char* text, const std::string& arch, const plan::Profile& profile) {
  GenericPlan gp{compiled(parse_graph(text, "m.kir"), arch), {}};
  PlanBuildOptions po{arch, "fp32", {}};
  po.profiles = {profile};
  po.source_name = "m.onnx";
  gp.plan = build_plan(*gp.graph, po);
  return gp;
}

// Launches of the static plan of the same model at one shape.
size_t static_launches(const char* text, const std::string& arch, const SymbolBindings& at) {
  auto g = compiled(specialize_graph(*parse_graph(text, "m.kir"), at, op_registry()), arch);
  PlanBuildOptions po{arch, "fp32", {}};
  po.source_name = "m.onnx";
  plan::Plan p = build_plan(*g, po);
  EXPECT_TRUE(p.generic_launches.empty());
  return p.steps.size();
}

// Every kernel compiled for its arch and every launch shape-generic; how
// many launches run an on-demand fused kernel (kiln_fe_).
int fused_generic_launches(const plan::Plan& p, const std::string& arch) {
  EXPECT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  for (const plan::Kernel& k : p.kernels) EXPECT_FALSE(k.cubin.empty()) << k.name << " has no CUBIN for " << arch;
  EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << arch;
  int n = 0;
  for (const plan::GenericLaunch& gl : p.generic_launches) {
    const plan::Kernel& k = p.kernels[p.steps[gl.step].kernel];
    EXPECT_NE(k.source.find("kiln_syms ks"), std::string::npos) << k.name;
    n += k.name.rfind("kiln_fe_", 0) == 0;
  }
  return n;
}

void expect_sim_matches_reference(const GenericPlan& gp, const std::vector<SymbolBindings>& shapes) {
  for (const SymbolBindings& at : shapes) {
    std::unique_ptr<Graph> spec = specialize_graph(*gp.graph, at, op_registry());
    uint64_t seed = 1;
    for (const auto& [name, v] : at) seed = seed * 131 + static_cast<uint64_t>(v);
    const std::map<std::string, Tensor> feed = testing::random_inputs(*spec, seed);
    std::vector<Tensor> want = ReferenceExecutor(*spec).run(feed);
    std::vector<Tensor> got = run_plan_on_sim(gp.plan, *gp.graph, feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      std::string where;
      for (const auto& [name, v] : at) where += fmt::format("{}={} ", name, v);
      EXPECT_EQ(got[i].shape(), want[i].shape()) << where;
      EXPECT_EQ(compare_tensors(got[i], want[i], {1e-6, 1e-5}), "") << where << "output " << i;
    }
  }
}

// rotate_half(q) * sin + q * cos over [b, 2, s, 8] (the slices' ends and
// the concat's parts along the static last axis, the outer dims symbolic;
// cos/sin broadcast over b and the heads); the embedding of [b, s] ids with
// its scale and square (two results, one kernel); the head split of [b, s,
// 8] into [b, 2, s, 4] (a transpose moving the symbolic s) times a scale.
const char* kMixed =
    "graph @m(%q: f32[b,2,s,8], %cos: f32[s,8], %sin: f32[s,8], %ids: i64[b,s], %emb: f32[5,8], %x: f32[b,s,8],"
    " %w: f32[4]) -> (f32[b,2,s,8], f32[b,s,8], f32[b,s,8], f32[b,2,s,4]) symbols(b in [1, 4], s in [1, 40]) {\n"
    "  %x1 = slice(%q) {ends=[b,2,s,4], starts=[0,0,0,0], steps=[1,1,1,1]} : f32[b,2,s,4]\n"
    "  %x2 = slice(%q) {ends=[b,2,s,8], starts=[0,0,0,4], steps=[1,1,1,1]} : f32[b,2,s,4]\n"
    "  %nx2 = neg(%x2) : f32[b,2,s,4]\n"
    "  %rot = concat(%nx2, %x1) {axis=3} : f32[b,2,s,8]\n"
    "  %qc = mul(%q, %cos) : f32[b,2,s,8]\n"
    "  %rs = mul(%rot, %sin) : f32[b,2,s,8]\n"
    "  %y = add(%qc, %rs) : f32[b,2,s,8]\n"
    "  %scale = const f32[] splat<2.0>\n"
    "  %e = gather(%emb, %ids) {axis=0} : f32[b,s,8]\n"
    "  %h = mul(%e, %scale) : f32[b,s,8]\n"
    "  %sq = mul(%h, %h) : f32[b,s,8]\n"
    "  %hx = reshape(%x) {shape=[b,s,2,4]} : f32[b,s,2,4]\n"
    "  %t = transpose(%hx) {perm=[0,2,1,3]} : f32[b,2,s,4]\n"
    "  %hw = mul(%t, %w) : f32[b,2,s,4]\n"
    "  return %y, %h, %sq, %hw\n"
    "}\n";

plan::Profile mixed_profile() {
  return {{{"q", {1, 2, 1, 8}, {4, 2, 40, 8}, {4, 2, 40, 8}},
           {"cos", {1, 8}, {40, 8}, {40, 8}},
           {"sin", {1, 8}, {40, 8}, {40, 8}},
           {"ids", {1, 1}, {4, 40}, {4, 40}},
           {"x", {1, 1, 8}, {4, 40, 8}, {4, 40, 8}}}};
}

TEST(ShapeGenericKernels, MixedPointwiseAndDataMovementGroupsLaunchAsInTheStaticPlanOnSimAtThreeShapes) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    GenericPlan gp = generic_plan(kMixed, arch, mixed_profile());
    // Rotary, the embedding (both results) and the head split: one kernel each.
    EXPECT_EQ(fused_generic_launches(gp.plan, arch), 3) << arch;
    EXPECT_EQ(gp.plan.steps.size(), static_launches(kMixed, arch, {{"b", 2}, {"s", 9}})) << arch;
    if (arch != "sm_90") continue;
    // random_inputs gives ids in [0, 5): every row of the table.
    expect_sim_matches_reference(gp, {{{"b", 1}, {"s", 1}}, {{"b", 2}, {"s", 9}}, {{"b", 4}, {"s", 40}}});
  }
}

// A decoder's causal mask at offset `past`: the query positions
// arange(seq) + past (past a scalar constant holding a symbolic size, which
// the on-demand kernel computes from `ks`: its bytes in a plan are zeros),
// reshaped to a column, compared with the key positions reshaped to a row,
// selected and reshaped to [1, 1, seq, past + seq].
const char* kMask =
    "graph @m(%x: f32[1,seq,8], %pk: f32[1,2,past,4]) -> (f32[1,1,seq,past+seq], f32[1,seq,8])"
    " symbols(seq in [1, 40], past in [0, 64]) {\n"
    "  %zero = const i64[] splat<0>\n"
    "  %one = const i64[] splat<1>\n"
    "  %n = const i64[] splat<seq>\n"
    "  %r = range(%zero, %n, %one) : i64[seq]\n"
    "  %past = const i64[] splat<past>\n"
    "  %pos = add(%r, %past) : i64[seq]\n"
    "  %pos2 = reshape(%pos) {shape=[seq,1]} : i64[seq,1]\n"
    "  %tot = const i64[] splat<past+seq>\n"
    "  %kr = range(%zero, %tot, %one) : i64[past+seq]\n"
    "  %kr2 = reshape(%kr) {shape=[1,past+seq]} : i64[1,past+seq]\n"
    "  %le = less_or_equal(%kr2, %pos2) : bool[seq,past+seq]\n"
    "  %z = const f32[] splat<0.0>\n"
    "  %ninf = const f32[] splat<-1000000000.0>\n"
    "  %m = where(%le, %z, %ninf) : f32[seq,past+seq]\n"
    "  %m4 = reshape(%m) {shape=[1,1,seq,past+seq]} : f32[1,1,seq,past+seq]\n"
    "  %xx = mul(%x, %x) : f32[1,seq,8]\n"
    "  return %m4, %xx\n"
    "}\n";

TEST(ShapeGenericKernels, CausalMaskAtAnOffsetFusesWithItsReshapesOnSimAtThreeShapes) {
  const plan::Profile profile{
      {{"x", {1, 1, 8}, {1, 40, 8}, {1, 40, 8}}, {"pk", {1, 2, 0, 4}, {1, 2, 64, 4}, {1, 2, 64, 4}}}};
  for (const std::string arch : {"sm_80", "sm_90"}) {
    GenericPlan gp = generic_plan(kMask, arch, profile);
    // The mask (both ranges computed from the element's index, positions,
    // compare, select, reshapes) is one kernel; with the square, two
    // launches (a static plan folds the mask to a constant).
    EXPECT_EQ(fused_generic_launches(gp.plan, arch), 1) << arch;
    EXPECT_EQ(gp.plan.steps.size(), 2u) << arch;
    if (arch != "sm_90") continue;
    // A prefill of 8, a decode step after 17 positions, a prefill of 40
    // after 64 (the largest).
    expect_sim_matches_reference(gp,
                                 {{{"seq", 8}, {"past", 0}}, {{"seq", 1}, {"past", 17}}, {{"seq", 40}, {"past", 64}}});
  }
}

// A decoder's embedding lookup feeding the first RMSNorm: the gather is the
// prologue of the fused reduction (square, mean over the static last axis,
// eps, sqrt, reciprocal), which reads the table through the index map with
// the reduction's symbols; then the normalised rows times the weight.
const char* kEmbeddingNorm =
    "graph @m(%ids: i64[1,seq], %emb: f32[5,64], %w: f32[64]) -> (f32[1,seq,64]) symbols(seq in [1, 40]) {\n"
    "  %e = gather(%emb, %ids) {axis=0} : f32[1,seq,64]\n"
    "  %two = const f32[] splat<2.0>\n"
    "  %sq = pow(%e, %two) : f32[1,seq,64]\n"
    "  %ms = reduce_mean(%sq) {axes=[2], keepdims=1} : f32[1,seq,1]\n"
    "  %eps = const f32[] splat<0.00001>\n"
    "  %mse = add(%ms, %eps) : f32[1,seq,1]\n"
    "  %r = sqrt(%mse) : f32[1,seq,1]\n"
    "  %one = const f32[] splat<1.0>\n"
    "  %inv = div(%one, %r) : f32[1,seq,1]\n"
    "  %xn = mul(%e, %inv) : f32[1,seq,64]\n"
    "  %y = mul(%xn, %w) : f32[1,seq,64]\n"
    "  return %y\n"
    "}\n";

TEST(ShapeGenericKernels, EmbeddingGatherFusesIntoTheRmsNormReductionOnSimAtThreeShapes) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    GenericPlan gp = generic_plan(kEmbeddingNorm, arch, {{{"ids", {1, 1}, {1, 40}, {1, 40}}}});
    int gathering_reductions = 0;
    for (const auto& n : gp.graph->nodes()) {
      if (n->op() != "fused" || n->attrs().get_string("kind", "") != "reduction") continue;
      for (const auto& bn : n->body()->nodes()) gathering_reductions += bn->op() == "gather";
    }
    EXPECT_EQ(gathering_reductions, 1) << arch << ": the gather is the reduction's prologue";
    EXPECT_EQ(fused_generic_launches(gp.plan, arch), 0) << arch;
    EXPECT_EQ(gp.plan.steps.size(), 2u) << arch << ": the reduction and the scale by the weight";
    EXPECT_EQ(gp.plan.steps.size(), static_launches(kEmbeddingNorm, arch, {{"seq", 9}})) << arch;
    if (arch != "sm_90") continue;
    expect_sim_matches_reference(gp, {{{"seq", 1}}, {{"seq", 17}}, {{"seq", 40}}});
  }
}

// An encoder's embeddings: the token gather plus the position rows, then the
// layer norm over the static hidden dim, whose row kernel takes the gather
// and the add as its prologue over [b, s] rows.
const char* kEmbeddingLayerNorm =
    "graph @m(%ids: i64[b,s], %emb: f32[5,32], %pos: f32[s,32]) -> (f32[b,s,32]) symbols(b in [1, 4], s in [1, "
    "40]) {\n"
    "  %e = gather(%emb, %ids) {axis=0} : f32[b,s,32]\n"
    "  %x = add(%e, %pos) : f32[b,s,32]\n"
    "  %g = const f32[32] splat<1.5>\n"
    "  %be = const f32[32] splat<0.25>\n"
    "  %y = layer_normalization(%x, %g, %be) {axis=-1, epsilon=0.00001} : f32[b,s,32]\n"
    "  return %y\n"
    "}\n";

TEST(ShapeGenericKernels, EmbeddingGatherFusesIntoTheLayerNormOnSimAtThreeShapes) {
  const plan::Profile profile{{{"ids", {1, 1}, {4, 40}, {4, 40}}, {"pos", {1, 32}, {40, 32}, {40, 32}}}};
  for (const std::string arch : {"sm_80", "sm_90"}) {
    GenericPlan gp = generic_plan(kEmbeddingLayerNorm, arch, profile);
    EXPECT_EQ(gp.plan.steps.size(), 1u) << arch << ": gather, add and layer norm in one kernel";
    EXPECT_EQ(gp.plan.steps.size(), static_launches(kEmbeddingLayerNorm, arch, {{"b", 2}, {"s", 9}})) << arch;
    EXPECT_EQ(gp.plan.generic_launches.size(), gp.plan.steps.size()) << arch;
    for (const plan::Kernel& k : gp.plan.kernels) EXPECT_FALSE(k.cubin.empty()) << k.name << " has no CUBIN";
    if (arch != "sm_90") continue;
    expect_sim_matches_reference(gp, {{{"b", 1}, {"s", 1}}, {{"b", 2}, {"s", 9}}, {{"b", 4}, {"s", 40}}});
  }
}

}  // namespace
}  // namespace kiln
