// The compute emitters (codegen/emitters/gemm_conv/emit_gemm.h, emit_conv.h, emit_epilogue.h)
// against the reference: small graphs of matmul / gemm / conv /
// conv_transpose, alone and fused with their epilogues (the fuse pass makes
// the gemm_epilogue / conv_epilogue nodes), with odd sizes, size-1 dims,
// broadcast batch dims, transposes, groups, dilations, pads and several
// tiles per result. Every kernel compiles with NVRTC for sm_80 and sm_90
// (no spills); the graphs run on the simulator through the sim backend's
// emitter table and must match the reference backend (ints exactly, f32/f64
// within 1e-5 + 1e-4 rel, f16/bf16 within their default tolerances). The
// real models' GEMM/conv nodes are in codegen_compute_models_test.cpp.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <tuple>
#include <unordered_map>

#include "backends/reference/executor.h"
#include "codegen/emitter_table.h"
#include "codegen/emitters/gemm_conv/emit_epilogue.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_executor.h"
#include "backends/sim/sim_module.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "passes/pass.h"
#include "backends/compare.h"
#include "compiler/compile.h"
#include "codegen_compute_util.h"
#include "conformance/conformance.h"

namespace kiln {
namespace {

using kiln::testing::tolerance_for;

struct Case {
  std::string name;
  std::string text;
  bool fuse = false;      // run the fuse pass first
  std::string want_kind;  // with fuse: the kind of the one fused node expected
  std::unique_ptr<Graph> g;
  std::unordered_map<const Node*, std::vector<codegen::NodeKernel>> kernels;
};

// Seeded data: normal floats (a few exact zeros), small ints.
std::map<std::string, Tensor> inputs_for(const Graph& g, uint64_t seed) {
  std::map<std::string, Tensor> feed;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (Value* in : g.inputs()) {
    Tensor t(in->type());
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (is_float(t.dtype())) t.set_double(i, rng() % 16 == 0 ? 0.0 : normal(rng));
      else t.set_int(i, static_cast<int64_t>(rng() % 11) - 5);
    }
    feed[in->name()] = std::move(t);
  }
  return feed;
}

// Runs `g` with the kernels already emitted for it (entries from one SimCompiler).
std::vector<Tensor> run_on_sim(const Case& c, const std::map<std::string, codegen::SimEntry>& entries,
                               const std::map<std::string, Tensor>& feed) {
  const Graph& g = *c.g;
  std::unordered_map<const Value*, Tensor> env;
  for (Value* in : g.inputs()) env[in] = feed.at(in->name());
  auto lookup = [&](const Value* v) -> const Tensor& { return v->is_constant() ? v->data() : env.at(v); };
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    if (n.op() == "reshape" || n.op() == "identity") {
      env[n.output(0)] = lookup(n.input(0)).reshaped(n.output(0)->shape());
      continue;
    }
    std::vector<Tensor> outs;
    for (int r = 0; r < n.num_outputs(); ++r) outs.emplace_back(n.output(r)->type());
    // A split-K node's kernels share its scratch (the partial sums), bound after the buffers, as the sim
    // backend does (backends/sim/sim_executor.cpp).
    const Tensor workspace(TensorType(DType::F32, {codegen::node_workspace_bytes(c.kernels.at(&n)) / 4}));
    for (const codegen::NodeKernel& k : c.kernels.at(&n)) {
      std::vector<void*> bufs;
      std::vector<long long> counts;
      auto add = [&](const Tensor& t) {
        bufs.push_back(const_cast<void*>(t.raw()));
        counts.push_back(t.numel());
      };
      if (k.results.empty()) {
        for (const Tensor& t : outs) add(t);
      } else {
        for (int r : k.results) add(outs.at(r));
      }
      for (Value* v : n.inputs()) {
        if (v) add(lookup(v));
        else {
          bufs.push_back(nullptr);
          counts.push_back(0);
        }
      }
      for (const Tensor& t : k.extra) add(t);
      if (k.workspace_f32 > 0) add(workspace);
      // A folded split-K kernel's tile counters (zero at the start), bound
      // after the scratch, as the sim backend binds them: without them the
      // simulator entry read past `bufs` (sim_launch now refuses that).
      const Tensor counters(TensorType(DType::U32, {std::max<int64_t>(k.tile_counters, 0)}));
      if (k.tile_counters > 0) add(counters);
      if (k.grid.count() == 0) continue;
      sim::LaunchConfig cfg;
      cfg.kernel = k.name;
      cfg.grid = dim3(k.grid.x, k.grid.y, k.grid.z);
      cfg.block = dim3(k.block.x, k.block.y, k.block.z);
      cfg.shared_bytes = k.shared_bytes;
      codegen::sim_launch(entries.at(k.name), cfg, bufs, counts);
    }
    for (int r = 0; r < n.num_outputs(); ++r) env[n.output(r)] = std::move(outs[r]);
  }
  std::vector<Tensor> res;
  for (Value* v : g.outputs()) res.push_back(lookup(v));
  return res;
}

