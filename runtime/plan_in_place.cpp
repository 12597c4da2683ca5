#include "runtime/plan_in_place.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/symbolic_dim.h"
#include "runtime/plan_sections.h"

namespace kiln::plan {

namespace {

// Whether `user` reads its operand `operand` only as an attention's keys
// (operand 1) or values (operand 2) through `capacity_symbol` (any capacity
// when empty): the bare attention op, or a fused attention (its epilogue
// after it, docs/dynamic_shapes.md) whose body does so with that input.
bool reads_through_capacity(const Node& user, int operand, const std::string& capacity_symbol) {
  auto strided = [&](const Node& n, int i) {
    const char* attr = i == 1 ? "k_capacity" : i == 2 ? "v_capacity" : nullptr;
    const std::string stride = attr ? n.attrs().get_string(attr, "") : "";
    return n.op() == "attention" && !stride.empty() && (capacity_symbol.empty() || stride == capacity_symbol);
  };
  if (!user.body()) return strided(user, operand);
  if (user.op() != "fused" || operand < 0 || operand >= static_cast<int>(user.body()->inputs().size())) return false;
  const Value* in = user.body()->inputs()[operand];
  if (in->uses().empty()) return false;
  for (const Use& u : in->uses())
    if (!strided(*u.user, u.operand)) return false;
  return true;
}

}  // namespace

std::string why_not_in_place_on_gpu(const Node& concat, const std::string& capacity_symbol) {
  const Value* past = concat.input(0);
  for (const Use& u : past->uses())
    if (u.user != &concat || u.operand != 0)
      return fmt::format("node {} reads the past \"{}\" too (only the appending concat may)", u.user->describe(),
                         past->name());
  const Value* present = concat.output(0);
  for (const Use& u : present->uses()) {
    if (reads_through_capacity(*u.user, u.operand, capacity_symbol)) continue;
    return fmt::format(
        "node {} reads the present \"{}\" as a dense tensor (only an attention's keys or values are read through "
        "the buffer's capacity)",
        u.user->describe(), present->name());
  }
  return "";
}

}  // namespace kiln::plan

namespace kiln::plan::detail {

std::vector<uint8_t> write_in_place_appends(const std::vector<InPlaceAppend>& as) {
  Writer w;
  w.put<uint64_t>(as.size());
  for (const InPlaceAppend& a : as) {
    w.put<uint32_t>(a.input);
    w.put<uint32_t>(a.output);
    w.put<uint32_t>(a.axis);
    w.str(a.capacity_symbol);
    w.put<uint32_t>(a.concat_step);
    w.blob(write_steps({a.append}));
    w.blob(write_generic_launches({a.launch}));
  }
  return w.bytes;
}

std::vector<InPlaceAppend> read_in_place_appends(Reader r) {
  std::vector<InPlaceAppend> as;
  const uint64_t n = r.count("in-place append count", 36);
  for (uint64_t i = 0; i < n; ++i) {
    InPlaceAppend a;
    a.input = r.get<uint32_t>("in-place input");
    a.output = r.get<uint32_t>("in-place output");
    a.axis = r.get<uint32_t>("in-place axis");
    a.capacity_symbol = r.str("capacity symbol");
    a.concat_step = r.get<uint32_t>("in-place concat step");
    const std::vector<uint8_t> step = r.blob("in-place append step");
    std::vector<Step> steps = read_steps(Reader(step.data(), step.size(), r.what()));
    const std::vector<uint8_t> launch = r.blob("in-place append launch");
    std::vector<GenericLaunch> launches = read_generic_launches(Reader(launch.data(), launch.size(), r.what()));
    if (steps.size() != 1 || launches.size() != 1)
      fail("{}: in-place append {} has {} steps and {} launches (1 each)", r.what(), i, steps.size(), launches.size());
    a.append = std::move(steps[0]);
    a.launch = std::move(launches[0]);
    as.push_back(std::move(a));
  }
  r.expect_end();
  return as;
}

void check_in_place_appends(const Plan& p, const std::vector<std::string>& declared, size_t inputs, size_t outputs,
                            std::string_view what) {
  for (size_t i = 0; i < p.in_place_appends.size(); ++i) {
    const InPlaceAppend& a = p.in_place_appends[i];
    if (a.input >= inputs || a.output >= outputs)
      fail("{}: in-place append {} pairs input {} with output {} (the graph has {} and {})", what, i, a.input, a.output,
           inputs, outputs);
    if (a.concat_step >= p.steps.size() || p.steps[a.concat_step].kind != StepKind::Kernel)
      fail("{}: in-place append {} names step {}, which is not a kernel launch of the list ({} steps)", what, i,
           a.concat_step, p.steps.size());
    if (a.launch.step != a.concat_step)
      fail("{}: in-place append {}'s launch names step {}, not its concat's {}", what, i, a.launch.step, a.concat_step);
    if (!is_symbol_name(a.capacity_symbol) ||
        std::find(declared.begin(), declared.end(), a.capacity_symbol) != declared.end())
      fail("{}: in-place append {}'s capacity symbol \"{}\" is not a fresh symbol name", what, i, a.capacity_symbol);
    const Step& s = a.append;
    if (s.kind != StepKind::Kernel || s.param_table || s.kernel >= p.kernels.size() || s.args.size() != 2)
      fail("{}: in-place append {} is not a launch of one of the plan's {} kernels with 2 buffers", what, i,
           p.kernels.size());
    if (s.args[0].kind != BufferKind::Output || s.args[0].index != a.output || s.args[0].offset != 0)
      fail("{}: in-place append {} does not write output {} (its present)", what, i, a.output);
    for (const BufferRef& b : s.args) check_binding(p, b, what, fmt::format("in-place append {}", i));
    for (const std::string& sym : a.launch.symbols)
      if (sym != a.capacity_symbol && std::find(declared.begin(), declared.end(), sym) == declared.end())
        fail("{}: in-place append {} reads symbol {}, which the graph does not declare", what, i, sym);
    for (const GenericGridAxis& ax : a.launch.grid)
      for (const auto& [mono, coeff] : ax.items)
        for (const std::string& sym : mono)
          if (std::find(declared.begin(), declared.end(), sym) == declared.end())
            fail("{}: in-place append {}'s grid uses the undeclared symbol {}", what, i, sym);
  }
}

}  // namespace kiln::plan::detail
