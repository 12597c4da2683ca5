// The graphs and plans the fake-GPU tests run (plans(): compiled once, before
// the fake driver is loaded).
#pragma once
#include "tests/runtime/fake_gpu_driver.h"
#include "tests/unit/pointwise_reduction_plan.h"

namespace kiln::fakegpu {

// The plan round-trip tests' graph (tests/unit/pointwise_reduction_plan.h).
inline constexpr const char* kGraph = testing::kPointwiseReductionGraph;

inline std::unique_ptr<Graph> compiled_graph() {
  auto g = parse_graph(kGraph);
  CompileOptions o;
  o.pass.target = "sm_90";
  compile_graph(*g, o);
  return g;
}

// ONNX node tests whose every node has an emitter: conv, GEMM, pooling.
inline const char* const kOnnxModels[] = {"test_basic_conv_with_padding", "test_matmul_2d", "test_gemm_default_no_bias",
                                          "test_maxpool_2d_default"};

inline std::unique_ptr<Graph> compiled_onnx(const std::string& name) {
  auto r = import_onnx_file("/usr/share/libonnx-testdata/data/node/" + name + "/model.onnx");
  CompileOptions o;
  o.pass.target = "sm_90";
  compile_graph(*r.graph, o);
  return std::move(r.graph);
}

// Node tests across the emitter families (the launch-limit ctest,
// tests/runtime/plan_launch_limits.py, checks every conformance plan's
// launches; these run on the strict H100 the fake driver is by default):
// reductions, normalizations, softmax, data movement, pooling, conv, GEMM,
// scans, top-k, RNNs, tfidf_vectorizer (its n-gram table an extra tensor).
inline const char* const kLaunchFitModels[] = {"test_softmax_large_number",
                                               "test_logsoftmax_axis_1",
                                               "test_reduce_sum_keepdims_random",
                                               "test_reduce_mean_keepdims_random",
                                               "test_layer_normalization_4d_axis1",
                                               "test_instancenorm_example",
                                               "test_batchnorm_example",
                                               "test_lrn",
                                               "test_concat_3d_axis_1",
                                               "test_transpose_all_permutations_0",
                                               "test_gather_0",
                                               "test_split_equal_parts_1d",
                                               "test_where_example",
                                               "test_pow",
                                               "test_averagepool_2d_default",
                                               "test_globalaveragepool",
                                               "test_conv_with_strides_padding",
                                               "test_convtranspose",
                                               "test_einsum_batch_matmul",
                                               "test_argmax_default_axis_example",
                                               "test_top_k",
                                               "test_cumsum_1d",
                                               "test_lstm_defaults",
                                               "test_gru_defaults",
                                               "test_tfidfvectorizer_tf_batch_uniandbigrams_skip5"};

// The issue's case: a softmax over 32768 f64 values, 1024-thread blocks
// (without __launch_bounds__ 1024 x 95 registers: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES).
inline constexpr const char* kWideSoftmax = R"(graph @m(%x: f64[1,32768]) -> (f64[1,32768]) {
    %y = softmax(%x) {axis=-1} : f64[1,32768]
    return %y
  })";

// A conformance test's model imported with its first data set's inputs (as
// `kiln conformance` does: shape inputs known), compiled for sm_90; `feed`
// gets those inputs (in range for gathers, top-k and the like).
inline std::unique_ptr<Graph> compiled_case(const std::string& name, std::map<std::string, Tensor>* feed = nullptr) {
  auto r = import_conformance_case("/usr/share/libonnx-testdata/data/node/" + name, "test_data_set_0", feed);
  CompileOptions o;
  o.pass.target = "sm_90";
  compile_graph(*r.graph, o);
  return std::move(r.graph);
}

// LinearAttention without its optional past_state but with decay after it
// (as onnx 1.23's test_linear_attention_gated): the plan's explicit "none"
// argument, a null pointer.
inline constexpr const char* kAbsentOperandCase = "absent_past_state";
inline constexpr const char* kAbsentOperand =
    R"(graph @la(%q: f32[2,4,32], %k: f32[2,4,32], %v: f32[2,4,32], %g: f32[2,4,32]) -> (f32[2,4,32], f32[2,4,8,8]) {
    %o, %st = linear_attention(%q, %k, %v, _, %g) {update_rule="gated", q_num_heads=4, kv_num_heads=4, scale=0.3} : f32[2,4,32], f32[2,4,8,8]
    return %o, %st
  })";