std::vector<Case> all_cases() {
  std::vector<Case> cs;
  auto add = [&](std::string name, std::string text, bool fuse = false, std::string kind = "") {
    Case c;
    c.name = std::move(name);
    c.text = std::move(text);
    c.fuse = fuse;
    c.want_kind = std::move(kind);
    cs.push_back(std::move(c));
  };
  auto mm = [&](const std::string& dt, const std::string& a, const std::string& b, const std::string& y) {
    add(fmt::format("matmul {} {} x {}", dt, a, b),
        fmt::format("graph @m(%a: {0}[{1}], %b: {0}[{2}]) -> ({0}[{3}]) {{\n  %y = matmul(%a, %b) : {0}[{3}]\n  "
                    "return %y\n}}",
                    dt, a, b, y));
  };
  mm("f32", "37,53", "53,29", "37,29");
  mm("f32", "2,1,5,19", "3,19,7", "2,3,5,7");
  mm("f32", "19", "3,19,7", "3,7");
  mm("f32", "2,5,19", "19", "2,5");
  mm("f32", "1,19", "19,1", "1,1");
  mm("f32", "3,0", "0,4", "3,4");  // K = 0: zeros
  mm("f32", "8,600", "600,9", "8,9");
  mm("f32", "130,70", "70,150", "130,150");
  mm("f16", "70,40", "40,130", "70,130");
  mm("bf16", "3,33,20", "20,17", "3,33,17");
  mm("f64", "33,17", "17,65", "33,65");
  mm("i32", "9,21", "21,11", "9,11");
  mm("i64", "2,9,21", "2,21,11", "2,9,11");
  mm("u8", "9,21", "21,11", "9,11");
  auto gemm = [&](const std::string& dt, const std::string& attrs, const std::string& a, const std::string& b,
                  const std::string& c, const std::string& y) {
    const bool has_c = !c.empty() && c != "-";
    add(fmt::format("gemm {} {{{}}} {} x {} + {}", dt, attrs, a, b, c),
        fmt::format("graph @m(%a: {0}[{1}], %b: {0}[{2}]{3}) -> ({0}[{4}]) {{\n  %y = gemm(%a, %b{5}) {{{6}}} : "
                    "{0}[{4}]\n  return %y\n}}",
                    dt, a, b, has_c ? fmt::format(", %c: {}[{}]", dt, c) : "", y, has_c ? ", %c" : "", attrs));
  };
  gemm("f32", "alpha=0.5, beta=2.0, trans_a=1, trans_b=1", "23,31", "45,23", "1,45", "31,45");
  gemm("f32", "trans_b=1", "31,23", "45,23", "31,1", "31,45");
  gemm("f32", "alpha=1.0, beta=1.0", "31,23", "23,45", "", "31,45");
  gemm("f32", "beta=0.0", "5,7", "7,3", "5,3", "5,3");
  gemm("f32", "trans_a=1", "23,31", "23,45", "-", "31,45");
  gemm("f16", "trans_b=1", "20,64", "70,64", "70", "20,70");
  gemm("bf16", "alpha=2.0", "20,64", "64,70", "", "20,70");
  gemm("f64", "alpha=0.25, beta=-1.0", "17,9", "9,33", "17,33", "17,33");
  gemm("i32", "trans_b=1", "9,21", "11,21", "11", "9,11");
  gemm("i64", "alpha=2.0, beta=3.0", "9,21", "21,11", "9,11", "9,11");

  auto conv = [&](const std::string& dt, const std::string& x, const std::string& w, bool bias,
                  const std::string& attrs_in, const std::string& y, const std::string& op = "conv",
                  const std::string& ytag = "") {
    // strides, pads and dilations are required attributes: the defaults where a case leaves them out.
    std::string attrs = attrs_in;
    const int nd = static_cast<int>(std::count(x.begin(), x.end(), ',')) - 1;
    auto ones = [&](int k, const char* v) {
      std::string r;
      for (int i = 0; i < k; ++i) r += fmt::format("{}{}", i ? "," : "", v);
      return r;
    };
    for (auto [name, k, v] : {std::tuple{"strides", nd, "1"}, {"pads", 2 * nd, "0"}, {"dilations", nd, "1"}})
      if (attrs.find(std::string(name) + "=") == std::string::npos)
        attrs += fmt::format("{}{}=[{}]", attrs.empty() ? "" : ", ", name, ones(k, v));
    // The bias has one value per output channel: dim 1 of y, or its last dim in nhwc.
    std::vector<std::string> ydims;
    for (size_t p = 0, q; p <= y.size(); p = q + 1) {
      q = y.find(',', p);
      if (q == std::string::npos) q = y.size();
      ydims.push_back(y.substr(p, q - p));
    }
    std::string bshape = ytag.empty() ? ydims.at(1) : ydims.back();
    add(fmt::format("{} {} x{} w{} {{{}}}", op, dt, x, w, attrs),
        fmt::format("graph @m(%x: {0}[{1}], %w: {0}[{2}]{3}) -> ({0}[{4}]{7}) {{\n  %y = {6}(%x, %w{5}) {{{8}}} : "
                    "{0}[{4}]{7}\n  return %y\n}}",
                    dt, x, w, bias ? fmt::format(", %b: {}[{}]", dt, "@B@") : "", y, bias ? ", %b" : "", op, ytag,
                    attrs));
    if (bias) {
      // The bias has one value per output channel.
      std::string& t = cs.back().text;
      t.replace(t.find("@B@"), 3, bshape);
    }
  };
  conv("f32", "2,5,9,11", "7,5,3,3", true, "pads=[1,1,1,1], strides=[2,2]", "2,7,5,6");
  conv("f32", "1,4,10,9", "6,2,3,2", false, "dilations=[2,1], group=2, pads=[0,1,2,0]", "1,6,8,9");
  conv("f32", "1,6,10,10", "6,1,3,3", true, "group=6, pads=[1,1,1,1]", "1,6,10,10");
  conv("f32", "1,3,12,12", "6,1,3,3", false, "group=3, strides=[2,2]", "1,6,5,5");
  conv("f32", "2,3,17", "4,3,5", true, "pads=[2,2], strides=[3]", "2,4,6");
  conv("f32", "1,2,5,6,7", "3,2,2,3,2", true, "pads=[0,1,0,1,0,1], strides=[1,2,2]", "1,3,5,3,4");
  conv("f32", "1,64,14,14", "70,64,1,1", true, "", "1,70,14,14");
  conv("f16", "1,8,9,9", "16,8,3,3", true, "pads=[1,1,1,1]", "1,16,9,9");
  conv("bf16", "1,8,9,9", "16,8,3,3", false, "strides=[2,2]", "1,16,4,4");
  conv("f64", "1,3,7,7", "5,3,3,3", true, "", "1,5,5,5");
  conv("f32", "2,9,11,5", "7,3,3,5", true, "layout=\"nhwc\", pads=[1,1,1,1], strides=[2,2]", "2,5,6,7", "conv",
       "{nhwc}");
  conv("f32", "1,10,10,6", "6,3,3,1", false, "group=6, layout=\"nhwc\", pads=[1,1,1,1]", "1,10,10,6", "conv", "{nhwc}");
  conv("f16", "1,7,7,8", "12,1,1,4", true, "group=2, layout=\"nhwc\"", "1,7,7,12", "conv", "{nhwc}");
  conv("f32", "1,3,5,6", "3,4,3,3", true, "output_padding=[1,1], pads=[1,1,1,1], strides=[2,2]", "1,4,10,12",
       "conv_transpose");
  conv("f32", "2,4,5", "4,3,4", false, "dilations=[2], group=2, pads=[1,0]", "2,6,10", "conv_transpose");
  conv("f16", "1,2,3,3,2", "2,2,2,2,2", false, "strides=[2,1,2]", "1,2,6,4,4", "conv_transpose");

  // Quantized ops (int32 accumulation, exact) and einsum.
  add("matmul_integer u8, zero points per row and column",
      R"(graph @m(%a: u8[9,21], %b: u8[21,11], %az: u8[9], %bz: u8[11]) -> (i32[9,11]) {
    %y = matmul_integer(%a, %b, %az, %bz) : i32[9,11]
    return %y
  })");
  add("matmul_integer i8 batched, scalar zero points",
      R"(graph @m(%a: i8[2,5,16], %b: i8[16,70], %az: i8[], %bz: i8[]) -> (i32[2,5,70]) {
    %y = matmul_integer(%a, %b, %az, %bz) : i32[2,5,70]
    return %y
  })");
  add("qlinear_matmul u8",
      R"(graph @m(%a: u8[7,20], %az: u8[], %b: u8[20,9], %bz: u8[], %yz: u8[]) -> (u8[7,9]) {
    %as = const f32[] splat<0.02>
    %bs = const f32[] splat<0.03>
    %ys = const f32[] splat<0.01>
    %y = qlinear_matmul(%a, %as, %az, %b, %bs, %bz, %ys, %yz) : u8[7,9]
    return %y
  })");
  add("conv_integer u8, per-channel w zero point",
      R"(graph @m(%x: u8[1,3,7,7], %w: u8[4,3,3,3], %xz: u8[], %wz: u8[4]) -> (i32[1,4,7,7]) {
    %y = conv_integer(%x, %w, %xz, %wz) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]} : i32[1,4,7,7]
    return %y
  })");
  add("qlinear_conv u8/i8, groups, bias",
      R"(graph @m(%x: u8[1,4,6,6], %xz: u8[], %w: i8[6,2,3,3], %ws: f32[6], %wz: i8[6], %yz: u8[], %b: i32[6]) -> (u8[1,6,4,4]) {
    %xs = const f32[] splat<0.05>
    %ys = const f32[] splat<0.2>
    %y = qlinear_conv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz, %b) {dilations=[1,1], group=2, pads=[0,0,0,0], strides=[1,1]} : u8[1,6,4,4]
    return %y
  })");
  auto einsum = [&](const std::string& dt, const std::string& eq, const std::vector<std::string>& ins,
                    const std::string& y) {
    std::string params, args;
    for (size_t i = 0; i < ins.size(); ++i) {
      params += fmt::format("{}%i{}: {}[{}]", i ? ", " : "", i, dt, ins[i]);
      args += fmt::format("{}%i{}", i ? ", " : "", i);
    }
    add(fmt::format("einsum {} {}", dt, eq),
        fmt::format("graph @m({}) -> ({}[{}]) {{\n  %y = einsum({}) {{equation=\"{}\"}} : {}[{}]\n  return %y\n}}",
                    params, dt, y, args, eq, dt, y));
  };
  einsum("f32", "ij,jk->ik", {"5,7", "7,3"}, "5,3");
  einsum("f32", "bij,bjk->bik", {"2,5,7", "2,7,3"}, "2,5,3");
  einsum("f32", "ii->i", {"6,6"}, "6");
  einsum("f32", "i,i", {"300", "300"}, "");
  einsum("f16", "...ij->...ji", {"2,3,4"}, "2,4,3");
  einsum("i64", "ij->j", {"5,4"}, "4");
  einsum("f64", "ij,ij,j->i", {"3,4", "3,4", "4"}, "3");

  // Epilogues (fused by the fuse pass).
  add("gemm_epilogue: bias, split, head split, scale",
      R"(graph @m(%x: f32[1,20,24], %w: f32[24,48], %b: f32[48]) -> (f32[1,2,20,12], f32[1,20,24]) {
    %c = const f32[] splat<0.125>
    %m = matmul(%x, %w) : f32[1,20,48]
    %a = add(%m, %b) : f32[1,20,48]
    %q, %k = split(%a) {axis=2, split=[24,24]} : f32[1,20,24], f32[1,20,24]
    %r = reshape(%q) {shape=[1,20,2,12]} : f32[1,20,2,12]
    %t = transpose(%r) {perm=[0,2,1,3]} : f32[1,2,20,12]
    %s = mul(%t, %c) : f32[1,2,20,12]
    %kk = sigmoid(%k) : f32[1,20,24]
    return %s, %kk
  })",
      true, "gemm_epilogue");
  add("gemm_epilogue: residual and an extra result",
      R"(graph @m(%x: f32[37,40], %w: f32[40,33], %res: f32[37,33]) -> (f32[37,33], f32[37,33]) {
    %m = matmul(%x, %w) : f32[37,33]
    %r = add(%m, %res) : f32[37,33]
    %y = relu(%r) : f32[37,33]
    return %y, %m
  })",
      true, "gemm_epilogue");
  add("gemm_epilogue: slice and gather of one index",
      R"(graph @m(%x: f32[3,10,16], %w: f32[16,30]) -> (f32[3,10,4], f32[10,30]) {
    %i = const i64[] splat<-2>
    %m = matmul(%x, %w) : f32[3,10,30]
    %s = slice(%m) {ends=[3,10,29], starts=[0,0,1], steps=[1,1,7]} : f32[3,10,4]
    %e = exp(%s) : f32[3,10,4]
    %g = gather(%m, %i) {axis=0} : f32[10,30]
    return %e, %g
  })",
      true, "gemm_epilogue");
  add("gemm_epilogue: negative slice step",
      R"(graph @m(%x: f32[6,16], %w: f32[16,20]) -> (f32[6,7]) {
    %m = matmul(%x, %w) : f32[6,20]
    %s = slice(%m) {ends=[6,-1], starts=[0,19], steps=[1,-3]} : f32[6,7]
    %n = neg(%s) : f32[6,7]
    return %n
  })",
      true, "gemm_epilogue");
  add("gemm_epilogue (BERT/GPT-2 FFN shape): bias, gelu, cast to f16",
      R"(graph @m(%x: f32[128,768], %w: f32[768,3072], %b: f32[3072]) -> (f16[128,3072]) {
    %m = matmul(%x, %w) : f32[128,3072]
    %a = add(%m, %b) : f32[128,3072]
    %g = gelu(%a) : f32[128,3072]
    %h = cast(%g) {to="f16"} : f16[128,3072]
    return %h
  })",
      true, "gemm_epilogue");
  add("gemm_epilogue (GPT-2 qkv shape): f16, bias, split into three",
      R"(graph @m(%x: f16[128,768], %w: f16[768,2304], %b: f16[2304]) -> (f16[128,768], f16[128,768], f16[128,768]) {
    %m = matmul(%x, %w) : f16[128,2304]
    %a = add(%m, %b) : f16[128,2304]
    %q, %k, %v = split(%a) {axis=1, split=[768,768,768]} : f16[128,768], f16[128,768], f16[128,768]
    return %q, %k, %v
  })",
      true, "gemm_epilogue");
  add("conv_epilogue: residual add and relu",
      R"(graph @m(%x: f32[1,8,9,9], %w: f32[16,8,3,3], %b: f32[16], %r: f32[1,16,9,9]) -> (f32[1,16,9,9]) {
    %c = conv(%x, %w, %b) {dilations=[1,1], pads=[1,1,1,1], strides=[1,1]} : f32[1,16,9,9]
    %a = add(%c, %r) : f32[1,16,9,9]
    %y = relu(%a) : f32[1,16,9,9]
    return %y
  })",
      true, "conv_epilogue");
  add("conv_epilogue: nhwc, f16, clip",
      R"(graph @m(%x: f16[1,9,9,8], %w: f16[16,3,3,8], %b: f16[16]) -> (f16[1,5,5,16]{nhwc}) {
    %c = conv(%x, %w, %b) {dilations=[1,1], layout="nhwc", pads=[1,1,1,1], strides=[2,2]} : f16[1,5,5,16]{nhwc}
    %lo = const f16[] splat<0.0>
    %hi = const f16[] splat<6.0>
    %y = clip(%c, %lo, %hi) : f16[1,5,5,16]{nhwc}
    return %y
  })",
      true, "conv_epilogue");
  return cs;
}

