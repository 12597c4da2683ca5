// The reduction emitter against the reference: every reduce_* op (one
// ReductionSpec each) x f32 x axis sets (last, first, middle, all, two
// non-adjacent, two adjacent with a size-1 one, a size-1 axis, an empty
// reduced set) x keepdims 0/1; i32 on last, first, two non-adjacent, empty;
// f16 on last and all; i64 on last and empty.
// Every distinct source must compile with NVRTC for sm_80 and sm_90, and run
// on the simulator matching kiln::evaluate_op: integers exactly, floats
// within 1e-5 abs + 1e-4 rel (f32) / 1e-3 abs + 2e-3 rel (f16, one f16 ulp:
// both sides round a double to f16); NaN matches NaN, infinities match exactly.
// softmax / log_softmax (f32/f16/f64, several axes) go through the same test.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "codegen/emitters/reduction/emit_reduction.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_module.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/reduction_spec.h"
#include "ops/registry.h"

namespace kiln {
namespace {

struct Case {
  const OpDef* def;
  AttrMap attrs;
  std::string text;
  TensorType in, out;
  codegen::ReductionKernel kernel;
};

std::optional<TensorType> try_infer(const OpDef& def, const TensorType& in, const AttrMap& attrs) {
  Graph g;
  std::vector<Value*> vals = {g.add_input("in0", in)};
  InferContext ic(def.name, vals, attrs, 1, "node");
  try {
    return infer_types(def, ic)[0];
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Seeded data; floats get a NaN at element 5 and +inf at element 700 (where
// they exist), so NaN propagation and infinite rows are exercised too.
Tensor make_data(const TensorType& t, const std::string& op, uint64_t seed) {
  Tensor x(t);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.5);
  const bool positive = op == "reduce_log_sum";  // mostly real logs
  const bool near_one = op == "reduce_prod";     // products stay in range
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = normal(rng);
    if (positive) v = std::fabs(v) + 0.01;
    if (near_one) v = 1.0 + v / 16;
    if (i == 5) v = NAN;
    if (i == 700) v = INFINITY;
    int64_t iv = static_cast<int64_t>(rng() % 41) - 20;
    if (near_one) iv = static_cast<int64_t>(rng() % 5) - 2;
    switch (t.dtype) {
      case DType::F32:
        x.data<float>()[i] = static_cast<float>(v);
        break;
      case DType::F16:
        x.data<uint16_t>()[i] = float_to_half(static_cast<float>(v));
        break;
      case DType::F64:
        x.data<double>()[i] = v;
        break;
      case DType::I32:
        x.data<int32_t>()[i] = static_cast<int32_t>(iv);
        break;
      case DType::I64:
        x.data<int64_t>()[i] = iv;
        break;
      default:
        ADD_FAILURE() << "dtype";
        break;
    }
  }
  return x;
}

std::vector<Case> all_cases() {
  struct Red {
    Shape shape;
    std::vector<int64_t> axes;
    const char* dtypes;  // besides f32: i(32), h(f16), l(i64) -- fewer kernels keep NVRTC's cold time down
  };
  const std::vector<Red> reds = {
      {{6, 300}, {1}, "ihl"},        // last axis, rows longer than a block
      {{37, 6}, {0}, "i"},           // first axis: strided reads
      {{4, 7, 33}, {1}, ""},         // middle
      {{4, 7, 33}, {0, 1, 2}, "h"},  // all: one output of 924
      {{4, 7, 33}, {0, 2}, "i"},     // two non-adjacent axes
      {{5, 9, 1}, {1, 2}, ""},       // two adjacent axes, one of size 1
      {{2, 1, 5}, {1}, ""},          // a size-1 axis: count 1
      {{3, 0, 5}, {1}, "il"},        // empty reduced set
  };
  std::vector<Case> cases;
  for (const ops::ReductionSpec& s : ops::reduction_specs()) {
    const OpDef& def = op_registry().get(std::string(s.op));
    for (DType dt : {DType::F32, DType::F16, DType::I32, DType::I64}) {
      for (const Red& r : reds) {
        const char tag = dt == DType::I32 ? 'i' : dt == DType::F16 ? 'h' : dt == DType::I64 ? 'l' : 'f';
        if (tag != 'f' && !std::strchr(r.dtypes, tag)) continue;
        for (int keep = 0; keep < 2; ++keep) {
          AttrMap a;
          a.set("axes", r.axes);
          a.set("keepdims", int64_t{keep});
          TensorType in(dt, r.shape);
          std::optional<TensorType> out = try_infer(def, in, a);
          if (!out) continue;
          Case c{
              &def, a,    fmt::format("{}({}, axes=[{}], keepdims={})", s.op, in.str(), fmt::join(r.axes, ","), keep),
              in,   *out, {}};
          cases.push_back(std::move(c));
        }
      }
    }
  }
  // softmax / log_softmax: f32/f16/f64 along the last, first, a middle axis,
  // a size-1 axis and an empty one.
  // (f16/f64 on the first two only.)
  const std::vector<std::pair<Shape, int64_t>> lines = {{{6, 300}, 1},    {{37, 6}, 0},   {{4, 7, 33}, 1},
                                                        {{4, 7, 33}, -1}, {{3, 1, 5}, 1}, {{2, 0, 3}, 1}};
  for (const char* op : {"softmax", "log_softmax"}) {
    const OpDef& def = op_registry().get(op);
    for (DType dt : {DType::F32, DType::F16, DType::F64}) {
      for (size_t li = 0; li < lines.size(); ++li) {
        if (dt != DType::F32 && li >= 2) break;
        const auto& [shape, axis] = lines[li];
        AttrMap a;
        a.set("axis", axis);
        TensorType in(dt, shape);
        std::optional<TensorType> out = try_infer(def, in, a);
        if (!out) {
          ADD_FAILURE() << op << " " << in.str() << " does not infer";
          continue;
        }
        cases.push_back(Case{&def, a, fmt::format("{}({}, axis={})", op, in.str(), axis), in, *out, {}});
      }
    }
  }
  return cases;
}

codegen::ReductionKernel emit(const Case& c) {
  if (c.def->name == "softmax" || c.def->name == "log_softmax") return codegen::emit_softmax_op(*c.def, c.attrs, c.in);
  return codegen::emit_reduction_op(*c.def, c.attrs, c.in, c.out);
}

bool close(DType t, double got, double want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  if (is_int(t)) return got == want;
  const double abs_tol = t == DType::F16 ? 1e-3 : 1e-5, rel_tol = t == DType::F16 ? 2e-3 : 1e-4;
  return std::fabs(got - want) <= abs_tol + rel_tol * std::fabs(want);
}

TEST(CodegenReduction, EveryReduceOpCompilesAndMatchesReferenceOnSim) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  std::vector<Case> cases = all_cases();
  ASSERT_GT(cases.size(), 250u);
  std::vector<codegen::KernelSource> sources;
  std::map<std::string, size_t> first_case;  // kernel name -> first case using it
  std::set<std::string> ops_seen;
  for (size_t i = 0; i < cases.size(); ++i) {
    Case& c = cases[i];
    c.kernel = emit(c);
    if (first_case.emplace(c.kernel.name, i).second) sources.push_back({c.kernel.name, c.kernel.source});
    ops_seen.insert(c.def->name);
  }
  EXPECT_EQ(ops_seen.size(), ops::reduction_specs().size() + 2);  // + softmax, log_softmax
  auto t1 = clock::now();

  codegen::KernelCache cache;
  int max_regs = 0, spills = 0, nvrtc_runs = 0;
  std::string max_regs_kernel;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks = compiler.compile(sources);
    nvrtc_runs += compiler.nvrtc_compilations();
    for (size_t i = 0; i < ks.size(); ++i) {
      const std::string what = cases[first_case.at(sources[i].name)].text;
      EXPECT_FALSE(ks[i].cubin.empty()) << what;
      EXPECT_GT(ks[i].registers, 0) << what;
      if (ks[i].registers > max_regs) {
        max_regs = ks[i].registers;
        max_regs_kernel = what + " " + arch;
      }
      if (ks[i].spill_bytes > 0) {
        ++spills;
        fmt::print("  spills: {} on {}: {} bytes\n", what, arch, ks[i].spill_bytes);
      }
    }
  }
  auto t2 = clock::now();

