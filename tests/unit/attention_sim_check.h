// What the attention kernel tests (codegen_attention_test.cpp,
// codegen_attention_gqa_test.cpp) share: seeded inputs, the tolerance per
// dtype, compiling the kernels for sm_80 and sm_90, and one kernel's run on
// the simulator compared with the reference (ops/attention_ops.cpp through
// evaluate_op).
#pragma once
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/sim/sim_module.h"
#include "codegen/emitters/attention/emit_attention.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "ops/registry.h"

namespace kiln::testing {

// Normal(0, 1) values; for a mask, BERT-style padding: -10000 at about one
// position in five, else 0.
inline Tensor attention_input(DType dt, const Shape& s, uint64_t seed, bool is_mask) {
  Tensor t(TensorType(dt, s));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = normal(rng);
    if (is_mask) v = (rng() % 5 == 0) ? -10000.0 : 0.0;
    t.set_double(i, v);
  }
  return t;
}

// f32 within 1e-5 abs + 1e-4 rel, f64 1e-9 + 1e-9, f16 1e-3 + 2e-3 (one f16
// ulp: both round a float to f16), bf16 8e-3 + 1e-2; NaN must match NaN and
// an infinity itself.
inline bool attention_close(DType t, double got, double want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  double atol = 1e-5, rtol = 1e-4;
  if (t == DType::F16) atol = 1e-3, rtol = 2e-3;
  if (t == DType::BF16) atol = 8e-3, rtol = 1e-2;
  if (t == DType::F64) atol = 1e-9, rtol = 1e-9;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

// Every kernel compiles with NVRTC for sm_80 and sm_90, without spills and
// without warnings; `what[i]` names sources[i] in a failure.
inline void expect_compiles_for_sm80_and_sm90(const std::vector<codegen::KernelSource>& sources,
                                              const std::vector<std::string>& what) {
  codegen::KernelCache cache;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    std::vector<codegen::CompiledKernel> ks = compiler.compile(sources);
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_FALSE(ks[i].cubin.empty()) << what[i];
      EXPECT_EQ(ks[i].spill_bytes, 0) << what[i] << " on " << arch << "\n" << ks[i].log;
      EXPECT_EQ(ks[i].log.find("warning"), std::string::npos) << what[i] << " on " << arch << ": " << ks[i].log;
    }
  }
}

// Launches `k` on the simulator with `bufs`; a split-KV kernel also gets its
// workspace (poisoned: undefined when a node starts) and its tile counters
// (zero), which must be zero again afterwards.
inline void sim_launch_attention(const codegen::SimEntry& entry, const codegen::AttentionKernel& k,
                                 std::vector<void*> bufs, std::vector<long long> counts, const std::string& what) {
  std::vector<float> ws(static_cast<size_t>(k.workspace_f32), NAN);
  std::vector<unsigned> tickets(static_cast<size_t>(k.tile_counters), 0u);
  if (k.kv_splits > 1) {
    bufs.push_back(ws.data());
    counts.push_back(static_cast<long long>(ws.size()));
    bufs.push_back(tickets.data());
    counts.push_back(static_cast<long long>(tickets.size()));
  }
  sim::LaunchConfig cfg;
  cfg.kernel = k.name;
  cfg.grid = dim3(k.grid);
  cfg.block = dim3(k.block);
  ASSERT_NO_THROW(codegen::sim_launch(entry, cfg, bufs, counts)) << what;
  EXPECT_EQ(std::count(tickets.begin(), tickets.end(), 0u), static_cast<long>(tickets.size()))
      << what << ": the tile counters must be zero again";
}

// One kernel's output on the simulator against the reference's.
struct AttentionOnSim {
  int64_t numel = 0, bad = 0;           // elements, and those off the tolerance
  int64_t got_nans = 0, want_nans = 0;  // NaN elements of each
  std::string first;                    // the first element off, in words
};

// Runs `k` over `ins` (q, k, v and a mask if any) into an output of type
// `out` poisoned with 0xa5 bytes (a kernel without a launch, grid 0, leaves
// it so) and compares it element by element with the reference attention
// of `attrs` over the same inputs.
inline AttentionOnSim run_attention_on_sim(const codegen::SimEntry& entry, const codegen::AttentionKernel& k,
                                           const AttrMap& attrs, const std::vector<Tensor>& ins, const TensorType& out,
                                           const std::string& what) {
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : ins) ptrs.push_back(&t);
  Tensor want = evaluate_op(op_registry().get("attention"), attrs, ptrs, {out}, "node")[0];
  Tensor got(out);
  std::memset(got.raw(), 0xa5, got.nbytes());
  std::vector<void*> bufs = {got.raw()};
  std::vector<long long> counts = {got.numel()};
  for (const Tensor& t : ins) {
    bufs.push_back(const_cast<void*>(t.raw()));
    counts.push_back(t.numel());
  }
  if (k.grid > 0) sim_launch_attention(entry, k, bufs, counts, what);
  AttentionOnSim r;
  r.numel = got.numel();
  for (int64_t i = 0; i < got.numel(); ++i) {
    r.got_nans += std::isnan(got.get_double(i));
    r.want_nans += std::isnan(want.get_double(i));
    if (attention_close(out.dtype, got.get_double(i), want.get_double(i))) continue;
    if (r.bad++ == 0) r.first = fmt::format("element {}: got {} want {}", i, got.get_double(i), want.get_double(i));
  }
  return r;
}

}  // namespace kiln::testing
