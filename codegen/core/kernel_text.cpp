#include "codegen/core/kernel_text.h"

#include <cctype>

namespace kiln::codegen {

std::string sanitize_identifier(std::string_view s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return r;
}

std::string replace_all(const std::string& s, std::string_view from, std::string_view to) {
  std::string r;
  for (size_t pos = 0;;) {
    size_t at = s.find(from, pos);
    r.append(s, pos, at == std::string::npos ? std::string::npos : at - pos);
    if (at == std::string::npos) return r;
    r += to;
    pos = at + from.size();
  }
}

}  // namespace kiln::codegen