  codegen::SimCompiler sim;
  std::map<std::string, codegen::SimEntry> entries = sim.compile(sources);
  auto t3 = clock::now();
  int matched = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    Tensor x = make_data(c.in, c.def->name, ci + 1);
    Tensor want = evaluate_op(*c.def, c.attrs, {&x}, {c.out}, "node")[0];
    Tensor got(c.out);
    std::memset(got.raw(), 0xa5, got.nbytes());
    if (c.kernel.grid > 0) {
      sim::LaunchConfig cfg;
      cfg.kernel = c.kernel.name;
      cfg.grid = dim3(c.kernel.grid);
      cfg.block = dim3(c.kernel.block);
      ASSERT_NO_THROW(codegen::sim_launch(entries.at(c.kernel.name), cfg, {got.raw(), x.raw()},
                                          {static_cast<long long>(got.numel()), static_cast<long long>(x.numel())}))
          << c.text;
    }
    int bad = 0;
    std::string first;
    for (int64_t i = 0; i < got.numel(); ++i) {
      if (close(c.out.dtype, got.get_double(i), want.get_double(i))) continue;
      if (bad++ == 0) first = fmt::format("element {}: got {} want {}", i, got.get_double(i), want.get_double(i));
    }
    if (bad) ADD_FAILURE() << c.text << ": " << bad << " of " << got.numel() << " elements differ; " << first;
    else ++matched;
  }
  auto t4 = clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  fmt::print(
      "codegen reduction: {} cases ({} distinct kernels) for {} ops (reduce_*, softmax, log_softmax), all compiled for sm_80/sm_90 ({} NVRTC "
      "runs, the rest cached), max registers {} ({}), {} with spills; {} of {} match the reference on the simulator\n",
      cases.size(), sources.size(), ops_seen.size(), nvrtc_runs, max_regs, max_regs_kernel, spills, matched,
      cases.size());
  fmt::print("  times: emit {:.2f}s, nvrtc {:.2f}s, sim build {:.2f}s ({} modules built, {} cached), run {:.2f}s\n",
             secs(t0, t1), secs(t1, t2), secs(t2, t3), sim.compilations(), sim.cache_hits(), secs(t3, t4));
  EXPECT_EQ(spills, 0);
}

