// The injective emitter against the reference: transpose, reshape, expand,
// slice, concat, split, pad, tile, gather, gather_elements, trilu,
// depth_to_space, space_to_depth,
// each with several attribute cases (negative steps, reflect/edge/wrap and
// negative pads, three-operand concat with an empty operand, gather on a
// middle axis with negative indices...) for f32/f16/i64/bool. Every kernel
// must compile with NVRTC for sm_80 and sm_90 without spills, and give on the
// simulator exactly the bytes of evaluate_op's result.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <random>

#include "codegen/emitters/data_movement/emit_injective.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_module.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/registry.h"

namespace kiln {
namespace {

using I = std::vector<int64_t>;

struct Spec {
  std::string op;
  AttrMap attrs;
  std::string text;
  std::vector<Shape> shapes;   // data operands (the dtype under test)
  std::optional<Shape> index;  // gather: the indices' shape
  DType index_dtype = DType::I64;
};

struct Case {
  const Spec* spec;
  DType dtype;
  std::vector<TensorType> in;
  std::vector<TensorType> outs;
  int result;
  codegen::InjectiveKernel kernel;
};

AttrMap attrs(std::initializer_list<std::pair<const char*, Attribute>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

std::vector<Spec> specs() {
  std::vector<Spec> s;
  auto add = [&](std::string op, AttrMap a, std::string text, std::vector<Shape> shapes,
                 std::optional<Shape> index = std::nullopt, DType idt = DType::I64) {
    s.push_back({std::move(op), std::move(a), std::move(text), std::move(shapes), std::move(index), idt});
  };
  add("transpose", attrs({{"perm", I{2, 0, 1}}}), "perm=2,0,1", {{3, 5, 7}});
  add("transpose", attrs({{"perm", I{0, 2, 3, 1}}}), "perm=0,2,3,1", {{2, 1, 33, 3}});
  add("transpose", attrs({{"perm", I{1, 0}}}), "perm=1,0", {{4, 70}});
  add("transpose", attrs({{"perm", I{3, 2, 1, 0}}}), "perm=3,2,1,0", {{1, 5, 1, 9}});
  add("reshape", attrs({{"shape", I{35, 6}}}), "shape=35,6", {{6, 5, 7}});
  add("reshape", attrs({{"shape", I{}}}), "shape=scalar", {{1, 1}});
  add("expand", attrs({{"shape", I{2, 3, 4, 5}}}), "shape=2,3,4,5", {{3, 1, 5}});
  add("expand", attrs({{"shape", I{3, 1, 300}}}), "shape=3,1,300", {{1}});
  add("slice", attrs({{"starts", I{1, 9, 0}}, {"ends", I{8, -1, 11}}, {"steps", I{2, -1, 3}}}), "steps=2,-1,3",
      {{9, 10, 11}});
  add("slice", attrs({{"starts", I{19, 0}}, {"ends", I{-1, 7}}, {"steps", I{-3, 1}}}), "steps=-3,1", {{20, 7}});
  add("slice", attrs({{"starts", I{2, 0}}, {"ends", I{2, 6}}, {"steps", I{1, 1}}}), "empty", {{5, 6}});
  add("concat", attrs({{"axis", int64_t{1}}}), "axis=1", {{2, 3, 5}, {2, 1, 5}, {2, 4, 5}});
  add("concat", attrs({{"axis", int64_t{-1}}}), "axis=-1", {{3, 4}, {3, 1}, {3, 70}});
  add("concat", attrs({{"axis", int64_t{0}}}), "axis=0,empty operand", {{2, 3}, {0, 3}, {5, 3}});
  add("split", attrs({{"axis", int64_t{1}}, {"split", I{3, 0, 7}}}), "axis=1,split=3,0,7", {{4, 10, 3}});
  add("split", attrs({{"axis", int64_t{-1}}, {"split", I{4, 5}}}), "axis=-1,split=4,5", {{5, 9}});
  add("pad", attrs({{"pads", I{1, 0, 2, 0, 3, 1}}, {"value", 1.5f}}), "constant,value=1.5", {{3, 4, 5}});
  add("pad", attrs({{"pads", I{1, 1, 1, 1}}}), "constant,value operand", {{5, 6}, {}});
  add("pad", attrs({{"pads", I{2, 0, 3, 2, 1, 4}}, {"mode", std::string("reflect")}}), "reflect", {{3, 4, 5}});
  add("pad", attrs({{"pads", I{2, 1, 2, 1}}, {"mode", std::string("reflect")}}), "reflect,dim 1", {{1, 6}});
  add("pad", attrs({{"pads", I{3, -1, 2, 4}}, {"mode", std::string("edge")}}), "edge,negative pad", {{4, 3}});
  add("pad", attrs({{"pads", I{5, 2, 6, 1}}, {"mode", std::string("wrap")}}), "wrap,pads > dim", {{4, 3}});
  add("tile", attrs({{"repeats", I{2, 1, 3}}}), "repeats=2,1,3", {{2, 3, 5}});
  add("tile", attrs({{"repeats", I{40, 2}}}), "repeats=40,2", {{1, 7}});
  add("gather", attrs({{"axis", int64_t{1}}}), "axis=1", {{4, 6, 5}}, Shape{2, 3});
  add("gather", attrs({{"axis", int64_t{1}}}), "axis=1,i32", {{4, 6, 5}}, Shape{2, 3}, DType::I32);
  add("gather", attrs({}), "axis=0", {{9, 40}}, Shape{7});
  add("gather", attrs({{"axis", int64_t{-1}}}), "axis=-1,scalar index", {{3, 4, 5}}, Shape{});
  add("gather_elements", attrs({{"axis", int64_t{1}}}), "axis=1", {{4, 6, 5}}, Shape{4, 3, 5});
  add("gather_elements", attrs({{"axis", int64_t{-1}}}), "axis=-1,i32", {{3, 7}}, Shape{2, 9}, DType::I32);
  add("trilu", attrs({{"k", int64_t{-1}}}), "upper,k=-1", {{2, 5, 7}});
  add("trilu", attrs({{"upper", int64_t{0}}, {"k", int64_t{2}}}), "lower,k=2", {{6, 4}});
  add("depth_to_space", attrs({{"blocksize", int64_t{2}}}), "b=2,DCR", {{2, 8, 3, 5}});
  add("depth_to_space", attrs({{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}}), "b=2,CRD", {{2, 8, 3, 5}});
  add("depth_to_space", attrs({{"blocksize", int64_t{3}}, {"mode", std::string("CRD")}}), "b=3,CRD", {{1, 27, 2, 3}});
  add("space_to_depth", attrs({{"blocksize", int64_t{2}}}), "b=2", {{2, 3, 6, 4}});
  add("space_to_depth", attrs({{"blocksize", int64_t{3}}}), "b=3", {{1, 2, 9, 3}});
  return s;
}

std::vector<TensorType> infer(const OpDef& def, const std::vector<TensorType>& ins, const AttrMap& a, int nout) {
  Graph g;
  std::vector<Value*> vals;
  for (size_t i = 0; i < ins.size(); ++i) vals.push_back(g.add_input(fmt::format("in{}", i), ins[i]));
  InferContext ic(def.name, vals, a, nout, "node");
  return infer_types(def, ic);
}

// Random bits (every f32/f16 pattern, NaNs included: the copy must keep them);
// bool 0/1; gather indices in [-n, n).
Tensor make_data(const TensorType& t, uint64_t seed, int64_t index_range = 0) {
  Tensor x(t);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (index_range) {
      int64_t v = static_cast<int64_t>(rng() % (2 * index_range)) - index_range;
      if (t.dtype == DType::I32) x.data<int32_t>()[i] = static_cast<int32_t>(v);
      else x.data<int64_t>()[i] = v;
    } else if (t.dtype == DType::Bool) {
      x.data<uint8_t>()[i] = rng() % 2;
    } else {
      uint64_t bits = rng();
      std::memcpy(static_cast<uint8_t*>(x.raw()) + i * dtype_size(t.dtype), &bits, dtype_size(t.dtype));
    }
  }
  return x;
}

std::string describe(const Case& c) {
  std::string s = fmt::format("{}[{}] {}(", c.spec->op, c.spec->text, dtype_name(c.dtype));
  for (size_t i = 0; i < c.in.size(); ++i) s += (i ? ", " : "") + c.in[i].str();
  return s + fmt::format(") -> result {} {}", c.result, c.outs[c.result].str());
}

TEST(CodegenInjective, EveryCaseCompilesAndMatchesReferenceOnSim) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  const std::vector<Spec> sp = specs();
  std::vector<Case> cases;
  std::vector<codegen::KernelSource> sources;
  std::map<std::string, int> per_op;
  for (const Spec& s : sp) {
    const OpDef& def = op_registry().get(s.op);
    EXPECT_TRUE(codegen::injective_supported(s.op)) << s.op;
    for (DType dt : {DType::F32, DType::F16, DType::I64, DType::Bool}) {
      std::vector<TensorType> in;
      for (const Shape& sh : s.shapes) in.emplace_back(dt, sh);
      if (s.index) in.emplace_back(s.index_dtype, *s.index);
      const int nout = s.op == "split" ? static_cast<int>(s.attrs.get_ints("split").size()) : 1;
      std::vector<TensorType> outs;
      ASSERT_NO_THROW(outs = infer(def, in, s.attrs, nout)) << s.op << " " << s.text;
      for (int r = 0; r < nout; ++r) {
        Case c{&s, dt, in, outs, r, codegen::emit_injective_op(def, s.attrs, in, outs, r)};
        sources.push_back({c.kernel.name, c.kernel.source});
        cases.push_back(std::move(c));
        ++per_op[s.op];
      }
    }
  }
  auto t1 = clock::now();

