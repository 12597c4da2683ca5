// The position arithmetic of a Llama-style KV decoder as shape-generic GPU
// kernels (docs/dynamic_shapes.md "Shape-generic GPU kernels", "KV-cache
// decoding"): range with a symbolic length (range(0, seq), range(0, past +
// seq), each computed in the kernel reading it) and a symbolic start
// (range(past, past + seq), a kernel of its own); the rotary angles
// of positions offset by `past`, a shape value fold-constants leaves as a
// scalar constant that the fused pointwise kernel computes from `ks`; the
// causal mask over [seq, past + seq]. Compiled once for sm_80 and sm_90
// (NVRTC), run from the plan on the simulator at a prefill and two decode
// steps, each equal to the reference backend on the specialised graph; and
// RMSNorm over [1, seq, d] rows as one fused reduction kernel; a causal mask
// computed from ranges read as the attention's causal=1.
#include <gtest/gtest.h>

#include "backends/compare.h"
#include "backends/plan_sim.h"
#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/plan_format.h"
#include "tests/unit/pass_test_util.h"

namespace kiln {
namespace {

// What the importer leaves of `position_ids = arange(seq) + past_key.shape[2]`,
// the rotary angles and the causal mask: `past` is Shape(past_key)[2], a
// gather fold-constants turns into a scalar holding `past`.
const char* kPositions =
    "graph @m(%x: f32[1,seq,8], %pk: f32[1,2,past,4]) -> (f32[1,seq,8], f32[1,seq,8], f32[seq,past+seq], i64[seq])"
    " symbols(seq in [1, 40], past in [0, 64]) {\n"
    "  %zero = const i64[] splat<0>\n"
    "  %one = const i64[] splat<1>\n"
    "  %n = const i64[] splat<seq>\n"
    "  %r = range(%zero, %n, %one) : i64[seq]\n"
    "  %shape = const i64[4] dense<[1, 2, past, 4]>\n"
    "  %two = const i64[] splat<2>\n"
    "  %past = gather(%shape, %two) {axis=0} : i64[]\n"
    "  %pos = add(%r, %past) : i64[seq]\n"
    "  %pos2 = reshape(%pos) {shape=[seq,1]} : i64[seq,1]\n"
    "  %posf = cast(%pos2) {to=\"f32\"} : f32[seq,1]\n"
    "  %invf = const f32[8] dense<[1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125]>\n"
    "  %ang = mul(%posf, %invf) : f32[seq,8]\n"
    "  %cos = cos(%ang) : f32[seq,8]\n"
    "  %sin = sin(%ang) : f32[seq,8]\n"
    "  %xc = mul(%x, %cos) : f32[1,seq,8]\n"
    "  %xs = mul(%x, %sin) : f32[1,seq,8]\n"
    "  %tot = const i64[] splat<past+seq>\n"
    "  %kr = range(%zero, %tot, %one) : i64[past+seq]\n"
    "  %kr2 = reshape(%kr) {shape=[1,past+seq]} : i64[1,past+seq]\n"
    "  %le = less_or_equal(%kr2, %pos2) : bool[seq,past+seq]\n"
    "  %z = const f32[] splat<0.0>\n"
    "  %ninf = const f32[] splat<-1000000000.0>\n"
    "  %mask = where(%le, %z, %ninf) : f32[seq,past+seq]\n"
    "  %pstart = const i64[] splat<past>\n"
    "  %ps = range(%pstart, %tot, %one) : i64[seq]\n"
    "  return %xc, %xs, %mask, %ps\n"
    "}\n";

plan::Profile positions_profile() {
  return {{{"x", {1, 1, 8}, {1, 40, 8}, {1, 40, 8}}, {"pk", {1, 2, 0, 4}, {1, 2, 64, 4}, {1, 2, 64, 4}}}};
}

std::unique_ptr<Graph> compiled(const std::string& text, const std::string& arch) {
  auto g = parse_graph(text, "m.kir");
  CompileOptions o;
  o.pass.target = arch;
  o.symbolic = true;
  compile_graph(*g, o);
  return g;
}

plan::Plan gpu_plan(const Graph& g, const std::string& arch) {
  PlanBuildOptions po{arch, "fp32", {}};
  po.profiles = {positions_profile()};
  po.source_name = "m.onnx";
  return build_plan(g, po);
}

TEST(ShapeGenericKernels, RangeRotaryAndCausalMaskAtAnOffsetOnSimAtThreeShapes) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(kPositions, arch);
    // The shape value folded: no kernel gathers from the shape.
    for (const auto& n : g->nodes()) EXPECT_NE(n->op(), "gather") << n->describe();
    plan::Plan p = gpu_plan(*g, arch);
    ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
    int ranges = 0;
    for (const plan::Kernel& k : p.kernels) EXPECT_FALSE(k.cubin.empty()) << k.name << " has no CUBIN for " << arch;
    for (const plan::GenericLaunch& gl : p.generic_launches) {
      const plan::Kernel& k = p.kernels[p.steps[gl.step].kernel];
      EXPECT_NE(k.source.find("kiln_syms ks"), std::string::npos) << k.name;
      ranges += k.name.rfind("kiln_misc_range_", 0) == 0;
    }
    // range(0, seq) and range(0, past + seq) are computed in the kernels
    // reading them (no launch of their own): the kernels of the two rotary
    // products each compute the positions and their cos or sin
    // (rematerialize-symbolic), the mask's kernel its positions and keys;
    // range(past, past + seq) is a result, so a kernel of its own.
    EXPECT_EQ(ranges, 1) << arch;
    int fused_ranges = 0;
    for (const auto& n : g->nodes())
      if (n->op() == "fused")
        for (const auto& bn : n->body()->nodes()) fused_ranges += bn->op() == "range";
    EXPECT_EQ(fused_ranges, 4) << arch;
    // Every launch is shape-generic (each size or value follows the symbols).
    EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << arch;
    if (arch != "sm_90") continue;
    // A prefill of 8, decode steps after 8 and 63 positions (the grid of
    // past+seq = 64 keys), and a prefill of 40 after 64 (the largest).
    for (auto [seq, past] : {std::pair<int64_t, int64_t>{8, 0}, {1, 8}, {1, 63}, {40, 64}}) {
      std::unique_ptr<Graph> spec = specialize_graph(*g, {{"seq", seq}, {"past", past}}, op_registry());
      const std::map<std::string, Tensor> feed = testing::random_inputs(*spec, static_cast<uint64_t>(seq + past));
      std::vector<Tensor> want = ReferenceExecutor(*spec).run(feed);
      std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].shape(), want[i].shape()) << "seq " << seq << " past " << past;
        EXPECT_EQ(compare_tensors(got[i], want[i], {1e-6, 1e-5}), "")
            << "seq " << seq << " past " << past << " output " << i;
      }
      // range(past, past + seq) starts at past.
      EXPECT_EQ(got[3].data<int64_t>()[0], past);
    }
  }
}

