// gtest's stdout/stderr capture (testing::internal::CaptureStdout), ended
// whatever happens. A capture left open when the captured call throws, or an
// ASSERT returns between the two calls, keeps the file descriptor redirected:
// the rest of the test binary's output vanishes and the next CaptureStdout
// aborts the binary ("Only one stdout capturer can exist at a time"), so one
// failing test takes every later one down with it. Here the destructor ends
// the capture on every path.
//
//   std::string out;
//   {
//     CapturedOutput captured;  // stdout
//     rc = run_the_command(...);
//     out = captured.text();
//   }
#pragma once
#include <gtest/gtest.h>

#include <string>

namespace kiln::testing {

class CapturedOutput {
 public:
  enum Stream { Stdout, Stderr };
  explicit CapturedOutput(Stream s = Stdout) : stream_(s) {
    if (stream_ == Stdout) ::testing::internal::CaptureStdout();
    else ::testing::internal::CaptureStderr();
  }
  CapturedOutput(const CapturedOutput&) = delete;
  CapturedOutput& operator=(const CapturedOutput&) = delete;
  ~CapturedOutput() {
    if (open_) text();
  }
  // Ends the capture and returns what was written; "" after the first call.
  std::string text() {
    if (!open_) return "";
    open_ = false;
    return stream_ == Stdout ? ::testing::internal::GetCapturedStdout() : ::testing::internal::GetCapturedStderr();
  }

 private:
  Stream stream_;
  bool open_ = true;
};

}  // namespace kiln::testing
