// Plan files (runtime/plan_format.h, compiler/plan_writer.h): byte-identical
// output for the same model and options, and loading rejects truncated,
// corrupt, altered, wrong-version and wrong-arch plans with messages that
// name what is wrong, expected and found.
#include <gtest/gtest.h>

#include <xxhash.h>

#include <cstring>

#include "backends/reference/executor.h"
#include "ir/error.h"
#include "runtime/plan_graph.h"
#include "runtime/version.h"
#include "tests/unit/plan_test_util.h"

namespace kiln {
namespace {

// The error message of loading `bytes` (empty if it loads).
std::string load_error(const std::vector<uint8_t>& bytes, const plan::LoadOptions& o = {}) {
  try {
    plan::deserialize(bytes.data(), bytes.size(), "m.plan", o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A plan with GPU kernels for `arch`, made by hand (no NVRTC needed).
plan::Plan fake_gpu_plan(const std::string& arch, bool with_ptx) {
  plan::Plan p;
  p.meta.kiln_version = kKilnVersion;
  p.meta.target = arch;
  p.meta.precision = "fp32";
  p.meta.archs = {arch};
  p.meta.gpu_kernels = true;
  p.graph_text = "graph @m(%x: f32[4]) -> (f32[4]) {\n  %y = relu(%x) : f32[4]\n  return %y\n}\n";
  p.kernels.push_back({"k", "extern \"C\" __global__ void k() {}", arch, {1, 2, 3, 4}, with_ptx ? ".version 8.0" : ""});
  plan::Step s;
  s.kernel = 0;
  s.grid = {1, 1, 1};
  s.block = {4, 1, 1};
  s.args = {{plan::BufferKind::Output, 0, 0, 16, 4}, {plan::BufferKind::Input, 0, 0, 16, 4}};
  p.steps.push_back(s);
  return p;
}

uint64_t section_offset(const std::vector<uint8_t>& b, uint32_t id) {
  uint32_t count;
  std::memcpy(&count, b.data() + 24, 4);
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t sid;
    std::memcpy(&sid, b.data() + 40 + 32 * i, 4);
    if (sid == id) {
      uint64_t off;
      std::memcpy(&off, b.data() + 40 + 32 * i + 8, 8);
      return off;
    }
  }
  return 0;
}

const char* kSmall = R"(graph @m(%x: f32[2,3]) -> (f32[2,3], f32[2]) {
    %w = const f32[2,3] dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]>
    %big = const f32[2,3,4] dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0]>
    %a = mul(%x, %w) : f32[2,3]
    %r = reduce_sum(%big) {axes=[1, 2], keepdims=0} : f32[2]
    return %a, %r
  })";

TEST(PlanFormat, SerializeDeserializeKeepsEveryField) {
  plan::Plan p = fake_gpu_plan("sm_90", true);
  p.weights.push_back({TensorType(DType::F16, {3, 5}), 0, 30});
  p.weight_data.assign(256 + 7, 9);
  p.weights.push_back({TensorType(DType::I8, {7}, Layout::Default), 256, 7});
  p.meta.graph_constants = 0;
  p.memory.arena_bytes = 512;
  p.memory.values.push_back({3, 1, 2, 256, 16});
  std::vector<uint8_t> b = plan::serialize(p);
  EXPECT_EQ(b.size() % plan::kAlignment, 0u);
  plan::Plan q = plan::deserialize(b.data(), b.size());
  EXPECT_EQ(q.meta.archs, p.meta.archs);
  EXPECT_TRUE(q.meta.gpu_kernels);
  EXPECT_EQ(q.graph_text, p.graph_text);
  ASSERT_EQ(q.weights.size(), 2u);
  EXPECT_EQ(q.weights[0].type, p.weights[0].type);
  EXPECT_EQ(q.weights[1].offset, 256u);
  EXPECT_EQ(q.weight_data, p.weight_data);
  ASSERT_EQ(q.kernels.size(), 1u);
  EXPECT_EQ(q.kernels[0].cubin, p.kernels[0].cubin);
  EXPECT_EQ(q.kernels[0].ptx, p.kernels[0].ptx);
  ASSERT_EQ(q.steps.size(), 1u);
  EXPECT_EQ(q.steps[0].args.size(), 2u);
  EXPECT_EQ(q.steps[0].args[1].kind, plan::BufferKind::Input);
  EXPECT_EQ(q.memory.arena_bytes, 512u);
  ASSERT_EQ(q.memory.values.size(), 1u);
  EXPECT_EQ(q.memory.values[0].offset, 256);
  EXPECT_EQ(plan::serialize(q), b);
}

