// A KV cache bound in place (docs/dynamic_shapes.md; passes/kv_cache_in_place.cpp,
// runtime/in_place_cache.h): the pass keeps the graph's meaning on the
// reference backend; kiln_context_bind_in_place runs prefill and decode
// steps from one plan on one capacity buffer per cache, equal to the
// reference on the plainly concatenated cache, writing only the appended
// positions (the past's pages are read-only during the run); and every
// binding that cannot be in place is refused by name.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstring>

#include "backends/reference/executor.h"
#include "compiler/compile.h"
#include "compiler/plan_writer.h"
#include "ir/parser.h"
#include "ir/specialize.h"
#include "ir/tensor_io.h"
#include "kiln/kiln.h"
#include "ops/registry.h"
#include "passes/pass.h"
#include "runtime/engine.h"
#include "runtime/plan_format.h"

namespace kiln {
namespace {

// One attention layer with its cache: the new keys and values appended to
// the past (graph inputs of symbolic length) and returned as the present.
const char* kLayer =
    "graph @layer(%past_key: f32[1,2,past,4], %past_value: f32[1,2,past,4], %x: f32[1,2,seq,4]) -> "
    "(f32[1,2,past+seq,4], f32[1,2,past+seq,4], f32[1,2,seq,4]) symbols(seq in [1, 4], past in [0, 12]) {\n"
    "  %k = neg(%x) : f32[1,2,seq,4]\n"
    "  %v = exp(%x) : f32[1,2,seq,4]\n"
    "  %present_key = concat(%past_key, %k) {axis=2} : f32[1,2,past+seq,4]\n"
    "  %present_value = concat(%past_value, %v) {axis=2} : f32[1,2,past+seq,4]\n"
    "  %kt = transpose(%present_key) {perm=[0,1,3,2]} : f32[1,2,4,past+seq]\n"
    "  %s = matmul(%x, %kt) : f32[1,2,seq,past+seq]\n"
    "  %p = softmax(%s) {axis=-1} : f32[1,2,seq,past+seq]\n"
    "  %y = matmul(%p, %present_value) : f32[1,2,seq,4]\n"
    "  return %present_key, %present_value, %y\n"
    "}\n";

plan::Profile layer_profile() {
  return {{{"past_key", {1, 2, 0, 4}, {1, 2, 12, 4}, {1, 2, 12, 4}},
           {"past_value", {1, 2, 0, 4}, {1, 2, 12, 4}, {1, 2, 12, 4}},
           {"x", {1, 2, 1, 4}, {1, 2, 4, 4}, {1, 2, 4, 4}}}};
}

// The graph through the default pipeline into a CPU plan with `profile`.
std::vector<uint8_t> plan_bytes(const char* text, const plan::Profile& profile, std::unique_ptr<Graph>* g_out) {
  auto g = parse_graph(text, "layer.kir");
  CompileOptions o;
  o.pass.target = "cpu";
  o.symbolic = true;
  compile_graph(*g, o);
  PlanBuildOptions po{"cpu", "fp32", {}};
  po.profiles = {profile};
  std::vector<uint8_t> bytes = plan::serialize(build_plan(*g, po));
  if (g_out) *g_out = std::move(g);
  return bytes;
}

TEST(KvCacheInPlacePass, MarksTheCachesAndKeepsTheMeaningOnTheReference) {
  auto before = parse_graph(kLayer, "layer.kir");
  auto after = parse_graph(kLayer, "layer.kir");
  PassStats stats;
  ASSERT_TRUE(create_pass("kv-cache-in-place")->run(*after, PassOptions{}, stats));
  EXPECT_EQ(stats.counters["concats-marked"], 2);
  for (auto [seq, past] : {std::pair<int64_t, int64_t>{4, 0}, {1, 4}, {3, 9}}) {
    SymbolBindings b = {{"seq", seq}, {"past", past}};
    auto a = specialize_graph(*before, b, op_registry()), c = specialize_graph(*after, b, op_registry());
    std::map<std::string, Tensor> in = {{"past_key", random_tensor(TensorType(DType::F32, {1, 2, past, 4}), 1)},
                                        {"past_value", random_tensor(TensorType(DType::F32, {1, 2, past, 4}), 2)},
                                        {"x", random_tensor(TensorType(DType::F32, {1, 2, seq, 4}), 3)}};
    std::vector<Tensor> want = ReferenceExecutor(*a).run(in), got = ReferenceExecutor(*c).run(in);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i].type(), want[i].type());
      EXPECT_EQ(std::memcmp(got[i].raw(), want[i].raw(), want[i].nbytes()), 0) << "output " << i;
    }
  }
}

