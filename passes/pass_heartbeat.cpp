#include "passes/pass_heartbeat.h"

#include <cstdlib>

namespace kiln {

PassHeartbeat::PassHeartbeat(Callback cb, double after_s, double every_s)
    : cb_(std::move(cb)), after_(after_s), every_(every_s > 0 ? every_s : 1.0) {
  if (cb_) thread_ = std::thread([this] { watch(); });
}

PassHeartbeat::~PassHeartbeat() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void PassHeartbeat::begin(const std::string& what) {
  if (!cb_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    what_ = what;
    start_ = std::chrono::steady_clock::now();
    ++generation_;
  }
  cv_.notify_all();
}

void PassHeartbeat::end() {
  if (!cb_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    what_.clear();
    ++generation_;
  }
  cv_.notify_all();
}

void PassHeartbeat::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (what_.empty()) {
      cv_.wait(lock, [this] { return stop_ || !what_.empty(); });
      continue;
    }
    // Sleep until the first beat of this pass, then between beats; a new
    // pass (or the end of this one) wakes the thread early and starts over.
    const unsigned gen = generation_;
    auto next = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(after_);
    while (!stop_ && generation_ == gen) {
      if (cv_.wait_until(lock, next, [&] { return stop_ || generation_ != gen; })) break;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      const std::string what = what_;
      lock.unlock();  // the callback writes to stderr: never under the lock begin() waits on
      cb_(what, s);
      lock.lock();
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(every_);
    }
  }
}

double test_slow_pass_seconds(const std::string& pass) {
  const char* v = std::getenv("KILN_TEST_SLOW_PASS");
  if (!v) return 0;
  const std::string s(v);
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || s.substr(0, colon) != pass) return 0;
  return std::atof(s.c_str() + colon + 1);
}

}  // namespace kiln
