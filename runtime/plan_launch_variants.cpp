#include "runtime/plan_launch_variants.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "ir/error.h"
#include "ir/specialize.h"
#include "runtime/plan_generic_launches.h"
#include "runtime/plan_sections.h"

namespace kiln::plan {

SymbolBindings opt_shape_symbols(const ShapeProfiles& s, size_t profile, const Graph& g) {
  KILN_CHECK(profile < s.profiles.size(), "profile {} of {}", profile, s.profiles.size());
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const Value* v : g.inputs()) {
    Shape at = v->shape();
    for (const InputProfile& ip : s.profiles[profile].inputs)
      if (ip.input == v->name()) at = ip.opt;
    shapes.emplace_back(v->name(), at);
  }
  return bind_symbols(g, shapes, fmt::format("the opt shape of profile {}", profile));
}

bool condition_holds(const ShapeCondition& c, const SymbolBindings& b) {
  const int64_t v = eval_poly(c.expr, b);
  return c.lo <= v && v <= c.hi;
}

std::string condition_text(const ShapeCondition& c) {
  const std::string e = dim_str(dim_of_poly(c.expr));
  if (c.lo == c.hi) return fmt::format("{}={}", e, c.lo);
  return fmt::format("{} <= {} <= {}", c.lo, e, c.hi);
}

std::string variant_text(const LaunchVariant& v) {
  std::vector<std::string> conds;
  for (const ShapeCondition& c : v.when) conds.push_back(condition_text(c));
  if (v.kind == VariantKind::OptShape)
    return fmt::format("the opt shape of profile {} ({})", v.profile, fmt::join(conds, ", "));
  return fmt::format("bucket {}", fmt::join(conds, ", "));
}

std::vector<ActiveStep> launches_at(const Plan& p, const SymbolBindings& b) {
  std::map<uint32_t, const GenericLaunch*> generic;
  for (const GenericLaunch& gl : p.generic_launches) generic.emplace(gl.step, &gl);
  std::multimap<uint32_t, size_t> variants;  // by first step, in the plan's order
  for (size_t v = 0; v < p.launch_variants.size(); ++v) variants.emplace(p.launch_variants[v].first, v);
  std::vector<ActiveStep> out;
  for (size_t i = 0; i < p.steps.size();) {
    const LaunchVariant* chosen = nullptr;
    int chosen_index = -1;
    auto [lo, hi] = variants.equal_range(static_cast<uint32_t>(i));
    for (auto it = lo; it != hi && !chosen; ++it) {
      const LaunchVariant& v = p.launch_variants[it->second];
      if (std::all_of(v.when.begin(), v.when.end(), [&](const ShapeCondition& c) { return condition_holds(c, b); })) {
        chosen = &v;
        chosen_index = static_cast<int>(it->second);
      }
    }
    if (!chosen) {
      auto g = generic.find(static_cast<uint32_t>(i));
      out.push_back({&p.steps[i], g == generic.end() ? nullptr : g->second, -1});
      ++i;
      continue;
    }
    std::map<uint32_t, const GenericLaunch*> own;
    for (const GenericLaunch& gl : chosen->generic) own.emplace(gl.step, &gl);
    for (size_t k = 0; k < chosen->steps.size(); ++k) {
      auto g = own.find(static_cast<uint32_t>(k));
      out.push_back({&chosen->steps[k], g == own.end() ? nullptr : g->second, chosen_index});
    }
    i += chosen->count;
  }
  return out;
}