class CApiInPlace : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes = plan_bytes(kLayer, layer_profile(), &graph);
    ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU, &engine), KILN_OK)
        << kiln_last_error();
    ASSERT_EQ(kiln_context_create(engine, &ctx), KILN_OK) << kiln_last_error();
  }
  void TearDown() override {
    kiln_context_destroy(ctx);
    kiln_engine_destroy(engine);
  }
  kiln_status bind_pair(const char* in, const char* out, float* data, Shape capacity, kiln_dtype dt = KILN_F32,
                        kiln_memory mem = KILN_MEMORY_HOST) {
    return kiln_context_bind_in_place(ctx, in, out, data, dt, capacity.data(), int(capacity.size()), mem);
  }
  void set_past(int64_t past) {
    int64_t p[] = {1, 2, past, 4};
    ASSERT_EQ(kiln_context_set_input_shape(ctx, "past_key", p, 4), KILN_OK) << kiln_last_error();
    ASSERT_EQ(kiln_context_set_input_shape(ctx, "past_value", p, 4), KILN_OK) << kiln_last_error();
  }

  std::vector<uint8_t> bytes;
  std::unique_ptr<Graph> graph;
  kiln_engine* engine = nullptr;
  kiln_context* ctx = nullptr;
};

// Positions [0, n) of a [1, 2, cap, 4] buffer as a [1, 2, n, 4] tensor.
Tensor positions(const std::vector<float>& buf, int64_t cap, int64_t n) {
  Tensor t(TensorType(DType::F32, {1, 2, n, 4}));
  for (int64_t h = 0; h < 2; ++h)
    std::memcpy(t.data<float>() + h * n * 4, buf.data() + h * cap * 4, size_t(n * 4) * sizeof(float));
  return t;
}

TEST_F(CApiInPlace, PrefillAndDecodeStepsOnOneBufferEqualTheReference) {
  const int64_t cap = 10;
  const float kUntouched = 12345.0f;
  std::vector<float> key(2 * cap * 4, kUntouched), value(2 * cap * 4, kUntouched);
  ASSERT_EQ(bind_pair("past_key", "present_key", key.data(), {1, 2, cap, 4}), KILN_OK) << kiln_last_error();
  ASSERT_EQ(bind_pair("past_value", "present_value", value.data(), {1, 2, cap, 4}), KILN_OK) << kiln_last_error();
  // The same steps on the reference, with the cache concatenated as the
  // model defines it (each present handed over as the next past).
  Tensor ref_key(TensorType(DType::F32, {1, 2, 0, 4})), ref_value = ref_key;
  int64_t past = 0;
  for (int64_t seq : {4, 1, 1, 3}) {
    set_past(past);
    Tensor x = random_tensor(TensorType(DType::F32, {1, 2, seq, 4}), uint64_t(7 + past));
    int64_t xs[] = {1, 2, seq, 4};
    ASSERT_EQ(kiln_context_bind_input(ctx, "x", x.raw(), KILN_F32, xs, 4, KILN_MEMORY_HOST), KILN_OK)
        << kiln_last_error();
    Tensor y(TensorType(DType::F32, {1, 2, seq, 4}));
    ASSERT_EQ(kiln_context_bind_output(ctx, "y", y.raw(), KILN_F32, xs, 4, KILN_MEMORY_HOST), KILN_OK)
        << kiln_last_error();
    ASSERT_EQ(kiln_context_run(ctx), KILN_OK) << kiln_last_error();

    auto at = specialize_graph(*graph, {{"seq", seq}, {"past", past}}, op_registry());
    std::vector<Tensor> want = ReferenceExecutor(*at).run({{"past_key", ref_key}, {"past_value", ref_value}, {"x", x}});
    ref_key = want[0];
    ref_value = want[1];
    past += seq;
    Tensor got_key = positions(key, cap, past), got_value = positions(value, cap, past);
    EXPECT_EQ(std::memcmp(got_key.raw(), want[0].raw(), want[0].nbytes()), 0) << "keys after past " << past;
    EXPECT_EQ(std::memcmp(got_value.raw(), want[1].raw(), want[1].nbytes()), 0) << "values after past " << past;
    EXPECT_EQ(std::memcmp(y.raw(), want[2].raw(), want[2].nbytes()), 0) << "y after past " << past;
    // Positions past the present are never written.
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = past * 4; i < cap * 4; ++i) ASSERT_EQ(key[h * cap * 4 + i], kUntouched) << h << " " << i;
  }
}

