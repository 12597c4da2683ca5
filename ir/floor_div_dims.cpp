#include "ir/floor_div_dims.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <numeric>

#include "ir/error.h"

namespace kiln {

namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

// "<prefix><digits>" as its number.
std::optional<int64_t> number_after(std::string_view part, std::string_view prefix) {
  if (part.size() <= prefix.size() || part.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::string_view digits = part.substr(prefix.size());
  int64_t v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || end != digits.data() + digits.size() || v < 0 || digits[0] == '0') return std::nullopt;
  return v;
}

// floor((times * base + plus) / div) as a dim: the integer parts pulled out,
// the atom reduced by the common factor (so equal values get equal names).
int64_t floor_of(DerivedSymbol d) {
  const int64_t base = symbol_dim(d.base);
  int64_t whole = dim_add(dim_mul(floor_div(d.times, d.div), base), 0);
  const int64_t lift = floor_div(d.plus, d.div);
  d.times = floor_mod(d.times, d.div);
  d.plus = floor_mod(d.plus, d.div);
  DimPoly p = dim_poly(whole);
  const DimMonomial one;
  if (lift) p[one] += lift;
  if (p.count(one) && p[one] == 0) p.erase(one);
  if (d.times != 0) {
    const int64_t g = std::gcd(std::gcd(d.times, d.plus), d.div);
    d.times /= g, d.plus /= g, d.div /= g;
    if (d.div == 1) p[{d.base}] += d.times;  // cannot happen with times < div, kept for safety
    else p[{derived_symbol_name(d)}] += 1;
  }
  return dim_of_poly(p);
}

}  // namespace

std::optional<DerivedSymbol> parse_derived_symbol(std::string_view name) {
  // From the end: ".div<d>", then optionally ".plus<r>", then optionally ".times<c>".
  auto last_part = [](std::string_view s) -> std::pair<std::string_view, std::string_view> {
    size_t dot = s.rfind('.');
    if (dot == std::string_view::npos) return {s, {}};
    return {s.substr(0, dot), s.substr(dot + 1)};
  };
  DerivedSymbol d;
  auto [rest, part] = last_part(name);
  auto div = number_after(part, "div");
  if (part.empty() || !div || *div < 2) return std::nullopt;
  d.div = *div;
  auto [rest2, part2] = last_part(rest);
  if (auto plus = number_after(part2, "plus"); !part2.empty() && plus) {
    d.plus = *plus;
    rest = rest2;
  }
  auto [rest3, part3] = last_part(rest);
  if (auto times = number_after(part3, "times"); !part3.empty() && times) {
    d.times = *times;
    rest = rest3;
  }
  if (rest.empty() || !is_symbol_name(rest) || d.times < 1 || d.times >= d.div || d.plus >= d.div) return std::nullopt;
  d.base = std::string(rest);
  return d;
}

std::string derived_symbol_name(const DerivedSymbol& d) {
  std::string s = d.base;
  if (d.times != 1) s += fmt::format(".times{}", d.times);
  if (d.plus != 0) s += fmt::format(".plus{}", d.plus);
  return s + fmt::format(".div{}", d.div);
}

std::optional<int64_t> dim_floor_div(int64_t a, int64_t s) {
  if (s < 1) fail("dim_floor_div: divisor {} is not positive", s);
  if (s == 1) return a;
  if (!is_symbolic_dim(a)) return a / s;
  DimPoly p = dim_poly(a);
  const DimMonomial one;
  const int64_t c0 = p.count(one) ? p.at(one) : 0;
  p.erase(one);
  // Exact for every value: each symbolic coefficient is a multiple of s.
  bool exact = true;
  for (const auto& [m, c] : p) exact &= c % s == 0;
  if (exact) {
    DimPoly q;
    for (const auto& [m, c] : p) q[m] = c / s;
    if (int64_t k = floor_div(c0, s)) q[one] = k;
    return dim_of_poly(q);
  }
  // One term of one name: k * X + c0.
  if (p.size() != 1 || p.begin()->first.size() != 1) return std::nullopt;
  const std::string& x = p.begin()->first[0];
  const int64_t k = p.begin()->second;
  if (k < 1) return std::nullopt;
  if (auto d = parse_derived_symbol(x)) {
    // floor((floor((t*b + r) / q) + c0) / s) = floor((t*b + r + q*c0) / (q*s)) for k = 1.
    if (k != 1) return std::nullopt;
    int64_t plus = 0, div = 0;
    if (__builtin_mul_overflow(d->div, c0, &plus) || __builtin_add_overflow(plus, d->plus, &plus) ||
        __builtin_mul_overflow(d->div, s, &div))
      return std::nullopt;
    return floor_of(DerivedSymbol{d->base, d->times, plus, div});
  }
  return floor_of(DerivedSymbol{x, k, c0, s});
}

std::optional<int64_t> dim_ceil_div(int64_t a, int64_t s) {
  if (s < 1) fail("dim_ceil_div: divisor {} is not positive", s);
  DimPoly p = dim_poly(a);
  const DimMonomial one;
  p[one] += s - 1;
  if (p[one] == 0) p.erase(one);
  // dim_of_poly rejects a negative constant: a + s - 1 of a dim a is not.
  return dim_floor_div(dim_of_poly(p), s);
}

std::optional<int64_t> dim_floor_scale(int64_t a, double s) {
  if (!(s > 0) || !std::isfinite(s)) return std::nullopt;
  int64_t k = 0;
  double m = s;
  for (; m != std::floor(m); ++k) {
    if (k == 30) return std::nullopt;
    m *= 2;  // exact: a power of two
  }
  if (m > static_cast<double>(int64_t(1) << 31)) return std::nullopt;
  return dim_floor_div(dim_mul(a, static_cast<int64_t>(m)), int64_t(1) << k);
}

std::optional<int64_t> symbol_value(std::string_view name, const SymbolBindings& b) {
  if (auto it = b.find(name); it != b.end()) return it->second;
  auto d = parse_derived_symbol(name);
  if (!d) return std::nullopt;
  auto it = b.find(d->base);
  if (it == b.end()) return std::nullopt;
  int64_t v = 0;
  if (__builtin_mul_overflow(d->times, it->second, &v) || __builtin_add_overflow(v, d->plus, &v))
    fail("derived symbol {} overflows at {}={}", name, d->base, it->second);
  return floor_div(v, d->div);
}

std::string base_symbol(std::string_view name) {
  if (auto d = parse_derived_symbol(name)) return d->base;
  return std::string(name);
}

}  // namespace kiln
