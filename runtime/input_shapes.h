// A context's input shapes for a plan with shape profiles
// (runtime/plan_profiles.h, docs/dynamic_shapes.md): the shapes the caller
// set, checked against the plan's fixed dims and its profiles; the symbol
// values they give; the output shapes; and the plan's graph specialised to
// those values for the CPU path, cached per distinct shape.
#pragma once
#include <cstddef>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/symbolic_dim.h"

namespace kiln::rt {

class Engine;

class InputShapes {
 public:
  // At most this many specialised graphs are kept per context; the least
  // recently used goes first.
  static constexpr size_t kMaxCachedShapes = 8;

  explicit InputShapes(const Engine& e);

  // Checks `shape` for input `i` (rank, fixed dims, inside some profile) and
  // keeps it. Throws kiln::Error naming the input, the dim and the range.
  void set(size_t i, const Shape& shape);
  // The shape set for input `i` (a static input: its own); kiln::Error when
  // a dynamic input's shape is not set.
  Shape input(size_t i) const;
  // The symbol values all inputs' shapes give, checked together (one symbol,
  // one value; all inputs inside one profile).
  const SymbolBindings& bindings() const;
  Shape output(size_t i) const;
  // The plan's graph specialised to bindings() (cached).
  const Graph& specialised();

 private:
  const Engine& engine_;
  std::vector<std::optional<Shape>> shapes_;
  mutable std::optional<SymbolBindings> bindings_;                      // of the shapes set; reset by set()
  std::list<std::pair<SymbolBindings, std::unique_ptr<Graph>>> cache_;  // most recent first
};

}  // namespace kiln::rt
