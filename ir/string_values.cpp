#include "ir/string_values.h"

#include "ir/error.h"
#include "ir/short_name.h"

namespace kiln {

namespace {

bool is_string_value(const Value* v) { return v && v->dtype() == DType::String; }

std::optional<std::string> first_in_nodes(const Graph& g) {
  for (const auto& n : g.nodes()) {
    for (const Value* v : n->inputs())
      if (is_string_value(v)) return n->describe();
    for (const Value* v : n->outputs())
      if (is_string_value(v)) return n->describe();
    for (const auto& r : n->regions())
      if (std::optional<std::string> s = first_in_nodes(*r)) return s;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> first_string_value(const Graph& g) {
  if (std::optional<std::string> s = first_in_nodes(g)) return s;
  for (const Value* v : g.inputs())
    if (is_string_value(v)) return fmt::format("input \"{}\" ({})", short_name(v->name()), v->type().str());
  for (const Value* v : g.outputs())
    if (is_string_value(v)) return fmt::format("output \"{}\" ({})", short_name(v->name()), v->type().str());
  return std::nullopt;
}

void refuse_string_tensors(const Graph& g, std::string_view context, std::string_view where) {
  if (std::optional<std::string> s = first_string_value(g))
    throw Unsupported(
        fmt::format("{}{}{} holds {}, not {}", context, context.empty() ? "" : ": ", *s, kStringsCpuOnly, where));
}

}  // namespace kiln