TEST_F(CApiInPlace, RefusesWhatCannotBeInPlace) {
  std::vector<float> buf(2 * 12 * 4);
  EXPECT_EQ(bind_pair("past_key", "present_value", buf.data(), {1, 2, 12, 4}), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(),
               "input \"past_key\" and output \"present_value\" cannot share one buffer: the plan appends in place "
               "only for \"past_key\" -> \"present_key\", \"past_value\" -> \"present_value\"");
  EXPECT_EQ(bind_pair("x", "y", buf.data(), {1, 2, 12, 4}), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bind_pair("past_key", "present_key", buf.data(), {1, 2, 12, 4}, KILN_F16), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(),
               "input \"past_key\" is f32 but the buffer bound in place with output \"present_key\" is f16");
  EXPECT_EQ(bind_pair("past_key", "present_key", buf.data(), {1, 3, 8, 4}), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(),
               "input \"past_key\" is [1,2,past,4] but the buffer bound in place with output \"present_key\" is "
               "[1,3,8,4]: only dim 2 (the positions appended along) may differ");
  EXPECT_EQ(bind_pair("past_key", "present_key", buf.data(), {1, 2, 12}), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(bind_pair("past_key", "present_key", buf.data(), {1, 2, 12, 4}, KILN_F32, KILN_MEMORY_DEVICE),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(),
               "input \"past_key\" and output \"present_key\": device memory bound but the engine runs on the CPU");

  // A buffer too short for a run's present: refused at the run.
  std::vector<float> key(2 * 4 * 4), value(2 * 4 * 4), x(2 * 2 * 4), y(2 * 2 * 4);
  ASSERT_EQ(bind_pair("past_key", "present_key", key.data(), {1, 2, 4, 4}), KILN_OK) << kiln_last_error();
  ASSERT_EQ(bind_pair("past_value", "present_value", value.data(), {1, 2, 4, 4}), KILN_OK) << kiln_last_error();
  set_past(3);
  int64_t xs[] = {1, 2, 2, 4};
  ASSERT_EQ(kiln_context_bind_input(ctx, "x", x.data(), KILN_F32, xs, 4, KILN_MEMORY_HOST), KILN_OK);
  ASSERT_EQ(kiln_context_bind_output(ctx, "y", y.data(), KILN_F32, xs, 4, KILN_MEMORY_HOST), KILN_OK);
  EXPECT_EQ(kiln_context_run(ctx), KILN_ERROR_RUNTIME);
  EXPECT_STREQ(kiln_last_error(),
               "output \"present_key\" needs 5 positions along dim 2 ([1,2,5,4]), but the buffer bound in place with "
               "input \"past_key\" holds 4 ([1,2,4,4])");
  // One of the pair bound again on its own ends the pairing.
  set_past(1);
  int64_t ps[] = {1, 2, 1, 4};
  ASSERT_EQ(kiln_context_bind_input(ctx, "past_key", key.data(), KILN_F32, ps, 4, KILN_MEMORY_HOST), KILN_OK);
  EXPECT_EQ(kiln_context_run(ctx), KILN_ERROR_RUNTIME);
  EXPECT_STREQ(kiln_last_error(),
               "output \"present_key\" was bound in place with input \"past_key\", which was bound again on its own "
               "since: bind the pair again (kiln_context_bind_in_place), or the output on its own");
}

TEST(KvCacheInPlace, AStaticPlanHasNoPairs) {
  auto g = parse_graph(kLayer, "layer.kir");
  auto fixed = specialize_graph(*g, {{"seq", 1}, {"past", 3}}, op_registry());
  CompileOptions o;
  o.pass.target = "cpu";
  compile_graph(*fixed, o);
  std::vector<uint8_t> bytes = plan::serialize(build_plan(*fixed, {"cpu", "fp32", {}}));
  kiln_engine* engine = nullptr;
  kiln_context* ctx = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(bytes.data(), bytes.size(), KILN_BACKEND_CPU, &engine), KILN_OK);
  ASSERT_EQ(kiln_context_create(engine, &ctx), KILN_OK);
  std::vector<float> buf(2 * 8 * 4);
  int64_t cap[] = {1, 2, 8, 4};
  EXPECT_EQ(kiln_context_bind_in_place(ctx, "past_key", "present_key", buf.data(), KILN_F32, cap, 4, KILN_MEMORY_HOST),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(),
               "input \"past_key\" and output \"present_key\" cannot share one buffer: the plan appends to no input "
               "in place (a cache's past input of symbolic length concatenated into an output; compile the model "
               "with a shape profile)");
  kiln_context_destroy(ctx);
  kiln_engine_destroy(engine);
}

