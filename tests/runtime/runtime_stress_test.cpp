// The runtime under load, on its CPU reference path, through the C API
// (libkiln_runtime.so) and the C++ wrapper:
// - threads: one engine shared by 8 threads, each with its own context,
//   running concurrently for KILN_THREAD_TEST_SECONDS (default 30); every
//   output must equal the single-threaded result bit for bit. Built with
//   ThreadSanitizer by tools/build_tsan.sh (a data race fails the run);
// - leaks: KILN_LEAK_TEST_CYCLES (default 1000) cycles of load engine /
//   create context / run / destroy; host RSS after the last cycle within
//   1 MiB of RSS after cycle 100 and, in the AddressSanitizer build,
//   LeakSanitizer finds nothing;
// - bindings of the wrong shape or dtype through the C++ wrapper name the
//   tensor, the expected and the found type.
// The plan is built from IR text without the compiler (cpu_plan.h), so the
// sanitizer builds compile only the runtime and the reference backend.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/kiln.hpp"
#include "tests/runtime/cpu_plan.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KILN_TEST_SANITIZED 1
#endif
#if __has_feature(address_sanitizer)
#include <sanitizer/lsan_interface.h>
#define KILN_TEST_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KILN_TEST_SANITIZED 1
#endif

namespace kiln {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// Host memory the process holds (resident set), in bytes.
size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * size_t(sysconf(_SC_PAGESIZE));
}

const std::vector<uint8_t>& plan() {
  static const std::vector<uint8_t> p = testing::cpu_plan_bytes(testing::cnn_graph_text());
  return p;
}

constexpr int64_t kIn[] = {2, 3, 8, 8}, kProbs[] = {2, 10}, kAct[] = {2, 4, 8, 8};
constexpr size_t kInN = 2 * 3 * 8 * 8, kProbsN = 2 * 10, kActN = 2 * 4 * 8 * 8;

struct Result {
  std::vector<float> probs = std::vector<float>(kProbsN), act = std::vector<float>(kActN);
  bool operator==(const Result& o) const {
    return std::memcmp(probs.data(), o.probs.data(), kProbsN * 4) == 0 &&
           std::memcmp(act.data(), o.act.data(), kActN * 4) == 0;
  }
};

std::vector<float> input(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(kInN);
  for (float& v : x) v = u(rng);
  return x;
}

// Binds and runs; the status of the first failing call.
kiln_status run(kiln_context* c, const std::vector<float>& x, Result& r) {
  kiln_status s = kiln_context_bind_input(c, "x", x.data(), KILN_F32, kIn, 4, KILN_MEMORY_HOST);
  if (s == KILN_OK) s = kiln_context_bind_output(c, "s", r.probs.data(), KILN_F32, kProbs, 2, KILN_MEMORY_HOST);
  if (s == KILN_OK) s = kiln_context_bind_output(c, "r", r.act.data(), KILN_F32, kAct, 4, KILN_MEMORY_HOST);
  if (s == KILN_OK) s = kiln_context_run(c);
  return s;
}

TEST(RuntimeThreads, OneEngineEightThreadsOwnContextsBitExact) {
  const double seconds = env_int("KILN_THREAD_TEST_SECONDS", 30);
  kiln_engine* e = nullptr;
  ASSERT_EQ(kiln_engine_create_from_memory(plan().data(), plan().size(), KILN_BACKEND_CPU, &e), KILN_OK)
      << kiln_last_error();
  // Single-threaded results for 8 inputs.
  constexpr int kInputs = 8, kThreads = 8;
  std::vector<std::vector<float>> xs;
  std::vector<Result> want(kInputs);
  {
    kiln_context* c = nullptr;
    ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << kiln_last_error();
    for (int i = 0; i < kInputs; ++i) {
      xs.push_back(input(100 + i));
      ASSERT_EQ(run(c, xs[i], want[i]), KILN_OK) << kiln_last_error();
    }
    kiln_context_destroy(c);
  }
  ASSERT_FALSE(want[0] == want[1]) << "inputs must give different outputs";
  std::atomic<long> runs{0}, mismatches{0}, failures{0};
  std::vector<std::string> errors(kThreads);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      kiln_context* c = nullptr;
      if (kiln_context_create(e, &c) != KILN_OK) {
        errors[t] = kiln_last_error();
        ++failures;
        return;
      }
      Result r;
      for (long i = 0; i == 0 || std::chrono::steady_clock::now() < deadline; ++i) {
        int k = int((t + i) % kInputs);  // threads run different inputs at the same time
        std::fill(r.probs.begin(), r.probs.end(), -1.0f);
        if (run(c, xs[k], r) != KILN_OK) {
          errors[t] = kiln_last_error();
          ++failures;
          break;
        }
        mismatches += !(r == want[k]);
        ++runs;
      }
      kiln_context_destroy(c);
    });
  for (auto& th : threads) th.join();
  kiln_engine_destroy(e);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "of " << runs.load() << " runs";
  EXPECT_GE(runs.load(), kThreads);
  std::printf("%ld runs on %d threads in %.0f s, %ld differed from the single-threaded result\n", runs.load(), kThreads,
              seconds, mismatches.load());
}

