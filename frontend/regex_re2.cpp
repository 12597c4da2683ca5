#include "frontend/regex_re2.h"

#include <re2/re2.h>

#include "ops/regex_engine.h"

namespace kiln::frontend {

namespace {

class Re2Matcher final : public ops::RegexMatcher {
 public:
  explicit Re2Matcher(std::unique_ptr<RE2> re) : re_(std::move(re)) {}
  bool full_match(const std::string& s) const override { return RE2::FullMatch(s, *re_); }

 private:
  std::unique_ptr<RE2> re_;
};

std::unique_ptr<ops::RegexMatcher> compile_re2(const std::string& pattern, std::string& error) {
  RE2::Options o;
  o.set_log_errors(false);
  auto re = std::make_unique<RE2>(pattern, o);
  if (!re->ok()) {
    error = re->error();
    return nullptr;
  }
  return std::make_unique<Re2Matcher>(std::move(re));
}

}  // namespace

void install_re2_regex_engine() { ops::set_regex_compiler(&compile_re2); }

}  // namespace kiln::frontend
