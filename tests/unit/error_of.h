// The message of the kiln::Error that `f` throws, or "(no error)" when it
// throws none: for tests that check what an error says (its file, node and
// problem), e.g. EXPECT_NE(error_of([&] { ... }).find("..."), std::string::npos).
#pragma once
#include <functional>
#include <string>

#include "ir/error.h"

namespace kiln::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace kiln::testing