TEST(RuntimeLeaks, LoadRunDestroyCyclesKeepHostMemoryFlat) {
  const int cycles = env_int("KILN_LEAK_TEST_CYCLES", 1000);
  ASSERT_GE(cycles, 200);
  std::vector<float> x = input(7);
  Result first, r;
  size_t rss_100 = 0;
  for (int i = 1; i <= cycles; ++i) {
    kiln_engine* e = nullptr;
    ASSERT_EQ(kiln_engine_create_from_memory(plan().data(), plan().size(), KILN_BACKEND_CPU, &e), KILN_OK)
        << kiln_last_error();
    kiln_context* c = nullptr;
    ASSERT_EQ(kiln_context_create(e, &c), KILN_OK) << kiln_last_error();
    ASSERT_EQ(run(c, x, r), KILN_OK) << kiln_last_error();
    // A failed call too (its error text is kept per thread, not leaked).
    ASSERT_EQ(kiln_context_bind_input(c, "nope", x.data(), KILN_F32, kIn, 4, KILN_MEMORY_HOST), KILN_ERROR_NOT_FOUND);
    kiln_context_destroy(c);
    kiln_engine_destroy(e);
    if (i == 1) first = r;
    ASSERT_TRUE(r == first) << "cycle " << i;
    if (i == 100) rss_100 = rss_bytes();
  }
  size_t rss_end = rss_bytes();
  std::printf("RSS after cycle 100: %zu KiB, after cycle %d: %zu KiB\n", rss_100 >> 10, cycles, rss_end >> 10);
#ifndef KILN_TEST_SANITIZED
  // 1 MiB over 900 cycles: a leak of more than about 1.2 KB per cycle fails.
  EXPECT_LT(rss_end, rss_100 + (size_t(1) << 20)) << "host memory grew by " << ((rss_end - rss_100) >> 10) << " KiB";
#endif
#ifdef KILN_TEST_LSAN
  // The sanitizer build keeps freed memory in quarantine (RSS says little);
  // LeakSanitizer says whether anything allocated is now unreachable.
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0) << "LeakSanitizer found leaks (report above)";
#endif
}

TEST(RuntimeBindings, CppWrapperWrongShapeOrDtypeNamesTheTensor) {
  kiln::Engine e = kiln::Engine::from_memory(plan().data(), plan().size(), KILN_BACKEND_CPU);
  kiln::Context c(e);
  std::vector<float> x = input(1);
  Result r;
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const kiln::runtime_error& err) {
      EXPECT_EQ(err.status(), KILN_ERROR_INVALID_ARGUMENT);
      return err.what();
    }
    return "no error";
  };
  EXPECT_EQ(message([&] {
              c.bind_input("x", x.data(), KILN_F32, {2, 3, 8, 9});
            }),
            "invalid argument: input \"x\" is f32[2,3,8,8] but was bound as f32[2,3,8,9]");
  EXPECT_EQ(message([&] {
              c.bind_input("x", x.data(), KILN_F16, {2, 3, 8, 8});
            }),
            "invalid argument: input \"x\" is f32[2,3,8,8] but was bound as f16[2,3,8,8]");
  EXPECT_EQ(message([&] { c.bind_output("s", r.probs.data(), KILN_F32, {20}); }),
            "invalid argument: output \"s\" is f32[2,10] but was bound as f32[20]");
  EXPECT_EQ(message([&] {
              c.bind_output("r", r.act.data(), KILN_I32, {2, 4, 8, 8});
            }),
            "invalid argument: output \"r\" is f32[2,4,8,8] but was bound as i32[2,4,8,8]");
  // A run with an output never bound fails with text; then the context runs.
  c.bind_input("x", x.data(), KILN_F32, {2, 3, 8, 8});
  try {
    c.run();
    ADD_FAILURE() << "ran with unbound outputs";
  } catch (const kiln::runtime_error& err) {
    EXPECT_EQ(err.status(), KILN_ERROR_RUNTIME);
    EXPECT_STREQ(err.what(), "runtime error: output \"s\" is not bound");
  }
  c.bind_output("s", r.probs.data(), KILN_F32, {2, 10});
  c.bind_output("r", r.act.data(), KILN_F32, {2, 4, 8, 8});
  c.run();
  float sum = 0;
  for (int i = 0; i < 10; ++i) sum += r.probs[i];
  EXPECT_NEAR(sum, 1.0f, 1e-5);
}

}  // namespace
}  // namespace kiln
