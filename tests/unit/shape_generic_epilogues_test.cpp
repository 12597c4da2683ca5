// Fused epilogues over symbolic sizes with layout ops (docs/dynamic_shapes.md
// "Shape-generic GPU kernels"): in a plan with shape profiles the fuser
// forms an attention with its head merge (transpose to [b, s, h, d], reshape
// to [b*s, h*d]) and a residual add, and a merged QKV projection with its
// split and head-split transposes, as a static plan does; each is one
// shape-generic kernel (NVRTC for sm_80 and sm_90) whose epilogue maps every
// element through the layout ops with the sizes of the launch, equal on the
// simulator to the reference at three shapes. The projection's epilogue also
// carries rotary's slices and negations of the head dim (and a one-index
// gather), as a Llama decoder's static plan fuses them; a slice along a
// symbol stays out of it.
#include <gtest/gtest.h>

#include "backends/compare.h"
#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "codegen/emitters/gemm_conv/emit_epilogue.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

std::unique_ptr<Graph> compiled(const std::string& text, const std::string& target) {
  auto g = parse_graph(text, "epi.kir");
  CompileOptions o;
  o.pass.target = target;
  o.symbolic = true;
  compile_graph(*g, o);
  return g;
}

// The graph's fused nodes of `kind`.
int fused_of_kind(const Graph& g, const std::string& kind) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op() == "fused" && node->attrs().get_string("kind", "") == kind;
  return n;
}

// Builds the plan for `arch`; every launch shape-generic, every kernel
// compiled; returns the names of the kernels launched.
std::vector<std::string> generic_plan(const Graph& g, const std::string& arch, const plan::Profile& profile,
                                      plan::Plan& p) {
  PlanBuildOptions po{arch, "fp32", {}};
  po.profiles = {profile};
  po.source_name = "epi.onnx";
  p = build_plan(g, po);
  EXPECT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << arch << ": a launch is not shape-generic";
  std::vector<std::string> names;
  for (const plan::GenericLaunch& gl : p.generic_launches) {
    const plan::Kernel& k = p.kernels.at(p.steps.at(gl.step).kernel);
    EXPECT_FALSE(k.cubin.empty()) << k.name;
    EXPECT_NE(k.source.find("kiln_syms ks"), std::string::npos) << k.name;
    names.push_back(k.name);
  }
  return names;
}

void expect_on_sim_equal(const plan::Plan& p, const Graph& g, const SymbolBindings& at_shape, Tolerance tol) {
  std::unique_ptr<Graph> at = specialize_graph(g, at_shape, op_registry());
  uint64_t seed = 7;
  for (const auto& [name, v] : at_shape) seed = seed * 131 + static_cast<uint64_t>(v);
  const std::map<std::string, Tensor> feed = testing::random_inputs(*at, seed);
  std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
  std::vector<Tensor> got = run_plan_on_sim(p, g, feed);
  ASSERT_EQ(got.size(), want.size());
  std::string where;
  for (const auto& [name, v] : at_shape) where += fmt::format(" {}={}", name, v);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].shape(), want[i].shape()) << where;
    EXPECT_EQ(compare_tensors(got[i], want[i], tol), "") << where << " output " << i;
  }
}

// An encoder's attention with its head merge and the residual stream: T is
// f32 (the SIMT kernel, D = 16) or f16 (tensor cores, D = 16), the residual
// f32 (a cast in the epilogue).
std::string merge_graph(const std::string& t) {
  std::string s =
      "graph @m(%q: T[b,2,s,16], %k: T[b,2,s,16], %v: T[b,2,s,16], %mask: T[b,1,1,s], %h: f32[b*s,32])"
      " -> (f32[b*s,32]) symbols(b in [1, 3], s in [1, 40]) {\n"
      "  %o = attention(%q, %k, %v, %mask) {scale=0.25} : T[b,2,s,16]\n"
      "  %ot = transpose(%o) {perm=[0,2,1,3]} : T[b,s,2,16]\n"
      "  %o2 = reshape(%ot) {shape=[b*s,32]} : T[b*s,32]\n"
      "  %c = cast(%o2) {to=\"f32\"} : f32[b*s,32]\n"
      "  %r = add(%c, %h) : f32[b*s,32]\n"
      "  return %r\n"
      "}\n";
  for (size_t at = s.find("T["); at != std::string::npos; at = s.find("T[", at)) s.replace(at, 1, t);
  return s;
}

const plan::Profile kMergeProfile = {{{"q", {1, 2, 1, 16}, {3, 2, 40, 16}, {3, 2, 40, 16}},
                                      {"k", {1, 2, 1, 16}, {3, 2, 40, 16}, {3, 2, 40, 16}},
                                      {"v", {1, 2, 1, 16}, {3, 2, 40, 16}, {3, 2, 40, 16}},
                                      {"mask", {1, 1, 1, 1}, {3, 1, 1, 40}, {3, 1, 1, 40}},
                                      {"h", {1, 32}, {120, 32}, {120, 32}}}};