// A decoder's attention whose causal mask is computed from ranges (queries at
// past..past+seq-1, keys at 0..past+seq-1), as Llama-style exports write
// it: recognize-patterns proves it causal at every shape, so the attention
// takes causal=1 and neither the mask nor its ranges get a kernel. The plan on
// the simulator equals the reference backend on the graph as written (the
// mask materialised) at prefills, a chunk and decode steps.
const char* kMaskedAttention =
    "graph @m(%q: f32[1,2,seq,16], %pk: f32[1,2,past,16], %kn: f32[1,2,seq,16], %v: f32[1,2,past+seq,16])"
    " -> (f32[1,2,seq,16]) symbols(seq in [1, 8], past in [0, 32]) {\n"
    "  %zero_i = const i64[] splat<0>\n"
    "  %one_i = const i64[] splat<1>\n"
    "  %n_q = const i64[] splat<seq>\n"
    "  %n_k = const i64[] splat<past+seq>\n"
    "  %past_v = const i64[] splat<past>\n"
    "  %zero = const f32[] splat<0.0>\n"
    "  %low = const f32[] splat<-3.4028235e+38>\n"
    "  %scale = const f32[] splat<0.25>\n"
    "  %r = range(%zero_i, %n_q, %one_i) : i64[seq]\n"
    "  %pos = add(%r, %past_v) : i64[seq]\n"
    "  %rows = reshape(%pos) {shape=[seq,1]} : i64[seq,1]\n"
    "  %rk = range(%zero_i, %n_k, %one_i) : i64[past+seq]\n"
    "  %cols = reshape(%rk) {shape=[1,past+seq]} : i64[1,past+seq]\n"
    "  %allowed = less_or_equal(%cols, %rows) : bool[seq,past+seq]\n"
    "  %mask = where(%allowed, %zero, %low) : f32[seq,past+seq]\n"
    "  %k = concat(%pk, %kn) {axis=2} : f32[1,2,past+seq,16]\n"
    "  %kt = transpose(%k) {perm=[0,1,3,2]} : f32[1,2,16,past+seq]\n"
    "  %s = matmul(%q, %kt) : f32[1,2,seq,past+seq]\n"
    "  %ss = mul(%s, %scale) : f32[1,2,seq,past+seq]\n"
    "  %sm = add(%ss, %mask) : f32[1,2,seq,past+seq]\n"
    "  %p = softmax(%sm) {axis=3} : f32[1,2,seq,past+seq]\n"
    "  %o = matmul(%p, %v) : f32[1,2,seq,16]\n"
    "  return %o\n"
    "}\n";

