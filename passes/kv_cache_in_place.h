// The names passes/kv_cache_in_place.cpp gives, shared with the plan builder
// (compiler/plan_in_place.cpp), which records them for the runtime.
#pragma once
#include <string>

namespace kiln {

// The symbol whose value is the capacity (positions along the appended axis)
// of the buffer graph input `input_index` (a KV cache's past) may be bound
// in place with: the readers of its present step over its rows with it. Not
// a symbol the graph declares: the runtime gives its value per run (the
// bound buffer's capacity, else the present's own length).
inline std::string kv_capacity_symbol(size_t input_index) { return "kv_capacity_" + std::to_string(input_index); }

}  // namespace kiln
