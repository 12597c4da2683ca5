// The tuning cache (compiler/tuning_cache.h) and the tuning session that
// applies it to the GEMM tile chooser (compiler/tuning.h): round trips,
// errors naming the file, keys per GPU and problem, stored winners replacing
// the default tile, and a plan built with a hand-written cache still
// computing the reference's results on the simulator.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/reference/executor.h"
#include "codegen/emitters/gemm_conv/gemm_tiles.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "runtime/version.h"
#include "tests/unit/pass_test_util.h"
#include "tests/unit/test_source_dir.h"
#include "backends/compare.h"
#include "compiler/compile.h"
#include "backends/plan_sim.h"
#include "compiler/plan_writer.h"
#include "compiler/tuning.h"
#include "compiler/tuning_cache.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using codegen::GemmMath;
using codegen::GemmProblem;
using codegen::GemmTileConfig;

std::string temp_path(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / fmt::format("kiln_tuning_test_{}", ::getpid());
  fs::create_directories(dir);
  return (dir / name).string();
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
std::string read(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

std::string load_error(const std::string& text) {
  std::string path = temp_path("bad.json");
  write(path, text);
  try {
    TuningCache::load(path, false);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

const GemmProblem kBig{GemmMath::F16, 1, 512, 512, 256};
const GemmProblem kSmall{GemmMath::F16, 1, 64, 64, 64};

// A valid tile for kBig that is not its default.
GemmTileConfig other_tile() {
  GemmTileConfig c = codegen::default_gemm_tile(kBig);
  for (const GemmTileConfig& cand : codegen::gemm_tile_candidates(kBig))
    if (!(cand == c)) return cand;
  ADD_FAILURE() << "a single candidate";
  return c;
}

std::string entry_json(const std::string& gpu, const std::string& cc, const std::string& problem,
                       const GemmTileConfig& c) {
  return fmt::format(R"({{"gpu": "{}", "cc": "{}", "kiln": "{}", "op": "gemm", "problem": "{}",
      "config": {{"bm": {}, "bn": {}, "bk": {}, "warps_m": {}, "warps_n": {}, "stages": {}}}, "ms": 0.5, "candidates": 7}})",
                     gpu, cc, kKilnVersion, problem, c.bm, c.bn, c.bk, c.warps_m, c.warps_n, c.stages);
}

std::string cache_json(const std::vector<std::string>& entries) {
  return fmt::format(R"({{"kiln_tuning_cache": 1, "entries": [{}]}})", fmt::join(entries, ",\n"));
}

TEST(TuningCache, SavesSortedAndLoadsBackTheSameEntries) {
  TuningCache c;
  GemmTileConfig t = other_tile();
  c.put({{"GPU B", "9.0", kKilnVersion, "gemm", codegen::gemm_problem_key(kBig)}, t, 0.25, 12});
  c.put({{"GPU A", "8.0", kKilnVersion, "gemm", codegen::gemm_problem_key(kSmall)},
         codegen::default_gemm_tile(kSmall),
         0.125,
         3});
  std::string a = temp_path("a.json"), b = temp_path("b.json");
  c.save(a);
  TuningCache back = TuningCache::load(a, false);
  ASSERT_EQ(back.entries().size(), 2u);
  const TuningEntry* e = back.find({"GPU B", "9.0", kKilnVersion, "gemm", codegen::gemm_problem_key(kBig)});
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->config, t);
  EXPECT_EQ(e->ms, 0.25);
  EXPECT_EQ(e->candidates, 12);
  // A split-K winner keeps its split (an entry without "split_k" reads as 1).
  GemmTileConfig split = codegen::default_gemm_tile(kSmall);
  split.split_k = 2;
  c.put({{"GPU C", "9.0", kKilnVersion, "gemm", codegen::gemm_problem_key(kSmall)}, split, 0.5, 4});
  c.save(b);
  const TuningEntry* es =
      TuningCache::load(b, false).find({"GPU C", "9.0", kKilnVersion, "gemm", codegen::gemm_problem_key(kSmall)});
  ASSERT_NE(es, nullptr);
  EXPECT_EQ(es->config.split_k, 2);
  EXPECT_EQ(back.find({"GPU A", "8.0", kKilnVersion, "gemm", codegen::gemm_problem_key(kSmall)})->config.split_k, 1);
  back.save(b);
  EXPECT_EQ(read(a), read(b));                              // deterministic bytes
  EXPECT_LT(read(a).find("GPU A"), read(a).find("GPU B"));  // key order
  EXPECT_EQ(TuningCache::load(temp_path("absent.json"), true).entries().size(), 0u);
}

