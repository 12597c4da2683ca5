#include "runtime/plan_generic_launches.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "ir/error.h"
#include "ir/floor_div_dims.h"
#include "runtime/plan_format.h"
#include "runtime/plan_sections.h"

namespace kiln::plan {

int64_t eval_poly(const DimPoly& p, const SymbolBindings& b) {
  int64_t sum = 0;
  for (const auto& [mono, coeff] : p) {
    int64_t term = coeff;
    for (const std::string& name : mono) {
      auto value = symbol_value(name, b);  // a derived symbol's from its base (ir/floor_div_dims.h)
      if (!value) fail("symbol {} has no value", name);
      if (__builtin_mul_overflow(term, *value, &term)) fail("a size overflows at {}={}", name, *value);
    }
    if (__builtin_add_overflow(sum, term, &sum)) fail("a size overflows");
  }
  if (sum < 0) fail("a size is negative ({})", sum);
  return sum;
}

uint32_t eval_grid_axis(const GenericGridAxis& a, const SymbolBindings& b) {
  const uint64_t items = static_cast<uint64_t>(eval_poly(a.items, b));
  uint64_t blocks = (items + a.per_block - 1) / a.per_block;
  if (blocks && a.multiplier > std::numeric_limits<uint64_t>::max() / blocks)
    fail("a grid axis of {} x {} blocks does not fit", blocks, a.multiplier);
  blocks *= a.multiplier;
  if (a.cap) blocks = std::min<uint64_t>(blocks, a.cap);
  if (blocks > std::numeric_limits<uint32_t>::max()) fail("a grid axis of {} blocks does not fit", blocks);
  return static_cast<uint32_t>(blocks);
}

LaunchSymbols launch_symbols(const GenericLaunch& l, const SymbolBindings& b) {
  LaunchSymbols s;
  for (size_t i = 0; i < l.symbols.size() && i < static_cast<size_t>(kMaxLaunchSymbols); ++i) {
    auto at = b.find(l.symbols[i]);
    if (at == b.end()) fail("symbol {} has no value", l.symbols[i]);
    s.v[i] = at->second;
  }
  return s;
}

namespace detail {

void put_poly(Writer& w, const DimPoly& poly) {
  w.put<uint64_t>(poly.size());
  for (const auto& [mono, coeff] : poly) {
    w.put<int64_t>(coeff);
    w.put<uint64_t>(mono.size());
    for (const std::string& sym : mono) w.str(sym);
  }
}

DimPoly get_poly(Reader& r, std::string_view what) {
  DimPoly poly;
  uint64_t terms = r.count("grid term count", 16);
  for (uint64_t t = 0; t < terms; ++t) {
    int64_t coeff = r.get<int64_t>("grid coefficient");
    uint64_t syms = r.count("grid term symbols", 8);
    DimMonomial mono;
    for (uint64_t k = 0; k < syms; ++k) mono.push_back(r.str("grid term symbol"));
    if (coeff == 0 || !std::is_sorted(mono.begin(), mono.end()) || !poly.emplace(mono, coeff).second)
      fail("{}: {} is not a canonical polynomial (term {})", r.what(), what, t);
  }
  return poly;
}

// u64 launch count; per launch u32 step, u64 symbol count and the names, then
// per grid axis (x, y, z) its item count (a polynomial as in `profiles`),
// u64 items per block, u32 cap and u64 multiplier.
std::vector<uint8_t> write_generic_launches(const std::vector<GenericLaunch>& ls) {
  Writer w;
  w.put<uint64_t>(ls.size());
  for (const GenericLaunch& l : ls) {
    w.put<uint32_t>(l.step);
    w.put<uint64_t>(l.symbols.size());
    for (const std::string& s : l.symbols) w.str(s);
    for (const GenericGridAxis& a : l.grid) {
      put_poly(w, a.items);
      w.put<uint64_t>(a.per_block);
      w.put<uint32_t>(a.cap);
      w.put<uint64_t>(a.multiplier);
    }
  }
  return w.bytes;
}

std::vector<GenericLaunch> read_generic_launches(Reader r) {
  std::vector<GenericLaunch> ls;
  uint64_t n = r.count("generic launch count", 12);
  for (uint64_t i = 0; i < n; ++i) {
    GenericLaunch l;
    l.step = r.get<uint32_t>("generic launch step");
    uint64_t syms = r.count("generic launch symbol count", 8);
    for (uint64_t k = 0; k < syms; ++k) l.symbols.push_back(r.str("generic launch symbol"));
    for (GenericGridAxis& a : l.grid) {
      a.items = get_poly(r, fmt::format("generic launch {}'s grid", i));
      a.per_block = r.get<uint64_t>("grid items per block");
      a.cap = r.get<uint32_t>("grid cap");
      a.multiplier = r.get<uint64_t>("grid multiplier");
      if (a.per_block == 0) fail("{}: generic launch {} has 0 items per block", r.what(), i);
    }
    ls.push_back(std::move(l));
  }
  r.expect_end();
  return ls;
}

void check_generic_list(const std::vector<GenericLaunch>& ls, const std::vector<Step>& steps,
                        const std::vector<std::string>& declared, std::string_view what, std::string_view of) {
  int64_t last = -1;
  for (size_t i = 0; i < ls.size(); ++i) {
    const GenericLaunch& l = ls[i];
    if (static_cast<int64_t>(l.step) <= last || l.step >= steps.size())
      fail("{}: generic launch {}{} names step {} (the launch list has {}, in increasing order)", what, i, of, l.step,
           steps.size());
    last = l.step;
    if (steps[l.step].kind != StepKind::Kernel || steps[l.step].param_table)
      fail("{}: generic launch {}{} names step {}, which is not a kernel launch with parameters", what, i, of, l.step);
    if (l.symbols.empty() || l.symbols.size() > static_cast<size_t>(kMaxLaunchSymbols))
      fail("{}: generic launch {}{} has {} symbols (1 to {})", what, i, of, l.symbols.size(), kMaxLaunchSymbols);
    auto undeclared = [&](const std::string& s) {
      return std::find(declared.begin(), declared.end(), s) == declared.end();
    };
    for (const std::string& s : l.symbols)
      if (undeclared(s))
        fail("{}: generic launch {}{} reads symbol {}, which the graph does not declare", what, i, of, s);
    for (const GenericGridAxis& a : l.grid)
      for (const auto& [mono, coeff] : a.items)
        for (const std::string& s : mono)
          if (undeclared(base_symbol(s)))  // a derived symbol's base (ir/floor_div_dims.h)
            fail("{}: generic launch {}{}'s grid uses the undeclared symbol {}", what, i, of, s);
  }
}

void check_generic_launches(const Plan& p, const std::vector<std::string>& declared, std::string_view what) {
  check_generic_list(p.generic_launches, p.steps, declared, what, "");
}

}  // namespace detail

}  // namespace kiln::plan