namespace detail {

// u64 variant count; per variant u8 kind, u32 profile, u32 first step, u32
// step count, u64 condition count and per condition its polynomial (as in
// `profiles`), i64 lo, i64 hi; then its launch list (a blob in the `launches`
// encoding) and its generic launches (a blob in the `generic launches` one).
std::vector<uint8_t> write_launch_variants(const std::vector<LaunchVariant>& vs) {
  Writer w;
  w.put<uint64_t>(vs.size());
  for (const LaunchVariant& v : vs) {
    w.put<uint8_t>(static_cast<uint8_t>(v.kind));
    w.put<uint32_t>(v.profile);
    w.put<uint32_t>(v.first);
    w.put<uint32_t>(v.count);
    w.put<uint64_t>(v.when.size());
    for (const ShapeCondition& c : v.when) {
      put_poly(w, c.expr);
      w.put<int64_t>(c.lo);
      w.put<int64_t>(c.hi);
    }
    w.blob(write_steps(v.steps));
    w.blob(write_generic_launches(v.generic));
  }
  return w.bytes;
}

std::vector<LaunchVariant> read_launch_variants(Reader r) {
  std::vector<LaunchVariant> vs;
  const uint64_t n = r.count("launch variant count", 45);
  for (uint64_t i = 0; i < n; ++i) {
    LaunchVariant v;
    const uint8_t kind = r.get<uint8_t>("variant kind");
    if (kind > static_cast<uint8_t>(VariantKind::Bucket)) fail("{}: variant {} has unknown kind {}", r.what(), i, kind);
    v.kind = static_cast<VariantKind>(kind);
    v.profile = r.get<uint32_t>("variant profile");
    v.first = r.get<uint32_t>("variant first step");
    v.count = r.get<uint32_t>("variant step count");
    const uint64_t conds = r.count("variant condition count", 24);
    for (uint64_t c = 0; c < conds; ++c) {
      ShapeCondition sc;
      sc.expr = get_poly(r, fmt::format("variant {}'s condition", i));
      sc.lo = r.get<int64_t>("condition low");
      sc.hi = r.get<int64_t>("condition high");
      v.when.push_back(std::move(sc));
    }
    std::vector<uint8_t> steps = r.blob("variant steps");
    v.steps = read_steps(Reader(steps.data(), steps.size(), r.what() + fmt::format(" (variant {} steps)", i)));
    std::vector<uint8_t> generic = r.blob("variant generic launches");
    v.generic =
        read_generic_launches(Reader(generic.data(), generic.size(), r.what() + fmt::format(" (variant {})", i)));
    vs.push_back(std::move(v));
  }
  r.expect_end();
  return vs;
}

void check_launch_variants(const Plan& p, const std::vector<std::string>& declared, std::string_view what) {
  std::map<uint32_t, uint32_t> ranges;  // first step -> count
  for (size_t i = 0; i < p.launch_variants.size(); ++i) {
    const LaunchVariant& v = p.launch_variants[i];
    const std::string of = fmt::format(" of launch variant {}", i);
    if (v.count == 0 || v.first >= p.steps.size() || v.count > p.steps.size() - v.first)
      fail("{}: launch variant {} replaces steps [{}, {}), the launch list has {}", what, i, v.first,
           uint64_t(v.first) + v.count, p.steps.size());
    for (uint32_t s = v.first; s < v.first + v.count; ++s)
      if (p.steps[s].kind == StepKind::Control || p.steps[s].node != p.steps[v.first].node)
        fail("{}: launch variant {} replaces steps [{}, {}), which are not the launches of one node", what, i, v.first,
             v.first + v.count);
    auto [at, fresh] = ranges.emplace(v.first, v.count);
    if (!fresh && at->second != v.count)
      fail("{}: launch variants replace steps from {} by {} and by {} steps", what, v.first, at->second, v.count);
    if (v.kind == VariantKind::OptShape && v.profile >= p.shapes.profiles.size())
      fail("{}: launch variant {} is for profile {}, the plan has {}", what, i, v.profile, p.shapes.profiles.size());
    if (v.when.empty()) fail("{}: launch variant {} has no condition", what, i);
    for (const ShapeCondition& c : v.when) {
      if (c.lo > c.hi) fail("{}: launch variant {}'s condition has range [{}, {}]", what, i, c.lo, c.hi);
      for (const auto& [mono, coeff] : c.expr)
        for (const std::string& s : mono)
          if (std::find(declared.begin(), declared.end(), s) == declared.end())
            fail("{}: launch variant {}'s condition uses the undeclared symbol {}", what, i, s);
    }
    for (size_t k = 0; k < v.steps.size(); ++k) {
      const Step& s = v.steps[k];
      if (s.kind == StepKind::Control)
        fail("{}: launch variant {} step {} is a control-flow step (variants hold launches and copies)", what, i, k);
      if (s.kind == StepKind::Kernel && s.kernel >= p.kernels.size())
        fail("{}: launch variant {} step {} names kernel {}, the plan has {}", what, i, k, s.kernel, p.kernels.size());
      for (const BufferRef& b : s.args) check_binding(p, b, what, fmt::format("launch variant {} step {}", i, k));
    }
    check_generic_list(v.generic, v.steps, declared, what, of);
  }
  // A variant's range is one node's launches, so ranges cannot overlap
  // unless they are the same.
  uint64_t end = 0;
  for (const auto& [first, count] : ranges) {
    if (first < end) fail("{}: launch variants replace overlapping step ranges (one starts at {})", what, first);
    end = uint64_t(first) + count;
  }
}

}  // namespace detail

}  // namespace kiln::plan
