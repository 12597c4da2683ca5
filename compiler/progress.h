// Progress of a long CLI step on stderr, the same for every step: on a
// terminal one updating line ("kernels compiled 12/40 (3.1 s)"); when stderr
// is a pipe or file, plain lines at every tenth of the work and at the end,
// so logs stay short. A step that finishes before `delay_s` shows nothing
// (small models stay quiet). Safe to call from several threads; a count
// lower than one already shown is ignored. note() adds what is running now to
// the step's line ("passes run 9/17 (6.2 s): fuse running for 4.0 s"), for a
// step whose current unit takes long (passes/pass_heartbeat.h).
#pragma once
#include <chrono>
#include <functional>
#include <mutex>
#include <string>

namespace kiln {

class Progress {
 public:
  explicit Progress(std::string what, double delay_s = 0);
  // `done` of `total` units finished.
  void update(int done, int total);
  // Shows `text` after the step's last count, whatever the delay (the caller
  // decides when a note is due): on a terminal in the updating line, else as
  // a line of its own.
  void note(const std::string& text);
  // The callback form codegen's KernelCompiler::set_progress takes; the
  // Progress must outlive it.
  std::function<void(int, int)> callback() {
    return [this](int done, int total) { update(done, total); };
  }

 private:
  void show_line(const std::string& line, bool last);  // terminal: rewrites the updating line

  std::string what_;
  double delay_s_;
  bool tty_;
  bool shown_ = false;
  int last_tenth_ = -1;
  int max_done_ = 0;
  int last_total_ = 0;
  size_t line_len_ = 0;  // terminal: what the updating line holds, to blank a longer one
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
};

}  // namespace kiln
