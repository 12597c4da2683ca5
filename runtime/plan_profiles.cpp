#include "runtime/plan_profiles.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "ir/error.h"
#include "ir/floor_div_dims.h"
#include "runtime/plan_format.h"
#include "runtime/plan_in_place.h"
#include "runtime/plan_sections.h"

namespace kiln::plan {

namespace detail {

namespace {
void put_dims(Writer& w, const Shape& s) {
  for (int64_t d : s) w.put<int64_t>(d);
}

Shape get_dims(Reader& r, uint64_t rank, std::string_view field) {
  Shape s;
  for (uint64_t i = 0; i < rank; ++i) {
    int64_t d = r.get<int64_t>(field);
    if (d < 0) fail("{}: {} has the negative dim {}", r.what(), field, d);
    s.push_back(d);
  }
  return s;
}
}  // namespace

// u64 profile count; per profile u64 input count, per input its name, u64
// rank and rank i64 each of min, opt, max. Then u64 size count, per size u64
// term count, per term i64 coefficient, u64 symbol count and the symbol names
// (a polynomial written out, never a process-local handle).
std::vector<uint8_t> write_profiles(const ShapeProfiles& s) {
  Writer w;
  w.put<uint64_t>(s.profiles.size());
  for (const Profile& p : s.profiles) {
    w.put<uint64_t>(p.inputs.size());
    for (const InputProfile& ip : p.inputs) {
      w.str(ip.input);
      w.put<uint64_t>(ip.min.size());
      put_dims(w, ip.min);
      put_dims(w, ip.opt);
      put_dims(w, ip.max);
    }
  }
  w.put<uint64_t>(s.value_bytes.size());
  for (const DimPoly& poly : s.value_bytes) {
    w.put<uint64_t>(poly.size());
    for (const auto& [mono, coeff] : poly) {
      w.put<int64_t>(coeff);
      w.put<uint64_t>(mono.size());
      for (const std::string& sym : mono) w.str(sym);
    }
  }
  return w.bytes;
}

ShapeProfiles read_profiles(Reader r) {
  ShapeProfiles s;
  uint64_t n = r.count("profile count", 8);
  if (n == 0) fail("{}: no profiles (a static plan has no 'profiles' section)", r.what());
  for (uint64_t i = 0; i < n; ++i) {
    Profile p;
    uint64_t inputs = r.count("profile input count", 16);
    for (uint64_t k = 0; k < inputs; ++k) {
      InputProfile ip;
      ip.input = r.str("profile input name");
      uint64_t rank = r.count("profile input rank", 24);
      ip.min = get_dims(r, rank, "min dim");
      ip.opt = get_dims(r, rank, "opt dim");
      ip.max = get_dims(r, rank, "max dim");
      p.inputs.push_back(std::move(ip));
    }
    s.profiles.push_back(std::move(p));
  }
  uint64_t sizes = r.count("result size count", 8);
  for (uint64_t i = 0; i < sizes; ++i) {
    DimPoly poly;
    uint64_t terms = r.count("size term count", 16);
    for (uint64_t t = 0; t < terms; ++t) {
      int64_t coeff = r.get<int64_t>("size coefficient");
      uint64_t syms = r.count("size term symbols", 8);
      DimMonomial mono;
      for (uint64_t k = 0; k < syms; ++k) mono.push_back(r.str("size term symbol"));
      if (coeff == 0 || !std::is_sorted(mono.begin(), mono.end()) || !poly.emplace(mono, coeff).second)
        fail("{}: result size {} is not a canonical polynomial (term {})", r.what(), i, t);
    }
    s.value_bytes.push_back(std::move(poly));
  }
  r.expect_end();
  return s;
}

}  // namespace detail

std::string range_str(const InputProfile& ip) {
  auto x = [](const Shape& s) { return s.empty() ? std::string("scalar") : fmt::format("{}", fmt::join(s, "x")); };
  return fmt::format("min {}, opt {}, max {}", x(ip.min), x(ip.opt), x(ip.max));
}

void check_profiles(const Plan& p, const Graph& g, std::string_view what) {
  const ShapeProfiles& s = p.shapes;
  if (g.symbols().empty()) {
    if (!s.empty()) fail("{}: the plan has shape profiles but its graph has no symbolic dims", what);
    if (!p.generic_launches.empty()) fail("{}: the plan has generic launches but its graph has no symbolic dims", what);
    return;
  }
  if (s.empty())
    fail("{}: the graph has symbolic dims but the plan records no shape profiles (section 'profiles')", what);
  std::map<std::string, SymbolDecl> declared;
  for (const SymbolDecl& d : g.symbols()) declared.emplace(d.name, d);
  std::vector<const Value*> dynamic;
  for (const Value* v : g.inputs())
    if (has_symbolic_dims(v->shape())) dynamic.push_back(v);
  for (size_t pi = 0; pi < s.profiles.size(); ++pi) {
    const Profile& prof = s.profiles[pi];
    if (prof.inputs.size() != dynamic.size())
      fail("{}: profile {} has {} inputs, the graph has {} with symbolic dims", what, pi, prof.inputs.size(),
           dynamic.size());
    for (size_t k = 0; k < dynamic.size(); ++k) {
      const Value* v = dynamic[k];
      const InputProfile& ip = prof.inputs[k];
      if (ip.input != v->name())
        fail("{}: profile {} input {} is \"{}\", the graph's is \"{}\"", what, pi, k, ip.input, v->name());
      const Shape& decl = v->shape();
      if (ip.min.size() != decl.size())
        fail("{}: profile {} input \"{}\" has rank {}, the graph's is [{}]", what, pi, ip.input, ip.min.size(),
             dims_str(decl));
      for (size_t d = 0; d < decl.size(); ++d) {
        if (ip.min[d] > ip.opt[d] || ip.opt[d] > ip.max[d])
          fail("{}: profile {} input \"{}\" dim {}: min {}, opt {}, max {} are out of order", what, pi, ip.input, d,
               ip.min[d], ip.opt[d], ip.max[d]);
        if (!is_symbolic_dim(decl[d])) {
          if (ip.min[d] != decl[d] || ip.max[d] != decl[d])
            fail("{}: profile {} input \"{}\" dim {} is fixed at {} in the graph, the profile gives [{}, {}]", what, pi,
                 ip.input, d, decl[d], ip.min[d], ip.max[d]);
          continue;
        }
        for (const std::string& sym : dim_symbols(decl[d])) {
          auto it = declared.find(sym);
          if (it == declared.end()) fail("{}: input \"{}\" uses the undeclared symbol {}", what, ip.input, sym);
        }
        // A dim that is one symbol alone gives that symbol's range directly.
        DimPoly poly = dim_poly(decl[d]);
        if (poly.size() == 1 && poly.begin()->first.size() == 1 && poly.begin()->second == 1) {
          const SymbolDecl& sd = declared.at(poly.begin()->first[0]);
          if (ip.min[d] < sd.min || ip.max[d] > sd.max)
            fail("{}: profile {} input \"{}\" dim {} ({}) has range [{}, {}], outside the symbol's [{}, {}]", what, pi,
                 ip.input, d, sd.name, ip.min[d], ip.max[d], sd.min, sd.max);
        }
      }
    }
  }
  for (size_t i = 0; i < s.value_bytes.size(); ++i)
    for (const auto& [mono, coeff] : s.value_bytes[i])
      for (const std::string& sym : mono)
        if (!declared.count(base_symbol(sym)))  // a derived symbol's base (ir/floor_div_dims.h)
          fail("{}: section 'profiles': result size {} uses the undeclared symbol {}", what, i, sym);
  std::vector<std::string> names;
  for (const SymbolDecl& d : g.symbols()) names.push_back(d.name);
  detail::check_in_place_appends(p, names, g.inputs().size(), g.outputs().size(), what);
  // A launch reading a KV cache's present may take its capacity symbol.
  for (const InPlaceAppend& a : p.in_place_appends) names.push_back(a.capacity_symbol);
  detail::check_generic_launches(p, names, what);
  detail::check_launch_variants(p, names, what);
}

int matching_profile(const ShapeProfiles& s, const std::vector<std::pair<std::string, Shape>>& shapes,
                     std::string* why) {
  std::vector<std::string> reasons;
  for (size_t pi = 0; pi < s.profiles.size(); ++pi) {
    std::string reason;
    for (const auto& [name, shape] : shapes) {
      for (const InputProfile& ip : s.profiles[pi].inputs) {
        if (ip.input != name) continue;
        if (shape.size() != ip.min.size()) {
          reason =
              fmt::format("input \"{}\" has rank {}, profile {} has rank {}", name, shape.size(), pi, ip.min.size());
          break;
        }
        for (size_t d = 0; d < shape.size() && reason.empty(); ++d)
          if (shape[d] < ip.min[d] || shape[d] > ip.max[d])
            reason = ip.min[d] == ip.max[d]
                         ? fmt::format("input \"{}\": dim {} is {}, fixed at {} in profile {}", name, d, shape[d],
                                       ip.min[d], pi)
                         : fmt::format("input \"{}\": dim {} is {}, outside profile {}'s range [{}, {}]", name, d,
                                       shape[d], pi, ip.min[d], ip.max[d]);
      }
      if (!reason.empty()) break;
    }
    if (reason.empty()) return static_cast<int>(pi);
    reasons.push_back(reason);
  }
  if (why) *why = fmt::format("{}", fmt::join(reasons, "; "));
  return -1;
}

}  // namespace kiln::plan
