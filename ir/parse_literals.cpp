// The literals of kiln IR text: types, dense<[...]> and splat<v> tensors,
// attribute values and dictionaries (grammar: docs/ir.md). Values are
// range-checked and constants materialized only up to a size limit: the
// parser is fuzzed and must never crash.
#include <cstring>

#include <algorithm>

#include "ir/low_bit.h"
#include "ir/symbolic_dim.h"
#include "ir/token_parser.h"

namespace kiln::text_detail {

namespace {

constexpr int64_t kMaxConstantBytes = int64_t(1) << 30;

// Whether a Number token is a negated symbol: "-seq" (the lexer reads a '-'
// before a letter as the start of a number, for -inf and -nan).
bool negated_symbol(const Tok& t) {
  return t.kind == T::Number && t.text.size() > 1 && t.text[0] == '-' && is_ident_start(t.text[1]) &&
         t.text != "-inf" && t.text != "-nan";
}

}  // namespace

// ---- dims: integers and symbolic dim expressions ----
TokenParser::Item TokenParser::item() {
  Item it{take()};
  // An expression goes on with '*' or '+' and an operand, or with a
  // negative term ("seq-1" lexes as seq, -1).
  while (true) {
    if (peek().punct('*') || peek().punct('+')) {
      it.push_back(take());
      it.push_back(take());
    } else if (peek().kind == T::Number && !peek().text.empty() && peek().text[0] == '-') {
      it.push_back(take());
    } else {
      return it;
    }
  }
}

const Tok& TokenParser::single(const Item& it) {
  if (it.size() > 1) error(it[1], fmt::format("expected ',' or the end of the list, found {}", describe(it[1])));
  return it[0];
}

int64_t TokenParser::int_or_dim(const Item& it, const char* what) {
  if (it.size() == 1 && it[0].kind == T::Number && !negated_symbol(it[0])) return parse_int<int64_t>(it[0], what);
  DimPoly poly;
  size_t i = 0;
  auto overflow = [&](const Tok& t) { error(t, fmt::format("{} overflows", what)); };
  while (i < it.size()) {
    const Tok& start = it[i];
    int64_t coef = 1;
    DimMonomial mono;
    while (true) {  // factors joined by '*'
      const Tok& f = it[i++];
      if (negated_symbol(f)) {
        coef = -coef;
        mono.push_back(f.text.substr(1));
        if (!is_symbol_name(mono.back())) error(f, fmt::format("'{}' is not a symbol name", mono.back()));
      } else if (f.kind == T::Number) {
        if (__builtin_mul_overflow(coef, parse_int<int64_t>(f, what), &coef)) overflow(f);
      } else if (f.kind == T::Ident && is_symbol_name(f.text)) {
        mono.push_back(f.text);
      } else {
        error(f,
              fmt::format("expected {} (an integer or a symbolic dim such as batch*seq), found {}", what, describe(f)));
      }
      if (i < it.size() && it[i].punct('*')) {
        ++i;
        continue;
      }
      break;
    }
    std::sort(mono.begin(), mono.end());
    int64_t& slot = poly[mono];
    if (__builtin_add_overflow(slot, coef, &slot)) overflow(start);
    if (slot == 0) poly.erase(mono);
    if (i < it.size() && it[i].punct('+')) ++i;  // else the next term is negative: "-1", "-seq"
  }
  // The printer writes a constant as its number: an expression without a
  // symbol ("3 -1", a missing comma) is malformed text, not arithmetic.
  bool constant = poly.empty() || (poly.size() == 1 && poly.begin()->first.empty());
  if (constant && it.size() > 1)
    error(it[1], fmt::format("expected ',' or the end of the list, found {}", describe(it[1])));
  if (constant) return poly.empty() ? 0 : poly.begin()->second;
  try {
    return dim_of_poly(poly);
  } catch (const Error& e) {
    error(it[0], e.what());
  }
}

// ---- types ----
TensorType TokenParser::type() {
  Tok d = expect(T::Ident, "a type such as f32[2,3]");
  auto dt = dtype_from_name(d.text);
  if (!dt) error(d, fmt::format("unknown element type '{}'", d.text));
  TensorType tt;
  tt.dtype = *dt;
  expect_punct('[');
  if (!peek().punct(']')) {
    do {
      Item n = item();
      int64_t dim = int_or_dim(n, "dimension");
      if (dim < 0 && !is_symbolic_dim(dim)) error(n[0], fmt::format("dimension {} is negative", dim));
      tt.shape.push_back(dim);
    } while (accept_punct(','));
  }
  expect_punct(']');
  try {
    // The element count's overflow checks (a polynomial's with symbolic dims).
    if (has_symbolic_dims(tt.shape)) dim_product(tt.shape);
    else tt.numel();
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
std::vector<TokenParser::Item> TokenParser::tensor_elements(bool splat) {
  std::vector<Item> elems;
  expect_punct('<');
  if (splat) {
    elems.push_back(item());
  } else {
    expect_punct('[');
    if (!peek().punct(']')) {
      do elems.push_back(item());
      while (accept_punct(','));
    }
    expect_punct(']');
  }
  expect_punct('>');
  return elems;
}

void TokenParser::store_element(Tensor& t, int64_t i, const Item& it) {
  DType dt = t.dtype();
  // Shape values of a graph with symbolic dims hold symbolic dims.
  if (dt == DType::I64 && (it.size() > 1 || it[0].kind == T::Ident || negated_symbol(it[0]))) {
    t.data<int64_t>()[i] = int_or_dim(it, "integer");
    return;
  }
  const Tok& e = single(it);
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
    case DType::String:
      if (e.kind != T::String) error(e, fmt::format("expected a string, found {}", describe(e)));
      t.strings()[i] = e.text;
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

Tensor TokenParser::make_tensor(const TensorType& type, const Tok& at, bool splat, const std::vector<Item>& elems) {
  if (has_symbolic_dims(type.shape))
    error(at, fmt::format("a tensor with data needs a static type, not {}", type.str()));
  int64_t n = type.numel();
  if (!splat && int64_t(elems.size()) != n)
    error(at, fmt::format("dense<> has {} elements but {} holds {}", elems.size(), type.str(), n));
  if (n > kMaxConstantBytes / int64_t(dtype_size(type.dtype)))
    error(at, fmt::format("{} is too large to materialize from text (limit {} bytes)", type.str(), kMaxConstantBytes));
  Tensor t(type);
  if (n == 0) return t;
  store_element(t, 0, elems[0]);
  size_t w = dtype_size(type.dtype);
  for (int64_t i = 1; i < n; ++i) {
    if (splat && type.dtype == DType::String) t.strings()[i] = t.strings()[0];
    else if (splat) std::memcpy(static_cast<uint8_t*>(t.raw()) + i * w, t.raw(), w);
    else store_element(t, i, elems[i]);
  }
  return t;
}

// ---- attributes ----
Attribute TokenParser::attr_value() {
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
    std::vector<Item> items;
    if (!peek().punct(']')) {
      do items.push_back(item());
      while (accept_punct(','));
    }
    expect_punct(']');
    if (kind.empty()) {
      if (items.empty()) error(open, "an empty list needs its kind: write ints[], floats[] or strings[]");
      kind = items[0][0].kind == T::String ? "strings" : "ints";
      for (const Item& i : items)
        if (i.size() == 1 && float_spelled(i[0])) kind = kind == "ints" ? "floats" : kind;
    }
    if (kind == "strings") {
      std::vector<std::string> v;
      for (const Item& i : items) {
        const Tok& s = single(i);
        if (s.kind != T::String) error(s, fmt::format("expected a string, found {}", describe(s)));
        v.push_back(s.text);
      }
      return v;
    }
    if (kind == "floats") {
      std::vector<float> v;
      for (const Item& i : items) v.push_back(parse_float<float>(single(i)));
      return v;
    }
    std::vector<int64_t> v;  // integers, or symbolic dims (reshape {shape=[batch,seq,768]})
    for (const Item& i : items) v.push_back(int_or_dim(i, "integer"));
    return v;
  }
  if (!kind.empty()) error(peek(), "expected '[' after the list kind");
  bool word = peek().kind == T::Ident && (is_symbol_name(peek().text) || float_spelled(peek()));
  if (peek().kind != T::Number && !word)
    error(peek(), fmt::format("expected an attribute value, found {}", describe(peek())));
  Item n = item();
  if (n.size() == 1 && float_spelled(n[0])) return parse_float<float>(n[0]);
  return int_or_dim(n, "integer");
}

AttrMap TokenParser::attr_dict() {
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

}  // namespace kiln::text_detail