// Each position of this cache is one page, so the past's positions can be
// made read-only: a run that wrote anything but the appended positions (a
// copy of the whole present back into the buffer) would fault.
const char* kPaged =
    "graph @paged(%past: f32[2,past,1024], %x: f32[2,seq,1024]) -> (f32[2,past+seq,1024], f32[2,seq,1024]) "
    "symbols(seq in [1, 2], past in [0, 4]) {\n"
    "  %n = neg(%x) : f32[2,seq,1024]\n"
    "  %present = concat(%past, %n) {axis=1} : f32[2,past+seq,1024]\n"
    "  %r = reduce_sum(%present) {axes=[1], keepdims=1} : f32[2,1,1024]\n"
    "  %y = add(%n, %r) : f32[2,seq,1024]\n"
    "  return %present, %y\n"
    "}\n";

// Runs two steps with the past's pages read-only; exits 0 when the buffer
// and the bytes written are as expected, 3 when not (a fault: killed).
[[noreturn]] void run_paged(const std::vector<uint8_t>& bytes, int64_t cap, size_t page) {
  auto engine = rt::Engine::load(bytes.data(), bytes.size(), "paged.plan", rt::Backend::Cpu);
  rt::Context ctx(engine);
  void* mem = mmap(nullptr, 2 * cap * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  auto* cache = static_cast<float*>(mem);
  std::vector<float> x(2 * 2 * 1024, 1.0f), y(2 * 2 * 1024);
  ctx.bind_in_place("past", "present", cache, TensorType(DType::F32, {2, cap, 1024}), false);
  size_t written[2] = {0, 0};
  int64_t step = 0;
  for (auto [past, seq] : {std::pair<int64_t, int64_t>{0, 2}, {2, 1}}) {
    // The past's positions (one page each, per row) are read-only.
    for (int64_t h = 0; h < 2; ++h)
      if (past) mprotect(static_cast<char*>(mem) + h * cap * page, past * page, PROT_READ);
    ctx.set_input_shape("past", {2, past, 1024});
    ctx.bind_input("x", x.data(), TensorType(DType::F32, {2, seq, 1024}), false);
    ctx.bind_output("y", y.data(), TensorType(DType::F32, {2, seq, 1024}), false);
    ctx.run();
    written[step++] = ctx.last_in_place_bytes();
  }
  // Both rows hold -1 at positions 0..2 (the negated x of both steps).
  bool ok = written[0] == 2 * 2 * page && written[1] == 2 * 1 * page;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 3 * 1024; ++i) ok &= cache[h * cap * 1024 + i] == -1.0f;
  std::exit(ok ? 0 : 3);
}

