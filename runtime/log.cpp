#include "runtime/log.h"

#include <mutex>

namespace kiln::rt {

namespace {
std::mutex log_mu;
LogCallback log_fn;
}  // namespace

void set_log_callback(LogCallback fn) {
  std::lock_guard<std::mutex> g(log_mu);
  log_fn = std::move(fn);
}

void log(LogLevel level, const std::string& message) {
  // Held during the call: after set_log_callback returns, the old callback
  // is not running and never runs again (the application may free its data).
  std::lock_guard<std::mutex> g(log_mu);
  if (log_fn) log_fn(level, message);
}

}  // namespace kiln::rt