TEST(PlanFormat, GraphAndWeightsRoundTrip) {
  auto g = testing::parse(kSmall);
  plan::Plan p = build_plan(*g, {});
  EXPECT_FALSE(p.meta.gpu_kernels);
  EXPECT_NE(p.meta.no_gpu_reason.find("target cpu"), std::string::npos) << p.meta.no_gpu_reason;
  EXPECT_EQ(p.meta.graph_constants, 2u);
  // The 24-element constant prints by reference: its bytes come from the weights.
  EXPECT_NE(p.graph_text.find("<xxh64:"), std::string::npos) << p.graph_text;
  std::vector<uint8_t> b = plan::serialize(p);
  plan::Plan q = plan::deserialize(b.data(), b.size());
  auto h = plan::load_graph(q);
  ASSERT_EQ(h->constants().size(), 2u);
  EXPECT_TRUE(h->constants()[1]->data().same_bytes(g->constants()[1]->data()));
  auto feed = testing::random_inputs(*g);
  auto want = ReferenceExecutor(*g).run(feed);
  auto got = ReferenceExecutor(*h).run(feed);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].same_bytes(want[0]));
  EXPECT_TRUE(got[1].same_bytes(want[1]));
  EXPECT_EQ(got[1].get_double(0), 78.0);  // 1 + ... + 12
}

TEST(PlanFormat, SameModelTwiceGivesIdenticalBytes) {
  auto a = testing::plan_bytes(*testing::compile_onnx(testing::tiny_cnn_path()));
  auto b = testing::plan_bytes(*testing::compile_onnx(testing::tiny_cnn_path()));
  EXPECT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b);
  // Other options give another plan.
  auto c = plan::serialize(build_plan(*testing::compile_onnx(testing::tiny_cnn_path()), {"cpu", "fp16", {}}));
  EXPECT_FALSE(a == c);
}

class PlanReject : public ::testing::Test {
 protected:
  std::vector<uint8_t> good = plan::serialize(build_plan(*testing::parse(kSmall), {}));
};

TEST_F(PlanReject, Truncated) {
  ASSERT_EQ(load_error(good), "");
  auto b = good;
  b.resize(b.size() - 300);
  EXPECT_EQ(load_error(b),
            fmt::format("m.plan: truncated: the header says the plan has {} bytes, found {}", good.size(), b.size()));
  b.resize(20);
  EXPECT_EQ(load_error(b), "m.plan: truncated: 20 bytes, a plan header needs 40");
  b.clear();
  EXPECT_NE(load_error(b).find("truncated"), std::string::npos);
}

TEST_F(PlanReject, NotAPlan) {
  std::vector<uint8_t> b(good.begin(), good.end());
  std::memcpy(b.data(), "PK\x03\x04zzzz", 8);
  EXPECT_EQ(load_error(b), "m.plan: not a kiln plan: magic is 'PK??zzzz', expected 'KILNPLAN'");
}

TEST_F(PlanReject, WrongFormatVersion) {
  auto b = good;
  b[8] = 9;
  EXPECT_EQ(load_error(b),
            "m.plan: plan format version 9, this runtime reads versions 1 to 2 (recompile the model with this kiln)");
  b[8] = 0;
  EXPECT_EQ(load_error(b),
            "m.plan: plan format version 0, this runtime reads versions 1 to 2 (recompile the model with this kiln)");
}

TEST_F(PlanReject, CorruptSectionBytes) {
  // A flipped bit in the weights (the graph still parses): the checksum catches it.
  auto b = good;
  uint64_t w = section_offset(b, 3);
  ASSERT_GT(w, 0u);
  b[w + plan::kAlignment + 4] ^= 0x10;
  std::string e = load_error(b);
  EXPECT_NE(e.find("m.plan: section 'weights' is corrupt: xxh64 is "), std::string::npos) << e;
  EXPECT_NE(e.find(", expected "), std::string::npos) << e;
  auto g = good;
  g[section_offset(g, 2) + 5] ^= 1;
  EXPECT_NE(load_error(g).find("section 'graph' is corrupt"), std::string::npos) << load_error(g);
}

