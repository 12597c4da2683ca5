#include "runtime/input_shapes.h"

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/specialize.h"
#include "ops/registry.h"
#include "runtime/engine.h"

namespace kiln::rt {

InputShapes::InputShapes(const Engine& e) : engine_(e), shapes_(e.inputs().size()) {
  for (size_t i = 0; i < shapes_.size(); ++i)
    if (!e.inputs()[i].dynamic()) shapes_[i] = e.inputs()[i].type.shape;
}

void InputShapes::set(size_t i, const Shape& shape) {
  const TensorDesc& d = engine_.inputs()[i];
  const Shape& decl = d.type.shape;
  if (shape.size() != decl.size())
    fail("input \"{}\" has rank {}, the plan's is {} ([{}])", d.name, shape.size(), decl.size(), dims_str(decl));
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] < 0) fail("input \"{}\": dim {} is {} (negative)", d.name, k, shape[k]);
    if (!is_symbolic_dim(decl[k]) && shape[k] != decl[k])
      fail("input \"{}\": dim {} is {}, the plan fixes it at {} ([{}])", d.name, k, shape[k], decl[k], dims_str(decl));
  }
  if (d.dynamic()) {
    std::string why;
    if (plan::matching_profile(engine_.plan().shapes, {{d.name, shape}}, &why) < 0)
      fail("input \"{}\" has shape [{}], outside every shape profile of the plan: {}", d.name, fmt::join(shape, ","),
           why);
  }
  shapes_[i] = shape;
  bindings_.reset();
}

Shape InputShapes::input(size_t i) const {
  if (!shapes_[i])
    fail("input \"{}\" is [{}]: set its shape first (kiln_context_set_input_shape, or bind it with its shape)",
         engine_.inputs()[i].name, dims_str(engine_.inputs()[i].type.shape));
  return *shapes_[i];
}

const SymbolBindings& InputShapes::bindings() const {
  if (bindings_) return *bindings_;
  std::vector<std::pair<std::string, Shape>> given;
  for (size_t i = 0; i < shapes_.size(); ++i) given.emplace_back(engine_.inputs()[i].name, input(i));
  // Each input lies in some profile (set() checked); together they must lie
  // in one, as TensorRT's optimization profiles are chosen per run.
  std::string why;
  if (plan::matching_profile(engine_.plan().shapes, given, &why) < 0)
    fail("the input shapes lie in no single shape profile of the plan: {}", why);
  bindings_ = bind_symbols(engine_.graph(), given, "input shapes");
  return *bindings_;
}

Shape InputShapes::output(size_t i) const {
  // A size the data decides (a CPU plan with data-dependent sizes) at its
  // upper bound: the buffer to bind before the run.
  SymbolBindings b = bindings();
  for (const SymbolDecl& d : engine_.graph().symbols())
    if (!b.count(d.name)) b[d.name] = d.max;
  return eval_shape(engine_.outputs()[i].type.shape, b);
}

const Graph& InputShapes::specialised() {
  const SymbolBindings& b = bindings();
  for (auto it = cache_.begin(); it != cache_.end(); ++it)
    if (it->first == b) {
      cache_.splice(cache_.begin(), cache_, it);
      return *cache_.front().second;
    }
  if (cache_.size() >= kMaxCachedShapes) cache_.pop_back();
  cache_.emplace_front(b, specialize_graph(engine_.graph(), b, op_registry()));
  return *cache_.front().second;
}

}  // namespace kiln::rt
