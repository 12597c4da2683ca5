#include "ir/name_cut.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace kiln {

std::string cut_middle(const std::string& s, size_t keep) {
  if (s.size() <= keep) return s;
  auto continuation = [&](size_t i) { return (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; };
  size_t head = (keep - 3) / 2, tail = s.size() - (keep - 3 - head);
  while (head > 0 && continuation(head)) --head;
  while (tail < s.size() && continuation(tail)) ++tail;
  return s.substr(0, head) + "..." + s.substr(tail);
}

std::string cut_name(const std::string& name, size_t keep) {
  if (name.size() <= keep) return name;
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t slash; (slash = name.find('/', start)) != std::string::npos; start = slash + 1)
    parts.push_back(name.substr(start, slash - start));
  parts.push_back(name.substr(start));
  const size_t n = parts.size();
  if (n < 3) return cut_middle(name, keep);
  std::vector<char> kept(n, 1);
  auto render = [&] {
    std::string r;
    for (size_t i = 0; i < n; ++i) {
      if (!kept[i] && i > 0 && !kept[i - 1]) continue;  // one "..." per run of dropped parts
      if (i > 0) r += '/';
      r += kept[i] ? parts[i] : "...";
    }
    return r;
  };
  // Repeated blocks differ in their numbered parts (layer.0, h.11), so the
  // parts without digits go first, nearest the middle first (right of it on
  // a tie).
  auto has_digit = [](const std::string& p) { return p.find_first_of("0123456789") != std::string::npos; };
  std::vector<size_t> order;
  for (size_t i = 1; i + 1 < n; ++i) order.push_back(i);
  const double mid = double(n - 1) / 2;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    double da = std::abs(double(a) - mid), db = std::abs(double(b) - mid);
    return std::make_tuple(has_digit(parts[a]), da, -double(a)) < std::make_tuple(has_digit(parts[b]), db, -double(b));
  });
  for (size_t i : order) {
    kept[i] = 0;
    std::string r = render();
    if (r.size() <= keep) return r;
  }
  return cut_middle(render(), keep);
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

std::string short_joined_names(const std::string& joined, size_t first_keep, size_t width) {
  std::vector<std::string> parts = split_joined_names(joined);
  if (parts.empty()) return "";
  const std::string more = parts.size() > 1 ? fmt::format(" + {} more", parts.size() - 1) : "";
  if (first_keep == 0) first_keep = width > more.size() + 8 ? width - more.size() : 8;
  return cut_name(parts[0], first_keep) + more;
}

}  // namespace kiln
