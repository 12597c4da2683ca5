// Tensor cores in matmul / gemm / conv / conv_transpose (codegen/emitters/gemm_conv/emit_gemm_mma.cpp):
// for f16, bf16 and tf32-marked f32 operands every such node -- bare or as the
// anchor of a fused epilogue -- must compile to mma.sync (checked in the PTX, so
// a silent fall back to the SIMT core fails), with cp.async where the operands
// give 16-byte chunks, for sm_80 and sm_90 without spills, and must match the
// reference backend on the simulator within the precision's tolerance
// (docs/precision.md: f16 / bf16 results at their dtype's, tf32 at FP16's).
// Shapes: 2-D, batched and broadcast-batch matmul; gemm with transposes,
// alpha, beta and a bias; conv NCHW and NHWC with strides, pads, dilations,
// groups and odd channel counts (the guarded element-by-element loads);
// conv_transpose; and bias + relu + residual + cast epilogues.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <unordered_map>

#include "backends/reference/executor.h"
#include "codegen/emitters/gemm_conv/gemm_tile_cost.h"
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
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

namespace kiln {
namespace {

enum class Prec { F16, BF16, Tf32 };

struct Case {
  std::string name;
  std::string text;
  Prec prec = Prec::F16;
  bool fuse = false;
  bool want_cp_async = false;  // every operand arrives in 16-byte chunks
  std::string want_in_source;  // e.g. the kernel comment naming an operand's load path
  int want_split_k = 1;        // the GEMM's K loop split among this many blocks
  bool want_fold = false;      // ... summed by the last block per tile, not by a reduction kernel
  std::unique_ptr<Graph> g;
  std::unordered_map<const Node*, std::vector<codegen::NodeKernel>> kernels;
  std::vector<size_t> anchor_sources;  // indices into the source list of the matmul/gemm/conv kernels
  int reductions = 0;                  // split-K reduction kernels (one per unfolded split)
};

const char* dt_of(Prec p) { return p == Prec::F16 ? "f16" : p == Prec::BF16 ? "bf16" : "f32"; }
// The attribute list with tf32=1 added for tf32 cases.
std::string with_tf32(Prec p, const std::string& attrs) {
  if (p != Prec::Tf32) return attrs;
  return attrs.empty() ? "tf32=1" : attrs + ", tf32=1";
}

std::vector<Case> all_cases() {
  std::vector<Case> cs;
  for (Prec p : {Prec::F16, Prec::BF16, Prec::Tf32}) {
    const std::string dt = dt_of(p);
    const std::string pn = p == Prec::Tf32 ? "tf32" : dt;
    // `extra`: a shape whose loaders the other precisions already exercise -- f16 only (test time).
    bool extra = false;
    auto add = [&](std::string name, std::string text, bool fuse = false, bool dense = false) {
      if (extra && p != Prec::F16) return;
      Case c;
      c.name = pn + " " + name;
      c.text = std::move(text);
      c.prec = p;
      c.fuse = fuse;
      c.want_cp_async = dense;
      cs.push_back(std::move(c));
    };
    auto attrs_of = [&](const std::string& a) {
      const std::string t = with_tf32(p, a);
      return t.empty() ? std::string() : " {" + t + "}";
    };
    auto mm = [&](const std::string& a, const std::string& b, const std::string& y, bool dense) {
      add(fmt::format("matmul {} x {}", a, b),
          fmt::format("graph @m(%a: {0}[{1}], %b: {0}[{2}]) -> ({0}[{3}]) {{\n  %y = matmul(%a, %b){4} : {0}[{3}]\n  "
                      "return %y\n}}",
                      dt, a, b, y, attrs_of("")),
          false, dense);
    };
    mm("64,48", "48,96", "64,96", true);            // dense: cp.async for A and B ([K, N] rows, ldmatrix.trans)
    mm("33,27", "27,65", "33,65", false);           // K, N odd: both element by element, partial tiles
    mm("3,33,24", "3,24,40", "3,33,40", true);      // batched
    mm("2,1,17,32", "3,32,24", "2,3,17,24", true);  // broadcast batch dims
    extra = true;
    mm("1,136", "136,200", "1,200", true);   // one row (a GEMV), several k-tiles
    mm("70,40", "40,130", "70,130", false);  // N % 8 != 0: B element by element
    // 2 tiles x 5 k-tiles of 64 (f16, only here): unsplit by the model, a 6-stage ring of 64-deep
    // k-tiles whose last one is partial (K = 264)
    mm("40,264", "264,72", "40,72", true);
    extra = false;
    // Split-K summed by a reduction kernel (which the calibrated model puts cheaper than a folded tail
    // here; codegen_split_k_fold_test.cpp emits the folded form of these): 11 splits of 3 k-tiles, the
    // last of 2 (tf32: 13 of 5 k-tiles of 16), 16-byte partial stores and loads; 16x32 tiles, a 6-stage ring.
    mm("40,1024", "1024,72", "40,72", true);
    cs.back().want_split_k = p == Prec::Tf32 ? 13 : 7;
    // Split-K with a partial last k-tile (K = 2000), odd N (scalar partial stores and sums), 2 batches;
    // f16/bf16: 63 k-tiles of 32 in 13 splits of 5; tf32: 125 k-tiles of 16 in 25 splits of 5.
    mm("2,24,2000", "2,2000,21", "2,24,21", true);
    cs.back().want_split_k = p == Prec::Tf32 ? 25 : 13;
    auto gemm = [&](const std::string& attrs, const std::string& a, const std::string& b, const std::string& c,
                    const std::string& y, bool dense) {
      const bool has_c = !c.empty();
      add(fmt::format("gemm {{{}}} {} x {} + {}", attrs, a, b, c),
          fmt::format("graph @m(%a: {0}[{1}], %b: {0}[{2}]{3}) -> ({0}[{4}]) {{\n  %y = gemm(%a, %b{5}){6} : "
                      "{0}[{4}]\n  return %y\n}}",
                      dt, a, b, has_c ? fmt::format(", %c: {}[{}]", dt, c) : "", y, has_c ? ", %c" : "",
                      attrs_of(attrs)),
          false, dense);
    };
    gemm("alpha=0.5, beta=2.0, trans_a=1, trans_b=1", "24,31", "45,24", "1,45", "31,45", false);
    gemm("trans_b=1", "20,64", "72,64", "72", "20,72", true);
    gemm("trans_a=1", "40,32", "40,48", "48", "32,48", true);  // A [K, M] by cp.async: ldmatrix.trans
    cs.back().want_in_source = "A cp.async [k][m], B cp.async [k][n]";
    extra = true;
    gemm("alpha=2.0", "20,64", "64,72", "", "20,72", true);
    extra = false;
    auto conv = [&](const std::string& x, const std::string& w, const std::string& bias, const std::string& attrs,
                    const std::string& y, const std::string& op, const std::string& ytag, bool dense) {
      add(fmt::format("{} x{} w{} {{{}}}", op, x, w, attrs),
          fmt::format("graph @m(%x: {0}[{1}], %w: {0}[{2}]{3}) -> ({0}[{4}]{7}) {{\n  %y = {6}(%x, %w{5}){8} : "
                      "{0}[{4}]{7}\n  return %y\n}}",
                      dt, x, w, bias.empty() ? "" : fmt::format(", %b: {}[{}]", dt, bias), y,
                      bias.empty() ? "" : ", %b", op, ytag, attrs_of(attrs)),
          false, dense);
    };
    const std::string d1 = "dilations=[1,1]", s1 = "strides=[1,1]", p0 = "pads=[0,0,0,0]";
    // NCHW: the weights (A) by cp.async when K % 8 == 0, the im2col B element by element.
    conv("2,16,9,11", "24,16,3,3", "24", d1 + ", pads=[1,1,1,1], strides=[2,2]", "2,24,5,6", "conv", "", false);
    conv("1,8,10,9", "6,4,3,2", "", "dilations=[2,1], group=2, pads=[0,1,2,0], " + s1, "1,6,8,9", "conv", "", false);
    conv("1,5,7,7", "7,5,3,3", "7", d1 + ", " + p0 + ", " + s1, "1,7,5,5", "conv", "", false);  // odd channels
    // NHWC: im2col rows by cp.async (a chunk of 8 channels lies in one tap) when Cg % 8 == 0.
    conv("2,9,11,16", "24,3,3,16", "24", d1 + ", layout=\"nhwc\", pads=[1,1,1,1], strides=[2,2]", "2,5,6,24", "conv",
         "{nhwc}", true);
    conv("1,7,7,16", "12,1,1,8", "12", d1 + ", group=2, layout=\"nhwc\", " + p0 + ", " + s1, "1,7,7,12", "conv",
         "{nhwc}", true);
    conv("1,6,6,5", "7,3,3,5", "", "dilations=[2,2], layout=\"nhwc\", pads=[2,2,2,2], " + s1, "1,6,6,7", "conv",
         "{nhwc}", false);  // odd channels: element by element
    conv("1,8,5,6", "8,4,3,3", "4", "dilations=[1,1], output_padding=[1,1], pads=[1,1,1,1], strides=[2,2]", "1,4,10,12",
         "conv_transpose", "", false);
    conv("2,6,5", "6,3,4", "", "dilations=[2], group=2, pads=[1,0], strides=[1]", "2,6,10", "conv_transpose", "",
         false);
    // Fused epilogues: bias + relu + residual + cast.
    const std::string cv = p == Prec::Tf32 ? "f16" : "f32";
    add("conv_epilogue nhwc: bias, residual, relu, cast",
        fmt::format(
            R"(graph @m(%x: {0}[1,9,9,16], %w: {0}[32,3,3,16], %b: {0}[32], %r: {0}[1,9,9,32]{{nhwc}}) -> ({1}[1,9,9,32]{{nhwc}}) {{
    %c = conv(%x, %w, %b) {{{2}}} : {0}[1,9,9,32]{{nhwc}}
    %a = add(%c, %r) : {0}[1,9,9,32]{{nhwc}}
    %y = relu(%a) : {0}[1,9,9,32]{{nhwc}}
    %z = cast(%y) {{to="{1}"}} : {1}[1,9,9,32]{{nhwc}}
    return %z
  }})",
            dt, cv, with_tf32(p, "dilations=[1,1], layout=\"nhwc\", pads=[1,1,1,1], strides=[1,1]")),
        true, true);
    // Split-K (1 tile of 16x32 x 72 k-tiles of 32 in 15 splits of 5; tf32 likewise) under a
    // conv epilogue: the reduction kernel adds the bias, the residual, relu and the cast after summing
    // the splits.
    add("split-K conv_epilogue nhwc: bias, residual, relu, cast",
        fmt::format(
            R"(graph @m(%x: {0}[1,4,4,256], %w: {0}[32,3,3,256], %b: {0}[32], %r: {0}[1,4,4,32]{{nhwc}}) -> ({1}[1,4,4,32]{{nhwc}}) {{
    %c = conv(%x, %w, %b) {{{2}}} : {0}[1,4,4,32]{{nhwc}}
    %a = add(%c, %r) : {0}[1,4,4,32]{{nhwc}}
    %y = relu(%a) : {0}[1,4,4,32]{{nhwc}}
    %z = cast(%y) {{to="{1}"}} : {1}[1,4,4,32]{{nhwc}}
    return %z
  }})",
            dt, cv, with_tf32(p, "dilations=[1,1], layout=\"nhwc\", pads=[1,1,1,1], strides=[1,1]")),
        true, true);
    cs.back().want_split_k = 15;
    add("gemm_epilogue: bias, residual, relu, cast",
        fmt::format(R"(graph @m(%x: {0}[40,64], %w: {0}[64,96], %b: {0}[96], %r: {0}[40,96]) -> ({1}[40,96]) {{
    %m = matmul(%x, %w){2} : {0}[40,96]
    %a = add(%m, %b) : {0}[40,96]
    %s = add(%a, %r) : {0}[40,96]
    %y = relu(%s) : {0}[40,96]
    %z = cast(%y) {{to="{1}"}} : {1}[40,96]
    return %z
  }})",
                    dt, cv, attrs_of("")),
        true, true);
  }
  return cs;
}

