#include "ir/symbolic_dim.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_map>

#include "ir/error.h"
#include "ir/floor_div_dims.h"
#include "ir/text_format.h"

namespace kiln {

namespace {

// Handles: kBase - id * kStride. The stride keeps a handle off by a small
// constant (what a symbol-unaware shape formula such as (h - k) / s + 1 makes
// of it) from being another valid handle, so such results are caught as
// invalid dims instead of read as some other symbol. The base is off a round
// number by an odd amount: an extreme a model or test writes on purpose
// (-(2^62) as Trilu's k) must never read as the first symbol interned.
constexpr int64_t kBase = -(int64_t(1) << 62) - 977;
constexpr int64_t kStride = int64_t(1) << 20;
constexpr int64_t kMaxEntries = int64_t(1) << 24;  // the handles stay above -(2^62 + 2^44)

struct Table {
  std::mutex mu;
  std::deque<DimPoly> polys;                     // by id; a deque keeps references stable
  std::unordered_map<std::string, int64_t> ids;  // canonical text -> id
};

Table& table() {
  static Table t;
  return t;
}

std::optional<int64_t> id_of(int64_t d) {
  if (d > kBase || (kBase - d) % kStride != 0) return std::nullopt;
  int64_t id = (kBase - d) / kStride;
  Table& t = table();
  std::lock_guard lock(t.mu);
  if (id >= static_cast<int64_t>(t.polys.size())) return std::nullopt;
  return id;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail("symbolic dim arithmetic overflows ({} * {})", a, b);
  return r;
}

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail("symbolic dim arithmetic overflows ({} + {})", a, b);
  return r;
}

void add_term(DimPoly& p, const DimMonomial& m, int64_t c) {
  int64_t& slot = p[m];
  slot = checked_add(slot, c);
  if (slot == 0) p.erase(m);
}

std::string monomial_str(const DimMonomial& m) {
  std::string s;
  for (size_t i = 0; i < m.size(); ++i) s += (i ? "*" : "") + m[i];
  return s;
}

// Canonical text: terms of higher degree first (then by name), the constant
// last: "batch*seq+2*seq-1".
std::string poly_str(const DimPoly& p) {
  if (p.empty()) return "0";
  std::vector<std::pair<DimMonomial, int64_t>> terms(p.begin(), p.end());
  std::stable_sort(terms.begin(), terms.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string s;
  for (size_t i = 0; i < terms.size(); ++i) {
    const auto& [m, c] = terms[i];
    bool neg = c < 0;
    // |c| as unsigned so INT64_MIN prints right.
    uint64_t mag = neg ? uint64_t(0) - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
    if (neg) s += "-";
    else if (i) s += "+";
    if (m.empty()) s += std::to_string(mag);
    else if (mag == 1) s += monomial_str(m);
    else s += std::to_string(mag) + "*" + monomial_str(m);
  }
  return s;
}

DimPoly mul_poly(const DimPoly& a, const DimPoly& b) {
  DimPoly r;
  for (const auto& [ma, ca] : a)
    for (const auto& [mb, cb] : b) {
      DimMonomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      add_term(r, m, checked_mul(ca, cb));
    }
  return r;
}

}  // namespace

bool is_symbolic_dim(int64_t d) { return id_of(d).has_value(); }

bool has_symbolic_dims(const Shape& s) { return first_symbolic_dim(s) >= 0; }

int first_symbolic_dim(const Shape& s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] < 0 && is_symbolic_dim(s[i])) return static_cast<int>(i);
  return -1;
}

bool is_symbol_name(std::string_view name) {
  static const std::set<std::string_view> reserved = {"in", "inf", "nan", "true", "false"};
  return is_identifier(name) && !reserved.count(name);
}

int64_t symbol_dim(std::string_view name) {
  if (!is_symbol_name(name))
    fail("\"{}\" is not a valid symbol name (an identifier [A-Za-z_][A-Za-z0-9_.]*, not in/inf/nan/true/false)", name);
  return dim_of_poly(DimPoly{{DimMonomial{std::string(name)}, 1}});
}

DimPoly dim_poly(int64_t d) {
  if (auto id = id_of(d)) {
    Table& t = table();
    std::lock_guard lock(t.mu);
    return t.polys[*id];
  }
  if (d < 0) fail("dim {} is negative", d);
  DimPoly p;
  if (d) p[{}] = d;
  return p;
}

int64_t dim_of_poly(const DimPoly& p) {
  bool constant = p.empty() || (p.size() == 1 && p.begin()->first.empty());
  if (constant) {
    int64_t c = p.empty() ? 0 : p.begin()->second;
    if (c < 0) fail("dim {} is negative", c);
    return c;
  }
  std::string key = poly_str(p);
  Table& t = table();
  std::lock_guard lock(t.mu);
  if (auto it = t.ids.find(key); it != t.ids.end()) return kBase - it->second * kStride;
  int64_t id = static_cast<int64_t>(t.polys.size());
  if (id >= kMaxEntries) fail("too many distinct symbolic dims (limit {})", kMaxEntries);
  t.polys.push_back(p);
  t.ids.emplace(std::move(key), id);
  return kBase - id * kStride;
}