TEST(TuningCache, KeysDifferPerGpuCapabilityAndProblem) {
  std::string big = codegen::gemm_problem_key(kBig), small = codegen::gemm_problem_key(kSmall);
  EXPECT_NE(big, small);
  GemmProblem bf = kBig;
  bf.math = GemmMath::BF16;
  EXPECT_NE(codegen::gemm_problem_key(bf), big);
  GemmProblem batched = kBig;
  batched.batch = 2;
  EXPECT_NE(codegen::gemm_problem_key(batched), big);
  TuningCache c;
  c.put({{"NVIDIA H100 80GB HBM3", "9.0", kKilnVersion, "gemm", big}, other_tile(), 1, 1});
  EXPECT_NE(c.find({"NVIDIA H100 80GB HBM3", "9.0", kKilnVersion, "gemm", big}), nullptr);
  EXPECT_EQ(c.find({"NVIDIA H200", "9.0", kKilnVersion, "gemm", big}), nullptr);
  EXPECT_EQ(c.find({"NVIDIA H100 80GB HBM3", "8.0", kKilnVersion, "gemm", big}), nullptr);
  EXPECT_EQ(c.find({"NVIDIA H100 80GB HBM3", "9.0", "0.0.1", "gemm", big}), nullptr);
  EXPECT_EQ(c.find({"NVIDIA H100 80GB HBM3", "9.0", kKilnVersion, "gemm", small}), nullptr);
  EXPECT_EQ(c.gpus_for("9.0", kKilnVersion), std::vector<std::string>{"NVIDIA H100 80GB HBM3"});
  EXPECT_TRUE(c.gpus_for("8.0", kKilnVersion).empty());
  EXPECT_EQ(compute_capability_of("sm_86"), "8.6");
  EXPECT_THROW(compute_capability_of("cpu"), Error);
}

TEST(TuningCache, MalformedFilesAreErrorsNamingTheFileAndTheProblem) {
  std::string path = temp_path("bad.json");
  std::string good = entry_json("G", "9.0", "f16:b1:m1:n1:k1", codegen::default_gemm_tile(kSmall));
  struct Case {
    std::string text, want;
  } cases[] = {
      {"{bad", "not valid JSON"},
      {"[]", "not a kiln tuning cache"},
      {R"({"kiln_tuning_cache": 2, "entries": []})", "format 2, this kiln reads format 1"},
      {R"({"kiln_tuning_cache": 1, "entries": {}})", "\"entries\" must be an array"},
      {cache_json({"3"}), "entry 0: not an object"},
      {cache_json({good, R"({"cc": "9.0"})"}), "entry 1: \"gpu\" must be a non-empty string"},
      {cache_json(
           {R"({"gpu": "G", "cc": "9.0", "kiln": "0.1.0", "op": "gemm", "problem": "p", "config": {"bm": "64"}})"}),
       "entry 0: \"config\".\"bm\" must be an integer from 1 to 1024"},
      {cache_json({R"({"gpu": "G", "cc": "9.0", "kiln": "0.1.0", "op": "conv", "problem": "p", "config": {}})"}),
       "entry 0: op \"conv\""},
      {cache_json({good, good}), "entry 1: a second entry for gemm f16:b1:m1:n1:k1 on G"},
  };
  for (const Case& c : cases) {
    std::string e = load_error(c.text);
    EXPECT_NE(e.find("tuning cache " + path), std::string::npos) << e;
    EXPECT_NE(e.find(c.want), std::string::npos) << c.text << "\n -> " << e;
  }
  try {
    TuningCache::load(temp_path("absent.json"), false);
    ADD_FAILURE() << "a missing cache loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent.json: cannot read the file"), std::string::npos) << e.what();
  }
}

// A session without --tune answers the emitters' questions from the cache:
// the stored tile for a stored problem of the target's capability, the
// default otherwise, and nothing once it ends.
TEST(TuningSession, AppliesStoredWinnersOfTheTargetsGpu) {
  std::string path = temp_path("winners.json");
  GemmTileConfig t = other_tile();
  std::string big = codegen::gemm_problem_key(kBig);
  write(path, cache_json({entry_json("GPU One", "9.0", big, t)}));
  Graph g;
  TuningOptions o;
  o.cache_file = path;
  {
    TuningSession s(g, o, "sm_90", "", true);
    EXPECT_EQ(codegen::choose_gemm_tile_config(kBig), t);
    EXPECT_EQ(codegen::choose_gemm_tile_config(kSmall), codegen::default_gemm_tile(kSmall));
    nlohmann::json j = s.json();
    EXPECT_EQ(j["gpu"], "GPU One");
    ASSERT_EQ(j["problems"].size(), 2u);
    EXPECT_EQ(j["problems"][0]["problem"], big);
    EXPECT_EQ(j["problems"][0]["from"], "cache");
    EXPECT_EQ(j["problems"][0]["tile"], codegen::gemm_tile_name(t));
    EXPECT_EQ(j["problems"][1]["from"], "default");
  }
  EXPECT_EQ(codegen::choose_gemm_tile_config(kBig), codegen::default_gemm_tile(kBig));
  {
    TuningSession s(g, o, "sm_80", "", true);  // no entries for cc 8.0
    EXPECT_EQ(codegen::choose_gemm_tile_config(kBig), codegen::default_gemm_tile(kBig));
  }
  // Two GPUs of the same capability: --tuning-gpu picks one, else an error.
  GemmTileConfig t2 = codegen::default_gemm_tile(kBig);
  write(path, cache_json({entry_json("GPU One", "9.0", big, t), entry_json("GPU Two", "9.0", big, t2)}));
  try {
    TuningSession s(g, o, "sm_90", "", true);
    ADD_FAILURE() << "an ambiguous cache was applied";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("several GPUs for cc 9.0 (kiln " + std::string(kKilnVersion) +
                                         "): GPU One, GPU Two; choose one with --tuning-gpu"),
              std::string::npos)
        << e.what();
  }
  o.gpu = "GPU Two";
  {
    TuningSession s(g, o, "sm_90", "", true);
    EXPECT_EQ(codegen::choose_gemm_tile_config(kBig), t2);
  }
  o.gpu = "GPU One";
  {
    TuningSession s(g, o, "sm_90", "", true);
    EXPECT_EQ(codegen::choose_gemm_tile_config(kBig), t);
  }
}