TEST(KvCacheInPlace, WritesOnlyTheAppendedPositions) {
  plan::Profile profile = {
      {{"past", {2, 0, 1024}, {2, 4, 1024}, {2, 4, 1024}}, {"x", {2, 1, 1024}, {2, 2, 1024}, {2, 2, 1024}}}};
  std::vector<uint8_t> bytes = plan_bytes(kPaged, profile, nullptr);
  const size_t page = 4096;
  ASSERT_EQ(size_t(sysconf(_SC_PAGESIZE)), page);
  const int64_t cap = 4;
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child re-executes the test: no forked threads
  EXPECT_EXIT(run_paged(bytes, cap, page), ::testing::ExitedWithCode(0), "");
}

// The same layer with one head: a cache whose rows are one (batch 1, one
// head), so the present's positions are the buffer's first bytes.
const char* kOneHead =
    "graph @layer(%past_key: f32[1,1,past,4], %x: f32[1,1,seq,4]) -> (f32[1,1,past+seq,4], f32[1,1,seq,past+seq]) "
    "symbols(seq in [1, 4], past in [0, 12]) {\n"
    "  %k = neg(%x) : f32[1,1,seq,4]\n"
    "  %present_key = concat(%past_key, %k) {axis=2} : f32[1,1,past+seq,4]\n"
    "  %kt = transpose(%present_key) {perm=[0,1,3,2]} : f32[1,1,4,past+seq]\n"
    "  %s = matmul(%x, %kt) : f32[1,1,seq,past+seq]\n"
    "  return %present_key, %s\n"
    "}\n";

// Decode steps on the CPU path read the cache in place and run the plan's
// graph at each step's sizes: no copy of the past into a tensor of its own
// and no graph specialised per step (each step has a new past length, so a
// cache of specialised graphs never hits). The present its consumers read is
// the buffer itself: where its positions are contiguous (one head), and with
// several heads where every reader is an attention stepping over the rows by
// the capacity (kLayer's caches: the attention reads them in place, f32 and
// f16, also fused with an epilogue after it), so a step moves only its new
// positions. Each step's result equals the reference on the specialised graph.
TEST(KvCacheInPlace, DecodeStepsCopyNoPastAndSpecialiseNoGraph) {
  struct Case {
    bool one_head;
    DType dtype;
    bool epilogue;  // relu(attention): one fused node reads the caches
  };
  for (const Case c : {Case{false, DType::F32, false}, Case{false, DType::F16, false}, Case{false, DType::F32, true},
                       Case{true, DType::F32, false}}) {
    const bool one_head = c.one_head;
    const std::string dt(dtype_name(c.dtype));
    SCOPED_TRACE(fmt::format("{}, {}{}", one_head ? "one head" : "two heads", dt, c.epilogue ? ", epilogue" : ""));
    const int64_t heads = one_head ? 1 : 2, cap = 12;
    const size_t esize = dtype_size(c.dtype);
    plan::Profile profile = one_head ? plan::Profile{{{"past_key", {1, 1, 0, 4}, {1, 1, 12, 4}, {1, 1, 12, 4}},
                                                      {"x", {1, 1, 1, 4}, {1, 1, 4, 4}, {1, 1, 4, 4}}}}
                                     : layer_profile();
    std::string text = one_head ? kOneHead : kLayer;
    if (c.epilogue) {
      const std::string ret = "  return %present_key, %present_value, %y\n";
      text.replace(text.find(ret), ret.size(),
                   "  %yr = relu(%y) : f32[1,2,seq,4]\n  return %present_key, %present_value, %yr\n");
    }
    for (size_t at = 0; (at = text.find("f32[", at)) != std::string::npos; at += 4) text.replace(at, 3, dt);
    std::unique_ptr<Graph> graph;
    std::vector<uint8_t> bytes = plan_bytes(text.c_str(), profile, &graph);
    auto engine = rt::Engine::load(bytes.data(), bytes.size(), "layer.plan", rt::Backend::Cpu);
    rt::Context ctx(engine);
    std::vector<uint8_t> key(heads * cap * 4 * esize), value(heads * cap * 4 * esize);
    const TensorType capacity(c.dtype, {1, heads, cap, 4});
    ctx.bind_in_place("past_key", "present_key", key.data(), capacity, false);
    if (!one_head) ctx.bind_in_place("past_value", "present_value", value.data(), capacity, false);
    Tensor ref_key(TensorType(c.dtype, {1, heads, 0, 4})), ref_value = ref_key;
    int64_t past = 0;
    for (int64_t seq : {4, 1, 1, 1, 1}) {
      ctx.set_input_shape("past_key", {1, heads, past, 4});
      if (!one_head) ctx.set_input_shape("past_value", {1, heads, past, 4});
      Tensor x = random_tensor(TensorType(c.dtype, {1, heads, seq, 4}), uint64_t(11 + past));
      ctx.bind_input("x", x.raw(), x.type(), false);
      const std::string y_name = one_head ? "s" : c.epilogue ? "yr" : "y";
      Tensor y(TensorType(c.dtype, ctx.output_shape(y_name)));
      ctx.bind_output(y_name, y.raw(), y.type(), false);
      ctx.run();
      EXPECT_EQ(ctx.last_past_bytes_copied(), 0u) << "past " << past;
      EXPECT_EQ(ctx.specialised_runs(), 0u) << "past " << past;
      EXPECT_EQ(ctx.last_present_bytes_copied(), 0u) << "past " << past;
      // Only the new positions are written: heads x seq x head dim per cache.
      const size_t caches = one_head ? 1 : 2;
      EXPECT_EQ(ctx.last_in_place_bytes(), caches * size_t(heads * seq * 4) * esize) << "past " << past;

      auto at = specialize_graph(*graph, {{"seq", seq}, {"past", past}}, op_registry());
      std::map<std::string, Tensor> feed = {{"past_key", ref_key}, {"x", x}};
      if (!one_head) feed["past_value"] = ref_value;
      std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
      ref_key = want[0];
      if (!one_head) ref_value = want[1];
      const Tensor& want_y = want.back();
      EXPECT_EQ(std::memcmp(y.raw(), want_y.raw(), want_y.nbytes()), 0) << "past " << past;
      past += seq;
      for (int64_t h = 0; h < heads; ++h) {
        const size_t row = size_t(past * 4) * esize;
        EXPECT_EQ(
            std::memcmp(key.data() + h * cap * 4 * esize, static_cast<const uint8_t*>(ref_key.raw()) + h * row, row), 0)
            << "keys, head " << h << ", past " << past;
        if (!one_head)
          EXPECT_EQ(std::memcmp(value.data() + h * cap * 4 * esize,
                                static_cast<const uint8_t*>(ref_value.raw()) + h * row, row),
                    0)
              << "values, head " << h << ", past " << past;
      }
    }
  }
}