TEST(CodegenCompute, KernelsCompileAndMatchReferenceOnSim) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  std::vector<Case> cases = all_cases();
  std::vector<codegen::KernelSource> sources;
  std::vector<std::string> source_case;
  std::map<std::string, bool> seen;
  for (Case& c : cases) {
    SCOPED_TRACE(c.name);
    c.g = parse_graph(c.text, "test.kir");
    ASSERT_NO_THROW(verify_graph(*c.g, op_registry())) << c.text;
    if (c.fuse) {
      PassStats st;
      create_pass("fuse")->run(*c.g, PassOptions{}, st);
      int fused = 0;
      for (const auto& n : c.g->nodes())
        if (n->op() == "fused") {
          ++fused;
          EXPECT_EQ(n->attrs().get_string("kind", ""), c.want_kind) << print_graph(*c.g);
        }
      EXPECT_EQ(fused, 1) << print_graph(*c.g);
    }
    for (const auto& np : c.g->nodes()) {
      const Node& n = *np;
      if (n.op() == "reshape" || n.op() == "identity") continue;
      const codegen::KernelEmitter* e = codegen::emitter_for(n);
      ASSERT_NE(e, nullptr) << n.describe();
      std::vector<codegen::NodeKernel> ks;
      ASSERT_NO_THROW(ks = e->emit(n)) << n.describe();
      for (const codegen::NodeKernel& k : ks)
        if (!seen[k.name]) {
          seen[k.name] = true;
          sources.push_back({k.name, k.source});
          source_case.push_back(c.name);
        }
      c.kernels[&n] = std::move(ks);
    }
  }
  auto t1 = clock::now();
  codegen::KernelCache cache;
  int max_regs = 0, spills = 0, nvrtc_runs = 0;
  std::string max_regs_kernel;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks;
    ASSERT_NO_THROW(ks = compiler.compile(sources));
    nvrtc_runs += compiler.nvrtc_compilations();
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_FALSE(ks[i].cubin.empty()) << source_case[i];
      if (ks[i].registers > max_regs) {
        max_regs = ks[i].registers;
        max_regs_kernel = source_case[i] + " " + arch;
      }
      if (ks[i].spill_bytes > 0) {
        ++spills;
        fmt::print("  spills: {} on {}: {} bytes\n", source_case[i], arch, ks[i].spill_bytes);
      }
    }
  }
  auto t2 = clock::now();
  codegen::SimCompiler sim;
  std::map<std::string, codegen::SimEntry> entries = sim.compile(sources);
  auto t3 = clock::now();
  int passed = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    SCOPED_TRACE(c.name);
    auto feed = inputs_for(*c.g, ci + 1);
    std::vector<Tensor> want = ReferenceExecutor(*c.g).run(feed);
    std::vector<Tensor> got;
    ASSERT_NO_THROW(got = run_on_sim(c, entries, feed));
    ASSERT_EQ(got.size(), want.size());
    bool ok = true;
    for (size_t i = 0; i < got.size(); ++i) {
      std::string diff = compare_tensors(got[i], want[i], tolerance_for(want[i].dtype()));
      EXPECT_EQ(diff, "") << "result " << i;
      ok = ok && diff.empty();
    }
    passed += ok;
  }
  auto t4 = clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  fmt::print(
      "codegen compute: {} cases, {} kernels, all compiled for sm_80/sm_90 ({} NVRTC runs), max registers {} ({}), "
      "{} with spills; {} of {} match the reference on the simulator\n",
      cases.size(), sources.size(), nvrtc_runs, max_regs, max_regs_kernel, spills, passed, cases.size());
  fmt::print("  times: emit {:.2f}s, nvrtc {:.2f}s, sim build {:.2f}s, run {:.2f}s\n", secs(t0, t1), secs(t1, t2),
             secs(t2, t3), secs(t3, t4));
  EXPECT_EQ(spills, 0);
  EXPECT_EQ(passed, static_cast<int>(cases.size()));
}

