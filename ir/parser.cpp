// Reads kiln IR text (grammar: docs/ir.md) with a hand-written lexer and a
// recursive-descent parser. Every error is a kiln::Error "file:line:col: ...";
// the parser must never crash, whatever the input (it is fuzzed): recursion
// is bounded by the body nesting limit, numbers are range-checked, and
// constants are materialized only up to a size limit.
//
// Operands may refer to values defined later in the same graph (as MLIR
// allows); such graphs parse and the verifier reports the order problem.
// Result types are taken from the text as written; nothing is inferred.
#include "ir/parser.h"

#include <charconv>
#include <cstring>
#include <cmath>
#include <limits>
#include <map>

#include "ir/error.h"
#include "ir/low_bit.h"
#include "ir/text_format.h"

namespace kiln {

namespace {

constexpr int kMaxBodyDepth = 32;
constexpr int64_t kMaxConstantBytes = int64_t(1) << 30;

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
    } else if (std::string_view("()[]{}<>,:=").find(c) != std::string_view::npos) {
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

// An operand as written: a name and where, or absent (`_`).
struct OperandRef {
  std::string name;
  int line = 0, col = 0;
  bool absent = false;
};

class Parser {
 public:
  Parser(std::string_view src, std::string_view file, int first_line) : lex_(src, file, first_line) {
    toks_.push_back(lex_.next());
  }

  std::unique_ptr<Graph> parse_single() {
    auto g = graph(0);
    if (peek().kind != T::End) error(peek(), "expected end of input after the graph");
    return g;
  }

 private:
  struct Def {
    Value* value;
    int line;
  };
  // Per-graph parsing state.
  struct Scope {
    Graph* g;
    std::map<std::string, Def> defs;
    std::vector<std::pair<Node*, std::vector<OperandRef>>> pending;
  };

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

  // ---- types ----
  TensorType type() {
    Tok d = expect(T::Ident, "a type such as f32[2,3]");
    auto dt = dtype_from_name(d.text);
    if (!dt) error(d, fmt::format("unknown element type '{}'", d.text));
    TensorType tt;
    tt.dtype = *dt;
    expect_punct('[');
    if (!peek().punct(']')) {
      do {
        Tok n = take();
        int64_t dim = parse_int<int64_t>(n, "dimension");
        if (dim < 0) error(n, fmt::format("dimension {} is negative", dim));
        tt.shape.push_back(dim);
      } while (accept_punct(','));
    }
    expect_punct(']');
    try {
      tt.numel();
    } catch (const Error& e) {
      error(d, e.what());
    }
    // A layout suffix: {nhwc}. A '{' starting anything else (a body) is left alone.
    if (peek().punct('{') && peek(1).kind == T::Ident && peek(2).punct('}') && peek(1).text != "graph") {
      take();
      Tok l = take();
      if (l.text != "nhwc") error(l, fmt::format("unknown layout '{}'", l.text));
      tt.layout = Layout::NHWC;
      take();
    }
    return tt;
  }

  // ---- tensors: dense<[...]> and splat<v> ----
  std::vector<Tok> tensor_elements(bool splat) {
    std::vector<Tok> elems;
    expect_punct('<');
    if (splat) {
      elems.push_back(take());
    } else {
      expect_punct('[');
      if (!peek().punct(']')) {
        do elems.push_back(take());
        while (accept_punct(','));
      }
      expect_punct(']');
    }
    expect_punct('>');
    return elems;
  }

  void store_element(Tensor& t, int64_t i, const Tok& e) {
    DType dt = t.dtype();
    auto range = [&](int64_t lo, uint64_t hi) {
      if (e.kind == T::Number && !e.text.empty() && e.text[0] == '-') {
        int64_t v = parse_int<int64_t>(e, "integer");
        if (v < lo) error(e, fmt::format("{} does not fit in {}", v, dtype_name(dt)));
        return static_cast<uint64_t>(v);
      }
      uint64_t v = parse_int<uint64_t>(e, "integer");
      if (v > hi) error(e, fmt::format("{} does not fit in {}", v, dtype_name(dt)));
      return v;
    };
    switch (dt) {
      case DType::F32:
        t.data<float>()[i] = parse_float<float>(e);
        return;
      case DType::F64:
        t.data<double>()[i] = parse_float<double>(e);
        return;
      case DType::F16:
        t.data<uint16_t>()[i] = float_to_half(parse_float<float>(e));
        return;
      case DType::BF16:
        t.data<uint16_t>()[i] = float_to_bf16(parse_float<float>(e));
        return;
      case DType::Bool:
        if (e.kind != T::Ident || (e.text != "true" && e.text != "false"))
          error(e, fmt::format("expected true or false, found {}", describe(e)));
        t.data<uint8_t>()[i] = e.text == "true";
        return;
      default:
        break;
    }
    if (is_low_bit_float(dt)) {  // printed values are exact: one the type cannot hold is an error
      float v = parse_float<float>(e);
      uint8_t code = low_bit_code_of(dt, v);
      float back = low_bit_to_float(dt, code);
      if (std::isnan(v) ? !std::isnan(back) : back != v)
        error(e, fmt::format("{} is not a {} value", describe(e), dtype_name(dt)));
      t.data<uint8_t>()[i] = code;
      return;
    }
    if (is_low_bit_int(dt)) {
      auto [lo, hi] = low_bit_int_range(dt);
      t.data<uint8_t>()[i] = static_cast<uint8_t>(range(lo, static_cast<uint64_t>(hi)));
      return;
    }
    dispatch_storage(dt, [&](auto z) {
      using I = decltype(z);
      if constexpr (std::is_integral_v<I>) {
        auto lo = static_cast<int64_t>(std::numeric_limits<I>::min());
        auto hi = static_cast<uint64_t>(std::numeric_limits<I>::max());
        t.data<I>()[i] = static_cast<I>(range(lo, hi));
      }
    });
  }

  Tensor make_tensor(const TensorType& type, const Tok& at, bool splat, const std::vector<Tok>& elems) {
    int64_t n = type.numel();
    if (!splat && int64_t(elems.size()) != n)
      error(at, fmt::format("dense<> has {} elements but {} holds {}", elems.size(), type.str(), n));
    if (n > kMaxConstantBytes / int64_t(dtype_size(type.dtype)))
      error(at,
            fmt::format("{} is too large to materialize from text (limit {} bytes)", type.str(), kMaxConstantBytes));
    Tensor t(type);
    if (n == 0) return t;
    store_element(t, 0, elems[0]);
    size_t w = dtype_size(type.dtype);
    for (int64_t i = 1; i < n; ++i) {
      if (splat) std::memcpy(static_cast<uint8_t*>(t.raw()) + i * w, t.raw(), w);
      else store_element(t, i, elems[i]);
    }
    return t;
  }

  // ---- attributes ----
  Attribute attr_value() {
    Tok t = peek();
    if (t.kind == T::String) return take().text;
    if (t.kind == T::Ident && (t.text == "dense" || t.text == "splat")) {
      Tok kw = take();
      auto elems = tensor_elements(kw.text == "splat");
      expect_punct(':');
      TensorType tt = type();
      return make_tensor(tt, kw, kw.text == "splat", elems);
    }
    std::string kind;  // forced list kind: ints / floats / strings
    if (t.kind == T::Ident && (t.text == "ints" || t.text == "floats" || t.text == "strings") && peek(1).punct('['))
      kind = take().text;
    if (peek().punct('[')) {
      Tok open = take();
      std::vector<Tok> items;
      if (!peek().punct(']')) {
        do items.push_back(take());
        while (accept_punct(','));
      }
      expect_punct(']');
      if (kind.empty()) {
        if (items.empty()) error(open, "an empty list needs its kind: write ints[], floats[] or strings[]");
        kind = items[0].kind == T::String ? "strings" : "ints";
        for (const Tok& i : items)
          if (float_spelled(i)) kind = kind == "ints" ? "floats" : kind;
      }
      if (kind == "strings") {
        std::vector<std::string> v;
        for (const Tok& i : items) {
          if (i.kind != T::String) error(i, fmt::format("expected a string, found {}", describe(i)));
          v.push_back(i.text);
        }
        return v;
      }
      if (kind == "floats") {
        std::vector<float> v;
        for (const Tok& i : items) v.push_back(parse_float<float>(i));
        return v;
      }
      std::vector<int64_t> v;
      for (const Tok& i : items) v.push_back(parse_int<int64_t>(i, "integer"));
      return v;
    }
    if (!kind.empty()) error(peek(), "expected '[' after the list kind");
    Tok n = take();
    if (float_spelled(n)) return parse_float<float>(n);
    if (n.kind == T::Number) return parse_int<int64_t>(n, "integer");
    error(n, fmt::format("expected an attribute value, found {}", describe(n)));
  }

  AttrMap attr_dict() {
    AttrMap attrs;
    expect_punct('{');
    if (accept_punct('}')) return attrs;
    do {
      Tok k = take();
      if (k.kind != T::Ident && k.kind != T::String)
        error(k, fmt::format("expected an attribute name, found {}", describe(k)));
      if (attrs.has(k.text)) error(k, fmt::format("attribute '{}' is given twice", k.text));
      expect_punct('=');
      attrs.set(k.text, attr_value());
    } while (accept_punct(','));
    expect_punct('}');
    return attrs;
  }

  // ---- graphs ----
  void define(Scope& s, const Tok& at, Value* v) {
    auto [it, fresh] = s.defs.emplace(at.text, Def{v, at.line});
    if (!fresh) error(at, fmt::format("value {} is already defined on line {}", describe(at), it->second.line));
  }

  Value* resolve(Scope& s, const OperandRef& r) {
    if (r.absent) return nullptr;
    auto it = s.defs.find(r.name);
    if (it == s.defs.end())
      lex_.error_at(r.line, r.col, fmt::format("use of undefined value %{}", bare_or_quoted(r.name)));
    return it->second.value;
  }

  OperandRef operand() {
    Tok t = take();
    if (t.is(T::Ident, "_")) return {"", t.line, t.col, true};
    if (t.kind != T::Value) error(t, fmt::format("expected an operand (%name or _), found {}", describe(t)));
    return {t.text, t.line, t.col, false};
  }

  std::unique_ptr<Graph> graph(int depth) {
    if (depth > kMaxBodyDepth) error(peek(), fmt::format("bodies nest deeper than {} levels", kMaxBodyDepth));
    expect_keyword("graph");
    auto g = std::make_unique<Graph>(expect(T::At, "a graph name (@name)").text);
    Scope s{g.get(), {}, {}};
    expect_punct('(');
    if (!peek().punct(')')) {
      do {
        Tok v = expect(T::Value, "an input (%name: type)");
        expect_punct(':');
        define(s, v, g->add_input(v.text, type()));
      } while (accept_punct(','));
    }
    expect_punct(')');
    if (peek().kind != T::Arrow) error(peek(), fmt::format("expected '->', found {}", describe(peek())));
    take();
    expect_punct('(');
    std::vector<TensorType> out_types;
    if (!peek().punct(')')) {
      do out_types.push_back(type());
      while (accept_punct(','));
    }
    expect_punct(')');
    expect_punct('{');
    while (!peek().is(T::Ident, "return")) statement(s, depth);
    Tok ret = take();
    std::vector<OperandRef> outs;
    if (!peek().punct('}')) {
      do {
        Tok v = expect(T::Value, "a result (%name)");
        outs.push_back({v.text, v.line, v.col, false});
      } while (accept_punct(','));
    }
    expect_punct('}');
    for (auto& [node, refs] : s.pending) {
      std::vector<Value*> ins;
      for (const OperandRef& r : refs) ins.push_back(resolve(s, r));
      node->set_inputs(std::move(ins));
    }
    if (outs.size() != out_types.size())
      error(ret,
            fmt::format("return gives {} values but the graph declares {} results", outs.size(), out_types.size()));
    std::vector<Value*> out_values;
    for (size_t i = 0; i < outs.size(); ++i) {
      Value* v = resolve(s, outs[i]);
      if (v->type() != out_types[i])
        lex_.error_at(outs[i].line, outs[i].col,
                      fmt::format("result {} %{} has type {} but the graph declares {}", i,
                                  bare_or_quoted(outs[i].name), v->type().str(), out_types[i].str()));
      out_values.push_back(v);
    }
    g->set_outputs(std::move(out_values));
    return g;
  }

  void statement(Scope& s, int depth) {
    std::vector<Tok> results;
    if (peek().kind == T::Value) {
      do results.push_back(expect(T::Value, "a result name (%name)"));
      while (accept_punct(','));
      expect_punct('=');
    }
    if (!results.empty() && peek().is(T::Ident, "const")) {
      Tok kw = take();
      if (results.size() != 1) error(kw, "a constant defines exactly one value");
      define(s, results[0], constant(s.g, results[0]));
      return;
    }
    Tok op = take();
    if (op.kind != T::Ident && op.kind != T::String)
      error(op, fmt::format("expected an op name or 'return', found {}", describe(op)));
    expect_punct('(');
    std::vector<OperandRef> refs;
    if (!peek().punct(')')) {
      do refs.push_back(operand());
      while (accept_punct(','));
    }
    expect_punct(')');
    AttrMap attrs;
    if (peek().punct('{') && !(peek(1).is(T::Ident, "graph") && peek(2).kind == T::At)) attrs = attr_dict();
    std::vector<TensorType> types;
    if (!results.empty()) {
      Tok colon = expect_punct(':');
      do types.push_back(type());
      while (accept_punct(','));
      if (types.size() != results.size())
        error(colon, fmt::format("{} results but {} types", results.size(), types.size()));
    }
    std::string loc;
    if (peek().is(T::Ident, "loc")) {
      take();
      expect_punct('(');
      loc = expect(T::String, "a string").text;
      expect_punct(')');
    }
    // Regions: one or more graphs inside one pair of braces (a fused body;
    // an if's then and else).
    std::vector<std::unique_ptr<Graph>> regions;
    if (peek().punct('{')) {
      take();
      do regions.push_back(graph(depth + 1));
      while (peek().is(T::Ident, "graph"));
      expect_punct('}');
    }
    Node* n = s.g->add_node(op.text, {}, types, std::move(attrs), loc);
    for (auto& r : regions) n->add_region(std::move(r));
    for (size_t i = 0; i < results.size(); ++i) {
      n->output(int(i))->set_name(results[i].text);
      define(s, results[i], n->output(int(i)));
    }
    s.pending.push_back({n, std::move(refs)});
  }

  Value* constant(Graph* g, const Tok& name) {
    TensorType tt = type();
    Tok form = peek();
    if (form.kind == T::At) {
      Tok ref = take();
      if (ref.text != name.text)
        error(ref, fmt::format("constant reference @{} does not repeat the value's name {}", quote_string(ref.text),
                               describe(name)));
      expect_punct('<');
      Tok algo = expect(T::Ident, "xxh64");
      if (algo.text != "xxh64") error(algo, fmt::format("unknown digest '{}' (expected xxh64)", algo.text));
      expect_punct(':');
      Tok hex = take();
      uint64_t digest = 0;
      bool ok = (hex.kind == T::Number || hex.kind == T::Ident) && hex.text.size() == 16;
      if (ok) {
        auto r = std::from_chars(hex.text.data(), hex.text.data() + 16, digest, 16);
        ok = r.ec == std::errc() && r.ptr == hex.text.data() + 16;
      }
      if (!ok) error(hex, fmt::format("expected 16 hex digits, found {}", describe(hex)));
      expect_punct('>');
      return g->add_constant_ref(name.text, tt, digest);
    }
    if (!form.is(T::Ident, "dense") && !form.is(T::Ident, "splat"))
      error(form, fmt::format("expected dense<...>, splat<...> or @\"name\" <xxh64:...> after the type, found {}",
                              describe(form)));
    Tok which = take();
    auto elems = tensor_elements(which.text == "splat");
    return g->add_constant(name.text, make_tensor(tt, which, which.text == "splat", elems));
  }

  Lexer lex_;
  std::vector<Tok> toks_;
};

}  // namespace

std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename) {
  return Parser(text, filename, 1).parse_single();
}

std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename, int first_line) {
  return Parser(text, filename, first_line).parse_single();
}

std::vector<InputChunk> split_input_file(std::string_view text) {
  std::vector<InputChunk> chunks;
  size_t chunk_start = 0;
  int line = 1, chunk_line = 1;
  for (size_t pos = 0; pos < text.size(); ++line) {
    size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view l = text.substr(pos, end - pos);
    while (!l.empty() && (l.back() == '\r' || l.back() == ' ' || l.back() == '\t')) l.remove_suffix(1);
    if (l == "// -----") {
      chunks.push_back({text.substr(chunk_start, pos - chunk_start), chunk_line});
      chunk_start = std::min(end + 1, text.size());
      chunk_line = line + 1;
    }
    pos = end + 1;
  }
  chunks.push_back({text.substr(chunk_start), chunk_line});
  return chunks;
}

std::vector<std::unique_ptr<Graph>> parse_graphs_split(std::string_view text, std::string_view filename) {
  std::vector<std::unique_ptr<Graph>> graphs;
  for (const InputChunk& c : split_input_file(text)) graphs.push_back(parse_graph(c.text, filename, c.first_line));
  return graphs;
}

}  // namespace kiln
