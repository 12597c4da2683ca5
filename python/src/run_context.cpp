// RunContext's DLPack bindings, enqueue and run reports (run_context.h).
#include "python/src/run_context.h"

#include <pybind11/stl.h>

#include "python/src/dlpack_bind.h"

namespace kiln_py {

void RunContext::bind(const std::string& name, bool output, const py::object& tensor, const py::object& stream) {
  const std::vector<kiln::TensorInfo>& infos = output ? outputs_ : inputs_;
  const std::string kind = output ? "output" : "input";
  const kiln::TensorInfo* t = nullptr;
  for (const auto& i : infos)
    if (i.name == name) t = &i;
  if (!t) raise("unknown " + kind + " \"" + name + "\"; the model's " + kind + "s are " + names_of(infos));
  if (!py::hasattr(tensor, "__dlpack__") || !py::hasattr(tensor, "__dlpack_device__"))
    raise(kind + " \"" + name + "\": bind_" + kind +
          " takes an object implementing DLPack (__dlpack__ and __dlpack_device__: a numpy array, a torch or CuPy "
          "tensor), not " +
          std::string(py::str(py::type::of(tensor).attr("__name__"))));
  std::shared_ptr<void> owner = bind_dlpack(ctx_, device_, *t, output, tensor, stream);
  // Binding one of an in-place pair on its own ends the pairing (the runtime's rule).
  for (auto it = pairs_.begin(); it != pairs_.end();)
    it = (output ? it->second.first == name : it->first == name) ? pairs_.erase(it) : std::next(it);
  (output ? bound_outputs_ : bound_inputs_)[name] = std::move(owner);
}

void RunContext::enqueue(const py::object& stream) {
  // A run's feed and its fresh output arrays live for that run only: the
  // context's bindings of them point at freed memory afterwards.
  std::set<std::string> in_place;
  for (const auto& [in, pair] : pairs_) {
    in_place.insert(in);
    in_place.insert(pair.first);
  }
  std::vector<std::string> unbound;
  for (const auto& t : inputs_)
    if (!bound_inputs_.count(t.name) && !in_place.count(t.name)) unbound.push_back("input \"" + t.name + "\"");
  for (const auto& t : outputs_)
    if (!bound_outputs_.count(t.name) && !in_place.count(t.name)) unbound.push_back("output \"" + t.name + "\"");
  if (!unbound.empty())
    raise("enqueue: bind every input and output first (bind_input/bind_output, bind_in_place); not bound: " +
          py::str(", ").attr("join")(unbound).cast<std::string>());
  void* s = reinterpret_cast<void*>(stream_handle(stream, "enqueue"));
  py::gil_scoped_release unlocked;
  ctx_.enqueue(s);
}

py::list RunContext::data_dependent_sizes() const {
  py::list r;
  for (const kiln::DataDependentSize& d : ctx_.data_dependent_sizes())
    r.append(py::make_tuple(d.symbol, d.node, d.bound, d.value));
  return r;
}

}  // namespace kiln_py
