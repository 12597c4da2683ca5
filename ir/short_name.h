// A name from a model (node, value, input, initializer) as error messages
// print it. Kept apart from error.h so that adding it rebuilds only its users.
#pragma once
#include <string>
#include <string_view>

namespace kiln {

// Whole when short, else its first and last 60 bytes around "...": a hostile
// 1 MB node name must not flood the terminal. Every message that prints a
// name taken from a model goes through this one function. The cuts fall on
// UTF-8 character boundaries.
inline std::string short_name(std::string_view name) {
  constexpr size_t kKeep = 60;
  if (name.size() <= 2 * kKeep + 3) return std::string(name);
  auto continuation = [&](size_t i) { return (static_cast<unsigned char>(name[i]) & 0xC0) == 0x80; };
  size_t head = kKeep, tail = name.size() - kKeep;
  while (head > 0 && continuation(head)) --head;
  while (tail < name.size() && continuation(tail)) ++tail;
  return std::string(name.substr(0, head)) + "..." + std::string(name.substr(tail));
}

}  // namespace kiln
