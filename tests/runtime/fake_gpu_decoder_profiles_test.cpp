// A Llama-style decoder layer with its KV cache as inputs on the runtime's
// GPU path (strict fake driver, the plan's shape-generic kernels run on the
// simulator), written as exporters write it: the embedding gather, RMSNorm
// (pow, reduce_mean over the static last axis, sqrt, reciprocal), Q/K/V
// projections, positions arange(seq) + Shape(past_key)[2] (the shape value
// folded to `past`), rotary cos/sin and rotate_half slices, the causal mask
// over [seq, past + seq] from range/less_or_equal/where, the keys and values
// appended to the past, grouped-query heads (repeat_kv), softmax attention
// and the output projection with its residual. Compiled once for sm_90 in
// fp32 and fp16 with seq in [1, 8] and past in [0, 24], then run for a
// prefill (seq 8, past 0) and decode steps (seq 1 after 8, 9 and 17
// positions) from one engine and one context, each equal to the reference
// backend on the graph specialised to that step.
#include <gtest/gtest.h>

#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/gpu_executor.h"
#include "tests/runtime/fake_gpu_util.h"

namespace kiln::fakegpu {
namespace {

using FakeGpuProfiles = FakeGpu;

constexpr const char* kDecoderLayer =
    R"(graph @dec(%ids: i64[1,seq], %pk: f32[1,2,past,8], %pv: f32[1,2,past,8], %emb: f32[5,32], %nw: f32[32],
       %wq: f32[32,32], %wk: f32[32,16], %wv: f32[32,16], %wo: f32[32,32])
       -> (f32[1,seq,32], f32[1,2,past+seq,8], f32[1,2,past+seq,8]) symbols(seq in [1, 8], past in [0, 24]) {
    %e = gather(%emb, %ids) {axis=0} : f32[1,seq,32]
    %two_f = const f32[] splat<2.0>
    %sq = pow(%e, %two_f) : f32[1,seq,32]
    %ms = reduce_mean(%sq) {axes=[2], keepdims=1} : f32[1,seq,1]
    %eps = const f32[] splat<0.00001>
    %mse = add(%ms, %eps) : f32[1,seq,1]
    %rms = sqrt(%mse) : f32[1,seq,1]
    %one_f = const f32[] splat<1.0>
    %inv = div(%one_f, %rms) : f32[1,seq,1]
    %xn = mul(%e, %inv) : f32[1,seq,32]
    %h = mul(%xn, %nw) : f32[1,seq,32]
    %q = matmul(%h, %wq) : f32[1,seq,32]
    %k = matmul(%h, %wk) : f32[1,seq,16]
    %v = matmul(%h, %wv) : f32[1,seq,16]
    %qr = reshape(%q) {shape=[1,seq,4,8]} : f32[1,seq,4,8]
    %qt = transpose(%qr) {perm=[0,2,1,3]} : f32[1,4,seq,8]
    %kr = reshape(%k) {shape=[1,seq,2,8]} : f32[1,seq,2,8]
    %kt = transpose(%kr) {perm=[0,2,1,3]} : f32[1,2,seq,8]
    %vr = reshape(%v) {shape=[1,seq,2,8]} : f32[1,seq,2,8]
    %vt = transpose(%vr) {perm=[0,2,1,3]} : f32[1,2,seq,8]
    %zero = const i64[] splat<0>
    %one = const i64[] splat<1>
    %n = const i64[] splat<seq>
    %r = range(%zero, %n, %one) : i64[seq]
    %pshape = const i64[4] dense<[1, 2, past, 8]>
    %two = const i64[] splat<2>
    %past = gather(%pshape, %two) {axis=0} : i64[]
    %pos = add(%r, %past) : i64[seq]
    %pos2 = reshape(%pos) {shape=[seq,1]} : i64[seq,1]
    %posf = cast(%pos2) {to="f32"} : f32[seq,1]
    %invf = const f32[4] dense<[1.0, 0.1, 0.01, 0.001]>
    %ang = mul(%posf, %invf) : f32[seq,4]
    %ang2 = concat(%ang, %ang) {axis=1} : f32[seq,8]
    %cos = cos(%ang2) : f32[seq,8]
    %sin = sin(%ang2) : f32[seq,8]
    %q1 = slice(%qt) {ends=[1,4,seq,4], starts=[0,0,0,0], steps=[1,1,1,1]} : f32[1,4,seq,4]
    %q2 = slice(%qt) {ends=[1,4,seq,8], starts=[0,0,0,4], steps=[1,1,1,1]} : f32[1,4,seq,4]
    %nq2 = neg(%q2) : f32[1,4,seq,4]
    %rq = concat(%nq2, %q1) {axis=3} : f32[1,4,seq,8]
    %qc = mul(%qt, %cos) : f32[1,4,seq,8]
    %qs = mul(%rq, %sin) : f32[1,4,seq,8]
    %qrot = add(%qc, %qs) : f32[1,4,seq,8]
    %k1 = slice(%kt) {ends=[1,2,seq,4], starts=[0,0,0,0], steps=[1,1,1,1]} : f32[1,2,seq,4]
    %k2 = slice(%kt) {ends=[1,2,seq,8], starts=[0,0,0,4], steps=[1,1,1,1]} : f32[1,2,seq,4]
    %nk2 = neg(%k2) : f32[1,2,seq,4]
    %rk = concat(%nk2, %k1) {axis=3} : f32[1,2,seq,8]
    %kc = mul(%kt, %cos) : f32[1,2,seq,8]
    %ks = mul(%rk, %sin) : f32[1,2,seq,8]
    %krot = add(%kc, %ks) : f32[1,2,seq,8]
    %present_k = concat(%pk, %krot) {axis=2} : f32[1,2,past+seq,8]
    %present_v = concat(%pv, %vt) {axis=2} : f32[1,2,past+seq,8]
    %k5 = reshape(%present_k) {shape=[1,2,1,past+seq,8]} : f32[1,2,1,past+seq,8]
    %ke = expand(%k5) {shape=[1,2,2,past+seq,8]} : f32[1,2,2,past+seq,8]
    %kk = reshape(%ke) {shape=[1,4,past+seq,8]} : f32[1,4,past+seq,8]
    %v5 = reshape(%present_v) {shape=[1,2,1,past+seq,8]} : f32[1,2,1,past+seq,8]
    %ve = expand(%v5) {shape=[1,2,2,past+seq,8]} : f32[1,2,2,past+seq,8]
    %vv = reshape(%ve) {shape=[1,4,past+seq,8]} : f32[1,4,past+seq,8]
    %tot = const i64[] splat<past+seq>
    %kpos = range(%zero, %tot, %one) : i64[past+seq]
    %kpos2 = reshape(%kpos) {shape=[1,past+seq]} : i64[1,past+seq]
    %allowed = less_or_equal(%kpos2, %pos2) : bool[seq,past+seq]
    %zf = const f32[] splat<0.0>
    %ninf = const f32[] splat<-1000000000.0>
    %mask = where(%allowed, %zf, %ninf) : f32[seq,past+seq]
    %kT = transpose(%kk) {perm=[0,1,3,2]} : f32[1,4,8,past+seq]
    %s = matmul(%qrot, %kT) : f32[1,4,seq,past+seq]
    %scale = const f32[] splat<0.35355339>
    %ss = mul(%s, %scale) : f32[1,4,seq,past+seq]
    %sm = add(%ss, %mask) : f32[1,4,seq,past+seq]
    %p = softmax(%sm) {axis=-1} : f32[1,4,seq,past+seq]
    %c = matmul(%p, %vv) : f32[1,4,seq,8]
    %ct = transpose(%c) {perm=[0,2,1,3]} : f32[1,seq,4,8]
    %cm = reshape(%ct) {shape=[1,seq,32]} : f32[1,seq,32]
    %o = matmul(%cm, %wo) : f32[1,seq,32]
    %y = add(%o, %e) : f32[1,seq,32]
    return %y, %present_k, %present_v
  })";

