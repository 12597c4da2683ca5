// CapturedOutput (tests/unit/captured_output.h): a call that throws while
// its output is captured leaves no capture open, so the next capture in the
// same binary works (with gtest's bare CaptureStdout it aborts the binary).
#include "tests/unit/captured_output.h"

#include <cstdio>
#include <stdexcept>

namespace kiln {
namespace {

using testing::CapturedOutput;

void print_and_throw(FILE* to) {
  std::fputs("before the throw\n", to);
  std::fflush(to);
  throw std::runtime_error("the captured call failed");
}

TEST(CapturedOutput, ACallThatThrowsLeavesNoCaptureOpen) {
  for (auto [stream, file] : {std::pair{CapturedOutput::Stdout, stdout}, std::pair{CapturedOutput::Stderr, stderr}}) {
    EXPECT_THROW(
        {
          CapturedOutput captured(stream);
          print_and_throw(file);
        },
        std::runtime_error);
    // A second capture of the same stream: gtest allows one at a time.
    CapturedOutput again(stream);
    std::fputs("after\n", file);
    std::fflush(file);
    EXPECT_EQ(again.text(), "after\n");
    EXPECT_EQ(again.text(), "") << "the capture ends once";
  }
}

}  // namespace
}  // namespace kiln
