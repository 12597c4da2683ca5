#include "codegen/kernel_text.h"

#include <cctype>

namespace kiln::codegen {

std::string sanitize_identifier(std::string_view s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return r;
}

}  // namespace kiln::codegen
