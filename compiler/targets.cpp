#include "compiler/targets.h"

#include <algorithm>

#include <fmt/format.h>

#include "ir/error.h"

namespace kiln {

const std::vector<std::string>& supported_targets() {
  static const std::vector<std::string> t{"cpu", "sm_80", "sm_86", "sm_89", "sm_90"};
  return t;
}

const std::vector<std::string>& supported_precisions() {
  static const std::vector<std::string> p{"fp32", "tf32", "fp16", "bf16"};
  return p;
}

namespace {

void check_member(const char* what, const std::string& v, const std::vector<std::string>& ok) {
  if (std::find(ok.begin(), ok.end(), v) == ok.end())
    fail("{} \"{}\": expected one of {}", what, v, fmt::join(ok, ", "));
}

}  // namespace

void check_target(const std::string& target) { check_member("target", target, supported_targets()); }
void check_precision(const std::string& precision) { check_member("precision", precision, supported_precisions()); }

}  // namespace kiln