TEST(ShapeGenericKernels, CausalMaskFromRangesBecomesCausalAttentionOnSimAtSeveralPasts) {
  auto g = compiled(kMaskedAttention, "sm_90");
  int attentions = 0;
  auto check = [&](const Node& n, const std::string& where) {
    EXPECT_NE(n.op(), "range") << where << n.describe();
    if (n.op() != "attention") return;
    ++attentions;
    EXPECT_EQ(n.attrs().get_int("causal", 0), 1) << n.describe();
    EXPECT_EQ(n.num_inputs(), 3) << "the attention reads no mask: " << n.describe();
  };
  for (const auto& n : g->nodes()) {
    check(*n, "");
    if (n->op() == "fused")
      for (const auto& bn : n->body()->nodes()) check(*bn, "in " + n->describe() + ": ");
  }
  EXPECT_EQ(attentions, 1);
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {plan::Profile{{{"q", {1, 2, 1, 16}, {1, 2, 8, 16}, {1, 2, 8, 16}},
                                {"pk", {1, 2, 0, 16}, {1, 2, 32, 16}, {1, 2, 32, 16}},
                                {"kn", {1, 2, 1, 16}, {1, 2, 8, 16}, {1, 2, 8, 16}},
                                {"v", {1, 2, 1, 16}, {1, 2, 40, 16}, {1, 2, 40, 16}}}}};
  po.source_name = "m.onnx";
  plan::Plan p = build_plan(*g, po);
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  EXPECT_EQ(p.generic_launches.size(), p.steps.size());
  auto written = parse_graph(kMaskedAttention, "m.kir");  // the mask as the model computes it
  for (auto [seq, past] : {std::pair<int64_t, int64_t>{8, 0}, {5, 0}, {3, 9}, {1, 8}, {1, 17}, {8, 32}}) {
    std::unique_ptr<Graph> spec = specialize_graph(*written, {{"seq", seq}, {"past", past}}, op_registry());
    const std::map<std::string, Tensor> feed = testing::random_inputs(*spec, static_cast<uint64_t>(seq * 100 + past));
    std::vector<Tensor> want = ReferenceExecutor(*spec).run(feed);
    std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(compare_tensors(got[0], want[0], {1e-5, 1e-4}), "") << "seq " << seq << " past " << past;
  }
}