// Seeded data: uniform in [-1, 1]. For the tf32 cases rounded to 10 mantissa bits, so that the
// tf32 operands equal the reference's f32 ones and the comparison checks the kernel (fragment
// layouts, pipeline, epilogue) rather than TF32's own rounding, which grows with K past FP16's
// tolerance on sums of 100+ terms (the simulator's cvt.rna/mma rounding is tested in tests/sim).
std::map<std::string, Tensor> inputs_for(const Graph& g, uint64_t seed, bool tf32_exact = false) {
  std::map<std::string, Tensor> feed;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (Value* in : g.inputs()) {
    Tensor t(in->type());
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v = u(rng);
      if (tf32_exact) v = std::ldexp(std::nearbyint(std::ldexp(v, 10)), -10);  // |v| < 1: 10 bits after the point
      t.set_double(i, v);
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
    std::vector<Tensor> outs;
    for (int r = 0; r < n.num_outputs(); ++r) outs.emplace_back(n.output(r)->type());
    // Split-K scratch, filled with NaN: a partial sum the GEMM fails to write shows in the result.
    Tensor ws(TensorType(DType::F32, {codegen::node_workspace_bytes(c.kernels.at(&n)) / 4}));
    for (int64_t i = 0; i < ws.numel(); ++i) ws.set_double(i, std::nan(""));
    // A folded split's tile counters: zero before, and the kernel must leave them zero.
    Tensor tickets(TensorType(DType::U32, {codegen::node_tile_counters(c.kernels.at(&n))}));
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
      for (Value* v : n.inputs()) add(lookup(v));
      for (const Tensor& t : k.extra) add(t);
      if (k.workspace_f32 > 0) add(ws);
      if (k.tile_counters > 0) add(tickets);
      if (k.grid.count() == 0) continue;
      sim::LaunchConfig cfg;
      cfg.kernel = k.name;
      cfg.grid = dim3(k.grid.x, k.grid.y, k.grid.z);
      cfg.block = dim3(k.block.x, k.block.y, k.block.z);
      cfg.shared_bytes = k.shared_bytes;
      codegen::sim_launch(entries.at(k.name), cfg, bufs, counts);
      for (int64_t i = 0; i < tickets.numel(); ++i)
        EXPECT_EQ(tickets.data<uint32_t>()[i], 0u) << k.name << ": tile counter " << i << " left nonzero";
    }
    for (int r = 0; r < n.num_outputs(); ++r) env[n.output(r)] = std::move(outs[r]);
  }
  std::vector<Tensor> res;
  for (Value* v : g.outputs()) res.push_back(lookup(v));
  return res;
}

