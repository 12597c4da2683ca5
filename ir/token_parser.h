// The token-level half of the IR text parser: a token stream with one-token
// lookahead and the literals that appear inside a graph (numbers, types,
// dense/splat tensors, attributes). ir/parser.cpp builds graphs on top.
#pragma once
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attribute.h"
#include "ir/tensor.h"
#include "ir/text_lexer.h"

namespace kiln::text_detail {

class TokenParser {
 public:
  TokenParser(std::string_view src, std::string_view file, int first_line) : lex_(src, file, first_line) {
    toks_.push_back(lex_.next());
  }

 protected:
  // ---- tokens ----
  const Tok& peek(size_t k = 0) {
    while (toks_.size() <= k) toks_.push_back(toks_.back().kind == T::End ? toks_.back() : lex_.next());
    return toks_[k];
  }
  Tok take() {
    peek();
    Tok t = toks_.front();
    toks_.erase(toks_.begin());
    if (toks_.empty()) toks_.push_back(t.kind == T::End ? t : lex_.next());
    return t;
  }
  [[noreturn]] void error(const Tok& t, const std::string& msg) { lex_.error_at(t.line, t.col, msg); }
  static std::string describe(const Tok& t) {
    switch (t.kind) {
      case T::End:
        return "end of input";
      case T::String:
        return "string " + quote_string(t.text);
      case T::Value:
        return "%" + bare_or_quoted(t.text);
      case T::At:
        return "@" + bare_or_quoted(t.text);
      default:
        return "'" + t.text + "'";
    }
  }
  Tok expect(T kind, const char* what) {
    if (peek().kind != kind) error(peek(), fmt::format("expected {}, found {}", what, describe(peek())));
    return take();
  }
  Tok expect_punct(char c) {
    if (!peek().punct(c)) error(peek(), fmt::format("expected '{}', found {}", c, describe(peek())));
    return take();
  }
  void expect_keyword(std::string_view kw) {
    if (!peek().is(T::Ident, kw)) error(peek(), fmt::format("expected '{}', found {}", kw, describe(peek())));
    take();
  }
  bool accept_punct(char c) {
    if (!peek().punct(c)) return false;
    take();
    return true;
  }

  // ---- numbers ----
  template <typename I>
  I parse_int(const Tok& t, const char* what) {
    I v{};
    if (t.kind != T::Number) error(t, fmt::format("expected {}, found {}", what, describe(t)));
    auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (r.ec == std::errc::result_out_of_range) error(t, fmt::format("{} {} is out of range", what, t.text));
    if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size())
      error(t, fmt::format("malformed {} '{}'", what, t.text));
    return v;
  }
  static bool float_spelled(const Tok& t) {
    if (t.kind == T::Ident) return t.text == "inf" || t.text == "nan";
    return t.kind == T::Number && t.text.find_first_of(".eEin") != std::string::npos;
  }
  template <typename F>
  F parse_float(const Tok& t) {
    if (t.kind == T::Ident || t.kind == T::Number) {
      std::string_view s = t.text;
      bool neg = !s.empty() && s[0] == '-';
      std::string_view mag = neg ? s.substr(1) : s;
      if (mag == "inf") return neg ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
      if (mag == "nan") return std::numeric_limits<F>::quiet_NaN();
      if (t.kind == T::Number) {
        F v{};
        auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (r.ec == std::errc::result_out_of_range) error(t, fmt::format("float {} is out of range", s));
        if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return v;
        error(t, fmt::format("malformed number '{}'", s));
      }
    }
    error(t, fmt::format("expected a number, found {}", describe(t)));
  }

  // ---- literals (ir/parse_literals.cpp) ----
  // A list item, dim or tensor element: one token, or the tokens of a
  // symbolic dim expression (2*batch+1, seq-1; ir/symbolic_dim.h).
  using Item = std::vector<Tok>;
  Item item();
  // The one token of an item that must not be an expression.
  const Tok& single(const Item& it);
  // An integer as written (it may be negative: axes), or the handle of the
  // symbolic dim an expression spells.
  int64_t int_or_dim(const Item& it, const char* what);
  TensorType type();
  std::vector<Item> tensor_elements(bool splat);
  void store_element(Tensor& t, int64_t i, const Item& it);
  Tensor make_tensor(const TensorType& type, const Tok& at, bool splat, const std::vector<Item>& elems);
  Attribute attr_value();
  AttrMap attr_dict();

  Lexer lex_;
  std::vector<Tok> toks_;
};

}  // namespace kiln::text_detail
