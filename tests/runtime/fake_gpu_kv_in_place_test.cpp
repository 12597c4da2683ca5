// A KV cache bound in place on the runtime's GPU path (strict fake driver;
// the launches run the plan's kernels on the simulator). One sm_90 plan with
// a shape profile runs a prefill and decode steps of a decoder layer's
// attention over its cache (grouped-query: 4 query heads over 2 key/value
// heads) with each cache one device buffer of `capacity` positions bound as
// both the past input and the present output (kiln_context_bind_in_place):
// the plan's in-place append writes only the new positions at offset `past`
// (the concat's own kernel does not run), the attention reads K and V rows
// `capacity` positions apart, and no copy of the cache is made per step.
// Each step's output equals the copy-back loop's (the same plan with the
// past uploaded and the present downloaded) and the reference backend's.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <tuple>

#include "compiler/compile_model.h"
#include "ir/specialize.h"
#include "ir/tensor_io.h"
#include "kiln/kiln.hpp"
#include "ops/registry.h"
#include "runtime/gpu_executor.h"
#include "runtime/plan_format.h"
#include "tests/runtime/fake_gpu_util.h"

namespace kiln::fakegpu {
namespace {

using FakeGpuKvInPlace = FakeGpu;

// DT: the dtype (f16: the tensor-core attention kernel; f32: the SIMT one).
// The attention's head merge (to [1, seq, 256]) is its fused epilogue.
constexpr const char* kDecoderLayer =
    R"(graph @m(%q: DT[1,4,seq,64], %k: DT[1,2,seq,64], %v: DT[1,2,seq,64], %past_key: DT[1,2,past,64], %past_value: DT[1,2,past,64]) -> (DT[1,seq,256], DT[1,2,past+seq,64], DT[1,2,past+seq,64])
    symbols(seq in [1, 8], past in [0, 24]) {
    %kt = tanh(%k) : DT[1,2,seq,64]
    %present_key = concat(%past_key, %kt) {axis=2} : DT[1,2,past+seq,64]
    %present_value = concat(%past_value, %v) {axis=2} : DT[1,2,past+seq,64]
    %o = attention(%q, %present_key, %present_value) {scale=0.125, causal=1} : DT[1,4,seq,64]
    %ot = transpose(%o) {perm=[0,2,1,3]} : DT[1,seq,4,64]
    %om = reshape(%ot) {shape=[1,seq,256]} : DT[1,seq,256]
    return %om, %present_key, %present_value
  })";

// The same with the present keys also read by a pointwise node.
constexpr const char* kDenseReader =
    R"(graph @m(%q: DT[1,4,seq,64], %k: DT[1,2,seq,64], %v: DT[1,2,seq,64], %past_key: DT[1,2,past,64], %past_value: DT[1,2,past,64]) -> (DT[1,4,seq,64], DT[1,2,past+seq,64], DT[1,2,past+seq,64], DT[1,2,past+seq,64])
    symbols(seq in [1, 8], past in [0, 24]) {
    %present_key = concat(%past_key, %k) {axis=2} : DT[1,2,past+seq,64]
    %present_value = concat(%past_value, %v) {axis=2} : DT[1,2,past+seq,64]
    %o = attention(%q, %present_key, %present_value) {scale=0.125, causal=1} : DT[1,4,seq,64]
    %n = neg(%present_key) : DT[1,2,past+seq,64]
    return %o, %present_key, %present_value, %n
  })";

std::string with_dtype(std::string text, const std::string& dt) {
  for (size_t at; (at = text.find("DT[")) != std::string::npos;) text.replace(at, 2, dt);
  return text;
}