// docs/precision.md: f16 / bf16 results at their dtype's tolerance; tf32 math at FP16's (an f32
// result of a tf32 run included).
Tolerance tolerance_for(Prec p, DType t) {
  if (t == DType::BF16 || p == Prec::BF16) return default_tolerance(DType::BF16);
  return default_tolerance(DType::F16);
}

bool is_anchor(const Node& n) {
  const std::string& op = n.op();
  return op == "matmul" || op == "gemm" || op == "conv" || op == "conv_transpose" ||
         (op == "fused" &&
          (n.attrs().get_string("kind", "") == "gemm_epilogue" || n.attrs().get_string("kind", "") == "conv_epilogue"));
}

TEST(CodegenTensorCore, MatmulGemmConvUseMmaAndMatchReferenceOnSim) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  std::vector<Case> cases = all_cases();
  std::vector<codegen::KernelSource> sources;
  std::vector<std::string> source_case;
  std::map<std::string, size_t> seen;
  for (Case& c : cases) {
    SCOPED_TRACE(c.name);
    c.g = parse_graph(c.text, "test.kir");
    ASSERT_NO_THROW(verify_graph(*c.g, op_registry())) << c.text;
    if (c.fuse) {
      PassStats st;
      create_pass("fuse")->run(*c.g, PassOptions{}, st);
      int fused = 0;
      for (const auto& n : c.g->nodes()) fused += n->op() == "fused";
      EXPECT_EQ(fused, 1) << print_graph(*c.g);
    }
    for (const auto& np : c.g->nodes()) {
      const Node& n = *np;
      const codegen::KernelEmitter* e = codegen::emitter_for(n);
      ASSERT_NE(e, nullptr) << n.describe();
      std::vector<codegen::NodeKernel> ks;
      ASSERT_NO_THROW(ks = e->emit(n)) << n.describe();
      for (const codegen::NodeKernel& k : ks) {
        auto [it, fresh] = seen.emplace(k.name, sources.size());
        if (fresh) {
          sources.push_back({k.name, k.source});
          source_case.push_back(c.name);
        }
        const bool reduction = k.source.find("split-K reduction") != std::string::npos;
        if (is_anchor(n) && !reduction) c.anchor_sources.push_back(it->second);
        if (is_anchor(n)) {
          const size_t tile = k.source.find("; tile ");
          EXPECT_EQ(k.workspace_f32 > 0, c.want_split_k > 1)
              << k.name << (tile == std::string::npos ? "" : k.source.substr(tile, k.source.find(',', tile) - tile));
          if (reduction) ++c.reductions;
        }
      }
      c.kernels[&n] = std::move(ks);
    }
    EXPECT_EQ(c.anchor_sources.size(), 1u) << print_graph(*c.g);
    EXPECT_EQ(c.reductions, c.want_split_k > 1 && !c.want_fold ? 1 : 0);
    if (c.want_split_k > 1 && !c.anchor_sources.empty()) {
      const std::string& src = sources[c.anchor_sources[0]].source;
      const size_t tile = src.find("; tile ");
      EXPECT_NE(src.find(fmt::format(" split{}{},", c.want_split_k, c.want_fold ? " fold" : "")), std::string::npos)
          << c.name << ": " << (tile == std::string::npos ? "" : src.substr(tile, src.find('\n', tile) - tile));
    }
  }
  auto t1 = clock::now();
  codegen::KernelCache cache;
  int max_regs = 0, spills = 0;
  std::string max_regs_kernel;
  std::vector<std::string> ptx80(sources.size());
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks;
    ASSERT_NO_THROW(ks = compiler.compile(sources));
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_FALSE(ks[i].cubin.empty()) << source_case[i];
      if (arch == "sm_80") ptx80[i] = ks[i].ptx;
      if (ks[i].registers > max_regs) {
        max_regs = ks[i].registers;
        max_regs_kernel = source_case[i] + " " + arch;
      }
      if (ks[i].spill_bytes > 0) {
        ++spills;
        fmt::print("  spills: {} on {}: {} bytes\n", source_case[i], arch, ks[i].spill_bytes);
        if (std::getenv("KILN_DUMP_SPILLS")) fmt::print("{}\n{}\n", ks[i].log, sources[i].source);
      }
    }
  }
  // The anchors really are on tensor cores (and cp.async where every operand is dense).
  int mma_kernels = 0, cp_async_kernels = 0;
  for (const Case& c : cases) {
    for (size_t i : c.anchor_sources) {
      const std::string want = c.prec == Prec::Tf32
                                   ? "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
                                   : fmt::format("mma.sync.aligned.m16n8k16.row.col.f32.{0}.{0}.f32", dt_of(c.prec));
      const bool mma = ptx80[i].find(want) != std::string::npos;
      const bool cp = ptx80[i].find("cp.async.cg.shared.global") != std::string::npos;
      EXPECT_TRUE(mma) << c.name << ": no " << want << " in the PTX";
      if (!c.want_in_source.empty()) {
        EXPECT_NE(sources[i].source.find(c.want_in_source), std::string::npos) << c.name << ": " << c.want_in_source;
      }
      if (c.want_cp_async) {
        EXPECT_TRUE(cp) << c.name << ": no cp.async in the PTX";
      }
      mma_kernels += mma;
      cp_async_kernels += cp;
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
    auto feed = inputs_for(*c.g, ci + 1, c.prec == Prec::Tf32);
    std::vector<Tensor> want = ReferenceExecutor(*c.g).run(feed);
    std::vector<Tensor> got;
    ASSERT_NO_THROW(got = run_on_sim(c, entries, feed));
    ASSERT_EQ(got.size(), want.size());
    bool ok = true;
    for (size_t i = 0; i < got.size(); ++i) {
      std::string diff = compare_tensors(got[i], want[i], tolerance_for(c.prec, want[i].dtype()));
      EXPECT_EQ(diff, "") << "result " << i;
      ok = ok && diff.empty();
    }
    passed += ok;
  }
  auto t4 = clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  fmt::print(
      "codegen tensor cores: {} cases, {} kernels ({} anchors on mma.sync, {} with cp.async), compiled for "
      "sm_80/sm_90, max registers {} ({}), {} with spills; {} of {} match the reference on the simulator\n",
      cases.size(), sources.size(), mma_kernels, cp_async_kernels, max_regs, max_regs_kernel, spills, passed,
      cases.size());
  fmt::print("  times: emit {:.2f}s, nvrtc {:.2f}s, sim build {:.2f}s, run {:.2f}s\n", secs(t0, t1), secs(t1, t2),
             secs(t2, t3), secs(t3, t4));
  EXPECT_EQ(spills, 0);
  EXPECT_EQ(passed, static_cast<int>(cases.size()));
}

