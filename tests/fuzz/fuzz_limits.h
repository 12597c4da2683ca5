// Limits for fuzz targets: small enough that no input can make a target
// allocate past libFuzzer's RSS limit (-rss_limit_mb=2048), so memory
// reports are real leaks or unchecked sizes, not big-but-legal models.
#pragma once
#include "ir/limits.h"

namespace kiln::fuzz {

inline void set_fuzz_limits() {
  limits().max_tensor_bytes = 64 << 20;
  limits().max_total_bytes = 256 << 20;
}

}  // namespace kiln::fuzz