plan::Plan decoder_plan(const std::string& text, const std::string& arch = "sm_90") {
  std::unique_ptr<Graph> g = parse_graph(text);
  CompileOptions co;
  co.pass.target = arch;
  co.symbolic = true;
  compile_graph(*g, co);
  PlanBuildOptions o{arch, "fp32", {}};
  plan::InputProfile q{"q", {1, 4, 1, 64}, {1, 4, 1, 64}, {1, 4, 8, 64}};
  plan::InputProfile k{"k", {1, 2, 1, 64}, {1, 2, 1, 64}, {1, 2, 8, 64}}, v = k;
  v.input = "v";
  plan::InputProfile pk{"past_key", {1, 2, 0, 64}, {1, 2, 16, 64}, {1, 2, 24, 64}}, pv = pk;
  pv.input = "past_value";
  o.profiles = {plan::Profile{{q, k, v, pk, pv}}};
  return build_plan(*g, o);
}

// Every launch the fake driver runs: its kernel, buffers and (shape-generic
// kernels) kiln_syms, which the simulator reads from the last argument.
struct Launch {
  std::string kernel;
  std::vector<CUdeviceptr> args;
  plan::LaunchSymbols syms;
};
std::vector<Launch>& launches() {
  static std::vector<Launch> l;
  return l;
}
int recording_launch(const char* name, const unsigned* grid, const unsigned* block, unsigned shared,
                     const CUdeviceptr* args) {
  const SimKernel& k = kernels().at(name);
  Launch l{name, std::vector<CUdeviceptr>(args, args + k.counts.size()), {}};
  if (!k.counts.empty() && k.counts.back() == 1 && args[k.counts.size() - 1])
    std::memcpy(&l.syms, reinterpret_cast<const void*>(args[k.counts.size() - 1]), sizeof(l.syms));
  launches().push_back(std::move(l));
  return launch(name, grid, block, shared, args);
}

long long sym_of(const std::vector<std::string>& names, const plan::LaunchSymbols& s, const std::string& name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return s.v[i];
  ADD_FAILURE() << "the launch takes no symbol " << name;
  return -1;
}

// Copies (host to device, device to host, device to device) the driver
// logged outside graph captures since the last call.
std::map<std::string, int> copies_logged() {
  std::map<std::string, int> n;
  std::string log = fake().take_log();
  for (size_t at = 0, end; at < log.size(); at = end + 1) {
    end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(at, end - at);
    for (const char* kind : {"htod", "dtoh", "dtod"})
      if (line.rfind(kind, 0) == 0) ++n[kind];
  }
  return n;
}

// The present's first `len` positions of each row, out of a buffer of
// `capacity` positions per row.
Tensor positions(const std::vector<uint8_t>& buffer, DType dt, int64_t rows, int64_t capacity, int64_t len) {
  Tensor t(TensorType(dt, {1, rows, len, 64}));
  const size_t pos = 64 * dtype_size(dt);
  for (int64_t r = 0; r < rows; ++r)
    if (len) std::memcpy(static_cast<uint8_t*>(t.raw()) + r * len * pos, buffer.data() + r * capacity * pos, len * pos);
  return t;
}

class KvInPlace : public FakeGpuKvInPlace, public ::testing::WithParamInterface<const char*> {};

