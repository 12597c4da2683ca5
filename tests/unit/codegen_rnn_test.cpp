// The recurrent emitter (codegen/emitters/rnn/emit_rnn.h) against the reference
// (ops/rnn_ops.cpp via evaluate_op): rnn, gru (with and without
// linear_before_reset) and lstm (peepholes, input_forget) forward, reverse
// and bidirectional, layout 0 and 1, clip, non-default activations with
// alpha/beta, initial states, sequence_lens (including 0 and a short one), a
// hidden size above one block of threads, f32 / f16 / f64. Every kernel
// compiles with NVRTC for sm_80 and sm_90 without spills and matches the
// reference on the simulator (f32 1e-5 + 1e-4 rel, f16 1e-3 + 2e-3, f64 1e-9).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>

#include "backends/reference/executor.h"
#include "codegen/emitters/rnn/emit_rnn.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_executor.h"
#include "backends/sim/sim_module.h"
#include "ir/error.h"
#include "ops/registry.h"
#include "tests/unit/pass_test_util.h"
#include "backends/compare.h"

namespace kiln {
namespace {

struct Case {
  std::string op;
  DType dt;
  int64_t S, B, I, H;
  std::string dir;
  int layout;
  std::string opts;  // b: bias, l: sequence_lens, h: initial_h, c: initial_c, p: peepholes, C: clip, A: activations
  int64_t lbr_or_if = 0;
};

int dirs(const Case& c) { return c.dir == "bidirectional" ? 2 : 1; }
bool has(const Case& c, char o) { return c.opts.find(o) != std::string::npos; }

AttrMap attrs_of(const Case& c) {
  AttrMap a;
  a.set("hidden_size", c.H);
  a.set("direction", c.dir);
  a.set("layout", int64_t{c.layout});
  if (has(c, 'C')) a.set("clip", 0.9f);
  if (c.op == "gru") a.set("linear_before_reset", c.lbr_or_if);
  if (c.op == "lstm") a.set("input_forget", c.lbr_or_if);
  if (has(c, 'A')) {
    std::vector<std::string> names;
    std::vector<float> al, be;
    const std::vector<std::string> pool = {"HardSigmoid", "ScaledTanh", "LeakyRelu", "Softsign", "Elu", "Affine"};
    const int per = c.op == "rnn" ? 1 : c.op == "gru" ? 2 : 3;
    for (int i = 0; i < per * dirs(c); ++i) {
      names.push_back(pool[(i + (c.op == "lstm")) % pool.size()]);
      al.push_back(0.3f + 0.1f * i);
      be.push_back(0.5f - 0.05f * i);
    }
    a.set("activations", names);
    a.set("activation_alpha", al);
    a.set("activation_beta", be);
  }
  return a;
}

std::vector<Case> all_cases() {
  return {
      {"rnn", DType::F32, 5, 3, 7, 9, "forward", 0, "bh"},
      {"rnn", DType::F32, 4, 3, 5, 6, "bidirectional", 1, "blhCA"},
      {"rnn", DType::F64, 3, 2, 4, 5, "reverse", 0, "l"},
      {"gru", DType::F32, 5, 3, 7, 9, "forward", 0, "bh", 0},
      {"gru", DType::F32, 6, 4, 5, 11, "bidirectional", 0, "blh", 1},
      {"gru", DType::F32, 4, 2, 3, 300, "reverse", 1, "blCA", 0},  // 300 hidden units: more than one block
      {"gru", DType::F16, 5, 2, 8, 16, "forward", 0, "b", 1},
      {"lstm", DType::F32, 5, 3, 7, 9, "forward", 0, "bhcp"},
      {"lstm", DType::F32, 6, 4, 5, 10, "bidirectional", 1, "blhcpC", 1},
      {"lstm", DType::F32, 4, 3, 6, 8, "reverse", 0, "lpA"},
      {"lstm", DType::F16, 3, 2, 8, 16, "forward", 0, "bhc"},
      {"lstm", DType::F64, 4, 2, 3, 5, "bidirectional", 0, "blhcp"},
  };
}

bool close(DType t, double got, double want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  double atol = 1e-5, rtol = 1e-4;
  if (t == DType::F16) atol = 1e-3, rtol = 2e-3;
  if (t == DType::F64) atol = 1e-9, rtol = 1e-9;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

TEST(CodegenRnn, EveryVariantCompilesWithoutSpillsAndMatchesReferenceOnSim) {
  std::vector<Case> cases = all_cases();
  struct Prepared {
    std::vector<std::optional<Tensor>> ins;
    std::vector<TensorType> outs;
    codegen::RnnKernel kernel;
  };
  std::vector<Prepared> prep;
  std::vector<codegen::KernelSource> sources;
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal(0.0, 0.5);
  for (const Case& c : cases) {
    const int64_t D = dirs(c), G = c.op == "rnn" ? 1 : c.op == "gru" ? 3 : 4;
    auto rand = [&](Shape s) {
      Tensor t(TensorType(c.dt, s));
      for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, normal(rng));
      return t;
    };
    Prepared p;
    p.ins.resize(c.op == "lstm" ? 8 : 6);
    p.ins[0] = rand(c.layout ? Shape{c.B, c.S, c.I} : Shape{c.S, c.B, c.I});
    p.ins[1] = rand({D, G * c.H, c.I});
    p.ins[2] = rand({D, G * c.H, c.H});
    if (has(c, 'b')) p.ins[3] = rand({D, 2 * G * c.H});
    if (has(c, 'l')) {
      Tensor l(TensorType(DType::I32, {c.B}));
      for (int64_t b = 0; b < c.B; ++b)
        l.data<int32_t>()[b] = static_cast<int32_t>(b == 0 ? c.S : b == 1 ? 0 : c.S - 2);
      p.ins[4] = l;
    }
    Shape state = c.layout ? Shape{c.B, D, c.H} : Shape{D, c.B, c.H};
    if (has(c, 'h')) p.ins[5] = rand(state);
    if (c.op == "lstm" && has(c, 'c')) p.ins[6] = rand(state);
    if (c.op == "lstm" && has(c, 'p')) p.ins[7] = rand({D, 3 * c.H});
    // Trailing absent operands are dropped, as the importer does.
    while (!p.ins.back()) p.ins.pop_back();
    p.outs = {TensorType(c.dt, c.layout ? Shape{c.B, c.S, D, c.H} : Shape{c.S, D, c.B, c.H}), TensorType(c.dt, state)};
    if (c.op == "lstm") p.outs.push_back(TensorType(c.dt, state));
    std::vector<TensorType> ops;
    std::vector<bool> present;
    for (const auto& t : p.ins) {
      ops.push_back(t ? t->type() : TensorType());
      present.push_back(t.has_value());
    }
    p.kernel = codegen::emit_rnn_op(c.op, attrs_of(c), ops, present, p.outs);
    sources.push_back({p.kernel.name, p.kernel.source});
    prep.push_back(std::move(p));
  }
  codegen::KernelCache cache;
  int max_regs = 0, spills = 0;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks = compiler.compile(sources);
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_FALSE(ks[i].cubin.empty());
      max_regs = std::max(max_regs, ks[i].registers);
      EXPECT_EQ(ks[i].log.find("warning"), std::string::npos) << cases[i].op << " on " << arch << ": " << ks[i].log;
      if (ks[i].spill_bytes > 0) {
        ++spills;
        ADD_FAILURE() << cases[i].op << " case " << i << " on " << arch << " spills";
      }
    }
  }
  codegen::SimCompiler sim;
  auto entries = sim.compile(sources);
  int matched = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    Prepared& p = prep[ci];
    std::vector<const Tensor*> ptrs;
    for (const auto& t : p.ins) ptrs.push_back(t ? &*t : nullptr);
    std::vector<Tensor> want = evaluate_op(op_registry().get(c.op), attrs_of(c), ptrs, p.outs, "node");
    std::vector<Tensor> got;
    std::vector<void*> bufs;
    std::vector<long long> counts;
    for (const TensorType& t : p.outs) {
      got.emplace_back(t);
      std::memset(got.back().raw(), 0xa5, got.back().nbytes());
    }
    for (Tensor& t : got) {
      bufs.push_back(t.raw());
      counts.push_back(t.numel());
    }
    for (const auto& t : p.ins) {
      bufs.push_back(t ? const_cast<void*>(t->raw()) : nullptr);
      counts.push_back(t ? t->numel() : 0);
    }
    ASSERT_GT(p.kernel.grid, 0u);
    sim::LaunchConfig cfg;
    cfg.kernel = p.kernel.name;
    cfg.grid = dim3(p.kernel.grid);
    cfg.block = dim3(p.kernel.block);
    ASSERT_NO_THROW(codegen::sim_launch(entries.at(p.kernel.name), cfg, bufs, counts)) << "case " << ci;
    int bad = 0;
    std::string first;
    for (size_t r = 0; r < got.size(); ++r)
      for (int64_t i = 0; i < got[r].numel(); ++i) {
        if (close(c.dt, got[r].get_double(i), want[r].get_double(i))) continue;
        if (bad++ == 0)
          first =
              fmt::format("result {} element {}: got {} want {}", r, i, got[r].get_double(i), want[r].get_double(i));
      }
    if (bad)
      ADD_FAILURE() << c.op << " case " << ci << " (" << c.dir << ", " << c.opts << "): " << bad << " differ; "
                    << first;
    else ++matched;
  }
  fmt::print(
      "codegen rnn: {} kernels compiled for sm_80/sm_90, max registers {}, {} with spills; {} of {} match the "
      "reference on the simulator\n",
      sources.size(), max_regs, spills, matched, cases.size());
  EXPECT_EQ(spills, 0);
}