TEST_F(FakeGpuProfiles, DecoderLayerPrefillAndDecodeStepsRunFromOnePlanInFp32AndFp16) {
  for (const std::string prec : {"fp32", "fp16"}) {
    std::unique_ptr<Graph> g = parse_graph(kDecoderLayer);
    CompileOptions co;
    co.pass.target = "sm_90";
    co.pass.precision = prec;
    co.symbolic = true;
    compile_graph(*g, co);
    PlanBuildOptions o{"sm_90", prec, {}};
    o.profiles = {plan::Profile{{{"ids", {1, 1}, {1, 8}, {1, 8}},
                                 {"pk", {1, 2, 0, 8}, {1, 2, 24, 8}, {1, 2, 24, 8}},
                                 {"pv", {1, 2, 0, 8}, {1, 2, 24, 8}, {1, 2, 24, 8}}}}};
    const plan::Plan p = build_plan(*g, o);
    ASSERT_TRUE(p.meta.gpu_kernels) << prec << ": " << p.meta.no_gpu_reason;
    int ranges = 0, fused_ranges = 0;
    for (const plan::GenericLaunch& gl : p.generic_launches)
      ranges += p.kernels[p.steps[gl.step].kernel].name.rfind("kiln_misc_range_", 0) == 0;
    for (const auto& n : g->nodes())
      if (n->op() == "fused")
        for (const auto& bn : n->body()->nodes()) fused_ranges += bn->op() == "range";
    EXPECT_EQ(ranges, 0) << prec << ": a range launched on its own";
    // range(0, seq) (the positions) is computed in each kernel reading it
    // (rematerialize-symbolic): twice in each rotary kernel (its cos and sin
    // products) and once in the mask's, with range(0, past + seq).
    EXPECT_EQ(fused_ranges, 6) << prec << ": range(0, seq) and range(0, past + seq) in the kernels reading them";
    // No kernel of their own for the positions and cos/sin (14 and 20 launches before).
    EXPECT_EQ(p.steps.size(), prec == "fp32" ? 12u : 18u) << prec;
    std::vector<uint8_t> bytes = plan_bytes(p);
    auto e = rt::Engine::load(bytes.data(), bytes.size(), "decoder.plan", rt::Backend::Gpu);
    rt::Context ctx(e);
    const rt::GpuContext* gpu = ctx.gpu_context();
    ASSERT_NE(gpu, nullptr);
    const Tolerance tol = prec == "fp16" ? Tolerance{2.5e-3, 1e-3} : Tolerance{1e-5, 1e-4};
    size_t shapes = 0;
    for (auto [seq, past] : {std::pair<int64_t, int64_t>{8, 0}, {1, 8}, {1, 9}, {1, 17}}) {
      std::unique_ptr<Graph> at = specialize_graph(*g, {{"seq", seq}, {"past", past}}, op_registry());
      const std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(past * 10 + seq));
      for (const Value* v : at->inputs()) ctx.bind_input(v->name(), feed.at(v->name()).raw(), v->type(), false);
      std::vector<Tensor> outs;
      for (const Value* v : at->outputs()) outs.emplace_back(v->type());
      const char* names[] = {"y", "present_k", "present_v"};
      for (size_t i = 0; i < outs.size(); ++i) {
        EXPECT_EQ(ctx.output_shape(names[i]), outs[i].shape()) << prec << " seq " << seq << " past " << past;
        ctx.bind_output(names[i], outs[i].raw(), outs[i].type(), false);
      }
      ctx.run();
      ++shapes;
      EXPECT_EQ(gpu->graph_cache_stats().captures, shapes) << "one CUDA Graph per shape";
      std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
      for (size_t i = 0; i < outs.size(); ++i)
        EXPECT_EQ(compare_tensors(outs[i], want[i], tol), "")
            << prec << " seq " << seq << " past " << past << " output " << names[i];
    }
  }
}

}  // namespace
}  // namespace kiln::fakegpu