inline std::unique_ptr<Graph> compiled_text(const char* text) {
  auto g = parse_graph(text);
  CompileOptions o;
  o.pass.target = "sm_90";
  compile_graph(*g, o);
  return g;
}

// A concatenation of 5,000 one-element inputs: 5,001 buffers, more than the
// parameter space holds (codegen/param_table.h), compiled for sm_90 with
// only the memory plan (the default pipeline has nothing to do on it).
inline std::unique_ptr<Graph> concat_5000() {
  std::string params, args;
  for (int i = 0; i < 5000; ++i) {
    params += (i ? ", %x" : "%x") + std::to_string(i) + ": f32[1]";
    args += (i ? ", %x" : "%x") + std::to_string(i);
  }
  auto g = parse_graph("graph @m(" + params + ") -> (f32[5000]) {\n  %cat = concat(" + args +
                       ") {axis=0} : f32[5000]\n  return %cat\n}");
  CompileOptions o;
  o.pass.target = "sm_90";
  o.passes = {"plan-memory"};
  compile_graph(*g, o);
  return g;
}

// cfgraphs::table_in_loop(): a loop whose body's concat takes a pointer
// table, compiled for sm_90 with only the memory plan (as concat_5000).
inline std::unique_ptr<Graph> table_in_loop() {
  auto g = parse_graph(cfgraphs::table_in_loop());
  CompileOptions o;
  o.pass.target = "sm_90";
  o.passes = {"plan-memory"};
  compile_graph(*g, o);
  return g;
}

// sm_90 with a quarter of the H100's register file (16,384 per block): the
// wide softmax's 1024-thread blocks (64 registers each under their bound) do
// not fit it, so the plan builder emits the node again with fewer threads
// (codegen::block_threads). FakeGpu.AMisfitLaunchIsBuiltAgainWithFewerThreads
// runs it on a fake device with that register file.
inline constexpr int kSmallRegisterFile = 16384;
inline plan::Plan small_register_file_plan(const Graph& g, const std::string& source = "") {
  codegen::ArchLimits small = codegen::arch_limits("sm_90");
  small.registers_per_block = kSmallRegisterFile;
  codegen::ScopedArchLimits scoped(small);
  return build_plan(g, {"sm_90", "fp32", {}, true, {}, source});
}

// A split-K GEMM whose partial sums the last block of each tile sums in the
// GEMM kernel (codegen/emitters/gemm_conv/emit_gemm.h, "folded"): 2 tiles x
// 32 k-tiles in 11 splits, with a bias and relu epilogue.
inline constexpr const char* kFoldedSplitK =
    R"(graph @m(%a: f16[40,1024], %b: f16[1024,72], %c: f16[72]) -> (f16[40,72]) {
    %m = matmul(%a, %b) : f16[40,72]
    %s = add(%m, %c) : f16[40,72]
    %y = relu(%s) : f16[40,72]
    return %y
  })";
inline plan::Plan folded_split_k_plan() {
  codegen::ScopedGemmTileChooser fold([](const codegen::GemmProblem& p) {
    codegen::GemmTileConfig c = codegen::default_gemm_tile(p);
    c.split_k = 11;
    c.fold_split = true;
    return std::optional<codegen::GemmTileConfig>(c);
  });
  return build_plan(*compiled_text(kFoldedSplitK), {"sm_90", "fp32", {}});
}

// A GEMM + bias + relu on a wgmma tile (fake_gpu_wgmma_test.cpp): the
// sm_90a target (every kernel's CUBIN and PTX for sm_90a) with the tile forced
// to 128 x 64 wgmma (the model alone would keep this small GEMM on mma.sync).
inline constexpr const char* kWgmmaGemm =
    R"(graph @m(%a: f16[136,200], %b: f16[200,72], %c: f16[72]) -> (f16[136,72]) {
    %m = matmul(%a, %b) : f16[136,72]
    %s = add(%m, %c) : f16[136,72]
    %y = relu(%s) : f16[136,72]
    return %y
  })";
inline plan::Plan wgmma_plan() {
  codegen::ScopedGemmTileChooser wgmma([](const codegen::GemmProblem&) {
    codegen::GemmTileConfig c;
    c.wgmma = true;
    c.bm = 128;
    c.bn = 64;
    c.bk = 64;
    c.warps_m = 8;
    c.warps_n = 1;
    c.stages = 3;
    return std::optional<codegen::GemmTileConfig>(c);
  });
  return build_plan(*compiled_text(kWgmmaGemm), {"sm_90a", "fp32", {}});
}

