// codegen/emitters/misc/emit_tfidf.h against the reference (evaluate_op of
// tfidf_vectorizer): ONNX's test pool on i32 rows with skips, i64 tokens
// beyond 2^53 with TFIDF weights, IDF without weights, and a random table of
// 1- to 3-grams over 64 rows (more values than one block, columns shared by
// several n-grams, columns with none). Every kernel compiles with NVRTC for
// sm_80 and sm_90 without spills and matches the reference exactly on the
// simulator.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "backends/sim/sim_module.h"
#include "codegen/emitters/misc/emit_tfidf.h"
#include "codegen/nvrtc/kernel_cache.h"
#include "codegen/nvrtc/nvrtc_compiler.h"
#include "ir/error.h"
#include "ops/registry.h"

namespace kiln {
namespace {

struct Case {
  std::string text;
  AttrMap attrs;
  Tensor x;
  TensorType out;
  codegen::TfIdfKernel kernel;
};

AttrMap table(const std::vector<std::vector<int64_t>>& grams, const std::vector<int64_t>& columns, int64_t width,
              int64_t skip, const std::string& mode, const std::vector<float>& weights = {}) {
  std::vector<int64_t> tokens, sizes;
  for (const auto& g : grams) {
    tokens.insert(tokens.end(), g.begin(), g.end());
    sizes.push_back(static_cast<int64_t>(g.size()));
  }
  AttrMap a;
  a.set("gram_tokens", tokens);
  a.set("gram_sizes", sizes);
  a.set("gram_columns", columns);
  a.set("width", width);
  a.set("max_skip", skip);
  a.set("mode", mode);
  if (!weights.empty()) a.set("weights", weights);
  return a;
}

Tensor tokens(DType dt, Shape s, const std::vector<int64_t>& v) {
  Tensor t(TensorType(dt, std::move(s)));
  for (size_t i = 0; i < v.size(); ++i) t.set_int(static_cast<int64_t>(i), v[i]);
  return t;
}

std::vector<Case> all_cases() {
  std::vector<Case> c;
  auto add = [&](std::string text, AttrMap a, Tensor x, TensorType out) {
    c.push_back({std::move(text), std::move(a), std::move(x), std::move(out), {}});
  };
  const std::vector<std::vector<int64_t>> onnx_grams = {{2}, {3}, {5}, {4}, {5, 6}, {7, 8}, {6, 7}};
  const std::vector<int64_t> row = {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};
  add("onnx pool, i32 [12], skip 5", table(onnx_grams, {0, 1, 2, 3, 4, 5, 6}, 7, 5, "TF"),
      tokens(DType::I32, {12}, row), TensorType(DType::F32, {7}));
  add("onnx pool, i32 [2,6], bigrams only, skip 0", table({{5, 6}, {7, 8}, {6, 7}}, {4, 5, 6}, 7, 0, "TF"),
      tokens(DType::I32, {2, 6}, row), TensorType(DType::F32, {2, 7}));
  const int64_t big = (int64_t(1) << 60) + 1;
  add("i64 tokens past 2^53, TFIDF weighted", table({{big}, {big, big - 1}}, {1, 0}, 3, 1, "TFIDF", {0.5f, 2.0f, 9.0f}),
      tokens(DType::I64, {2, 4}, {big, big + 1, big - 1, big, big, big - 1, big, big}), TensorType(DType::F32, {2, 3}));
  add("IDF without weights", table(onnx_grams, {0, 1, 2, 3, 4, 5, 6}, 7, 5, "IDF"), tokens(DType::I32, {12}, row),
      TensorType(DType::F32, {7}));
  {
    // 40 distinct random n-grams over a vocabulary of 5, into 30 columns.
    std::mt19937_64 rng(7);
    std::vector<std::vector<int64_t>> grams;
    std::vector<int64_t> cols;
    while (grams.size() < 40) {
      std::vector<int64_t> g(1 + rng() % 3);
      for (int64_t& t : g) t = static_cast<int64_t>(rng() % 5);
      if (std::find(grams.begin(), grams.end(), g) != grams.end()) continue;
      grams.push_back(g);
      cols.push_back(static_cast<int64_t>(rng() % 30));
    }
    std::vector<float> w(30);
    for (float& x : w) x = 0.25f * static_cast<float>(rng() % 9);
    std::vector<int64_t> v(64 * 50);
    for (int64_t& t : v) t = static_cast<int64_t>(rng() % 5);
    add("random 1..3-grams, [64,50], skip 3, TFIDF", table(grams, cols, 30, 3, "TFIDF", w),
        tokens(DType::I32, {64, 50}, v), TensorType(DType::F32, {64, 30}));
  }
  return c;
}

TEST(CodegenTfIdf, CompilesAndMatchesReferenceOnSim) {
  std::vector<Case> cases = all_cases();
  std::vector<codegen::KernelSource> sources;
  for (Case& c : cases) {
    c.kernel = codegen::emit_tfidf_vectorizer(c.attrs, c.x.type(), c.out);
    sources.push_back({c.kernel.kernel.name, c.kernel.kernel.source});
  }
  codegen::KernelCache cache;
  int max_regs = 0;
  for (std::string arch : {"sm_80", "sm_90"}) {
    codegen::KernelCompiler compiler(arch, &cache);
    auto ks = compiler.compile(sources);
    for (size_t i = 0; i < ks.size(); ++i) {
      EXPECT_FALSE(ks[i].cubin.empty()) << cases[i].text;
      EXPECT_EQ(ks[i].spill_bytes, 0) << cases[i].text << " spills on " << arch;
      EXPECT_EQ(ks[i].log.find("warning"), std::string::npos) << cases[i].text << " on " << arch << ": " << ks[i].log;
      max_regs = std::max(max_regs, ks[i].registers);
    }
  }
  codegen::SimCompiler sim;
  auto entries = sim.compile(sources);
  int matched = 0;
  for (const Case& c : cases) {
    std::vector<Tensor> want =
        evaluate_op(op_registry().get("tfidf_vectorizer"), c.attrs, {&c.x}, {c.out}, "node \"tf\"");
    Tensor got(c.out);
    std::memset(got.raw(), 0xa5, got.nbytes());
    std::vector<void*> bufs;
    std::vector<long long> counts;
    auto add = [&](const Tensor& t) {
      bufs.push_back(const_cast<void*>(t.raw()));
      counts.push_back(t.numel());
    };
    add(got);
    add(c.x);
    for (const Tensor& t : c.kernel.tables) add(t);
    const codegen::SimpleKernel& k = c.kernel.kernel;
    sim::LaunchConfig cfg;
    cfg.kernel = k.name;
    cfg.grid = dim3(k.grid);
    cfg.block = dim3(k.block);
    ASSERT_NO_THROW(codegen::sim_launch(entries.at(k.name), cfg, bufs, counts)) << c.text;
    int bad = 0;
    std::string first;
    for (int64_t i = 0; i < got.numel(); ++i) {
      if (got.get_double(i) == want[0].get_double(i)) continue;
      if (bad++ == 0) first = fmt::format("element {}: got {} want {}", i, got.get_double(i), want[0].get_double(i));
    }
    if (bad) ADD_FAILURE() << c.text << ": " << bad << " differ; " << first;
    else ++matched;
    // A test that cannot fail is no test: the random case must count something.
    double sum = 0;
    for (int64_t i = 0; i < got.numel(); ++i) sum += got.get_double(i);
    EXPECT_GT(sum, 0.0) << c.text;
  }
  fmt::print("codegen tfidf: {} kernels compiled for sm_80/sm_90, max registers {}; {} of {} cases match exactly\n",
             sources.size(), max_regs, matched, cases.size());
}

TEST(CodegenTfIdf, RejectsBadInput) {
  const AttrMap a = table({{1}}, {0}, 1, 0, "TF");
  EXPECT_THROW(codegen::emit_tfidf_vectorizer(a, TensorType(DType::F32, {4}), TensorType(DType::F32, {1})), Error);
  EXPECT_THROW(codegen::emit_tfidf_vectorizer(a, TensorType(DType::I32, {2, 4}), TensorType(DType::F32, {1})), Error);
  EXPECT_THROW(codegen::emit_tfidf_vectorizer(table({{1}}, {3}, 1, 0, "TF"), TensorType(DType::I32, {4}),
                                              TensorType(DType::F32, {1})),
               Error);
}

}  // namespace
}  // namespace kiln
