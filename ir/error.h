// kiln's error type. Errors that a user can cause (a bad model, a bad flag, an
// unsupported op) are kiln::Error; anything else escaping is an internal bug.
// Messages read like a compiler's: "model.onnx: node "conv1" (Conv): ...".
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Raised when a model uses an op, attribute value or dtype kiln does not
// implement. Kept apart from Error so the conformance runner can report
// "unsupported" instead of "fail".
class Unsupported : public Error {
 public:
  explicit Unsupported(const std::string& what) : Error(what) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void unsupported(fmt::format_string<Args...> f, Args&&... args) {
  throw Unsupported(fmt::format(f, std::forward<Args>(args)...));
}

// Internal invariant; failing it is a kiln bug, not a user error.
#define KILN_CHECK(cond, ...)                                                                               \
  do {                                                                                                      \
    if (!(cond))                                                                                            \
      throw std::logic_error(                                                                               \
          fmt::format("{}:{}: check failed: {}: {}", __FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__))); \
  } while (0)

}  // namespace kiln
