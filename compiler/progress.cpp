#include "compiler/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

namespace kiln {

Progress::Progress(std::string what, double delay_s)
    : what_(std::move(what)), delay_s_(delay_s), tty_(::isatty(2)), start_(std::chrono::steady_clock::now()) {}

void Progress::update(int done, int total) {
  std::lock_guard<std::mutex> lock(mu_);
  last_total_ = total;  // also from the step's first call, (0, total)
  // Worker threads report out of order (5/11 before 2/11): counts only go up.
  if (done <= max_done_) return;
  max_done_ = done;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (s < delay_s_ && !shown_) return;
  const bool last = done >= total;
  if (tty_) {
    show_line(fmt::format("{} {}/{} ({:.1f} s)", what_, done, total, s), last);
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

void Progress::note(const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string line = fmt::format("{} {}/{} ({:.1f} s): {}", what_, max_done_, last_total_, s, text);
  if (tty_) {
    show_line(line, false);
    shown_ = true;
    return;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
  shown_ = true;
}

void Progress::show_line(const std::string& line, bool last) {
  // Blank what a longer line before (a note) left at the end.
  const size_t pad = line_len_ > line.size() ? line_len_ - line.size() : 0;
  std::fprintf(stderr, "\r%s%*s%s", line.c_str(), static_cast<int>(pad), "", last ? "\n" : "");
  std::fflush(stderr);
  line_len_ = last ? 0 : line.size();
}

}  // namespace kiln