TEST(ShapeGenericKernels, FusedAttentionWithItsHeadMergeOnSimAtThreeShapes) {
  for (const std::string t : {"f32", "f16"}) {
    for (const std::string arch : {"sm_80", "sm_90"}) {
      auto g = compiled(merge_graph(t), arch);
      ASSERT_EQ(fused_of_kind(*g, "attention"), 1) << t << " " << arch;
      ASSERT_EQ(g->num_nodes(), 1) << t << " " << arch << ": the head merge or the residual is not in the kernel";
      plan::Plan p;
      std::vector<std::string> names = generic_plan(*g, arch, kMergeProfile, p);
      ASSERT_EQ(names.size(), 1u);
      EXPECT_EQ(names[0].rfind(t == "f16" ? "kiln_attn_tc_fused_attention_" : "kiln_attn_fused_attention_", 0), 0u)
          << names[0];
      if (arch != "sm_90") continue;
      const Tolerance tol = t == "f16" ? Tolerance{2e-3, 2e-2} : Tolerance{1e-5, 1e-4};
      // s = 1 (one query tile, one key), 7 and 40 (the largest: three query tiles of 16).
      for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 1}, {2, 7}, {3, 40}})
        expect_on_sim_equal(p, *g, {{"b", b}, {"s", s}}, tol);
    }
  }
}

// A decode step's causal attention over a long past on tensor cores, split
// along the keys per launch (flash-decoding): the block that combines the
// parts runs the epilogue (the head merge to [seq, 4*64]).
TEST(ShapeGenericKernels, FusedSplitKvAttentionWithItsHeadMergeOnSim) {
  const char* text =
      "graph @m(%q: f16[1,4,seq,64], %k: f16[1,4,kv,64], %v: f16[1,4,kv,64]) -> (f16[seq,256]) "
      "symbols(seq in [1, 8], kv in [1, 1100]) {\n"
      "  %o = attention(%q, %k, %v) {scale=0.125, causal=1} : f16[1,4,seq,64]\n"
      "  %ot = transpose(%o) {perm=[0,2,1,3]} : f16[1,seq,4,64]\n"
      "  %r = reshape(%ot) {shape=[seq,256]} : f16[seq,256]\n"
      "  return %r\n"
      "}\n";
  auto g = compiled(text, "sm_90");
  ASSERT_EQ(fused_of_kind(*g, "attention"), 1);
  plan::Plan p;
  generic_plan(*g, "sm_90",
               {{{"q", {1, 4, 1, 64}, {1, 4, 1, 64}, {1, 4, 8, 64}},
                 {"k", {1, 4, 1, 64}, {1, 4, 1100, 64}, {1, 4, 1100, 64}},
                 {"v", {1, 4, 1, 64}, {1, 4, 1100, 64}, {1, 4, 1100, 64}}}},
               p);
  ASSERT_EQ(p.generic_launches.size(), 1u);
  const plan::Kernel& k = p.kernels.at(p.steps.at(p.generic_launches[0].step).kernel);
  ASSERT_NE(k.source.find("split-KV"), std::string::npos);
  for (auto [seq, past] : {std::pair<int64_t, int64_t>{1, 0}, {1, 700}, {2, 1098}})
    expect_on_sim_equal(p, *g, {{"seq", seq}, {"kv", past + seq}}, {2e-3, 2e-2});
}

