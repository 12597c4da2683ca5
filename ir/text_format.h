// Spelling rules shared by the IR printer and parser (grammar: docs/ir.md).
#pragma once
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace kiln {

// Characters of a bare value or graph name: %conv1.out-2, @main.
inline bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}
// Identifiers (op names, attribute names, keywords, dtypes): [A-Za-z_][A-Za-z0-9_.]*
inline bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
inline bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9') || c == '.'; }

// "..." with \" \\ \n \t and \xHH for every other byte outside printable ASCII.
inline std::string quote_string(std::string_view s) {
  std::string r = "\"";
  for (unsigned char c : s) {
    if (c == '"') r += "\\\"";
    else if (c == '\\') r += "\\\\";
    else if (c == '\n') r += "\\n";
    else if (c == '\t') r += "\\t";
    else if (c < 0x20 || c >= 0x7f) r += fmt::format("\\x{:02x}", c);
    else r += static_cast<char>(c);
  }
  return r + "\"";
}

// A value or graph name: bare when every character is a name character.
inline std::string bare_or_quoted(std::string_view s) {
  bool bare = !s.empty();
  for (char c : s) bare = bare && is_name_char(c);
  return bare ? std::string(s) : quote_string(s);
}

inline bool is_identifier(std::string_view s) {
  if (s.empty() || !is_ident_start(s[0])) return false;
  for (char c : s)
    if (!is_ident_char(c)) return false;
  return true;
}

// Op and attribute names: bare identifiers, quoted otherwise (and for the
// keywords a statement could start with).
inline std::string ident_or_quoted(std::string_view s) {
  if (is_identifier(s) && s != "const" && s != "return" && s != "_") return std::string(s);
  return quote_string(s);
}

}  // namespace kiln
