// RegexFullMatch's matcher, behind an interface so that kiln_ops (and with it
// libkiln_runtime, which refuses string tensors and never runs a string op)
// does not link a regular-expression library. The frontend installs RE2's
// (frontend/regex_re2.cpp) when it imports a RegexFullMatch and the kiln tools
// at start-up; without one, regex_full_match fails with a clear error.
#pragma once

#include <memory>
#include <string>

namespace kiln::ops {

class RegexMatcher {
 public:
  virtual ~RegexMatcher() = default;
  // Whether the whole of `s` matches the pattern.
  virtual bool full_match(const std::string& s) const = 0;
};

// Compiles `pattern`; on a pattern the engine rejects, returns null and sets
// `error` to the engine's reason.
using RegexCompiler = std::unique_ptr<RegexMatcher> (*)(const std::string& pattern, std::string& error);

void set_regex_compiler(RegexCompiler compiler);
// The installed compiler, or null.
RegexCompiler regex_compiler();

}  // namespace kiln::ops
