// codegen/emitters/misc/emit_misc_ops.h against the reference (evaluate_op): dft (real and
// complex input, a middle axis, zero-padding and truncation by `length`,
// inverse, onesided, f16 and f64, more bins than one block; inverse +
// onesided, numpy's irfft: even and odd lengths, a longer input, f64), stft (with and
// without a window, complex signal, not onesided), det (2x2, batched 3x3 with
// a singular matrix and one needing pivoting, 6x6 f64, f16), and
// dynamic_quantize_linear (more elements than one block, all positive, all
// negative, constant, one and three results), and range (integers
// ascending, descending and wrapping, f32 and f64 steps). Every kernel compiles with NVRTC
// for sm_80 and sm_90 without spills and matches the reference on the
// simulator: f32 1e-5 + 1e-4 rel, f64 1e-9 + 1e-9, f16 1e-3 + 2e-3, u8 exactly.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>

#include "codegen/emitters/misc/emit_misc_ops.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_module.h"
#include "ir/error.h"
#include "ops/registry.h"

namespace kiln {
namespace {

struct Case {
  std::string text;
  std::string op;
  AttrMap attrs;
  std::vector<Tensor> ins;
  std::vector<TensorType> outs;
  std::vector<codegen::SimpleKernel> kernels;
};

Tensor rand(DType dt, Shape s, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Tensor t(TensorType(dt, s));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, u(rng));
  return t;
}

AttrMap attrs(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  AttrMap a;
  for (auto& [k, v] : kv) a.set(k, v);
  return a;
}

std::vector<Case> all_cases() {
  std::vector<Case> c;
  auto add = [&](std::string text, std::string op, AttrMap a, std::vector<Tensor> ins, std::vector<TensorType> outs) {
    c.push_back({std::move(text), std::move(op), std::move(a), std::move(ins), std::move(outs), {}});
  };
  add("dft real axis 1", "dft", attrs({{"axis", 1}}), {rand(DType::F32, {2, 20, 1}, 1)},
      {TensorType(DType::F32, {2, 20, 2})});
  add("dft complex middle axis, padded length", "dft", attrs({{"axis", 1}, {"length", 24}}),
      {rand(DType::F32, {3, 17, 5, 2}, 2)}, {TensorType(DType::F32, {3, 24, 5, 2})});
  add("dft truncated, onesided", "dft", attrs({{"axis", 0}, {"length", 9}, {"onesided", 1}}),
      {rand(DType::F32, {13, 4, 1}, 3)}, {TensorType(DType::F32, {5, 4, 2})});
  add("dft inverse complex, 300 bins", "dft", attrs({{"axis", 1}, {"inverse", 1}}), {rand(DType::F32, {2, 300, 2}, 4)},
      {TensorType(DType::F32, {2, 300, 2})});
  add("dft inverse onesided (irfft), even length 10", "dft", attrs({{"axis", 1}, {"inverse", 1}, {"onesided", 1}}),
      {rand(DType::F32, {2, 6, 2}, 21)}, {TensorType(DType::F32, {2, 10, 1})});
  add("dft irfft, odd length 9, middle axis", "dft",
      attrs({{"axis", 1}, {"length", 9}, {"inverse", 1}, {"onesided", 1}}), {rand(DType::F32, {3, 5, 4, 2}, 22)},
      {TensorType(DType::F32, {3, 9, 4, 1})});
  add("dft irfft, input longer than the half spectrum, f64", "dft",
      attrs({{"axis", 0}, {"length", 6}, {"inverse", 1}, {"onesided", 1}}), {rand(DType::F64, {8, 3, 2}, 23)},
      {TensorType(DType::F64, {6, 3, 1})});
  add("dft f64", "dft", attrs({{"axis", 1}}), {rand(DType::F64, {2, 31, 2}, 5)}, {TensorType(DType::F64, {2, 31, 2})});
  add("dft f16", "dft", attrs({{"axis", 1}}), {rand(DType::F16, {2, 16, 1}, 6, -0.1, 0.1)},
      {TensorType(DType::F16, {2, 16, 2})});
  add("stft real, onesided, no window", "stft", attrs({{"frame_step", 8}, {"frame_length", 16}}),
      {rand(DType::F32, {2, 64, 1}, 7)}, {TensorType(DType::F32, {2, 7, 9, 2})});
  add("stft complex, window, two-sided", "stft", attrs({{"frame_step", 5}, {"frame_length", 12}, {"onesided", 0}}),
      {rand(DType::F32, {1, 50, 2}, 8), rand(DType::F32, {12}, 9, 0.0, 1.0)}, {TensorType(DType::F32, {1, 8, 12, 2})});
  {
    Tensor m = rand(DType::F32, {4, 3, 3}, 10);
    for (int j = 0; j < 3; ++j) m.set_double(9 + 3 + j, 2 * m.get_double(9 + j));  // matrix 1 singular
    m.set_double(18, 0.0);  // matrix 2: zero first pivot, rows swap
    add("det batched 3x3 (singular, pivoting)", "det", {}, {m}, {TensorType(DType::F32, {4})});
  }
  add("det 2x2", "det", {}, {rand(DType::F32, {2, 2}, 11)}, {TensorType(DType::F32, {})});
  add("det f64 6x6 x 200", "det", {}, {rand(DType::F64, {200, 6, 6}, 12)}, {TensorType(DType::F64, {200})});
  add("det f16", "det", {}, {rand(DType::F16, {3, 2, 2}, 13, -0.5, 0.5)}, {TensorType(DType::F16, {3})});
  const TensorType u8s(DType::U8, {}), f32s(DType::F32, {});
  add("dql 1000 elements", "dynamic_quantize_linear", {}, {rand(DType::F32, {10, 100}, 14, -3, 5)},
      {TensorType(DType::U8, {10, 100}), f32s, u8s});
  add("dql 100000 elements (49 partial blocks)", "dynamic_quantize_linear", {}, {rand(DType::F32, {100000}, 17, -2, 3)},
      {TensorType(DType::U8, {100000}), f32s, u8s});
  add("dql all positive", "dynamic_quantize_linear", {}, {rand(DType::F32, {37}, 15, 1, 9)},
      {TensorType(DType::U8, {37}), f32s, u8s});
  add("dql all negative, y only", "dynamic_quantize_linear", {}, {rand(DType::F32, {3, 5}, 16, -7, -1)},
      {TensorType(DType::U8, {3, 5})});
  {
    Tensor z(TensorType(DType::F32, {6}));  // constant: scale 1/255
    for (int i = 0; i < 6; ++i) z.set_double(i, 0.0);
    add("dql constant zero", "dynamic_quantize_linear", {}, {z}, {TensorType(DType::U8, {6}), f32s, u8s});
  }
  // range: the operands are scalars; lengths as the graph's shapes give them.
  auto scalar = [](DType dt, double v) { return Tensor::scalar(dt, v); };
  add("range i64 past..past+seq", "range", {}, {scalar(DType::I64, 5), scalar(DType::I64, 13), scalar(DType::I64, 1)},
      {TensorType(DType::I64, {8})});
  add("range i64 over many blocks", "range", {},
      {scalar(DType::I64, 0), scalar(DType::I64, 1000), scalar(DType::I64, 1)}, {TensorType(DType::I64, {1000})});
  add("range i32 descending", "range", {}, {scalar(DType::I32, 7), scalar(DType::I32, -8), scalar(DType::I32, -3)},
      {TensorType(DType::I32, {5})});
  add("range u8 wrapping", "range", {}, {scalar(DType::U8, 250), scalar(DType::U8, 255), scalar(DType::U8, 2)},
      {TensorType(DType::U8, {3})});
  add("range f32 fractional", "range", {}, {scalar(DType::F32, 0.5), scalar(DType::F32, 3), scalar(DType::F32, 0.3)},
      {TensorType(DType::F32, {9})});
  add("range f64", "range", {}, {scalar(DType::F64, -1), scalar(DType::F64, 1), scalar(DType::F64, 0.1)},
      {TensorType(DType::F64, {20})});
  return c;
}

bool close(DType t, double got, double want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (is_int(t) || t == DType::U8) return got == want;
  double atol = 1e-5, rtol = 1e-4;
  if (t == DType::F16) atol = 1e-3, rtol = 2e-3;
  if (t == DType::F64) atol = 1e-9, rtol = 1e-9;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

TEST(CodegenMiscOps, DftStftDetDynamicQuantizeCompileAndMatchReferenceOnSim) {
  std::vector<Case> cases = all_cases();
  std::vector<codegen::KernelSource> sources;
  std::vector<std::string> owner;
  for (Case& c : cases) {
    const TensorType x = c.ins[0].type();
    if (c.op == "dft") c.kernels = {codegen::emit_dft(c.attrs, x, c.outs[0])};
    else if (c.op == "stft")
      c.kernels = {codegen::emit_stft(c.attrs, x, c.ins.size() > 1, c.ins.size() > 1 ? c.ins[1].type() : TensorType(),
                                      c.outs[0])};
    else if (c.op == "det") c.kernels = {codegen::emit_det(x, c.outs[0])};
    else if (c.op == "range") c.kernels = {codegen::emit_range(x.dtype, c.outs[0])};
    else c.kernels = codegen::emit_dynamic_quantize_linear(x, c.outs);
    for (const auto& k : c.kernels) {
      sources.push_back({k.name, k.source});
      owner.push_back(c.text);
    }
  }
  codegen::KernelCache cache;
  int max_regs = 0, spills = 0;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    auto ks = compiler.compile(sources);
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_FALSE(ks[i].cubin.empty()) << owner[i];
      max_regs = std::max(max_regs, ks[i].registers);
      EXPECT_EQ(ks[i].log.find("warning"), std::string::npos) << owner[i] << " on " << arch << ": " << ks[i].log;
      if (ks[i].spill_bytes > 0) {
        ++spills;
        ADD_FAILURE() << owner[i] << " spills on " << arch;
      }
    }
  }
  codegen::SimCompiler sim;
  auto entries = sim.compile(sources);
  int matched = 0;
  for (const Case& c : cases) {
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : c.ins) ptrs.push_back(&t);
    std::vector<Tensor> want = evaluate_op(op_registry().get(c.op), c.attrs, ptrs, c.outs, "node");
    std::vector<Tensor> got;
    for (const TensorType& t : c.outs) {
      got.emplace_back(t);
      std::memset(got.back().raw(), 0xa5, got.back().nbytes());
    }
    std::vector<Tensor> scratch;
    for (const auto& k : c.kernels)
      for (const TensorType& t : k.scratch) scratch.emplace_back(t);
    std::vector<void*> bufs;
    std::vector<long long> counts;
    auto add = [&](const Tensor& t) {
      bufs.push_back(const_cast<void*>(t.raw()));
      counts.push_back(t.numel());
    };
    for (const Tensor& t : got) add(t);
    for (const Tensor& t : c.ins) add(t);
    for (const Tensor& t : scratch) add(t);
    for (const auto& k : c.kernels) {
      if (k.grid == 0) continue;
      sim::LaunchConfig cfg;
      cfg.kernel = k.name;
      cfg.grid = dim3(k.grid);
      cfg.block = dim3(k.block);
      ASSERT_NO_THROW(codegen::sim_launch(entries.at(k.name), cfg, bufs, counts)) << c.text;
    }
    int bad = 0;
    std::string first;
    for (size_t r = 0; r < got.size(); ++r)
      for (int64_t i = 0; i < got[r].numel(); ++i) {
        if (close(got[r].dtype(), got[r].get_double(i), want[r].get_double(i))) continue;
        if (bad++ == 0)
          first =
              fmt::format("result {} element {}: got {} want {}", r, i, got[r].get_double(i), want[r].get_double(i));
      }
    if (bad) ADD_FAILURE() << c.text << ": " << bad << " differ; " << first;
    else ++matched;
  }
  fmt::print(
      "codegen misc ops: {} kernels compiled for sm_80/sm_90, max registers {}, {} with spills; {} of {} cases "
      "match the reference on the simulator\n",
      sources.size(), max_regs, spills, matched, cases.size());
}

TEST(CodegenMiscOps, RejectsBadInput) {
  EXPECT_THROW(codegen::emit_det(TensorType(DType::F32, {2, 3}), TensorType(DType::F32, {})), Error);
  EXPECT_THROW(codegen::emit_range(DType::F16, TensorType(DType::F16, {4})), Error);
  EXPECT_THROW(codegen::emit_dynamic_quantize_linear(TensorType(DType::F64, {3}), {TensorType(DType::U8, {3})}),
               Unsupported);
  EXPECT_THROW(
      codegen::emit_dft(attrs({{"axis", 2}}), TensorType(DType::F32, {2, 3, 1}), TensorType(DType::F32, {2, 3, 2})),
      Error);
}

}  // namespace
}  // namespace kiln