// The index map: a non-adjacent axis set decomposes both the output and the
// reduced index; keepdims gives the same kernel; bad axes are errors.
TEST(CodegenReduction, EmitsIndexMapAndRejectsBadInput) {
  const OpDef& sum = op_registry().get("reduce_sum");
  AttrMap a;
  a.set("axes", std::vector<int64_t>{0, 2});
  a.set("keepdims", int64_t{0});
  auto k = codegen::emit_reduction_op(sum, a, TensorType(DType::F32, {4, 7, 33}), TensorType(DType::F32, {7}));
  EXPECT_EQ(k.outputs, 7);
  EXPECT_EQ(k.count, 132);
  EXPECT_EQ(k.block, 256u);
  EXPECT_EQ(k.grid, 7u);
  EXPECT_NE(k.source.find("r % 33LL"), std::string::npos) << k.source;
  a.set("keepdims", int64_t{1});
  EXPECT_EQ(
      codegen::emit_reduction_op(sum, a, TensorType(DType::F32, {4, 7, 33}), TensorType(DType::F32, {1, 7, 1})).name,
      k.name);
  a.set("axes", std::vector<int64_t>{2, 0});
  EXPECT_THROW(codegen::emit_reduction_op(sum, a, TensorType(DType::F32, {4, 7, 33}), TensorType(DType::F32, {7})),
               Error);
  a.set("axes", std::vector<int64_t>{1});
  EXPECT_THROW(codegen::emit_reduction_op(sum, a, TensorType(DType::F32, {4, 7, 33}), TensorType(DType::F32, {7})),
               Error);  // wrong output size
  EXPECT_THROW(codegen::emit_reduction_op(op_registry().get("relu"), a, TensorType(DType::F32, {4, 7}),
                                          TensorType(DType::F32, {4})),
               Error);
  // Short rows: one warp.
  auto s = codegen::emit_reduction_op(sum, a, TensorType(DType::F32, {4, 7, 33}), TensorType(DType::F32, {4, 33}));
  EXPECT_EQ(s.block, 32u);
}

}  // namespace
}  // namespace kiln