// A merged QKV projection: one matmul over [b, s, 32] x [32, 96], its split
// into three along the static last axis, the head split reshapes and the
// transposes to [b, 4, s, 8] as one gemm_epilogue kernel storing three
// results (f32 on SIMT, f16 on tensor cores).
TEST(ShapeGenericKernels, ProjectionWithSplitAndHeadTransposesOnSimAtThreeShapes) {
  const std::string f32 =
      "graph @m(%x: f32[b,s,32], %w: f32[32,96]) -> (f32[b,4,s,8], f32[b,4,s,8], f32[b,4,s,8])"
      " symbols(b in [1, 3], s in [1, 40]) {\n"
      "  %p = matmul(%x, %w) : f32[b,s,96]\n"
      "  %a, %c, %d = split(%p) {axis=2, split=[32,32,32]} : f32[b,s,32], f32[b,s,32], f32[b,s,32]\n"
      "  %ar = reshape(%a) {shape=[b,s,4,8]} : f32[b,s,4,8]\n"
      "  %cr = reshape(%c) {shape=[b,s,4,8]} : f32[b,s,4,8]\n"
      "  %dr = reshape(%d) {shape=[b,s,4,8]} : f32[b,s,4,8]\n"
      "  %at = transpose(%ar) {perm=[0,2,1,3]} : f32[b,4,s,8]\n"
      "  %ct = transpose(%cr) {perm=[0,2,1,3]} : f32[b,4,s,8]\n"
      "  %dt = transpose(%dr) {perm=[0,2,1,3]} : f32[b,4,s,8]\n"
      "  return %at, %ct, %dt\n"
      "}\n";
  const plan::Profile profile = {{{"x", {1, 1, 32}, {3, 40, 32}, {3, 40, 32}}}};
  for (const std::string t : {"f32", "f16"}) {
    std::string text = f32;
    for (size_t at = text.find("f32"); at != std::string::npos; at = text.find("f32", at + t.size()))
      text.replace(at, 3, t);
    for (const std::string arch : {"sm_80", "sm_90"}) {
      auto g = compiled(text, arch);
      ASSERT_EQ(fused_of_kind(*g, "gemm_epilogue"), 1) << t << " " << arch;
      ASSERT_EQ(g->num_nodes(), 1) << t << " " << arch;
      plan::Plan p;
      std::vector<std::string> names = generic_plan(*g, arch, profile, p);
      ASSERT_EQ(names.size(), 1u);
      EXPECT_EQ(names[0].rfind(t == "f16" ? "kiln_matmul_mma_" : "kiln_matmul_", 0), 0u) << names[0];
      if (arch != "sm_90") continue;
      const Tolerance tol = t == "f16" ? Tolerance{2.5e-3, 1e-3} : Tolerance{1e-5, 1e-4};
      for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 1}, {2, 17}, {3, 40}})
        expect_on_sim_equal(p, *g, {{"b", b}, {"s", s}}, tol);
    }
  }
}

// The ops of `kind` inside the bodies of the graph's fused nodes of kind `fused_kind`.
int body_ops(const Graph& g, const std::string& fused_kind, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes())
    if (node->op() == "fused" && node->attrs().get_string("kind", "") == fused_kind)
      for (const auto& bn : node->body()->nodes()) n += bn->op() == op;
  return n;
}

// A Llama decoder layer's merged QKV projection with rotary as its exporter
// writes it (x * cos + concat(-x2, x1) * sin over the head dim), the values
// passed through, and one key position picked by a constant index: the
// projection's epilogue holds the split, head splits, the products with cos,
// the four slices, both negations and the gather (one kernel, as the static
// plan's), the concats with sin after it (the on-demand kernel).
std::string rotary_graph(const std::string& t) {
  std::string s =
      "graph @m(%x: T[b,s,64], %w: T[64,128], %cos: T[s,16], %sin: T[s,16])"
      " -> (T[b,4,s,16], T[b,2,s,16], T[b,2,s,16], T[b,s,16]) symbols(b in [1, 3], s in [1, 40]) {\n"
      "  %qkv = matmul(%x, %w) : T[b,s,128]\n"
      "  %q, %k, %v = split(%qkv) {axis=2, split=[64,32,32]} : T[b,s,64], T[b,s,32], T[b,s,32]\n"
      "  %qr = reshape(%q) {shape=[b,s,4,16]} : T[b,s,4,16]\n"
      "  %qt = transpose(%qr) {perm=[0,2,1,3]} : T[b,4,s,16]\n"
      "  %qc = mul(%qt, %cos) : T[b,4,s,16]\n"
      "  %q2 = slice(%qt) {ends=[b,4,s,16], starts=[0,0,0,8], steps=[1,1,1,1]} : T[b,4,s,8]\n"
      "  %qn = neg(%q2) : T[b,4,s,8]\n"
      "  %q1 = slice(%qt) {ends=[b,4,s,8], starts=[0,0,0,0], steps=[1,1,1,1]} : T[b,4,s,8]\n"
      "  %qh = concat(%qn, %q1) {axis=3} : T[b,4,s,16]\n"
      "  %qs = mul(%qh, %sin) : T[b,4,s,16]\n"
      "  %qo = add(%qc, %qs) : T[b,4,s,16]\n"
      "  %kr = reshape(%k) {shape=[b,s,2,16]} : T[b,s,2,16]\n"
      "  %kt = transpose(%kr) {perm=[0,2,1,3]} : T[b,2,s,16]\n"
      "  %kc = mul(%kt, %cos) : T[b,2,s,16]\n"
      "  %k2 = slice(%kt) {ends=[b,2,s,16], starts=[0,0,0,8], steps=[1,1,1,1]} : T[b,2,s,8]\n"
      "  %kn = neg(%k2) : T[b,2,s,8]\n"
      "  %k1 = slice(%kt) {ends=[b,2,s,8], starts=[0,0,0,0], steps=[1,1,1,1]} : T[b,2,s,8]\n"
      "  %kh = concat(%kn, %k1) {axis=3} : T[b,2,s,16]\n"
      "  %ks = mul(%kh, %sin) : T[b,2,s,16]\n"
      "  %ko = add(%kc, %ks) : T[b,2,s,16]\n"
      "  %vr = reshape(%v) {shape=[b,s,2,16]} : T[b,s,2,16]\n"
      "  %vt = transpose(%vr) {perm=[0,2,1,3]} : T[b,2,s,16]\n"
      "  %one = const i64[] dense<[1]>\n"
      "  %kl = gather(%kr, %one) {axis=2} : T[b,s,16]\n"
      "  return %qo, %ko, %vt, %kl\n"
      "}\n";
  for (size_t at = s.find("T["); at != std::string::npos; at = s.find("T[", at)) s.replace(at, 1, t);
  return s;
}