// The tile configurations: the default is valid and first among the
// candidates, every candidate is valid, and a chooser overrides the default
// (and an invalid choice is refused, naming the problem).
TEST(CodegenTensorCore, TileConfigurations) {
  using namespace codegen;
  for (GemmMath m : {GemmMath::Simt, GemmMath::F16, GemmMath::BF16, GemmMath::Tf32})
    for (auto [b, M, N, K] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
             {1, 1, 768, 768}, {1, 3136, 64, 576}, {12, 128, 128, 64}, {1, 4096, 4096, 4096}, {1, 7, 5, 3}}) {
      GemmProblem p{m, b, M, N, K};
      std::vector<GemmTileConfig> cs = gemm_tile_candidates(p);
      ASSERT_FALSE(cs.empty());
      EXPECT_EQ(cs[0], default_gemm_tile(p)) << gemm_problem_key(p);
      for (const GemmTileConfig& c : cs) EXPECT_EQ(gemm_tile_invalid(c, p), "") << gemm_tile_name(c);
      if (m != GemmMath::Simt) {
        EXPECT_GT(cs.size(), 4u) << gemm_problem_key(p);
      }
    }
  GemmProblem p{GemmMath::F16, 1, 4096, 4096, 4096};
  EXPECT_EQ(gemm_tile_name(default_gemm_tile(p)), "128x128x32 w2x4 s3");
  // Split-K where the tiles leave most of the GPU's resident block slots empty and kiln's calibrated
  // performance model (gemm_tile_cost.h; docs/codegen.md, "Split-K") puts a split faster, its reduction
  // included -- a reduction kernel, or folded into the GEMM (the last block per tile sums), whichever the
  // model puts cheaper. A folded tail reads a tile's partial sums at one block's per-warp rate (about
  // 2-7 us at the splits the pre-calibration constants chose), a reduction kernel at the DRAM's over
  // every SM (about 1.7 us + a graph node): ResNet-50's stage-4 3x3 conv (8 tiles of 64x64 x 144 k-tiles:
  // 29 splits of 5, a reduction kernel), BERT's FFN-down GEMM (24 tiles of 64x64 x 96 k-tiles: 14 of 7)
  // and QKV GEMM (72 tiles x 24 k-tiles: 4 of 6); the larger tiles stream fewer operand bytes through L2.
  // Not: a short K (7 k-tiles), a full grid, the SIMT core. The depth of the k-tile (32 or 64) and of
  // the ring (2 to 6 stages, at most 96 KiB) are the model's too: below one wave each k-tile waits a
  // load round trip / (stages - 1), so a sub-wave grid takes 64-deep k-tiles in a 5-6 deep ring (half
  // the trips, each waiting a quarter of a round trip), and then fewer splits: the FFN-down GEMM 8 of
  // 6 k-tiles, the stage-4 conv 18 of 4; the QKV GEMM no split at all (144 tiles of 32x64 reach every
  // SM with 12 k-tiles of 64).
  EXPECT_EQ(gemm_tile_name(default_gemm_tile({GemmMath::F16, 1, 49, 512, 4608})), "64x64x64 w2x2 s5 split18");
  EXPECT_EQ(gemm_tile_name(default_gemm_tile({GemmMath::F16, 1, 128, 768, 3072})), "64x64x64 w2x2 s5 split8");
  EXPECT_EQ(default_gemm_tile({GemmMath::F16, 1, 49, 512, 224}).split_k, 1);
  EXPECT_EQ(gemm_tile_name(default_gemm_tile({GemmMath::F16, 1, 128, 2304, 768})), "32x64x64 w1x2 s6");
  // The choice is the model's: the chosen split is the cheapest by gemm_tile_cost_us, and the fold the
  // old constants took for the FFN-down GEMM costs more than twice as much by the calibrated model.
  {
    const GemmProblem ffn{GemmMath::F16, 1, 128, 768, 3072};
    const GemmTileConfig chosen = default_gemm_tile(ffn);
    GemmTileConfig old_fold = chosen;
    old_fold.bm = 16, old_fold.bn = 32, old_fold.warps_m = 1, old_fold.warps_n = 1, old_fold.split_k = 8;
    old_fold.fold_split = true;
    EXPECT_GT(gemm_tile_cost_us(ffn, old_fold), 2 * gemm_tile_cost_us(ffn, chosen));
    for (int s : {7, 10, 20}) {
      GemmTileConfig other = chosen;
      other.split_k = s;
      EXPECT_GE(gemm_tile_cost_us(ffn, other), gemm_tile_cost_us(ffn, chosen)) << s;
    }
  }
  // A fold needs a split, and the SIMT core neither splits nor folds.
  GemmTileConfig fold_alone = default_gemm_tile({GemmMath::F16, 1, 49, 512, 224});
  fold_alone.fold_split = true;
  EXPECT_NE(gemm_tile_invalid(fold_alone, {GemmMath::F16, 1, 49, 512, 224}), "");
  GemmTileConfig simt_fold = default_gemm_tile({GemmMath::Simt, 1, 49, 512, 4608});
  simt_fold.fold_split = true;
  EXPECT_NE(gemm_tile_invalid(simt_fold, {GemmMath::Simt, 1, 49, 512, 4608}), "");
  EXPECT_EQ(gemm_tile_name(default_gemm_tile({GemmMath::F16, 1, 3136, 64, 64})), "32x32x32 w1x1 s3");
  EXPECT_EQ(default_gemm_tile({GemmMath::F16, 1, 4096, 512, 4608}).split_k, 1);
  // 256 tiles of 64x128 (8 warps, 2 resident per SM: a wave of 264) keep a 4-deep ring; a grid of
  // several waves gets 3 stages.
  EXPECT_EQ(default_gemm_tile({GemmMath::F16, 1, 4096, 512, 4608}).stages, 4);
  EXPECT_EQ(gemm_tile_name(default_gemm_tile({GemmMath::F16, 1, 4096, 4096, 4608})), "128x128x32 w2x4 s3");
  EXPECT_EQ(default_gemm_tile({GemmMath::Simt, 1, 49, 512, 4608}).split_k, 1);
  // A smaller tile where the cost terms put it clearly faster: a lone 64x64 tile would pull all of a
  // 64x64x256 GEMM's operands through one SM; smaller blocks share them (down to 16x32 every tile leaves
  // the 8-k-tile loop the bound; 16x32's 8 blocks reach the most SMs at no more cost).
  EXPECT_EQ(gemm_tile_name(default_gemm_tile({GemmMath::F16, 1, 64, 64, 256})), "16x32x64 w1x1 s5");
  // Issue 18's sub-wave grids (fewer blocks than 132 SMs): where a sub-wave grid is latency-bound the
  // cost terms are flat across tiles (every block waits on the same k-loop), and a smaller tile that
  // gives a block to SMs the larger one leaves idle is taken at no more cost. ResNet-50's 1x1 convs at
  // batch 1: stage 3's conv3 (64 tiles of 64x64 -> 224 of 32x32), stage 2's conv3 (104 -> 200 of
  // 32x64), stage 1's conv1 (49 -> 196 of 32x32), stage 2's first conv1 (98 -> 196). A grid that
  // already reaches every SM keeps its tile unless a smaller one is clearly (3%) faster.
  EXPECT_EQ(gemm_tile_name(default_gemm_tile({GemmMath::F16, 1, 196, 1024, 256})), "32x32x64 w1x1 s5");
  EXPECT_EQ(gemm_tile_name(default_gemm_tile({GemmMath::F16, 1, 784, 512, 128})), "32x64x32 w1x2 s5");
  EXPECT_EQ(gemm_tile_name(default_gemm_tile({GemmMath::F16, 1, 3136, 64, 256})), "32x32x64 w1x1 s5");
  EXPECT_EQ(gemm_tile_name(default_gemm_tile({GemmMath::F16, 1, 3136, 128, 256})), "32x64x64 w1x2 s5");
  EXPECT_EQ(gemm_tile_name(default_gemm_tile({GemmMath::F16, 1, 3136, 256, 64})), "64x64x32 w2x2 s3");
  // The split-K reduction's blocks: 256 threads, fewer where that leaves SMs without a block.
  EXPECT_EQ(split_k_reduction_threads(132 * 256), 256);
  EXPECT_EQ(split_k_reduction_threads(131 * 256), 128);
  EXPECT_EQ(split_k_reduction_threads(132 * 128), 128);
  EXPECT_EQ(split_k_reduction_threads(132 * 64), 64);
  EXPECT_EQ(split_k_reduction_threads(100), 64);
  // Splits never empty: 144 k-tiles asked in 64 parts run as 48 of 3.
  EXPECT_EQ(split_k_of(GemmTileConfig{.split_k = 64}, 144).splits, 48);
  EXPECT_EQ(split_k_of(GemmTileConfig{.split_k = 64}, 144).k_tiles, 3);
  GemmTileConfig too_many = default_gemm_tile({GemmMath::F16, 1, 49, 512, 64});
  too_many.split_k = 3;  // 2 k-tiles
  EXPECT_NE(gemm_tile_invalid(too_many, {GemmMath::F16, 1, 49, 512, 64}), "");
  EXPECT_EQ(gemm_problem_key(p), "f16:b1:m4096:n4096:k4096");
  GemmTileConfig small{64, 32, 16, 2, 1, 2};
  {
    ScopedGemmTileChooser ch([&](const GemmProblem&) { return std::optional<GemmTileConfig>(small); });
    EXPECT_EQ(choose_gemm_tile_config(p), small);
    GemmTileConfig bad = small;
    bad.warps_n = 3;
    ScopedGemmTileChooser inner([&](const GemmProblem&) { return std::optional<GemmTileConfig>(bad); });
    EXPECT_THROW(choose_gemm_tile_config(p), Error);
  }
  EXPECT_EQ(choose_gemm_tile_config(p), default_gemm_tile(p));
}

