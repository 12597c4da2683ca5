// Shared harness of the pool / select / loss emitter tests
// (codegen_pool_test.cpp, codegen_select_test.cpp): every case's kernels are
// compiled with NVRTC for sm_80 and sm_90 (one KernelCompiler call per arch)
// and for the simulator (one SimCompiler::compile), run on the simulator and
// compared with kiln::evaluate_op: integers exactly, floats within 1e-5 abs +
// 1e-4 rel (f32/f64) or 1e-3 + 2e-3 rel (f16/bf16); NaN must match NaN.
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/core/kernel_shell.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "backends/sim/sim_module.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/registry.h"

namespace kiln::op_kernels_test {

struct Case {
  std::string op;
  AttrMap attrs;
  std::vector<Tensor> operands;
  int num_results = 1;
  std::string text;
  bool expect_error = false;  // the reference and the kernel both stop (bad data)
  std::vector<TensorType> results = {};
  std::vector<codegen::OpKernel> kernels = {};
};

// Result types by the op's inference; nullopt (and a test failure) if it rejects them.
inline std::optional<std::vector<TensorType>> infer(const Case& c) {
  Graph g;
  std::vector<Value*> vals;
  for (size_t i = 0; i < c.operands.size(); ++i)
    vals.push_back(g.add_input(fmt::format("in{}", i), c.operands[i].type()));
  InferContext ic(c.op, vals, c.attrs, c.num_results, "node");
  try {
    return infer_types(op_registry().get(c.op), ic);
  } catch (const Error& e) {
    ADD_FAILURE() << c.text << ": inference rejects it: " << e.what();
    return std::nullopt;
  }
}

// Seeded values: normal floats, or with `ties` multiples of 0.5 in [-3, 3]
// (many ties); NaNs at the given element indices; integers in [-20, 20].
inline Tensor data(const TensorType& t, uint64_t seed, bool ties = false, std::vector<int64_t> nans = {}) {
  Tensor x(t);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.5);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = ties ? static_cast<double>(static_cast<int64_t>(rng() % 13) - 6) / 2 : normal(rng);
    for (int64_t k : nans)
      if (k == i) v = NAN;
    if (is_int(t.dtype)) v = static_cast<double>(static_cast<int64_t>(rng() % 41) - 20);
    x.set_double(i, v);
  }
  return x;
}

inline bool close(DType t, double got, double want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  if (!is_float(t)) return got == want;
  const bool half = t == DType::F16 || t == DType::BF16;
  const double abs_tol = half ? 1e-3 : 1e-5, rel_tol = half ? 2e-3 : 1e-4;
  return std::fabs(got - want) <= abs_tol + rel_tol * std::fabs(want);
}

using Emit = std::vector<codegen::OpKernel> (*)(const OpDef&, const AttrMap&, const std::vector<TensorType>&,
                                                const std::vector<TensorType>&);

