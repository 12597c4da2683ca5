#include "compiler/plan_sniff.h"

#include <cstring>
#include <fstream>

#include "runtime/plan_format.h"

namespace kiln {

bool is_plan_file(const std::string& path) {
  char head[sizeof(plan::kMagic)] = {};
  std::ifstream in(path, std::ios::binary);
  if (in.read(head, sizeof head) && std::memcmp(head, plan::kMagic, sizeof head) == 0) return true;
  return path.size() > 5 && path.ends_with(".plan");
}

}  // namespace kiln