// An overridden tile reaches the kernel: a chooser's configuration changes the
// emitted source (the autotuner's entry point) and stays correct on the simulator.
TEST(CodegenTensorCore, ChooserOverridesTheKernelTile) {
  auto g = parse_graph(R"(graph @m(%a: f16[40,72], %b: f16[72,48]) -> (f16[40,48]) {
    %y = matmul(%a, %b) : f16[40,48]
    return %y
  })",
                       "t.kir");
  const Node& n = *g->nodes().front();
  const codegen::KernelEmitter* e = codegen::emitter_for(n);
  ASSERT_NE(e, nullptr);
  std::string def = e->emit(n).at(0).source;
  codegen::GemmTileConfig c{16, 16, 16, 1, 1, 4};
  codegen::ScopedGemmTileChooser ch([&](const codegen::GemmProblem&) { return std::optional(c); });
  std::vector<codegen::NodeKernel> ks = e->emit(n);
  EXPECT_NE(ks.at(0).source, def);
  EXPECT_NE(ks.at(0).source.find("tile 16x16x16 w1x1 s4"), std::string::npos);
  EXPECT_EQ(ks.at(0).block.x, 32u);
  codegen::SimExecutor sim(*g);
  std::map<std::string, Tensor> feed = inputs_for(*g, 5);
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  std::vector<Tensor> got = sim.run(feed);
  EXPECT_EQ(compare_tensors(got.at(0), want.at(0), default_tolerance(DType::F16)), "");
}