// A decode-step attention (one query against 900 keys, 4 heads): the
// tensor-core kernel splits the keys over blocks (split-KV) and combines them
// in its last block per query tile, with counters in the zeroed region.
inline constexpr const char* kSplitKvAttention =
    R"(graph @m(%q: f16[1,4,1,64], %k: f16[1,4,900,64], %v: f16[1,4,900,64]) -> (f16[1,4,1,64]) {
    %o = attention(%q, %k, %v) {scale=0.125} : f16[1,4,1,64]
    return %o
  })";

// Graphs with control flow (tests/runtime/control_flow_graphs.h) by plan name.
inline const std::map<std::string, const char*>& control_flow_graphs() {
  static const std::map<std::string, const char*> gs = {{"cf_if_in_loop", cfgraphs::kIfInLoop},
                                                        {"cf_if_pass_through", cfgraphs::kIfPassThrough},
                                                        {"cf_while", cfgraphs::kWhile},
                                                        {"cf_loop_scan", cfgraphs::kLoopScan},
                                                        {"cf_scan", cfgraphs::kScan}};
  return gs;
}

// The IR text of a graph with symbols through the passes for sm_90, as a
// plan with shape profiles compiles it.
inline std::unique_ptr<Graph> symbolic_sm90_graph(const char* text) {
  auto g = parse_graph(text);
  CompileOptions o;
  o.pass.target = "sm_90";
  o.symbolic = true;
  compile_graph(*g, o);
  return g;
}

// A pointwise chain and a softmax over the static last axis with a symbolic
// batch (fake_gpu_profiles_test.cpp), compiled once into a plan with one
// shape profile, batch in [1, 16].
inline constexpr const char* kProfilePointwise =
    R"(graph @m(%x: f32[batch,3,24], %b: f32[24]) -> (f32[batch,3,24]) symbols(batch in [1, 16]) {
    %h = add(%x, %b) : f32[batch,3,24]
    %t = tanh(%h) : f32[batch,3,24]
    %s = softmax(%t) {axis=-1} : f32[batch,3,24]
    %r = mul(%s, %x) : f32[batch,3,24]
    return %r
  })";

inline std::unique_ptr<Graph> profile_pointwise_graph() { return symbolic_sm90_graph(kProfilePointwise); }

// A dynamic-batch MLP: gemm with a bias, relu, gemm with trans_b, matmul,
// softmax; batch in [1, 64].
inline constexpr const char* kProfileMlp =
    R"(graph @m(%x: f32[batch,16], %w1: f32[16,24], %b1: f32[24], %w2: f32[8,24], %w3: f32[8,5]) -> (f32[batch,5])
    symbols(batch in [1, 64]) {
    %h = gemm(%x, %w1, %b1) : f32[batch,24]
    %r = relu(%h) : f32[batch,24]
    %g = gemm(%r, %w2) {trans_b=1} : f32[batch,8]
    %m = matmul(%g, %w3) : f32[batch,5]
    %y = softmax(%m) {axis=-1} : f32[batch,5]
    return %y
  })";

inline std::unique_ptr<Graph> profile_mlp_graph() { return symbolic_sm90_graph(kProfileMlp); }

// The issue's dynamic-batch CNN (tests/cli/make_dynamic_models.py): conv with
// a bias, batch normalization (folded into it), relu, max pool, a strided
// conv, relu, global average pool, flatten, gemm, softmax; batch in [1, 8].
inline constexpr const char* kProfileCnn =
    R"(graph @m(%x: f32[batch,3,16,16], %w1: f32[8,3,3,3], %b1: f32[8], %w2: f32[16,8,3,3], %b2: f32[16],
    %fw: f32[10,16], %fb: f32[10]) -> (f32[batch,10]) symbols(batch in [1, 8]) {
    %s = const f32[8] dense<[1.1, 0.9, 1.3, 0.7, 1.0, 1.2, 0.8, 0.95]>
    %t = const f32[8] dense<[0.1, -0.2, 0.05, 0.0, 0.3, -0.1, 0.2, -0.05]>
    %mu = const f32[8] dense<[0.01, -0.02, 0.03, 0.0, -0.01, 0.02, 0.05, -0.03]>
    %var = const f32[8] dense<[0.9, 1.1, 0.8, 1.3, 1.0, 0.7, 1.2, 0.95]>
    %c1 = conv(%x, %w1, %b1) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]} : f32[batch,8,16,16]
    %bn = batch_normalization(%c1, %s, %t, %mu, %var) {epsilon=1e-05} : f32[batch,8,16,16]
    %r1 = relu(%bn) : f32[batch,8,16,16]
    %p1 = max_pool(%r1) {dilations=[1,1], kernel_shape=[2,2], pads=[0,0,0,0], strides=[2,2]} : f32[batch,8,8,8]
    %c2 = conv(%p1, %w2, %b2) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[2,2]} : f32[batch,16,4,4]
    %r2 = relu(%c2) : f32[batch,16,4,4]
    %g = global_average_pool(%r2) : f32[batch,16,1,1]
    %f = reshape(%g) {shape=[batch,16]} : f32[batch,16]
    %l = gemm(%f, %fw, %fb) {trans_b=1} : f32[batch,10]
    %y = softmax(%l) {axis=-1} : f32[batch,10]
    return %y
  })";