// An epilogue op outside the rules is refused with its name.
TEST(CodegenCompute, EpilogueRefusesWhatItCannotStore) {
  auto g = parse_graph(R"(graph @m(%x: f32[4,8], %w: f32[8,6]) -> (f32[4,6]) {
    %y = fused(%x, %w) {kind="gemm_epilogue"} : f32[4,6] {
      graph @f(%a: f32[4,8], %b: f32[8,6]) -> (f32[4,6]) {
        %m = matmul(%a, %b) : f32[4,6]
        %s = softmax(%m) {axis=1} : f32[4,6]
        return %s
      }
    }
    return %y
  })",
                       "t.kir");
  const Node& n = *g->nodes().front();
  try {
    codegen::Epilogue::from_fused(n, op_registry(), {"matmul", "gemm"});
    ADD_FAILURE() << "no error";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("softmax cannot be an epilogue op"), std::string::npos) << e.what();
  }
  // Two parts of a split hold different elements: adding them is no one-to-one epilogue.
  auto g2 = parse_graph(R"(graph @m(%x: f32[4,8], %w: f32[8,6]) -> (f32[4,3]) {
    %y = fused(%x, %w) {kind="gemm_epilogue"} : f32[4,3] {
      graph @f(%a: f32[4,8], %b: f32[8,6]) -> (f32[4,3]) {
        %m = matmul(%a, %b) : f32[4,6]
        %p, %q = split(%m) {axis=1, split=[3,3]} : f32[4,3], f32[4,3]
        %s = add(%p, %q) : f32[4,3]
        return %s
      }
    }
    return %y
  })",
                        "t.kir");
  codegen::Epilogue ep = codegen::Epilogue::from_fused(*g2->nodes().front(), op_registry(), {"matmul"});
  try {
    ep.code("acc", "i", "");
    ADD_FAILURE() << "no error";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("different elements"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
