// The lexer of kiln IR text (grammar: docs/ir.md): tokens with their line and
// column, so every parse error can say where. Used by the parser only.
#pragma once
#include <string>
#include <string_view>

#include "ir/error.h"
#include "ir/text_format.h"

namespace kiln::text_detail {

enum class T { End, Ident, Value, At, String, Number, Arrow, Punct };

struct Tok {
  T kind = T::End;
  std::string text;  // identifier, name, decoded string, number, or the punctuation char
  int line = 0, col = 0;
  bool is(T k, std::string_view s) const { return kind == k && text == s; }
  bool punct(char c) const { return kind == T::Punct && text.size() == 1 && text[0] == c; }
};

class Lexer {
 public:
  Lexer(std::string_view src, std::string_view file, int first_line) : src_(src), file_(file), line_(first_line) {}

  [[noreturn]] void error_at(int line, int col, const std::string& msg) const {
    throw Error(fmt::format("{}:{}:{}: {}", file_, line, col, msg));
  }

  Tok next() {
    skip_space();
    Tok t;
    t.line = line_;
    t.col = col_;
    if (pos_ >= src_.size()) return t;
    char c = src_[pos_];
    if (c == '%' || c == '@') {
      advance();
      t.kind = c == '%' ? T::Value : T::At;
      if (pos_ < src_.size() && src_[pos_] == '"') {
        t.text = string_body();
      } else {
        while (pos_ < src_.size() && is_name_char(src_[pos_])) t.text += advance();
        if (t.text.empty()) error_at(t.line, t.col, fmt::format("expected a name after '{}'", c));
      }
    } else if (c == '"') {
      t.kind = T::String;
      t.text = string_body();
    } else if (is_ident_start(c)) {
      t.kind = T::Ident;
      while (pos_ < src_.size() && is_ident_char(src_[pos_])) t.text += advance();
    } else if (is_digit(c) ||
               (c == '-' && pos_ + 1 < src_.size() && (is_digit(src_[pos_ + 1]) || is_ident_start(src_[pos_ + 1])))) {
      // Numbers are lexed greedily ([-]digit-or-letter run, with a sign after
      // an exponent 'e') and validated where they are used; "-inf" and "-nan"
      // lex as numbers too.
      t.kind = T::Number;
      t.text += advance();
      while (pos_ < src_.size()) {
        char d = src_[pos_];
        bool sign_after_e = (d == '+' || d == '-') && (t.text.back() == 'e' || t.text.back() == 'E') &&
                            is_digit(t.text[t.text[0] == '-' ? 1 : 0]);
        if (!is_ident_char(d) && !sign_after_e) break;
        t.text += advance();
      }
    } else if (c == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '>') {
      advance(), advance();
      t.kind = T::Arrow;
      t.text = "->";
    } else if (std::string_view("()[]{}<>,:=*+").find(c) != std::string_view::npos) {
      t.kind = T::Punct;
      t.text = std::string(1, advance());
    } else {
      error_at(t.line, t.col, fmt::format("unexpected character {}", quote_string(std::string(1, c))));
    }
    return t;
  }

 private:
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }

  char advance() {
    char c = src_[pos_++];
    if (c == '\n') ++line_, col_ = 1;
    else ++col_;
    return c;
  }

  void skip_space() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '/') {
        while (pos_ < src_.size() && src_[pos_] != '\n') advance();
      } else {
        break;
      }
    }
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Reads "..." starting at the opening quote; returns the decoded bytes.
  std::string string_body() {
    int line = line_, col = col_;
    advance();
    std::string r;
    while (true) {
      if (pos_ >= src_.size() || src_[pos_] == '\n') error_at(line, col, "unterminated string");
      char c = advance();
      if (c == '"') return r;
      if (c != '\\') {
        r += c;
        continue;
      }
      if (pos_ >= src_.size()) error_at(line, col, "unterminated string");
      int el = line_, ec = col_ - 1;
      char e = advance();
      if (e == '"' || e == '\\') r += e;
      else if (e == 'n') r += '\n';
      else if (e == 't') r += '\t';
      else if (e == 'x') {
        int hi = pos_ < src_.size() ? hex_value(src_[pos_]) : -1;
        int lo = pos_ + 1 < src_.size() ? hex_value(src_[pos_ + 1]) : -1;
        if (hi < 0 || lo < 0) error_at(el, ec, "\\x must be followed by two hex digits");
        advance(), advance();
        r += static_cast<char>(hi * 16 + lo);
      } else {
        error_at(el, ec, fmt::format("unknown escape '\\{}' in string", e));
      }
    }
  }

  std::string_view src_;
  std::string_view file_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

}  // namespace kiln::text_detail
