#include "codegen/core/kernel_vector.h"

#include <algorithm>

#include <fmt/format.h>

namespace kiln::codegen {

int vector_width(const std::vector<DType>& dtypes) {
  size_t widest = 1;
  for (DType t : dtypes) widest = std::max(widest, dtype_size(t));
  return static_cast<int>(std::max<size_t>(1, kVectorBytes / widest));
}

std::string vector_aligned(const std::vector<std::string>& names, const std::vector<size_t>& elem_bytes, int width) {
  std::string e;
  for (size_t i = 0; i < names.size(); ++i)
    e += fmt::format("{}(KILN_PTR_ADDR({}) & {}ull)", e.empty() ? "" : " | ", names[i], elem_bytes[i] * width - 1);
  return e.empty() ? std::string("true") : "(" + e + ") == 0ull";
}

}  // namespace kiln::codegen