// A batch of A's matrices against one B is one GEMM of batch x M rows: ViT-B/16's sequence-first QKV
// projection [197, 1, 768] x [768, 2304] ran as 197 GEMMs of one row, each block padding it to 16.
// A batched B keeps the batch.
TEST(CodegenTensorCore, ABatchAgainstOneBIsOneGemmOfAllRows) {
  for (auto [text, header] : std::vector<std::pair<std::string, std::string>>{
           {R"(graph @m(%a: f16[20,1,64], %b: f16[64,96]) -> (f16[20,1,96]) {
    %y = matmul(%a, %b) : f16[20,1,96]
    return %y
  })",
            "batch 1 x [20 x 96]"},
           {R"(graph @m(%a: f16[2,5,3,64], %b: f16[64,40]) -> (f16[2,5,3,40]) {
    %y = matmul(%a, %b) : f16[2,5,3,40]
    return %y
  })",
            "batch 1 x [30 x 40]"},
           {R"(graph @m(%a: f16[3,20,64], %b: f16[3,64,96]) -> (f16[3,20,96]) {
    %y = matmul(%a, %b) : f16[3,20,96]
    return %y
  })",
            "batch 3 x [20 x 96]"},
           {R"(graph @m(%a: f16[20,64], %b: f16[3,64,96]) -> (f16[3,20,96]) {
    %y = matmul(%a, %b) : f16[3,20,96]
    return %y
  })",
            "batch 3 x [20 x 96]"}}) {
    SCOPED_TRACE(header);
    auto g = parse_graph(text, "t.kir");
    const Node& n = *g->nodes().front();
    std::vector<codegen::NodeKernel> ks = codegen::emitter_for(n)->emit(n);
    ASSERT_EQ(ks.size(), 1u);
    EXPECT_NE(ks[0].source.find("// matmul: " + header), std::string::npos) << ks[0].source.substr(0, 2000);
    codegen::SimExecutor sim(*g);
    std::map<std::string, Tensor> feed = inputs_for(*g, 3);
    std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
    std::vector<Tensor> got = sim.run(feed);
    EXPECT_EQ(compare_tensors(got.at(0), want.at(0), default_tolerance(DType::F16)), "");
  }
}

}  // namespace
}  // namespace kiln