TEST(ShapeGenericKernels, ProjectionWithRotarySlicesAndAGatherInItsEpilogueOnSimAtFourShapes) {
  const plan::Profile profile = {{{"x", {1, 1, 64}, {3, 40, 64}, {3, 40, 64}},
                                  {"cos", {1, 16}, {40, 16}, {40, 16}},
                                  {"sin", {1, 16}, {40, 16}, {40, 16}}}};
  for (const std::string t : {"f32", "f16"}) {
    for (const std::string arch : {"sm_80", "sm_90"}) {
      auto g = compiled(rotary_graph(t), arch);
      ASSERT_EQ(fused_of_kind(*g, "gemm_epilogue"), 1) << t << " " << arch;
      EXPECT_EQ(body_ops(*g, "gemm_epilogue", "slice"), 4) << t << " " << arch;
      EXPECT_EQ(body_ops(*g, "gemm_epilogue", "neg"), 2) << t << " " << arch;
      EXPECT_EQ(body_ops(*g, "gemm_epilogue", "gather"), 1) << t << " " << arch;
      plan::Plan p;
      std::vector<std::string> names = generic_plan(*g, arch, profile, p);
      // The projection and its epilogue, then one kernel per rotary tail (concat, sin, add).
      ASSERT_EQ(names.size(), 3u) << t << " " << arch;
      EXPECT_EQ(names[0].rfind(t == "f16" ? "kiln_matmul_mma_" : "kiln_matmul_", 0), 0u) << names[0];
      if (arch != "sm_90") continue;
      const Tolerance tol = t == "f16" ? Tolerance{2.5e-3, 1e-3} : Tolerance{1e-5, 1e-4};
      // A decode step (s = 1), odd prefills (7, 17) and the largest shape.
      for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 1}, {2, 7}, {1, 17}, {3, 40}})
        expect_on_sim_equal(p, *g, {{"b", b}, {"s", s}}, tol);
    }
  }
}

// A one-index gather along a symbolic dim (the first position of s) has no
// place in a shape-generic epilogue (its bound would follow the symbols; the
// verifier already keeps slices from cutting a symbol): the fuser splits the
// group back, as any group codegen refuses, so the gather is a kernel of its
// own, and the plan still runs every shape.
TEST(ShapeGenericKernels, AGatherAlongASymbolStaysOutOfTheEpilogue) {
  const std::string text =
      "graph @m(%x: f32[b,s,16], %w: f32[16,32]) -> (f32[b,32], f32[b,s,16])"
      " symbols(b in [1, 3], s in [1, 40]) {\n"
      "  %p = matmul(%x, %w) : f32[b,s,32]\n"
      "  %zero = const i64[] dense<[0]>\n"
      "  %f = gather(%p, %zero) {axis=1} : f32[b,32]\n"
      "  %h = slice(%p) {ends=[b,s,32], starts=[0,0,16], steps=[1,1,1]} : f32[b,s,16]\n"
      "  %r = relu(%h) : f32[b,s,16]\n"
      "  return %f, %r\n"
      "}\n";
  auto g = compiled(text, "sm_90");
  int gathers = 0;
  for (const auto& n : g->nodes()) {
    if (n->op() != "gather") continue;
    ++gathers;
    EXPECT_EQ(codegen::symbolic_cut_refusal(*n), "picks along static dims only (gather axis 1 is s)");
  }
  EXPECT_EQ(gathers, 1) << "the gather along s is not a node of its own";
  plan::Plan p;
  generic_plan(*g, "sm_90", {{{"x", {1, 1, 16}, {3, 40, 16}, {3, 40, 16}}}}, p);
  for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 1}, {2, 9}})
    expect_on_sim_equal(p, *g, {{"b", b}, {"s", s}}, {1e-5, 1e-4});
}

}  // namespace
}  // namespace kiln