TEST(CodegenRnn, RejectsUnknownActivationAndBadOperands) {
  AttrMap a;
  a.set("hidden_size", int64_t{4});
  a.set("activations", std::vector<std::string>{"Gelu"});
  std::vector<TensorType> ops = {TensorType(DType::F32, {2, 1, 3}), TensorType(DType::F32, {1, 4, 3}),
                                 TensorType(DType::F32, {1, 4, 4})};
  std::vector<TensorType> outs = {TensorType(DType::F32, {2, 1, 1, 4})};
  EXPECT_THROW(codegen::emit_rnn_op("rnn", a, ops, {true, true, true}, outs), Unsupported);
  a.set("activations", std::vector<std::string>{"Tanh"});
  EXPECT_NO_THROW(codegen::emit_rnn_op("rnn", a, ops, {true, true, true}, outs));
  ops[1] = TensorType(DType::F32, {1, 5, 3});  // W of the wrong size
  EXPECT_THROW(codegen::emit_rnn_op("rnn", a, ops, {true, true, true}, outs), Error);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Through the sim backend: an lstm whose bias is absent but whose
// sequence_lens and peepholes are given (a null buffer in the middle of the
// operand list), and a gru with only Y used, against the reference backend.
TEST(CodegenRnn, SimBackendPassesAbsentOperandsAsNullBuffers) {
  auto g = testing::parse(
      R"(graph @m(%x: f32[5,3,4], %w: f32[1,24,4], %r: f32[1,24,6], %l: i32[3], %h: f32[1,3,6], %c: f32[1,3,6], %p: f32[1,18], %gw: f32[2,18,4], %gr: f32[2,18,6]) -> (f32[5,1,3,6], f32[1,3,6], f32[1,3,6], f32[5,2,3,6]) {
    %y, %yh, %yc = lstm(%x, %w, %r, _, %l, %h, %c, %p) {hidden_size=6} : f32[5,1,3,6], f32[1,3,6], f32[1,3,6]
    %gy, %gh = gru(%x, %gw, %gr) {hidden_size=6, direction="bidirectional", linear_before_reset=1} : f32[5,2,3,6], f32[2,3,6]
    return %y, %yh, %yc, %gy
  })");
  auto feed = testing::random_inputs(*g, 3);
  Tensor lens(TensorType(DType::I32, {3}));
  lens.data<int32_t>()[0] = 5;
  lens.data<int32_t>()[1] = 2;
  lens.data<int32_t>()[2] = 0;
  feed["l"] = lens;
  std::vector<Tensor> want = ReferenceExecutor(*g).run(feed);
  std::vector<Tensor> got = codegen::SimExecutor(*g).run(feed);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(compare_tensors(got[i], want[i], Tolerance{1e-5, 1e-4}), "") << "result " << i;
}

}  // namespace
}  // namespace kiln