  codegen::KernelCache cache;
  int max_regs = 0, spills = 0, nvrtc_runs = 0;
  std::string max_regs_kernel;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks = compiler.compile(sources);
    nvrtc_runs += compiler.nvrtc_compilations();
    ASSERT_EQ(ks.size(), cases.size());
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_FALSE(ks[i].cubin.empty()) << describe(cases[i]);
      if (ks[i].registers > max_regs) {
        max_regs = ks[i].registers;
        max_regs_kernel = describe(cases[i]) + " " + arch;
      }
      if (ks[i].spill_bytes > 0) {
        ++spills;
        ADD_FAILURE() << "spills: " << describe(cases[i]) << " on " << arch << ": " << ks[i].spill_bytes;
      }
    }
  }
  auto t2 = clock::now();

  codegen::SimCompiler sim;
  std::map<std::string, codegen::SimEntry> entries = sim.compile(sources);
  auto t3 = clock::now();
  int exact = 0, launched = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const OpDef& def = op_registry().get(c.spec->op);
    std::vector<Tensor> ins;
    for (size_t i = 0; i < c.in.size(); ++i) {
      const bool is_index = c.spec->index && i + 1 == c.in.size();
      int64_t range = 0;
      if (is_index) {
        const int64_t r = static_cast<int64_t>(c.in[0].shape.size());
        int64_t a = c.spec->attrs.get_int("axis", 0);
        range = c.in[0].shape[a < 0 ? a + r : a];
      }
      ins.push_back(make_data(c.in[i], ci * 31 + i + 1, range));
    }
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : ins) ptrs.push_back(&t);
    Tensor want = evaluate_op(def, c.spec->attrs, ptrs, c.outs, "node")[c.result];
    Tensor got(c.outs[c.result]);
    std::memset(got.raw(), 0xa5, got.nbytes());
    if (c.kernel.grid > 0) {
      std::vector<void*> bufs = {got.raw()};
      std::vector<long long> counts = {static_cast<long long>(got.numel())};
      for (Tensor& t : ins) {
        bufs.push_back(t.raw());
        counts.push_back(t.numel());
      }
      sim::LaunchConfig cfg;
      cfg.kernel = c.kernel.name;
      cfg.grid = dim3(c.kernel.grid);
      cfg.block = dim3(c.kernel.block);
      ASSERT_NO_THROW(codegen::sim_launch(entries.at(c.kernel.name), cfg, bufs, counts)) << describe(c);
      ++launched;
    }
    ASSERT_EQ(got.nbytes(), want.nbytes()) << describe(c);
    const size_t es = dtype_size(got.dtype());
    int bad = 0;
    int64_t first = -1;
    for (int64_t i = 0; i < got.numel(); ++i)
      if (std::memcmp(got.bytes().data() + i * es, want.bytes().data() + i * es, es) != 0 && bad++ == 0) first = i;
    if (bad)
      ADD_FAILURE() << describe(c) << ": " << bad << " of " << got.numel() << " elements differ, first " << first;
    else ++exact;
  }
  auto t4 = clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::string ops;
  for (const auto& [op, n] : per_op) ops += fmt::format(" {}:{}", op, n);
  fmt::print(
      "codegen injective: {} kernels ({} attribute cases x f32/f16/i64/bool), all compiled for sm_80/sm_90 ({} NVRTC "
      "runs, the rest cached), max registers {} ({}), {} with spills; {} of {} match the reference bit for bit on the "
      "simulator ({} launched, the rest empty)\n  per op:{}\n",
      sources.size(), sp.size(), nvrtc_runs, max_regs, max_regs_kernel, spills, exact, cases.size(), launched, ops);
  fmt::print("  times: emit {:.2f}s, nvrtc {:.2f}s, sim build {:.2f}s ({} modules built, {} cached), run {:.2f}s\n",
             secs(t0, t1), secs(t1, t2), secs(t2, t3), sim.compilations(), sim.cache_hits(), secs(t3, t4));
  EXPECT_EQ(exact, static_cast<int>(cases.size()));
}