TEST_F(PlanReject, AlteredHeader) {
  // A section offset moved: the header checksum fails before the offset is used.
  auto b = good;
  b[40 + 32 * 2 + 8] += 1;
  EXPECT_NE(load_error(b).find("m.plan: corrupt header: xxh64 is "), std::string::npos) << load_error(b);
  auto c = good;
  c[24] = 200;  // section count
  EXPECT_NE(load_error(c).find("corrupt header: 200 sections"), std::string::npos) << load_error(c);
}

TEST_F(PlanReject, AnotherKilnVersion) {
  plan::Plan p = plan::deserialize(good.data(), good.size(), "m.plan");
  p.meta.kiln_version = "0.0.9";
  EXPECT_EQ(load_error(plan::serialize(p)), fmt::format("m.plan: the plan was built by kiln 0.0.9, this runtime is "
                                                        "kiln {} (recompile the model with this kiln)",
                                                        kKilnVersion));
}

TEST_F(PlanReject, TrailingBytes) {
  auto b = good;
  b.push_back(0);
  EXPECT_NE(load_error(b).find("trailing bytes"), std::string::npos) << load_error(b);
}

TEST(PlanArch, CubinForItsArchPtxForNewerRejectedForOlder) {
  plan::Plan p = fake_gpu_plan("sm_86", true);
  std::vector<uint8_t> b = plan::serialize(p);
  EXPECT_EQ(load_error(b, {"sm_86"}), "");
  EXPECT_EQ(plan::select_code(p, "sm_86").kind, "cubin");
  EXPECT_EQ(plan::select_code(p, "sm_89").describe(), "CUBIN sm_86");  // binary compatible within sm_8x
  EXPECT_EQ(plan::select_code(p, "sm_90").kind, "ptx");
  EXPECT_EQ(load_error(b, {"sm_80"}),
            "m.plan: wrong GPU arch: the plan's kernels are for sm_86, this GPU is sm_80 (a CUBIN runs on its own "
            "major arch, PTX JIT only on the same or a newer arch; recompile with --target sm_80)");
  plan::Plan no_ptx = fake_gpu_plan("sm_86", false);
  EXPECT_THROW(plan::select_code(no_ptx, "sm_90"), Error);
  EXPECT_NE(load_error(plan::serialize(no_ptx), {"sm_90"}).find("wrong GPU arch"), std::string::npos);
}