inline std::unique_ptr<Graph> profile_cnn_graph() { return symbolic_sm90_graph(kProfileCnn); }

inline plan::Plan profile_pointwise_plan() {
  PlanBuildOptions o{"sm_90", "fp32", {}};
  plan::InputProfile x{"x", {1, 3, 24}, {8, 3, 24}, {16, 3, 24}};
  o.profiles = {plan::Profile{{x}}};
  return build_plan(*profile_pointwise_graph(), o);
}

// Plans by arch or "portable" (kGraph), by ONNX test name (for sm_90), "wide_softmax",
// "wide_softmax_small_registers",
// "folded_split_k", "sm_90a_wgmma", "split_kv_attention", "concat_5000", kAbsentOperandCase, the control-flow
// graphs' names, "cf_table_in_loop", and the plans with shape profiles "profile_pointwise", "profile_mlp",
// "profile_cnn" and "profile_cnn_opt3" (launch variants for batch 3).
inline const std::map<std::string, plan::Plan>& plans() {
  static const std::map<std::string, plan::Plan> ps = [] {
    auto g = compiled_graph();
    std::map<std::string, plan::Plan> r;
    for (std::string arch : {"sm_80", "sm_90", "portable"}) r[arch] = build_plan(*g, {arch, "fp32", {}});
    for (const char* m : kOnnxModels) r[m] = build_plan(*compiled_onnx(m), {"sm_90", "fp32", {}});
    for (const char* m : kLaunchFitModels) r[m] = build_plan(*compiled_case(m), {"sm_90", "fp32", {}});
    r["wide_softmax"] = build_plan(*compiled_text(kWideSoftmax), {"sm_90", "fp32", {}});
    r["wide_softmax_small_registers"] = small_register_file_plan(*compiled_text(kWideSoftmax));
    r["folded_split_k"] = folded_split_k_plan();
    r["sm_90a_wgmma"] = wgmma_plan();
    r["split_kv_attention"] = build_plan(*compiled_text(kSplitKvAttention), {"sm_90", "fp32", {}});
    // Control flow left in the plan (fake_gpu_control_flow_test.cpp).
    for (const auto& [name, text] : control_flow_graphs())
      r[name] = build_plan(*compiled_text(text), {"sm_90", "fp32", {}});
    r["concat_5000"] = build_plan(*concat_5000(), {"sm_90", "fp32", {}});
    r["cf_table_in_loop"] = build_plan(*table_in_loop(), {"sm_90", "fp32", {}});
    r[kAbsentOperandCase] = build_plan(*compiled_text(kAbsentOperand), {"sm_90", "fp32", {}});
    r["profile_pointwise"] = profile_pointwise_plan();
    {
      PlanBuildOptions o{"sm_90", "fp32", {}};
      o.profiles = {plan::Profile{{{"x", {1, 16}, {64, 16}, {64, 16}}}}};
      r["profile_mlp"] = build_plan(*profile_mlp_graph(), o);
      o.profiles = {plan::Profile{{{"x", {1, 3, 16, 16}, {8, 3, 16, 16}, {8, 3, 16, 16}}}}};
      r["profile_cnn"] = build_plan(*profile_cnn_graph(), o);
      // Every node also specialised for the opt shape batch=3 (launch variants).
      o.profiles = {plan::Profile{{{"x", {1, 3, 16, 16}, {3, 3, 16, 16}, {8, 3, 16, 16}}}}};
      o.opt_variants = "all";
      r["profile_cnn_opt3"] = build_plan(*profile_cnn_graph(), o);
    }
    return r;
  }();
  return ps;
}

}  // namespace kiln::fakegpu
