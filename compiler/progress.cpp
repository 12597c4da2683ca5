#include "compiler/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace kiln {

Progress::Progress(std::string what, double delay_s)
    : what_(std::move(what)), delay_s_(delay_s), tty_(::isatty(2)), start_(std::chrono::steady_clock::now()) {}

void Progress::update(int done, int total) {
  std::lock_guard<std::mutex> lock(mu_);
  // Worker threads report out of order (5/11 before 2/11): counts only go up.
  if (done <= max_done_) return;
  max_done_ = done;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (s < delay_s_ && !shown_) return;
  const bool last = done >= total;
  if (tty_) {
    std::fprintf(stderr, "\r%s %d/%d (%.1f s)%s", what_.c_str(), done, total, s, last ? "\n" : "");
    std::fflush(stderr);
    shown_ = !last;
    return;
  }
  const int tenth = total > 0 ? done * 10 / total : 10;
  if (last || tenth != last_tenth_) {
    std::fprintf(stderr, "%s %d/%d (%.1f s)\n", what_.c_str(), done, total, s);
    shown_ = true;
  }
  last_tenth_ = tenth;
}

}  // namespace kiln