// Emits, compiles and runs every case; returns the number that matched.
inline void run_all(std::vector<Case>& cases, Emit emit, const char* what) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  std::vector<codegen::KernelSource> sources;
  std::map<std::string, size_t> first_case;
  for (size_t i = 0; i < cases.size(); ++i) {
    Case& c = cases[i];
    auto r = infer(c);
    if (!r) continue;
    c.results = *r;
    std::vector<TensorType> ops;
    for (const Tensor& t : c.operands) ops.push_back(t.type());
    try {
      c.kernels = emit(op_registry().get(c.op), c.attrs, ops, c.results);
    } catch (const Error& e) {
      ADD_FAILURE() << c.text << ": emitter throws: " << e.what();
      continue;
    }
    for (const auto& k : c.kernels)
      if (first_case.emplace(k.name, i).second) sources.push_back({k.name, k.source});
  }
  auto t1 = clock::now();
  codegen::KernelCache cache;
  int max_regs = 0, spills = 0;
  std::string max_regs_kernel;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks;
    ASSERT_NO_THROW(ks = compiler.compile(sources));
    for (size_t i = 0; i < ks.size(); ++i) {
      const std::string name = cases[first_case.at(sources[i].name)].text;
      EXPECT_FALSE(ks[i].cubin.empty()) << name;
      if (ks[i].registers > max_regs) {
        max_regs = ks[i].registers;
        max_regs_kernel = name + " " + arch;
      }
      if (ks[i].spill_bytes > 0) {
        ++spills;
        fmt::print("  spills: {} on {}: {} bytes\n", name, arch, ks[i].spill_bytes);
      }
    }
  }
  auto t2 = clock::now();
  codegen::SimCompiler sim;
  std::map<std::string, codegen::SimEntry> entries;
  ASSERT_NO_THROW(entries = sim.compile(sources));
  auto t3 = clock::now();
  int matched = 0;
  for (const Case& c : cases) {
    if (c.kernels.empty()) continue;
    const OpDef& def = op_registry().get(c.op);
    std::vector<const Tensor*> ins;
    for (const Tensor& t : c.operands) ins.push_back(&t);
    std::vector<Tensor> want;
    bool ref_error = false;
    try {
      want = evaluate_op(def, c.attrs, ins, c.results, "node");
    } catch (const Error&) {
      ref_error = true;
    }
    std::vector<Tensor> got;
    for (const TensorType& t : c.results) {
      got.emplace_back(t);
      std::memset(got.back().raw(), 0xa5, got.back().nbytes());
    }
    bool kernel_error = false;
    for (const auto& k : c.kernels) {
      if (k.grid == 0) continue;
      std::vector<void*> bufs;
      std::vector<long long> counts;
      auto add = [&](const Tensor& t) {
        bufs.push_back(const_cast<void*>(t.raw()));
        counts.push_back(t.numel());
      };
      if (k.results.empty())
        for (const Tensor& t : got) add(t);
      else
        for (int r : k.results) add(got.at(r));
      for (const Tensor& t : c.operands) add(t);
      sim::LaunchConfig cfg;
      cfg.kernel = k.name;
      cfg.grid = dim3(k.grid);
      cfg.block = dim3(k.block);
      cfg.shared_bytes = k.shared_bytes;
      try {
        codegen::sim_launch(entries.at(k.name), cfg, bufs, counts);
      } catch (const sim::SimError& e) {
        kernel_error = true;
        if (!c.expect_error) ADD_FAILURE() << c.text << ": kernel " << k.name << " fails: " << e.what();
        break;
      }
    }
    if (c.expect_error || ref_error || kernel_error) {
      EXPECT_TRUE(c.expect_error && ref_error && kernel_error)
          << c.text << ": expected error " << c.expect_error << ", reference error " << ref_error << ", kernel error "
          << kernel_error;
      if (c.expect_error && ref_error && kernel_error) ++matched;
      continue;
    }
    int bad = 0;
    std::string first;
    for (size_t r = 0; r < got.size(); ++r)
      for (int64_t i = 0; i < got[r].numel(); ++i) {
        if (close(c.results[r].dtype, got[r].get_double(i), want[r].get_double(i))) continue;
        if (bad++ == 0)
          first =
              fmt::format("result {} element {}: got {} want {}", r, i, got[r].get_double(i), want[r].get_double(i));
      }
    if (bad) ADD_FAILURE() << c.text << ": " << bad << " elements differ; " << first;
    else ++matched;
  }
  auto t4 = clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  fmt::print(
      "codegen {}: {} cases ({} distinct kernels), all compiled for sm_80/sm_90, max registers {} ({}), {} with "
      "spills; {} of {} match the reference on the simulator\n",
      what, cases.size(), sources.size(), max_regs, max_regs_kernel, spills, matched, cases.size());
  fmt::print("  times: emit {:.2f}s, nvrtc {:.2f}s, sim build {:.2f}s, run {:.2f}s\n", secs(t0, t1), secs(t1, t2),
             secs(t2, t3), secs(t3, t4));
  EXPECT_EQ(spills, 0);
  EXPECT_EQ(matched, static_cast<int>(cases.size()));
}

}  // namespace kiln::op_kernels_test
