// A heartbeat while one pass runs long: the pass manager's per-pass progress
// ("passes run 9/17") says nothing while a single pass takes seconds or
// minutes (fusion or layout on a deep model), so a watcher thread calls back
// with the running pass's name and its time so far, first after `after_s`
// seconds and then every `every_s`, until the pass ends. The thread exists
// only when there is a callback: a pipeline without one (tests, the
// conformance runner, an embedding app that did not ask) starts nothing.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace kiln {

class PassHeartbeat {
 public:
  using Callback = std::function<void(const std::string& what, double seconds)>;
  PassHeartbeat(Callback cb, double after_s, double every_s);
  ~PassHeartbeat();
  PassHeartbeat(const PassHeartbeat&) = delete;
  PassHeartbeat& operator=(const PassHeartbeat&) = delete;

  // `what` (a pass name) starts / the running one ends. No-ops without a callback.
  void begin(const std::string& what);
  void end();

 private:
  void watch();

  Callback cb_;
  std::chrono::duration<double> after_, every_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string what_;  // empty: nothing running
  std::chrono::steady_clock::time_point start_;
  unsigned generation_ = 0;  // bumped by begin(): a beat never outlives its pass
  bool stop_ = false;
  std::thread thread_;
};

// Test hook: KILN_TEST_SLOW_PASS=NAME:SECONDS makes pass NAME take SECONDS
// longer (a sleep inside its timing), so the heartbeat can be tested on a
// small model. Returns 0 for any other pass or when the variable is unset
// (one getenv per pass: nothing a run would notice).
double test_slow_pass_seconds(const std::string& pass);

}  // namespace kiln
