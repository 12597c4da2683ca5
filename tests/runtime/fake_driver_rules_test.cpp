// The fake CUDA driver's rules (tests/runtime/fake_cuda/, docs/testing.md),
// one test each, called through the driver API itself. Each test fails when
// its rule is switched off (KILN_FAKE_CUDA_DISABLE=<rule>): ctest
// fake_rule_<rule>_must_fail runs it so (tests/runtime/rule_must_fail.sh).
// What the runtime does after a sticky error is fake_gpu_sticky_test.cpp.
#include <algorithm>
#include <cstring>
#include <thread>

#include "runtime/cubin_info.h"
#include "tests/runtime/fake_gpu_util.h"

namespace kiln {
namespace {

using namespace fakegpu;

// The driver entry points the tests call.
struct Api {
  template <typename F>
  static F get(const char* n) {
    F f = fake().sym<F>(n);
    if (!f) throw std::runtime_error(std::string("the fake driver has no ") + n);
    return f;
  }
  int (*retain)(void**, int) = get<decltype(retain)>("cuDevicePrimaryCtxRetain");
  int (*push)(void*) = get<decltype(push)>("cuCtxPushCurrent_v2");
  int (*pop)(void**) = get<decltype(pop)>("cuCtxPopCurrent_v2");
  int (*stream_create)(void**, unsigned) = get<decltype(stream_create)>("cuStreamCreate");
  int (*stream_destroy)(void*) = get<decltype(stream_destroy)>("cuStreamDestroy_v2");
  int (*stream_sync)(void*) = get<decltype(stream_sync)>("cuStreamSynchronize");
  int (*alloc)(CUdeviceptr*, size_t) = get<decltype(alloc)>("cuMemAlloc_v2");
  int (*free)(CUdeviceptr) = get<decltype(free)>("cuMemFree_v2");
  int (*host_alloc)(void**, size_t, unsigned) = get<decltype(host_alloc)>("cuMemHostAlloc");
  int (*host_free)(void*) = get<decltype(host_free)>("cuMemFreeHost");
  int (*htod_async)(CUdeviceptr, const void*, size_t, void*) = get<decltype(htod_async)>("cuMemcpyHtoDAsync_v2");
  int (*dtoh_async)(void*, CUdeviceptr, size_t, void*) = get<decltype(dtoh_async)>("cuMemcpyDtoHAsync_v2");
  int (*dtod_async)(CUdeviceptr, CUdeviceptr, size_t, void*) = get<decltype(dtod_async)>("cuMemcpyDtoDAsync_v2");
  int (*event_create)(void**, unsigned) = get<decltype(event_create)>("cuEventCreate");
  int (*event_destroy)(void*) = get<decltype(event_destroy)>("cuEventDestroy_v2");
  int (*event_record)(void*, void*) = get<decltype(event_record)>("cuEventRecord");
  int (*event_query)(void*) = get<decltype(event_query)>("cuEventQuery");
  int (*event_sync)(void*) = get<decltype(event_sync)>("cuEventSynchronize");
  int (*wait_event)(void*, void*, unsigned) = get<decltype(wait_event)>("cuStreamWaitEvent");
  int (*module_load)(void**, const void*) = get<decltype(module_load)>("cuModuleLoadData");
  int (*module_unload)(void*) = get<decltype(module_unload)>("cuModuleUnload");
  int (*get_function)(void**, void*, const char*) = get<decltype(get_function)>("cuModuleGetFunction");
  int (*set_attribute)(void*, int, int) = get<decltype(set_attribute)>("cuFuncSetAttribute");
  int (*param_info)(void*, size_t, size_t*, size_t*) = get<decltype(param_info)>("cuFuncGetParamInfo");
  int (*launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                void**) = get<decltype(launch)>("cuLaunchKernel");
  int (*begin_capture)(void*, int) = get<decltype(begin_capture)>("cuStreamBeginCapture_v2");
  int (*end_capture)(void*, void**) = get<decltype(end_capture)>("cuStreamEndCapture");
  int (*is_capturing)(void*, int*) = get<decltype(is_capturing)>("cuStreamIsCapturing");
  int (*graph_destroy)(void*) = get<decltype(graph_destroy)>("cuGraphDestroy");
};

int no_args(const char*) { return 0; }

// kernelParams for a kernel of up to 64 pointer parameters, all null (the
// driver reads as many as the kernel's image declares).
void** null_params() {
  static CUdeviceptr zeros[64] = {};
  static void* params[64];
  for (int i = 0; i < 64; ++i) params[i] = &zeros[i];
  return params;
}
int fault(const char*, const unsigned*, const unsigned*, unsigned, const CUdeviceptr*) { return 700; }

class FakeDriverRules : public FakeGpu {
 protected:
  void SetUp() override {
    FakeGpu::SetUp();
    plans();
    fake().set_kernels(nullptr, nullptr);  // launches are timed, not run: the rules are the point
    ASSERT_EQ(api.retain(&ctx, 0), 0);
    ASSERT_EQ(api.push(ctx), 0);
  }
  void TearDown() override {
    void* popped = nullptr;
    api.pop(&popped);
    fake().set_kernel_buffers(kernel_table_size, kernel_buffer_use);
    fake().pause(0);
    fake().clear_sticky();
    fake().set_driver_version(13000);
    fake().set_property("regs_per_block", 65536);
    fake().set_arch(9, 0);
    FakeGpu::TearDown();
  }
  void* new_stream() {
    void* s = nullptr;
    EXPECT_EQ(api.stream_create(&s, 1), 0);
    return s;
  }
  // The plan kernel with the most registers, loaded from its CUBIN.
  void* kernel(std::string* name = nullptr, int* registers = nullptr) {
    const plan::Plan& p = plans().at("test_matmul_2d");
    const plan::Kernel* best = nullptr;
    int most = -1;
    for (const plan::Kernel& k : p.kernels) {
      int r = plan::cubin_kernel_info(k.cubin, k.name).registers;
      if (r > most) most = r, best = &k;
    }
    EXPECT_EQ(api.module_load(&module, best->cubin.data()), 0);
    void* f = nullptr;
    EXPECT_EQ(api.get_function(&f, module, best->name.c_str()), 0);
    if (name) *name = best->name;
    if (registers) *registers = most;
    return f;
  }
  Api api;
  void* ctx = nullptr;
  void* module = nullptr;
};

// async: a stream's work runs after the call returns, when the device gets
// to it: with the "GPU" paused, a copy and an event recorded after it are
// still pending; once it runs, the event completes and the data is there.
TEST_F(FakeDriverRules, AsyncStreamWorkRunsAfterTheCallReturns) {
  void* s = new_stream();
  void *in = nullptr, *out = nullptr, *ev = nullptr;
  CUdeviceptr d = 0;
  ASSERT_EQ(api.host_alloc(&in, 256, 0), 0);
  ASSERT_EQ(api.host_alloc(&out, 256, 0), 0);
  ASSERT_EQ(api.alloc(&d, 256), 0);
  ASSERT_EQ(api.event_create(&ev, 0), 0);
  std::memset(in, 7, 256);
  std::memset(out, 0, 256);
  fake().pause(1);
  EXPECT_EQ(api.htod_async(d, in, 256, s), 0);
  EXPECT_EQ(api.dtoh_async(out, d, 256, s), 0);
  EXPECT_EQ(api.event_record(ev, s), 0);
  EXPECT_EQ(api.event_query(ev), 600) << "CUDA_ERROR_NOT_READY: the stream ran its work inside the calls";
  EXPECT_EQ(static_cast<uint8_t*>(out)[0], 0) << "the copies ran before the device got to them";
  fake().pause(0);
  EXPECT_EQ(api.event_sync(ev), 0);
  EXPECT_EQ(static_cast<uint8_t*>(out)[255], 7);
  // A copy from pageable memory takes its source at the call.
  std::vector<uint8_t> pageable(256, 3);
  fake().pause(1);
  EXPECT_EQ(api.htod_async(d, pageable.data(), 256, s), 0);
  std::fill(pageable.begin(), pageable.end(), 9);
  fake().pause(0);
  EXPECT_EQ(api.dtoh_async(out, d, 256, s), 0);
  EXPECT_EQ(api.stream_sync(s), 0);
  EXPECT_EQ(static_cast<uint8_t*>(out)[0], 3);
  api.event_destroy(ev);
  api.stream_destroy(s);
  api.free(d);
  api.host_free(in);
  api.host_free(out);
}

// races: a buffer written on one stream and read on another without an
// event between them is reported; with cuStreamWaitEvent it is not.
TEST_F(FakeDriverRules, RacesUnorderedAccessesFromTwoStreamsAreReported) {
  void *s1 = new_stream(), *s2 = new_stream();
  void *in = nullptr, *out = nullptr, *ev = nullptr;
  CUdeviceptr d = 0;
  ASSERT_EQ(api.host_alloc(&in, 256, 0), 0);
  ASSERT_EQ(api.host_alloc(&out, 256, 0), 0);
  ASSERT_EQ(api.alloc(&d, 256), 0);
  ASSERT_EQ(api.event_create(&ev, 0), 0);
  EXPECT_EQ(api.htod_async(d, in, 256, s1), 0);
  EXPECT_EQ(api.dtoh_async(out, d, 128, s2), 0);  // no wait for s1's upload
  EXPECT_EQ(api.stream_sync(s1), 0);
  EXPECT_EQ(api.stream_sync(s2), 0);
  std::string races = fake().take_races();
  EXPECT_NE(races.find("race: copy "), std::string::npos) << races;
  EXPECT_NE(races.find("of device allocation +0"), std::string::npos) << races;
  // Ordered by an event: no race.
  EXPECT_EQ(api.htod_async(d, in, 256, s1), 0);
  EXPECT_EQ(api.event_record(ev, s1), 0);
  EXPECT_EQ(api.wait_event(s2, ev, 0), 0);
  EXPECT_EQ(api.dtoh_async(out, d, 256, s2), 0);
  EXPECT_EQ(api.stream_sync(s2), 0);
  EXPECT_EQ(api.stream_sync(s1), 0);
  EXPECT_EQ(std::string(fake().take_races()), "");
  api.event_destroy(ev);
  api.stream_destroy(s1);
  api.stream_destroy(s2);
  api.free(d);
  api.host_free(in);
  api.host_free(out);
}

// What the kernel_races test's kernel does with its buffers: it writes its
// first and only reads the others (as `KILN_PTR(T) y, KILN_PTR(const T) x`),
// 256 bytes each.
int direct_buffers(const char*) { return 0; }
int first_written(const char*, int i, unsigned long long* bytes) {
  *bytes = 256;
  return i == 0 ? 1 : 0;
}

// kernel_races: with what each kernel reads and writes known
// (fake_cuda_set_kernel_buffers: the plan's kernel signatures), two kernels
// on different streams are compared too: one writing a buffer and one reading
// it with no event between them are a race; ordered by an event they are not,
// and two kernels that only read a buffer never are.
TEST_F(FakeDriverRules, KernelRacesTwoKernelsOnTwoStreamsAreReported) {
  void *s1 = new_stream(), *s2 = new_stream(), *ev = nullptr;
  std::string name;
  void* f = kernel(&name);
  fake().set_kernel_buffers(direct_buffers, first_written);
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_EQ(api.alloc(&a, 256), 0);
  ASSERT_EQ(api.alloc(&b, 256), 0);
  ASSERT_EQ(api.alloc(&c, 256), 0);
  ASSERT_EQ(api.event_create(&ev, 0), 0);
  // kernelParams: `out`, `in`, then nulls for the kernel's other parameters.
  CUdeviceptr args[64] = {};
  void* params[64];
  for (int i = 0; i < 64; ++i) params[i] = &args[i];
  auto launch = [&](CUdeviceptr out, CUdeviceptr in, void* s) {
    args[0] = out;
    args[1] = in;
    return api.launch(f, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr);
  };
  auto sync = [&] {
    EXPECT_EQ(api.stream_sync(s1), 0);
    EXPECT_EQ(api.stream_sync(s2), 0);
  };
  // s2 reads what s1 writes, unordered.
  EXPECT_EQ(launch(a, b, s1), 0);
  EXPECT_EQ(launch(c, a, s2), 0);
  sync();
  // Whichever of the two the device ran second is the one reported.
  std::string races = fake().take_races();
  EXPECT_NE(races.find("race: kernel " + name + " on stream"), std::string::npos) << races;
  EXPECT_NE(races.find("of device allocation +0 (256 bytes)"), std::string::npos) << races;
  // Ordered by an event: no race.
  EXPECT_EQ(launch(a, b, s1), 0);
  EXPECT_EQ(api.event_record(ev, s1), 0);
  EXPECT_EQ(api.wait_event(s2, ev, 0), 0);
  EXPECT_EQ(launch(c, a, s2), 0);
  sync();
  EXPECT_EQ(std::string(fake().take_races()), "");
  // Both only read b: no race.
  EXPECT_EQ(launch(a, b, s1), 0);
  EXPECT_EQ(launch(c, b, s2), 0);
  sync();
  EXPECT_EQ(std::string(fake().take_races()), "");
  api.event_destroy(ev);
  api.stream_destroy(s1);
  api.stream_destroy(s2);
  for (CUdeviceptr d : {a, b, c}) api.free(d);
  api.module_unload(module);
}

// table_races: a kernel that takes its buffers through a pointer table in
// device memory (codegen/param_table.h; the 5,000-input Concat's) accesses
// the buffers the table names, not only the table: its output read by a copy
// on another stream with no event between them is a race.
TEST_F(FakeDriverRules, TableRacesSeeTheBuffersAPointerTableNames) {
  const plan::Plan& p = plans().at("concat_5000");
  ASSERT_EQ(p.steps.size(), 1u);
  const plan::Step& step = p.steps[0];
  ASSERT_TRUE(step.param_table);
  const plan::Kernel& k = p.kernels.at(step.kernel);
  note_kernel_buffers(p);  // the kernel writes entry 0 (the output) and reads the 5,000 inputs
  fake().set_kernel_buffers(kernel_table_size, kernel_buffer_use);
  ASSERT_EQ(kernel_table_size(k.name.c_str()), 5001);
  void* f = nullptr;
  ASSERT_EQ(api.module_load(&module, k.cubin.data()), 0);
  ASSERT_EQ(api.get_function(&f, module, k.name.c_str()), 0);
  void *s1 = new_stream(), *s2 = new_stream(), *host = nullptr;
  CUdeviceptr out = 0, in = 0, table = 0;
  ASSERT_EQ(api.alloc(&out, 5000 * 4), 0);
  ASSERT_EQ(api.alloc(&in, 4), 0);
  ASSERT_EQ(api.host_alloc(&host, 5000 * 4, 0), 0);
  // The table: 5,001 addresses (the output, then every input at `in`), then their element counts.
  std::vector<uint64_t> words(2 * 5001, in);
  words[0] = out;
  for (size_t i = 5001; i < words.size(); ++i) words[i] = 1;
  words[5001] = 5000;
  ASSERT_EQ(api.alloc(&table, words.size() * 8), 0);
  ASSERT_EQ(api.htod_async(table, words.data(), words.size() * 8, s1), 0);
  ASSERT_EQ(api.stream_sync(s1), 0);
  void* params[1] = {&table};
  EXPECT_EQ(api.launch(f, 1, 1, 1, 256, 1, 1, 0, s1, params, nullptr), 0);
  EXPECT_EQ(api.dtoh_async(host, out + 400, 64, s2), 0);  // no wait for the concat
  EXPECT_EQ(api.stream_sync(s1), 0);
  EXPECT_EQ(api.stream_sync(s2), 0);
  // Whichever of the two the device ran second is the one reported.
  std::string races = fake().take_races();
  const bool copy_second = races.find("race: copy source on stream") != std::string::npos &&
                           races.find("device allocation +400 (64 bytes)") != std::string::npos;
  const bool kernel_second = races.find("race: kernel " + k.name + " on stream") != std::string::npos &&
                             races.find("device allocation +0 (20000 bytes)") != std::string::npos;
  EXPECT_TRUE(copy_second || kernel_second) << races;
  api.stream_destroy(s1);
  api.stream_destroy(s2);
  for (CUdeviceptr d : {out, in, table}) api.free(d);
  api.host_free(host);
  api.module_unload(module);
}

// launch_limits: block and grid dimensions, dynamic shared memory against the
// function's allowance and cuFuncSetAttribute's ceiling, registers x threads.
TEST_F(FakeDriverRules, LaunchLimitsAreTheDevicesPerBlockAndGridLimits) {
  void* s = new_stream();
  std::string name;
  int regs = 0;
  void* f = kernel(&name, &regs);
  ASSERT_GT(regs, 0) << name << ": no register count in its CUBIN";
  auto launch = [&](unsigned gx, unsigned gy, unsigned bx, unsigned by, unsigned bz, unsigned shared) {
    return api.launch(f, gx, gy, 1, bx, by, bz, shared, s, null_params(), nullptr);
  };
  EXPECT_EQ(launch(1, 1, 128, 1, 1, 0), 0);
  EXPECT_EQ(launch(1, 1, 1025, 1, 1, 0), 1) << "CUDA_ERROR_INVALID_VALUE: more than 1024 threads in x";
  EXPECT_EQ(launch(1, 1, 1024, 2, 1, 0), 1) << "2048 threads per block";
  EXPECT_EQ(launch(1, 1, 1, 1, 65, 0), 1) << "block z > 64";
  EXPECT_EQ(launch(1, 65536, 32, 1, 1, 0), 1) << "grid y > 65535";
  EXPECT_EQ(launch(0, 1, 32, 1, 1, 0), 1) << "an empty grid";
  // Dynamic shared memory: 48 KiB (minus static) unless raised.
  EXPECT_EQ(launch(1, 1, 32, 1, 1, 48 * 1024 + 1), 1);
  EXPECT_EQ(api.set_attribute(f, 8, 228 * 1024), 1) << "past the H100's 227 KiB opt-in maximum";
  EXPECT_EQ(api.set_attribute(f, 8, 100 * 1024), 0);
  EXPECT_EQ(launch(1, 1, 32, 1, 1, 100 * 1024), 0);
  EXPECT_EQ(launch(1, 1, 32, 1, 1, 100 * 1024 + 1), 1);
  // Registers: allocated per warp in units of 256; a block of 8 warps does
  // not fit a register file one register short of them.
  const int per_warp = (regs * 32 + 255) / 256 * 256;
  ASSERT_EQ(fake().set_property("regs_per_block", per_warp * 8 - 1), 0);
  EXPECT_EQ(launch(1, 1, 256, 1, 1, 0), 701)
      << "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (" << name << ", " << regs << " registers)";
  EXPECT_EQ(launch(1, 1, 224, 1, 1, 0), 0);
  EXPECT_EQ(api.stream_sync(s), 0);
  api.stream_destroy(s);
  api.module_unload(module);
}

// capture: unsafe calls during a capture fail and invalidate it; the capture
// still ends (with the error and no graph); thread-local captures bind only
// their own thread, global ones every thread.
TEST_F(FakeDriverRules, CaptureForbidsUnsafeCallsAndInvalidatesTheCapture) {
  void* s = new_stream();
  CUdeviceptr a = 0, b = 0, p = 0;
  ASSERT_EQ(api.alloc(&a, 256), 0);
  ASSERT_EQ(api.alloc(&b, 256), 0);
  void* g = nullptr;
  int status = -1;
  ASSERT_EQ(api.begin_capture(s, 1), 0);  // thread-local
  EXPECT_EQ(api.dtod_async(a, b, 16, s), 0);
  EXPECT_EQ(api.alloc(&p, 256), 900) << "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
  EXPECT_EQ(api.free(a), 900);
  EXPECT_EQ(api.dtod_async(a, b, 16, s), 901) << "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
  EXPECT_EQ(api.end_capture(s, &g), 901);
  EXPECT_EQ(g, nullptr);
  EXPECT_EQ(api.is_capturing(s, &status), 0);
  EXPECT_EQ(status, 0) << "the capture ended";
  // Synchronizing the capturing stream.
  ASSERT_EQ(api.begin_capture(s, 1), 0);
  EXPECT_EQ(api.stream_sync(s), 900);
  EXPECT_EQ(api.end_capture(s, &g), 901);
  // Another thread may allocate during a thread-local capture, not during a global one.
  auto other_thread_alloc = [&] {
    int r = -1;
    std::thread t([&] {
      EXPECT_EQ(api.push(ctx), 0);
      CUdeviceptr q = 0;
      r = api.alloc(&q, 256);
      if (r == 0) api.free(q);
      void* popped = nullptr;
      api.pop(&popped);
    });
    t.join();
    return r;
  };
  ASSERT_EQ(api.begin_capture(s, 1), 0);
  EXPECT_EQ(other_thread_alloc(), 0);
  EXPECT_EQ(api.end_capture(s, &g), 0);
  ASSERT_NE(g, nullptr);
  api.graph_destroy(g);
  ASSERT_EQ(api.begin_capture(s, 0), 0);  // global
  EXPECT_EQ(other_thread_alloc(), 900);
  EXPECT_EQ(api.end_capture(s, &g), 901);
  api.stream_destroy(s);
  api.free(a);
  api.free(b);
}

// sticky: a kernel that faults (illegal address) poisons the context: the
// error comes with the next synchronizing call and every later call.
TEST_F(FakeDriverRules, StickyErrorsPoisonTheContextForEveryLaterCall) {
  void* s = new_stream();
  void* f = kernel();
  fake().set_kernels(no_args, fault);
  EXPECT_EQ(api.launch(f, 1, 1, 1, 32, 1, 1, 0, s, null_params(), nullptr), 0) << "a fault is reported later";
  EXPECT_EQ(api.stream_sync(s), 700);
  CUdeviceptr p = 0;
  EXPECT_EQ(api.alloc(&p, 256), 700);
  EXPECT_EQ(api.stream_sync(s), 700);
  void* ev = nullptr;
  EXPECT_EQ(api.event_create(&ev, 0), 700);
  EXPECT_EQ(stats()[11], 700);
  fake().set_kernels(nullptr, nullptr);
  fake().clear_sticky();  // what only a new process gets
  ASSERT_EQ(api.alloc(&p, 256), 0);
  api.free(p);
  api.stream_destroy(s);
  api.module_unload(module);
}

// modules: a CUBIN only on its own major arch (equal or newer minor), PTX
// only up to the driver's ISA version and the device's arch.
TEST_F(FakeDriverRules, ModuleImagesAreCheckedAgainstTheDeviceAndTheDriver) {
  const plan::Kernel& k90 = plans().at("sm_90").kernels.at(0);
  void* m = nullptr;
  fake().set_arch(8, 0);
  EXPECT_EQ(api.module_load(&m, k90.cubin.data()), 209) << "CUDA_ERROR_NO_BINARY_FOR_GPU: an sm_90 CUBIN on sm_80";
  fake().set_arch(9, 0);
  ASSERT_EQ(api.module_load(&m, k90.cubin.data()), 0);
  api.module_unload(m);
  const std::string ptx = plans().at("sm_80").kernels.at(0).ptx;
  ASSERT_NE(ptx.find(".version 9."), std::string::npos) << "this test assumes CUDA 13's PTX ISA 9.x";
  fake().set_driver_version(12040);
  EXPECT_EQ(api.module_load(&m, ptx.c_str()), 222) << "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: ISA 9 on a CUDA 12.4 driver";
  fake().set_driver_version(13000);
  ASSERT_EQ(api.module_load(&m, ptx.c_str()), 0);
  api.module_unload(m);
  std::string newer = ptx;
  size_t t = newer.find(".target sm_80");
  ASSERT_NE(t, std::string::npos);
  newer.replace(t, 13, ".target sm_100");
  EXPECT_EQ(api.module_load(&m, newer.c_str()), 218) << "CUDA_ERROR_INVALID_PTX: sm_100 PTX on an sm_90 device";
}

// An sm_90a (arch-specific, wgmma) plan's code: its CUBIN only on Hopper,
// its PTX (.target sm_90a) only on sm_90 itself, not JIT-compiled on newer GPUs.
TEST_F(FakeDriverRules, ArchSpecificSm90aCodeRunsOnSm90Only) {
  const plan::Kernel& k = plans().at("sm_90a_wgmma").kernels.at(0);
  ASSERT_EQ(k.arch, "sm_90a");
  void* m = nullptr;
  fake().set_arch(8, 0);
  EXPECT_EQ(api.module_load(&m, k.cubin.data()), 209) << "CUDA_ERROR_NO_BINARY_FOR_GPU: an sm_90a CUBIN on sm_80";
  EXPECT_EQ(api.module_load(&m, k.ptx.c_str()), 218) << "CUDA_ERROR_INVALID_PTX: sm_90a PTX on sm_80";
  fake().set_arch(10, 0);
  EXPECT_EQ(api.module_load(&m, k.ptx.c_str()), 218) << "CUDA_ERROR_INVALID_PTX: sm_90a PTX on sm_100";
  fake().set_arch(9, 0);
  ASSERT_EQ(api.module_load(&m, k.cubin.data()), 0);
  api.module_unload(m);
  ASSERT_EQ(api.module_load(&m, k.ptx.c_str()), 0);
  api.module_unload(m);
}

// A PTX module with one kernel of `n` pointer parameters, as NVRTC writes them.
std::string ptx_with_params(int n) {
  std::string s = ".version 9.0\n.target sm_90\n.address_size 64\n\n.visible .entry wide(\n";
  for (int i = 0; i < n; ++i)
    s += "\t.param .u64 .ptr .align 1 wide_param_" + std::to_string(i) + (i + 1 < n ? ",\n" : "\n");
  return s + ")\n{\n\tret;\n}\n";
}

// params: the kernel parameter space, from the image's own layout (what
// cuLaunchKernel reads kernelParams by): 32,764 bytes with a CUDA 12.1+
// driver (Volta and newer), 4,096 bytes with an older one. PTX over it fails
// to JIT at load; a CUBIN over it is refused at launch.
TEST_F(FakeDriverRules, ParametersMustFitTheParameterSpace) {
  void* s = new_stream();
  // A plan kernel's CUBIN: one 8-byte pointer per buffer the plan binds.
  const plan::Plan& p = plans().at("test_matmul_2d");
  const plan::Step* step = nullptr;
  for (const plan::Step& st : p.steps)
    if (st.kind == plan::StepKind::Kernel) step = &st;
  ASSERT_NE(step, nullptr);
  const plan::Kernel& k = p.kernels.at(step->kernel);
  const size_t n = step->args.size();
  void* f = nullptr;
  ASSERT_EQ(api.module_load(&module, k.cubin.data()), 0);
  ASSERT_EQ(api.get_function(&f, module, k.name.c_str()), 0);
  for (size_t i = 0; i < n; ++i) {
    size_t offset = 0, size = 0;
    ASSERT_EQ(api.param_info(f, i, &offset, &size), 0) << i;
    EXPECT_EQ(offset, 8 * i);
    EXPECT_EQ(size, 8u);
  }
  size_t offset = 0;
  EXPECT_EQ(api.param_info(f, n, &offset, nullptr), 1) << "CUDA_ERROR_INVALID_VALUE: past the last parameter";
  std::vector<CUdeviceptr> ptrs(4096, 0);
  std::vector<void*> params;
  for (CUdeviceptr& q : ptrs) params.push_back(&q);
  EXPECT_EQ(api.launch(f, 1, 1, 1, 32, 1, 1, 0, s, params.data(), nullptr), 0);
  api.module_unload(module);
  // The same CUBIN saying its parameters take 5,000 bytes (its
  // EIATTR_CBANK_PARAM_SIZE entry: format 3, attribute 0x19, u16 bytes): past
  // a CUDA 12.0 driver's 4 KiB, within CUDA 13's 32,764; 40,000 bytes fit no driver.
  std::vector<uint8_t> image = k.cubin;
  const uint8_t entry[4] = {3, 0x19, uint8_t(8 * n), uint8_t((8 * n) >> 8)};
  auto at = std::search(image.begin(), image.end(), entry, entry + 4);
  ASSERT_NE(at, image.end()) << "no EIATTR_CBANK_PARAM_SIZE of " << 8 * n << " bytes in " << k.name;
  ASSERT_EQ(std::search(at + 1, image.end(), entry, entry + 4), image.end()) << "two candidates";
  auto launch_claiming = [&](int bytes) {
    at[2] = uint8_t(bytes), at[3] = uint8_t(bytes >> 8);
    void* m = nullptr;
    void* g = nullptr;
    EXPECT_EQ(api.module_load(&m, image.data()), 0);
    EXPECT_EQ(api.get_function(&g, m, k.name.c_str()), 0);
    int r = api.launch(g, 1, 1, 1, 32, 1, 1, 0, s, params.data(), nullptr);
    EXPECT_EQ(api.stream_sync(s), 0);
    api.module_unload(m);
    return r;
  };
  EXPECT_EQ(launch_claiming(5000), 0) << "32,764 bytes with a CUDA 13 driver";
  fake().set_driver_version(12000);
  EXPECT_EQ(launch_claiming(4096), 0);
  EXPECT_EQ(launch_claiming(5000), 801) << "CUDA_ERROR_NOT_SUPPORTED: over 4 KiB with a CUDA 12.0 driver";
  fake().set_driver_version(13000);
  EXPECT_EQ(launch_claiming(40000), 1) << "CUDA_ERROR_INVALID_VALUE: over 32,764 bytes";
  // PTX: 4,095 pointers (32,760 bytes) JIT and launch; 4,096 (32,768) do not.
  void* m = nullptr;
  const std::string fits = ptx_with_params(4095), over = ptx_with_params(4096);
  ASSERT_EQ(api.module_load(&m, fits.c_str()), 0);
  ASSERT_EQ(api.get_function(&f, m, "wide"), 0);
  ASSERT_EQ(api.param_info(f, 4094, &offset, nullptr), 0);
  EXPECT_EQ(offset, 32752u);
  EXPECT_EQ(api.launch(f, 1, 1, 1, 32, 1, 1, 0, s, params.data(), nullptr), 0);
  EXPECT_EQ(api.stream_sync(s), 0);
  api.module_unload(m);
  EXPECT_EQ(api.module_load(&m, over.c_str()), 218) << "CUDA_ERROR_INVALID_PTX: formal parameter space overflowed";
  api.stream_destroy(s);
}

// context: calls that need a context fail without a current one.
TEST_F(FakeDriverRules, CallsNeedACurrentContext) {
  void* popped = nullptr;
  ASSERT_EQ(api.pop(&popped), 0);
  CUdeviceptr p = 0;
  void* s = nullptr;
  EXPECT_EQ(api.alloc(&p, 256), 201) << "CUDA_ERROR_INVALID_CONTEXT";
  EXPECT_EQ(api.stream_create(&s, 1), 201);
  ASSERT_EQ(api.push(ctx), 0);  // TearDown pops it
}

}  // namespace
}  // namespace kiln