// Gather with an index outside [-n, n): the reference raises an error; the
// kernel writes zero bytes there (and reads nothing out of bounds).
TEST(CodegenInjective, GatherOutOfRangeIndexWritesZero) {
  const OpDef& def = op_registry().get("gather");
  AttrMap a = attrs({{"axis", int64_t{0}}});
  std::vector<TensorType> in = {TensorType(DType::F32, {3, 2}), TensorType(DType::I64, {4})};
  std::vector<TensorType> outs = infer(def, in, a, 1);
  codegen::InjectiveKernel k = codegen::emit_injective_op(def, a, in, outs);
  codegen::SimCompiler sim;
  auto entries = sim.compile({{k.name, k.source}});
  Tensor x(in[0]), idx(in[1]), got(outs[0]);
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>(i + 1);
  const int64_t iv[] = {2, 3, -4, -1};
  for (int i = 0; i < 4; ++i) idx.data<int64_t>()[i] = iv[i];
  EXPECT_THROW(evaluate_op(def, a, {&x, &idx}, outs, "node"), Error);
  sim::LaunchConfig cfg;
  cfg.kernel = k.name;
  cfg.grid = dim3(k.grid);
  cfg.block = dim3(k.block);
  codegen::sim_launch(entries.at(k.name), cfg, {got.raw(), x.raw(), idx.raw()}, {8, 6, 4});
  const float want[] = {5, 6, 0, 0, 0, 0, 5, 6};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got.data<float>()[i], want[i]) << i;
}