TEST(PlanArch, PlanWithoutKernelsSaysWhy) {
  plan::Plan p = build_plan(*testing::parse(kSmall), {});
  try {
    plan::select_code(p, "sm_90");
    FAIL() << "selected code for a plan without kernels";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the plan has no GPU kernels (compiled for target cpu"), std::string::npos)
        << e.what();
  }
}

TEST(PlanBindings, OutsideTheArenaOrWeightsAreRejected) {
  plan::Plan p = fake_gpu_plan("sm_90", true);
  p.steps[0].args[0] = {plan::BufferKind::Arena, 0, 64, 16, 4};
  p.memory.arena_bytes = 64;
  std::vector<uint8_t> b = plan::serialize(p);
  EXPECT_EQ(load_error(b), "m.plan: launch step 0 binds 16 bytes at arena offset 64, the arena has 64");
  p.steps[0].args[0] = {plan::BufferKind::Weight, 3, 0, 16, 4};
  b = plan::serialize(p);
  EXPECT_EQ(load_error(b), "m.plan: launch step 0 binds weight 3, the plan has 0");
}

// An absent optional operand is the explicit "none" argument: it round-trips,
// and one with a buffer's fields, or in a copy step, is refused.
TEST(PlanBindings, AnAbsentOperandIsAnExplicitNoneArgument) {
  plan::Plan p = fake_gpu_plan("sm_90", true);
  p.steps[0].args.push_back({plan::BufferKind::None, 0, 0, 0, 0});
  std::vector<uint8_t> b = plan::serialize(p);
  plan::Plan q = plan::deserialize(b.data(), b.size(), "m.plan");
  ASSERT_EQ(q.steps[0].args.size(), 3u);
  EXPECT_EQ(q.steps[0].args[2].kind, plan::BufferKind::None);
  EXPECT_EQ(plan::serialize(q), b);
  p.steps[0].args[2] = {plan::BufferKind::None, 0, 64, 16, 4};
  b = plan::serialize(p);
  EXPECT_EQ(
      load_error(b),
      "m.plan: section 'launches': step 0 argument 2 is an absent operand (kind none) with index 0, offset 64, 16 bytes, "
      "4 elements (all must be 0)");
  p.steps[0].args.pop_back();
  p.steps[0].kind = plan::StepKind::Copy;
  p.steps[0].args[1] = {plan::BufferKind::None, 0, 0, 0, 0};
  b = plan::serialize(p);
  EXPECT_EQ(load_error(b), "m.plan: section 'launches': copy step 0 has an absent operand (kind none) as argument 1");
}

// The arena's zeroed region (the tile counters of folded split-K kernels):
// written only when there is one (a plan without it keeps its bytes), read
// back exactly, and refused when it is not an aligned range of the arena.
TEST(PlanFormat, ZeroedRegionRoundTripsAndIsChecked) {
  plan::Plan p = fake_gpu_plan("sm_90", true);
  p.memory.arena_bytes = 512;
  const std::vector<uint8_t> without = plan::serialize(p);
  EXPECT_EQ(plan::deserialize(without.data(), without.size()).memory.zeroed_bytes, 0u);
  p.memory.zeroed_offset = 256;
  p.memory.zeroed_bytes = 64;
  std::vector<uint8_t> b = plan::serialize(p);
  EXPECT_NE(b, without);
  plan::Plan q = plan::deserialize(b.data(), b.size());
  EXPECT_EQ(q.memory.zeroed_offset, 256u);
  EXPECT_EQ(q.memory.zeroed_bytes, 64u);
  EXPECT_EQ(plan::serialize(q), b);
  p.memory.zeroed_offset = 480;  // 480 + 64 > 512
  b = plan::serialize(p);
  EXPECT_EQ(load_error(b),
            "m.plan: section 'memory': zeroed region of 64 bytes at 480 is not an aligned range of the arena of 512 "
            "bytes");
  p.memory.zeroed_offset = 258;  // not 4-byte aligned
  b = plan::serialize(p);
  EXPECT_NE(load_error(b).find("is not an aligned range"), std::string::npos);
}

// Mutations inside sections with their checksums recomputed (what a bug or a
// malicious file could hold): every one either loads or is a kiln::Error,
// never a crash or another exception.
TEST(PlanFuzz, MutatedSectionsWithValidChecksumsNeverCrash) {
  plan::Plan p = fake_gpu_plan("sm_90", true);
  p.weights.push_back({TensorType(DType::F32, {4}), 0, 16});
  p.weight_data.assign(16, 1);
  p.memory.arena_bytes = 256;
  p.memory.values.push_back({0, 0, 0, 0, 16});
  const std::vector<uint8_t> good = plan::serialize(p);
  uint32_t count;
  std::memcpy(&count, good.data() + 24, 4);
  uint64_t state = 12345;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull, state >> 33; };
  int loaded = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = good;
    uint32_t s = uint32_t(next() % count);
    uint8_t* entry = b.data() + 40 + 32 * s;
    uint64_t off, size;
    std::memcpy(&off, entry + 8, 8);
    std::memcpy(&size, entry + 16, 8);
    if (size == 0) continue;
    for (int k = 0; k < 1 + int(next() % 3); ++k) b[off + next() % size] = uint8_t(next());
    uint64_t sum = XXH64(b.data() + off, size, 0);
    std::memcpy(entry + 24, &sum, 8);
    uint64_t zero = 0;
    std::memcpy(b.data() + 32, &zero, 8);
    uint64_t hsum = XXH64(b.data(), 40 + 32 * count, 0);
    std::memcpy(b.data() + 32, &hsum, 8);
    try {
      plan::Plan q = plan::deserialize(b.data(), b.size(), "fuzz.plan");
      plan::load_graph(q, "fuzz.plan");
      ++loaded;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
  fmt::print("  {} mutated plans loaded, {} rejected\n", loaded, rejected);
}

}  // namespace
}  // namespace kiln