namespace {

// Dims are non-negative (a negative constant in or out is an error); shape
// values (the i64 tensors exported models compute shapes with) may be
// negative. The same polynomial arithmetic serves both, with these
// conversions in and out.
enum class Domain { Dim, Value };

DimPoly value_poly(int64_t v) {
  if (is_symbolic_dim(v)) return dim_poly(v);
  DimPoly p;
  if (v) p[{}] = v;
  return p;
}

int64_t value_of_poly(const DimPoly& p) {
  if (p.empty()) return 0;
  if (p.size() == 1 && p.begin()->first.empty()) return p.begin()->second;
  return dim_of_poly(p);
}

// a + sign * b, as polynomials, converted in and out as `domain` says.
int64_t poly_sum(int64_t a, int64_t b, int64_t sign, Domain domain) {
  auto in = [domain](int64_t v) { return domain == Domain::Dim ? dim_poly(v) : value_poly(v); };
  DimPoly p = in(a);
  for (const auto& [m, c] : in(b)) add_term(p, m, checked_mul(c, sign));
  return domain == Domain::Dim ? dim_of_poly(p) : value_of_poly(p);
}

}  // namespace

int64_t dim_add(int64_t a, int64_t b) {
  if (!is_symbolic_dim(a) && !is_symbolic_dim(b) && a >= 0 && b >= 0) return checked_add(a, b);
  return poly_sum(a, b, +1, Domain::Dim);
}

int64_t dim_sub(int64_t a, int64_t b) { return poly_sum(a, b, -1, Domain::Dim); }

int64_t dim_mul(int64_t a, int64_t b) {
  if (!is_symbolic_dim(a) && !is_symbolic_dim(b) && a >= 0 && b >= 0) return checked_mul(a, b);
  return dim_of_poly(mul_poly(dim_poly(a), dim_poly(b)));
}

std::optional<int64_t> dim_div_exact(int64_t a, int64_t b) {
  (void)dim_poly(a);  // dims: a negative constant is an error
  (void)dim_poly(b);
  std::optional<int64_t> r = value_div(a, b);
  if (r && !is_symbolic_dim(a) && !is_symbolic_dim(b) && a % b != 0) return std::nullopt;
  return r;
}

int64_t dim_product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n = dim_mul(n, d);
  return n;
}

int64_t value_add(int64_t a, int64_t b) { return poly_sum(a, b, +1, Domain::Value); }

int64_t value_sub(int64_t a, int64_t b) { return poly_sum(a, b, -1, Domain::Value); }

int64_t value_mul(int64_t a, int64_t b) { return value_of_poly(mul_poly(value_poly(a), value_poly(b))); }

std::optional<int64_t> value_div(int64_t a, int64_t b) {
  if (!is_symbolic_dim(a) && !is_symbolic_dim(b)) {
    if (b == 0) return std::nullopt;
    if (a == INT64_MIN && b == -1) fail("symbolic dim arithmetic overflows ({} / {})", a, b);
    return a / b;
  }
  DimPoly pb = value_poly(b);
  if (pb.size() != 1) return std::nullopt;
  DimPoly pa = value_poly(a), r;
  const auto& [mb, cb] = *pb.begin();
  for (const auto& [ma, ca] : pa) {
    if (ca % cb != 0) return std::nullopt;
    DimMonomial rest;
    size_t j = 0;
    for (const std::string& s : ma) {
      if (j < mb.size() && mb[j] == s) ++j;
      else rest.push_back(s);
    }
    if (j != mb.size()) return std::nullopt;
    add_term(r, rest, ca / cb);
  }
  return value_of_poly(r);
}

std::string dim_str(int64_t d) {
  if (!is_symbolic_dim(d)) return std::to_string(d);
  return poly_str(dim_poly(d));
}

std::string dims_str(const Shape& s, std::string_view sep) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += sep;
    r += dim_str(s[i]);
  }
  return r;
}

std::vector<std::string> dim_symbols(int64_t d) {
  std::set<std::string> names;
  if (is_symbolic_dim(d))
    for (const auto& [m, c] : dim_poly(d))
      for (const std::string& name : m) names.insert(base_symbol(name));  // a derived symbol's base (floor_div_dims.h)
  return {names.begin(), names.end()};
}

std::vector<std::string> shape_symbols(const Shape& s) {
  std::set<std::string> names;
  for (int64_t d : s)
    for (std::string& n : dim_symbols(d)) names.insert(std::move(n));
  return {names.begin(), names.end()};
}

int64_t substitute_dim(int64_t d, const SymbolBindings& b) {
  if (!is_symbolic_dim(d)) return d;
  // The bound symbols' products fold into each term's coefficient; terms
  // left with no symbol sum into the constant (negative on the way for
  // seq-1), the rest stay a polynomial over the unbound symbols.
  int64_t constant = 0;
  DimPoly rest;
  for (const auto& [m, c] : dim_poly(d)) {
    int64_t coef = c;
    DimMonomial unbound;
    for (const std::string& name : m) {
      auto value = symbol_value(name, b);  // a derived symbol's from its base (floor_div_dims.h)
      if (!value) unbound.push_back(name);
      else coef = checked_mul(coef, *value);
    }
    if (unbound.empty()) constant = checked_add(constant, coef);
    else add_term(rest, unbound, coef);
  }
  if (rest.empty()) {
    if (constant < 0) fail("dim {} is {} (negative) for the given symbol values", dim_str(d), constant);
    return constant;
  }
  if (constant) add_term(rest, {}, constant);
  return value_of_poly(rest);
}

int64_t eval_dim(int64_t d, const SymbolBindings& b) {
  int64_t v = substitute_dim(d, b);
  if (is_symbolic_dim(v)) fail("symbol '{}' has no value", dim_symbols(v).front());
  return v;
}

Shape eval_shape(const Shape& s, const SymbolBindings& b) {
  Shape r;
  r.reserve(s.size());
  for (int64_t d : s) r.push_back(eval_dim(d, b));
  return r;
}

}  // namespace kiln