TEST(CodegenInjective, RejectsOpsWithoutIndexMap) {
  const OpDef& add = op_registry().get("add");
  EXPECT_FALSE(codegen::injective_supported("add"));
  EXPECT_THROW(codegen::emit_injective_op(add, {}, {TensorType(DType::F32, {2})}, {TensorType(DType::F32, {2})}),
               Error);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Index arithmetic is 32-bit while every buffer has fewer than 2^31 elements,
// 64-bit beyond (only emitted and compiled here: the buffers would be 6 GiB).
TEST(CodegenInjective, WideIndexingPastTwoToThe31Elements) {
  const OpDef& def = op_registry().get("expand");
  AttrMap a;
  a.set("shape", std::vector<int64_t>{3, int64_t{1} << 30});
  std::vector<TensorType> in = {TensorType(DType::F16, {1})};
  codegen::InjectiveKernel wide = codegen::emit_injective_op(def, a, in, {TensorType(DType::F16, {3, 1 << 30})});
  EXPECT_NE(wide.source.find("const long long o1 = r % 1073741824LL;"), std::string::npos) << wide.source;
  EXPECT_EQ(wide.grid, 8192u);
  a.set("shape", std::vector<int64_t>{3, 1 << 20});
  codegen::InjectiveKernel narrow = codegen::emit_injective_op(def, a, in, {TensorType(DType::F16, {3, 1 << 20})});
  EXPECT_NE(narrow.source.find("const int o1 = r % 1048576;"), std::string::npos) << narrow.source;
  codegen::KernelCache cache;
  codegen::KernelCompiler compiler("sm_90", &cache);
  std::vector<codegen::CompiledKernel> ks = compiler.compile({{wide.name, wide.source}, {narrow.name, narrow.source}});
  ASSERT_EQ(ks.size(), 2u);
  EXPECT_FALSE(ks[0].cubin.empty());
  EXPECT_FALSE(ks[1].cubin.empty());
}

}  // namespace
}  // namespace kiln