// A present that a node other than an attention reads (a reduction over
// it): that reader needs dense rows, so with two rows the present its
// readers get is one gather of the buffer's positions, counted.
TEST(KvCacheInPlace, ADenseReaderOfSeveralRowsGetsOneGather) {
  plan::Profile profile = {
      {{"past", {2, 0, 1024}, {2, 4, 1024}, {2, 4, 1024}}, {"x", {2, 1, 1024}, {2, 2, 1024}, {2, 2, 1024}}}};
  std::vector<uint8_t> bytes = plan_bytes(kPaged, profile, nullptr);
  auto engine = rt::Engine::load(bytes.data(), bytes.size(), "paged.plan", rt::Backend::Cpu);
  rt::Context ctx(engine);
  std::vector<float> cache(2 * 4 * 1024), x(2 * 1 * 1024, 1.0f), y(2 * 1 * 1024);
  ctx.bind_in_place("past", "present", cache.data(), TensorType(DType::F32, {2, 4, 1024}), false);
  ctx.set_input_shape("past", {2, 2, 1024});
  ctx.bind_input("x", x.data(), TensorType(DType::F32, {2, 1, 1024}), false);
  ctx.bind_output("y", y.data(), TensorType(DType::F32, {2, 1, 1024}), false);
  ctx.run();
  EXPECT_EQ(ctx.last_present_bytes_copied(), 2u * 3 * 1024 * sizeof(float));
  EXPECT_EQ(ctx.last_in_place_bytes(), 2u * 1 * 1024 * sizeof(float));
}

}  // namespace
}  // namespace kiln
