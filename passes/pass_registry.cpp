#include <functional>
#include <map>

#include "ir/error.h"
#include "passes/pass_list.h"

namespace kiln {

namespace {
using Factory = std::unique_ptr<Pass> (*)();
const std::map<std::string, Factory, std::less<>>& factories() {
  static const std::map<std::string, Factory, std::less<>> f = {
      {"dce", create_dce_pass},
      {"cse", create_cse_pass},
      {"fold-constants", create_fold_constants_pass},
      {"precision", create_precision_pass},
      {"simplify", create_simplify_pass},
      {"fold-batchnorm", create_fold_batchnorm_pass},
      {"recognize-patterns", create_recognize_patterns_pass},
      {"plan-memory", create_plan_memory_pass},
      {"fuse", create_fuse_pass},
      {"merge-sibling-matmuls", create_merge_sibling_matmuls_pass},
      {"layout", create_layout_pass},
      {"fold-control-flow", create_fold_control_flow_pass},
      {"kv-cache-in-place", create_kv_cache_in_place_pass},
      {"share-transposed-weights", create_share_transposed_weights_pass},
      {"rematerialize-symbolic", create_rematerialize_symbolic_pass},
  };
  return f;
}
}  // namespace

std::unique_ptr<Pass> create_pass(std::string_view name) {
  auto it = factories().find(name);
  if (it == factories().end()) fail("unknown pass '{}' (known: {})", name, fmt::join(pass_names(), ", "));
  return it->second();
}

std::vector<std::string> pass_names() {
  std::vector<std::string> r;
  for (auto& [k, v] : factories()) r.push_back(k);
  return r;
}

}  // namespace kiln