TEST(TuningSession, AStoredTileInvalidForItsProblemIsAnErrorNamingTheFile) {
  std::string path = temp_path("invalid.json");
  GemmTileConfig bad = codegen::default_gemm_tile(kBig);
  bad.bm = 48;
  write(path, cache_json({entry_json("G", "9.0", codegen::gemm_problem_key(kBig), bad)}));
  Graph g;
  TuningOptions o;
  o.cache_file = path;
  TuningSession s(g, o, "sm_90", "", true);
  try {
    codegen::choose_gemm_tile_config(kBig);
    ADD_FAILURE() << "an invalid tile was used";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tuning cache " + path + ": the tile 48x"), std::string::npos) << e.what();
  }
  TuningOptions cpu = o;
  EXPECT_THROW(TuningSession(g, cpu, "cpu", "", true), Error);
}

// The GEMM kernel step of a plan (the one whose kernel name has "matmul").
const plan::Step& gemm_step(const plan::Plan& p) {
  for (const plan::Step& s : p.steps)
    if (s.kind == plan::StepKind::Kernel && p.kernels[s.kernel].name.find("matmul") != std::string::npos) return s;
  throw std::runtime_error("no matmul kernel in the plan");
}

TEST(TuningSession, AHandWrittenCacheChangesTheGemmKernelAndTheSimulatorStillMatchesTheReference) {
  auto imported = import_onnx_file(test_source_dir() + "/tests/runtime/tuning_matmul.onnx");
  CompileOptions o;
  o.pass.target = "sm_90";
  o.pass.precision = "fp16";
  compile_graph(*imported.graph, o);
  const Graph& g = *imported.graph;
  plan::Plan def = build_plan(g, {"sm_90", "fp16", {}});
  const GemmProblem problem{GemmMath::F16, 1, 64, 80, 96};
  // The cache names a tile the default chooser does not take (the default
  // follows the model: docs/codegen.md, "Split-K"), so the plans differ.
  const GemmTileConfig chosen = codegen::default_gemm_tile(problem);
  GemmTileConfig other = chosen;
  other.split_k = 1;
  other.fold_split = false;
  if (chosen.bm == 64 && chosen.bn == 64) {
    other.bm = other.bn = 16;
    other.warps_m = other.warps_n = 1;
  } else {
    other.bm = other.bn = 64;
    other.warps_m = other.warps_n = 2;
  }
  ASSERT_FALSE(other == chosen);
  ASSERT_EQ(codegen::gemm_tile_invalid(other, problem), "");
  auto blocks_of = [](const GemmTileConfig& t) {
    return uint64_t((64 + t.bm - 1) / t.bm) * uint64_t((80 + t.bn - 1) / t.bn) * uint64_t(t.split_k);
  };
  std::string path = temp_path("sim.json");
  write(path, cache_json({entry_json("Some GPU", "9.0", codegen::gemm_problem_key(problem), other)}));
  TuningOptions to;
  to.cache_file = path;
  plan::Plan tuned;
  {
    TuningSession s(g, to, "sm_90", "", true);
    tuned = build_plan(g, {"sm_90", "fp16", {}});
    ASSERT_EQ(s.json()["problems"].size(), 1u);
    EXPECT_EQ(s.json()["problems"][0]["from"], "cache");
  }
  const plan::Step &a = gemm_step(def), &b = gemm_step(tuned);
  EXPECT_NE(def.kernels[a.kernel].name, tuned.kernels[b.kernel].name);
  // 64x80 in the default tiles, then in the cached ones (64x64: 2 blocks; 16x16: 4 x 5 = 20).
  EXPECT_EQ(uint64_t(a.grid.x) * a.grid.y * a.grid.z, blocks_of(chosen));
  EXPECT_EQ(uint64_t(b.grid.x) * b.grid.y * b.grid.z, blocks_of(other));
  auto feed = testing::random_inputs(g, 5);
  std::vector<Tensor> want = ReferenceExecutor(g).run(feed);
  for (const plan::Plan* p : {&def, &tuned}) {
    std::vector<Tensor> got = run_plan_on_sim(*p, g, feed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(compare_tensors(got[i], want[i], {2e-3, 2e-3}), "") << (p == &def ? "default" : "tuned");
  }
}

}  // namespace
}  // namespace kiln