// RMSNorm as exporters write it over a decoder's [1, seq, d] rows: the
// square, reduce_mean over the static last axis and the epilogue (eps, sqrt,
// reciprocal) fuse into one shape-generic reduction kernel although the
// symbol is not the outermost dim (its operands are all of the rows' shape or
// static scalars), then the scale by the weight.
const char* kRmsNorm =
    "graph @m(%x: f32[1,seq,64], %w: f32[64]) -> (f32[1,seq,64]) symbols(seq in [1, 40]) {\n"
    "  %two = const f32[] splat<2.0>\n"
    "  %sq = pow(%x, %two) : f32[1,seq,64]\n"
    "  %ms = reduce_mean(%sq) {axes=[2], keepdims=1} : f32[1,seq,1]\n"
    "  %eps = const f32[] splat<0.00001>\n"
    "  %mse = add(%ms, %eps) : f32[1,seq,1]\n"
    "  %r = sqrt(%mse) : f32[1,seq,1]\n"
    "  %one = const f32[] splat<1.0>\n"
    "  %inv = div(%one, %r) : f32[1,seq,1]\n"
    "  %xn = mul(%x, %inv) : f32[1,seq,64]\n"
    "  %y = mul(%xn, %w) : f32[1,seq,64]\n"
    "  return %y\n"
    "}\n";

TEST(ShapeGenericKernels, RmsNormOverSymbolicSeqRowsFusesIntoOneReductionOnSimAtThreeShapes) {
  for (const std::string arch : {"sm_80", "sm_90"}) {
    auto g = compiled(kRmsNorm, arch);
    int fused_reductions = 0;
    for (const auto& n : g->nodes())
      fused_reductions += n->op() == "fused" && n->attrs().get_string("kind", "") == "reduction";
    EXPECT_EQ(fused_reductions, 1) << arch << ": square, mean and epilogue in one reduction kernel";
    PlanBuildOptions po{arch, "fp32", {}};
    po.profiles = {plan::Profile{{{"x", {1, 1, 64}, {1, 40, 64}, {1, 40, 64}}}}};
    po.source_name = "m.onnx";
    plan::Plan p = build_plan(*g, po);
    ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
    for (const plan::Kernel& k : p.kernels) EXPECT_FALSE(k.cubin.empty()) << k.name << " has no CUBIN for " << arch;
    EXPECT_EQ(p.generic_launches.size(), p.steps.size()) << arch;
    EXPECT_EQ(p.steps.size(), 2u) << arch << ": the reduction and the scale";
    if (arch != "sm_90") continue;
    for (int64_t seq : {1, 17, 40}) {
      std::unique_ptr<Graph> spec = specialize_graph(*g, {{"seq", seq}}, op_registry());
      const std::map<std::string, Tensor> feed = testing::random_inputs(*spec, static_cast<uint64_t>(seq));
      std::vector<Tensor> want = ReferenceExecutor(*spec).run(feed);
      std::vector<Tensor> got = run_plan_on_sim(p, *g, feed);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(compare_tensors(got[0], want[0], {1e-5, 1e-4}), "") << "seq " << seq;
    }
  }
}

// A constant of several symbolic shape values has no bytes a kernel could
// read (process-local handles): a GPU plan refuses the node reading it,
// naming the constant, rather than reading zeros.
TEST(ShapeGenericKernels, ConstantOfSymbolicShapeValuesReadByAKernelIsRefusedByName) {
  const char* text =
      "graph @m(%x: i64[2], %pk: f32[1,past,seq]) -> (i64[2]) symbols(seq in [1, 8], past in [0, 8]) {\n"
      "  %sv = const i64[2] dense<[past, seq]>\n"
      "  %y = add(%x, %sv) : i64[2]\n"
      "  return %y\n"
      "}\n";
  auto g = compiled(text, "sm_90");
  PlanBuildOptions po{"sm_90", "fp32", {}};
  po.profiles = {plan::Profile{{{"pk", {1, 0, 1}, {1, 8, 8}, {1, 8, 8}}}}};
  po.source_name = "m.onnx";
  try {
    build_plan(*g, po);
    FAIL() << "a kernel reading [past, seq] was built";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("producing %y"), std::string::npos) << what;
    EXPECT_NE(what.find("reads constant %sv, which holds symbolic shape values [past, seq]"), std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace kiln
