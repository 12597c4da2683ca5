// Every pass's factory, declared once; pass_registry.cpp lists them by name.
// Adding a pass: write passes/<name>.cpp with create_<name>_pass() and add it
// to both lists.
#pragma once
#include <memory>

#include "passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> create_dce_pass();
std::unique_ptr<Pass> create_cse_pass();
std::unique_ptr<Pass> create_fold_constants_pass();
std::unique_ptr<Pass> create_precision_pass();
std::unique_ptr<Pass> create_simplify_pass();
std::unique_ptr<Pass> create_fold_batchnorm_pass();
std::unique_ptr<Pass> create_recognize_patterns_pass();
std::unique_ptr<Pass> create_plan_memory_pass();
std::unique_ptr<Pass> create_fuse_pass();
std::unique_ptr<Pass> create_merge_sibling_matmuls_pass();
std::unique_ptr<Pass> create_layout_pass();
std::unique_ptr<Pass> create_fold_control_flow_pass();
std::unique_ptr<Pass> create_kv_cache_in_place_pass();
std::unique_ptr<Pass> create_share_transposed_weights_pass();
std::unique_ptr<Pass> create_rematerialize_symbolic_pass();

}  // namespace kiln
