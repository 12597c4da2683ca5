#include "ir/name_cut.h"

#include <fmt/format.h>

namespace kiln {

std::string cut_middle(const std::string& s, size_t keep) {
  if (s.size() <= keep) return s;
  auto continuation = [&](size_t i) { return (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; };
  size_t head = (keep - 3) / 2, tail = s.size() - (keep - 3 - head);
  while (head > 0 && continuation(head)) --head;
  while (tail < s.size() && continuation(tail)) ++tail;
  return s.substr(0, head) + "..." + s.substr(tail);
}

// The label shows the first and how many more, the tooltip all of them, one a line.
std::vector<std::string> split_joined_names(const std::string& joined) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= joined.size()) {
    size_t plus = joined.find('+', start);
    if (plus == std::string::npos) plus = joined.size();
    if (plus > start) parts.push_back(joined.substr(start, plus - start));
    start = plus + 1;
  }
  return parts;
}

std::string short_joined_names(const std::string& joined) {
  std::vector<std::string> parts = split_joined_names(joined);
  if (parts.empty()) return "";
  std::string s = cut_middle(parts[0], 48);
  if (parts.size() > 1) s += fmt::format(" + {} more", parts.size() - 1);
  return s;
}

}  // namespace kiln