TEST_P(KvInPlace, PrefillAndDecodeStepsAppendInPlaceWithoutCopyingTheCache) {
  const std::string dt_name = GetParam();
  const DType dt = dt_name == "f16" ? DType::F16 : DType::F32;
  const std::string text = with_dtype(kDecoderLayer, dt_name);
  const plan::Plan p = decoder_plan(text);
  ASSERT_TRUE(p.meta.gpu_kernels) << p.meta.no_gpu_reason;
  ASSERT_EQ(p.in_place_appends.size(), 2u) << "the key and the value caches can be bound in place";
  // One append kernel per cache (each reads its own capacity symbol).
  const std::string appends_of[2] = {p.kernels.at(p.in_place_appends[0].append.kernel).name,
                                     p.kernels.at(p.in_place_appends[1].append.kernel).name};
  const std::string concat = p.kernels.at(p.steps.at(p.in_place_appends[0].concat_step).kernel).name;
  const std::string& kcap = p.in_place_appends[0].capacity_symbol;
  const std::string& vcap = p.in_place_appends[1].capacity_symbol;
  const plan::GenericLaunch* attention = nullptr;
  for (const plan::GenericLaunch& gl : p.generic_launches)
    if (p.kernels[p.steps[gl.step].kernel].name.find("attn") != std::string::npos) attention = &gl;
  ASSERT_NE(attention, nullptr);
  const std::string attention_kernel = p.kernels[p.steps[attention->step].kernel].name;
  EXPECT_EQ(dt == DType::F16, attention_kernel.find("attn_tc") != std::string::npos) << attention_kernel;
  // Reading the caches through their capacity, it keeps its head merge fused.
  EXPECT_NE(attention_kernel.find("fused_attention"), std::string::npos) << attention_kernel;
  EXPECT_EQ(p.steps.size(), 4u) << "tanh, two concats (appends when bound), the attention with its head merge";

  std::vector<uint8_t> bytes = plan_bytes(p);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "decoder.plan", rt::Backend::Gpu);
  rt::Context ctx(e), copy_back(e);
  std::unique_ptr<Graph> g = parse_graph(text);

  CallerStream caller;  // the application's current context, as for its own cuMemAlloc
  auto mem_alloc = fake().sym<int (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
  auto mem_free = fake().sym<int (*)(CUdeviceptr)>("cuMemFree_v2");
  auto htod = fake().sym<int (*)(CUdeviceptr, const void*, size_t)>("cuMemcpyHtoD_v2");
  auto dtoh = fake().sym<int (*)(void*, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2");
  // Each cache: 30 positions (more than any step uses, fewer than the
  // profile's largest present), filled with NaN bytes: a position read or
  // written past the present shows in the outputs or the check below.
  constexpr int64_t kCapacity = 30, kRows = 2;
  const TensorType cap_type(dt, {1, kRows, kCapacity, 64});
  CUdeviceptr cache[2] = {0, 0};
  for (CUdeviceptr& c : cache) {
    ASSERT_EQ(mem_alloc(&c, cap_type.nbytes()), 0);
    const std::vector<uint8_t> nan_bytes(cap_type.nbytes(), 0xff);
    ASSERT_EQ(htod(c, nan_bytes.data(), nan_bytes.size()), 0);
  }
  ctx.bind_in_place("past_key", "present_key", reinterpret_cast<void*>(cache[0]), cap_type, true);
  ctx.bind_in_place("past_value", "present_value", reinterpret_cast<void*>(cache[1]), cap_type, true);

  fake().set_kernels(arg_count, recording_launch);
  (void)fake().take_log();
  // A prefill of 5, three decode steps, a second prefill chunk and decode
  // steps at pasts 16 and 17.
  const std::pair<int64_t, int64_t> steps[] = {{5, 0}, {1, 5}, {1, 6}, {1, 7}, {8, 8}, {1, 16}, {1, 17}};
  for (auto [seq, past] : steps) {
    SCOPED_TRACE(fmt::format("{} seq {} past {}", dt_name, seq, past));
    std::unique_ptr<Graph> at = specialize_graph(*g, {{"seq", seq}, {"past", past}}, op_registry());
    std::map<std::string, Tensor> feed = testing::random_inputs(*at, static_cast<uint64_t>(100 * past + seq));
    // The past is what the buffers hold (what earlier steps appended).
    std::vector<uint8_t> held[2];
    for (int c = 0; c < 2; ++c) {
      held[c].resize(cap_type.nbytes());
      ASSERT_EQ(dtoh(held[c].data(), cache[c], held[c].size()), 0);
    }
    feed["past_key"] = positions(held[0], dt, kRows, kCapacity, past);
    feed["past_value"] = positions(held[1], dt, kRows, kCapacity, past);
    const std::vector<Tensor> want = ReferenceExecutor(*at).run(feed);
    (void)copies_logged();

    // In place: only q, k and v are bound besides the caches.
    ctx.set_input_shape("past_key", {1, kRows, past, 64});
    ctx.set_input_shape("past_value", {1, kRows, past, 64});
    for (const char* name : {"q", "k", "v"}) ctx.bind_input(name, feed.at(name).raw(), feed.at(name).type(), false);
    Tensor o(at->outputs()[0]->type());
    ctx.bind_output("om", o.raw(), o.type(), false);
    launches().clear();
    ctx.run();
    const std::map<std::string, int> copies = copies_logged();
    EXPECT_EQ(copies.count("dtod"), 0u) << "no device copy";
    EXPECT_EQ(copies.count("htod") ? copies.at("htod") : 0, 3) << "q, k and v uploaded; no past";
    EXPECT_EQ(copies.count("dtoh") ? copies.at("dtoh") : 0, 1) << "o downloaded; no present";
    EXPECT_EQ(ctx.last_in_place_bytes(), static_cast<size_t>(2 * kRows * seq * 64 * dtype_size(dt)));
    int appends = 0, attentions = 0;
    for (const Launch& l : launches()) {
      EXPECT_NE(l.kernel, concat) << "the concat does not run on a cache bound in place";
      for (int c = 0; c < 2; ++c) {
        if (l.kernel != appends_of[c]) continue;
        const plan::InPlaceAppend& a = p.in_place_appends[c];
        EXPECT_EQ(l.args[0], cache[c]) << "it writes the buffer bound in place";
        EXPECT_EQ(sym_of(a.launch.symbols, l.syms, "past"), past) << "at offset past";
        EXPECT_EQ(sym_of(a.launch.symbols, l.syms, "seq"), seq);
        EXPECT_EQ(sym_of(a.launch.symbols, l.syms, a.capacity_symbol), kCapacity) << "rows capacity apart";
        ++appends;
      }
      if (l.kernel == attention_kernel) {
        ++attentions;
        EXPECT_EQ(l.args[2], cache[0]) << "keys read from the buffer bound in place";
        EXPECT_EQ(l.args[3], cache[1]) << "values read from the buffer bound in place";
        EXPECT_EQ(sym_of(attention->symbols, l.syms, kcap), kCapacity) << "key rows capacity apart";
        EXPECT_EQ(sym_of(attention->symbols, l.syms, vcap), kCapacity) << "value rows capacity apart";
      }
    }
    EXPECT_EQ(appends, 2);
    EXPECT_EQ(attentions, 1);
    const Tolerance tol = dt == DType::F16 ? Tolerance{2e-3, 2e-2} : Tolerance{1e-5, 1e-4};
    EXPECT_EQ(compare_tensors(o, want[0], tol), "");
    for (int c = 0; c < 2; ++c) {
      std::vector<uint8_t> now(cap_type.nbytes());
      ASSERT_EQ(dtoh(now.data(), cache[c], now.size()), 0);
      EXPECT_EQ(compare_tensors(positions(now, dt, kRows, kCapacity, past + seq), want[1 + c], tol), "")
          << "the present is in the buffer (cache " << c << ")";
      for (int64_t r = 0; r < kRows; ++r)  // untouched past the present
        for (size_t b = (r * kCapacity + past + seq) * 64 * dtype_size(dt);
             b < size_t((r + 1) * kCapacity * 64 * dtype_size(dt)); ++b)
          ASSERT_EQ(now[b], 0xff) << "byte " << b << " of cache " << c;
    }
    (void)copies_logged();

    // The copy-back loop: the same plan, the past uploaded and the present
    // downloaded by the runtime (dense, rows past + seq positions apart).
    for (const Value* v : at->inputs()) copy_back.bind_input(v->name(), feed.at(v->name()).raw(), v->type(), false);
    std::vector<Tensor> outs;
    for (const Value* v : at->outputs()) outs.emplace_back(v->type());
    for (size_t i = 0; i < outs.size(); ++i)
      copy_back.bind_output(at->outputs()[i]->name(), outs[i].raw(), outs[i].type(), false);
    launches().clear();
    copy_back.run();
    for (const Launch& l : launches()) {
      EXPECT_TRUE(l.kernel != appends_of[0] && l.kernel != appends_of[1])
          << "no append without a buffer bound in place";
      if (l.kernel == attention_kernel) {
        EXPECT_EQ(sym_of(attention->symbols, l.syms, kcap), past + seq) << "dense: rows past + seq apart";
      }
    }
    EXPECT_EQ(compare_tensors(o, outs[0], {0, 0}), "") << "the same as the copy-back loop's";
    EXPECT_EQ(compare_tensors(outs[1], want[1], tol), "");
  }
  fake().set_kernels(arg_count, launch);
  for (CUdeviceptr c : cache) mem_free(c);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvInPlace, ::testing::Values("f16", "f32"));

// A decoder layer as exporters write it (tests/runtime/make_kv_decoder.py:
// MatMul projections, heads split by Reshape/Transpose, Concat(past, new),
// MatMul/Softmax/MatMul attention, the output projection), compiled once
// from ONNX for sm_90 with a profile: its pattern becomes an attention that
// reads the caches through their capacity, and its prefill and decode steps
// (pasts 0 to 17) run with both caches bound in place, each step's output
// equal to ONNX Runtime's copy-back loop and the caches at the end to its
// last presents.
TEST_F(FakeGpuKvInPlace, OnnxDecoderStepsEqualOnnxRuntime) {
  const std::string dir = std::string(KILN_RUNTIME_TEST_DATA) + "/kv_decoder";
  CompileModelOptions co;
  co.build.pass.target = "sm_90";
  co.min_shapes = {{"x", {1, 1, 64}}, {"past_key", {1, 2, 0, 16}}, {"past_value", {1, 2, 0, 16}}};
  co.opt_shapes = {{"x", {1, 1, 64}}, {"past_key", {1, 2, 16, 16}}, {"past_value", {1, 2, 16, 16}}};
  co.max_shapes = {{"x", {1, 8, 64}}, {"past_key", {1, 2, 24, 16}}, {"past_value", {1, 2, 24, 16}}};
  const CompileResult r = compile_model(ModelSource::file(dir + "/model.onnx"), co);
  const plan::Plan p = plan::deserialize(r.plan.data(), r.plan.size(), "kv_decoder.plan");
  ASSERT_EQ(p.in_place_appends.size(), 2u) << "both caches can be bound in place";
  // The attention reads the caches through their capacity and keeps its head merge fused.
  std::string attention_kernel;
  const plan::GenericLaunch* attention = nullptr;
  for (const plan::GenericLaunch& gl : p.generic_launches) {
    const std::string& name = p.kernels[p.steps[gl.step].kernel].name;
    if (name.find("attn") == std::string::npos) continue;
    EXPECT_TRUE(attention_kernel.empty()) << "a second attention kernel " << name;
    attention_kernel = name;
    attention = &gl;
  }
  ASSERT_NE(attention, nullptr);
  EXPECT_NE(attention_kernel.find("fused_attention"), std::string::npos) << attention_kernel;
  std::vector<uint8_t> bytes = plan_bytes(p);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "kv_decoder.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  CallerStream caller;
  auto mem_alloc = fake().sym<int (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
  auto mem_free = fake().sym<int (*)(CUdeviceptr)>("cuMemFree_v2");
  auto dtoh = fake().sym<int (*)(void*, CUdeviceptr, size_t)>("cuMemcpyDtoH_v2");
  constexpr int64_t kCapacity = 30;
  const TensorType cap(DType::F32, {1, 2, kCapacity, 16});
  CUdeviceptr cache[2] = {0, 0};
  for (CUdeviceptr& c : cache) ASSERT_EQ(mem_alloc(&c, cap.nbytes()), 0);
  ctx.bind_in_place("past_key", "present_key", reinterpret_cast<void*>(cache[0]), cap, true);
  ctx.bind_in_place("past_value", "present_value", reinterpret_cast<void*>(cache[1]), cap, true);
  const std::pair<int64_t, int64_t> steps[] = {{5, 0}, {1, 5}, {1, 6}, {1, 7}, {8, 8}, {1, 16}, {1, 17}};
  (void)fake().take_log();
  for (size_t i = 0; i < std::size(steps); ++i) {
    const auto [seq, past] = steps[i];
    SCOPED_TRACE(fmt::format("step {}: seq {} past {}", i, seq, past));
    const Tensor x = read_npy(fmt::format("{}/step{}_x.npy", dir, i));
    const Tensor want = read_npy(fmt::format("{}/step{}_y.npy", dir, i));
    ctx.set_input_shape("past_key", {1, 2, past, 16});
    ctx.set_input_shape("past_value", {1, 2, past, 16});
    ctx.bind_input("x", x.raw(), x.type(), false);
    Tensor y(want.type());
    ctx.bind_output("y", y.raw(), y.type(), false);
    fake().set_kernels(arg_count, recording_launch);
    launches().clear();
    ctx.run();
    fake().set_kernels(arg_count, launch);
    int attentions = 0;
    for (const Launch& l : launches()) {
      if (l.kernel != attention_kernel) continue;
      ++attentions;
      for (int c = 0; c < 2; ++c) {
        EXPECT_NE(std::find(l.args.begin(), l.args.end(), cache[c]), l.args.end()) << "it reads cache " << c;
        EXPECT_EQ(sym_of(attention->symbols, l.syms, p.in_place_appends[c].capacity_symbol), kCapacity);
      }
    }
    EXPECT_EQ(attentions, 1);
    const std::map<std::string, int> copies = copies_logged();
    EXPECT_EQ(copies.count("dtod"), 0u);
    EXPECT_EQ(copies.count("htod") ? copies.at("htod") : 0, 1) << "x uploaded; no past";
    EXPECT_EQ(copies.count("dtoh") ? copies.at("dtoh") : 0, 1) << "y downloaded; no present";
    EXPECT_EQ(compare_tensors(y, want, {1e-5, 1e-4}), "") << "as ONNX Runtime's";
  }
  const char* last[2] = {"last_present_key", "last_present_value"};
  for (int c = 0; c < 2; ++c) {
    std::vector<uint8_t> now(cap.nbytes());
    ASSERT_EQ(dtoh(now.data(), cache[c], now.size()), 0);
    const Tensor want = read_npy(fmt::format("{}/{}.npy", dir, last[c]));
    Tensor got(want.type());
    for (int64_t r = 0; r < 2; ++r)  // 18 positions of each head, rows 30 apart
      std::memcpy(static_cast<uint8_t*>(got.raw()) + r * 18 * 16 * 4, now.data() + r * kCapacity * 16 * 4, 18 * 16 * 4);
    EXPECT_EQ(compare_tensors(got, want, {1e-5, 1e-4}), "") << last[c];
  }
  for (CUdeviceptr c : cache) mem_free(c);
}

// Through the C API and its C++ wrapper: device memory bound in place on a
// GPU engine; a misaligned pointer is an invalid argument naming the input.
TEST_F(FakeGpuKvInPlace, CApiBindsDeviceMemoryInPlace) {
  const plan::Plan p = decoder_plan(with_dtype(kDecoderLayer, "f32"));
  std::vector<uint8_t> bytes = plan_bytes(p);
  kiln::Engine e = kiln::Engine::from_memory(bytes.data(), bytes.size(), KILN_BACKEND_GPU);
  kiln::Context ctx(e);
  CallerStream caller;
  auto mem_alloc = fake().sym<int (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
  auto mem_free = fake().sym<int (*)(CUdeviceptr)>("cuMemFree_v2");
  const std::vector<int64_t> cap = {1, 2, 16, 64};
  CUdeviceptr buf = 0;
  ASSERT_EQ(mem_alloc(&buf, 2 * 16 * 64 * 4 + 256), 0);
  EXPECT_EQ(kiln_context_bind_in_place(ctx.get(), "past_key", "present_key", reinterpret_cast<void*>(buf + 16),
                                       KILN_F32, cap.data(), 4, KILN_MEMORY_DEVICE),
            KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("input \"past_key\": device pointer"), std::string::npos)
      << kiln_last_error();
  EXPECT_NO_THROW(
      ctx.bind_in_place("past_key", "present_key", reinterpret_cast<void*>(buf), KILN_F32, cap, KILN_MEMORY_DEVICE));
  mem_free(buf);
}

// Section `in-place appends` round-trips through the plan file, a static
// plan has none, and the loader refuses a section that does not fit the
// plan, naming what is wrong.
TEST_F(FakeGpuKvInPlace, PlanSectionRoundTripsAndIsChecked) {
  const plan::Plan p = decoder_plan(with_dtype(kDecoderLayer, "f32"));
  const std::vector<uint8_t> bytes = plan::serialize(p);
  const plan::Plan back = plan::deserialize(bytes.data(), bytes.size(), "decoder.plan");
  ASSERT_EQ(back.in_place_appends.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const plan::InPlaceAppend &a = p.in_place_appends[i], &b = back.in_place_appends[i];
    EXPECT_EQ(std::tie(a.input, a.output, a.axis, a.capacity_symbol, a.concat_step),
              std::tie(b.input, b.output, b.axis, b.capacity_symbol, b.concat_step));
    EXPECT_EQ(a.append.kernel, b.append.kernel);
    EXPECT_EQ(a.append.grid, b.append.grid);
    EXPECT_EQ(a.launch, b.launch);
  }
  EXPECT_EQ(plan::serialize(back), bytes) << "the same plan gives the same bytes";
  auto refused = [&](const std::function<void(plan::Plan&)>& spoil, const std::string& says) {
    plan::Plan bad = p;
    spoil(bad);
    const std::vector<uint8_t> b = plan::serialize(bad);
    try {
      (void)plan::deserialize(b.data(), b.size(), "bad.plan");
      // The section is checked against the graph when the engine loads it.
      (void)rt::Engine::load(b.data(), b.size(), "bad.plan", rt::Backend::Cpu);
      ADD_FAILURE() << "loaded: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused([](plan::Plan& b) { b.in_place_appends[0].append.args[0].index = 0; }, "does not write output");
  refused([](plan::Plan& b) { b.in_place_appends[0].capacity_symbol = "past"; }, "is not a fresh symbol name");
  refused([](plan::Plan& b) { b.in_place_appends[0].concat_step = 999; }, "which is not a kernel launch");
  refused([](plan::Plan& b) { b.in_place_appends[1].input = 9; }, "pairs input 9");
  refused([](plan::Plan& b) { b.in_place_appends[0].launch.symbols.push_back("nope"); }, "reads symbol nope");
}

// NVRTC compiles the appends and the attentions reading through the
// capacity for both archs (the plan builder compiles every kernel).
TEST_F(FakeGpuKvInPlace, PlansCompileForSm80AndSm90) {
  for (const char* arch : {"sm_80", "sm_90"})
    for (const char* dt : {"f16", "f32"}) {
      const plan::Plan p = decoder_plan(with_dtype(kDecoderLayer, dt), arch);
      ASSERT_TRUE(p.meta.gpu_kernels) << arch << " " << dt << ": " << p.meta.no_gpu_reason;
      ASSERT_EQ(p.in_place_appends.size(), 2u) << arch << " " << dt;
      for (const plan::InPlaceAppend& a : p.in_place_appends) {
        const plan::Kernel& k = p.kernels.at(a.append.kernel);
        EXPECT_EQ(k.arch, arch);
        EXPECT_FALSE(k.cubin.empty()) << k.name;
      }
      bool strided = false;
      for (const plan::Kernel& k : p.kernels)
        strided |= k.name.find("attn") != std::string::npos && k.source.find("kv_capacity_3") != std::string::npos &&
                   !k.cubin.empty();
      EXPECT_TRUE(strided) << arch << " " << dt << ": the attention reads K rows through kv_capacity_3";
    }
}

// What a buffer bound in place on a GPU engine must be: device memory of
// the input's dtype and dims, 256-byte aligned, long enough for the present
// (checked at the run), and a plan whose kernels read the cache through its
// capacity. Each refusal names the input.
TEST_F(FakeGpuKvInPlace, RefusalsNameTheInput) {
  const std::string text = with_dtype(kDecoderLayer, "f32");
  const plan::Plan p = decoder_plan(text);
  std::vector<uint8_t> bytes = plan_bytes(p);
  auto e = rt::Engine::load(bytes.data(), bytes.size(), "decoder.plan", rt::Backend::Gpu);
  rt::Context ctx(e);
  CallerStream caller;
  auto mem_alloc = fake().sym<int (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
  auto mem_free = fake().sym<int (*)(CUdeviceptr)>("cuMemFree_v2");
  const TensorType cap(DType::F32, {1, 2, 12, 64});
  CUdeviceptr buf = 0;
  ASSERT_EQ(mem_alloc(&buf, cap.nbytes() + 256), 0);
  auto refused = [&](auto&& bind, const std::string& says) {
    try {
      bind();
      ADD_FAILURE() << "not refused: " << says;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("\"past_key\""), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find(says), std::string::npos) << err.what();
    }
  };
  std::vector<float> host(cap.numel());
  refused([&] { ctx.bind_in_place("past_key", "present_key", host.data(), cap, false); }, "bind device memory");
  refused([&] { ctx.bind_in_place("past_key", "present_key", reinterpret_cast<void*>(buf + 4), cap, true); },
          "not 256-byte aligned");
  refused(
      [&] {
        ctx.bind_in_place("past_key", "present_key", reinterpret_cast<void*>(buf),
                          TensorType(DType::F32, {1, 3, 12, 64}), true);
      },
      "only dim 2");
  refused(
      [&] {
        ctx.bind_in_place("past_key", "present_key", reinterpret_cast<void*>(buf),
                          TensorType(DType::F16, {1, 2, 12, 64}), true);
      },
      "is f32");
  // Too short for the present: refused at the run, before anything runs.
  ctx.bind_in_place("past_key", "present_key", reinterpret_cast<void*>(buf), cap, true);
  std::unique_ptr<Graph> at = specialize_graph(*parse_graph(text), {{"seq", 4}, {"past", 10}}, op_registry());
  const std::map<std::string, Tensor> feed = testing::random_inputs(*at, 3);
  for (const char* name : {"q", "k", "v", "past_value"})
    ctx.bind_input(name, feed.at(name).raw(), feed.at(name).type(), false);
  ctx.set_input_shape("past_key", {1, 2, 10, 64});
  std::vector<Tensor> outs;
  for (const Value* v : at->outputs()) outs.emplace_back(v->type());
  for (const char* name : {"om", "present_value"})
    ctx.bind_output(name, outs[std::string(name) == "om" ? 0 : 2].raw(), outs[std::string(name) == "om" ? 0 : 2].type(),
                    false);
  refused([&] { ctx.run(); }, "present_key");
  mem_free(buf);

  // A plan whose present is also read as a dense tensor cannot run in place.
  const std::string dense = with_dtype(kDenseReader, "f32");
  const plan::Plan pd = decoder_plan(dense);
  EXPECT_EQ(pd.in_place_appends.size(), 1u) << "only the value cache";
  std::vector<uint8_t> dbytes = plan_bytes(pd);
  auto ed = rt::Engine::load(dbytes.data(), dbytes.size(), "dense.plan", rt::Backend::Gpu);
  rt::Context cd(ed);
  ASSERT_EQ(mem_alloc(&buf, cap.nbytes()), 0);
  refused([&] { cd.bind_in_place("past_key", "present_key", reinterpret_cast<void*>(buf), cap, true); },
          "reads the present \"present_key\" as a dense tensor");
  EXPECT_NO_THROW(cd.bind_in_place("past_value", "present_value", reinterpret_cast<void*>(buf), cap, true));
  mem_free(buf);
}

}  // namespace
}  // namespace kiln::fakegpu
