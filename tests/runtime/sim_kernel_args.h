// What the simulator binds for each kernel a plan launches, shared by the
// fake-GPU tests (fake_gpu_util.h) and kiln_fake_gpu_plan_check: the element
// count of each parameter, in the kernel's parameter order. The strict fake
// driver takes the parameter layout from the kernel's image (a shape-generic
// kernel's by-value kiln_syms is in it, 64 bytes); the launch callback hands
// the simulator as many parameters as these counts list, so a slot left out
// here is a parameter the simulator never sees.
#pragma once
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "runtime/plan_format.h"

namespace kiln::fakegpu {

// Kernel name -> the element count of each parameter: each buffer's
// elements; after them, for a shape-generic launch (the plan's generic
// launches, a launch variant's, a KV cache's in-place append), the by-value
// kiln_syms as one slot of count 1 (the simulator reads the symbols' values
// from it); for a kernel taking a pointer table (codegen/param_table.h), its
// one parameter: 2 x buffers entries (addresses, then counts). Every step of
// the plan: the launch list, control-flow regions, in-place appends and
// launch variants. A kernel launched by several steps gets each slot's
// largest count (its text, so its parameters, is the same for each).
inline std::map<std::string, std::vector<long long>> sim_kernel_counts(const plan::Plan& p) {
  auto generic_in = [](const std::vector<plan::GenericLaunch>& gls, const std::vector<plan::Step>& steps,
                       const plan::Step* s) {
    for (const plan::GenericLaunch& gl : gls)
      if (&steps.at(gl.step) == s) return true;
    return false;
  };
  std::vector<std::pair<const plan::Step*, bool>> every;  // step, shape-generic
  for (const plan::StepAt& at : plan::all_steps(p)) {
    bool generic = generic_in(p.generic_launches, p.steps, at.step);
    for (const plan::InPlaceAppend& a : p.in_place_appends) generic = generic || &a.append == at.step;
    every.emplace_back(at.step, generic);
  }
  for (const plan::LaunchVariant& v : p.launch_variants)
    for (const plan::Step& s : v.steps) every.emplace_back(&s, generic_in(v.generic, v.steps, &s));
  std::map<std::string, std::vector<long long>> counts;
  for (const auto& [step, generic] : every) {
    const plan::Step& s = *step;
    if (s.kind != plan::StepKind::Kernel) continue;
    std::vector<long long> c;
    if (s.param_table) {
      c = {static_cast<long long>(2 * s.args.size())};
    } else {
      for (const plan::BufferRef& b : s.args) c.push_back(static_cast<long long>(b.elements));
      if (generic) c.push_back(1);
    }
    std::vector<long long>& k = counts[p.kernels.at(s.kernel).name];
    if (k.size() < c.size()) k.resize(c.size(), 0);
    for (size_t i = 0; i < c.size(); ++i) k[i] = std::max(k[i], c[i]);
  }
  return counts;
}

}  // namespace kiln::fakegpu
