// kiln.Context's extension class: one runtime context kept across runs.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"
#include "python/src/py_common.h"

namespace kiln_py {

// A context of an engine kept across runs (kiln::Context), for what one
// run() cannot say: shapes set ahead, buffers bound in place (a KV cache,
// kiln_context_bind_in_place), tensors bound ahead through DLPack and runs
// enqueued on a stream. Not for several threads at once.
class RunContext {
 public:
  RunContext(const kiln::Engine& e, std::vector<kiln::TensorInfo> inputs, std::vector<kiln::TensorInfo> outputs)
      : ctx_(e), device_(e.device()), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}

  void set_input_shape(const std::string& name, const std::vector<int64_t>& shape) {
    ctx_.set_input_shape(name, shape);
  }
  std::vector<int64_t> output_shape(const std::string& name) const { return ctx_.output_shape(name); }

  // `buffer` serves as input `input` and output `output` and is kept alive
  // while bound: a writable C-contiguous numpy array (host memory: a CPU
  // engine), or an object exposing __cuda_array_interface__ (device memory:
  // a torch or CuPy tensor on a GPU engine), in either case of the capacity
  // shape (the input's shape with the appended axis at the most positions it
  // holds).
  void bind_in_place(const std::string& input, const std::string& output, const py::object& obj) {
    if (py::hasattr(obj, "__cuda_array_interface__")) {
      bind_cuda_array(input, output, obj);
      return;
    }
    // An ndarray itself, never a converted copy: the caller reads the cache from it.
    const bool ndarray = py::isinstance<py::array>(obj);
    py::array buffer = ndarray ? py::reinterpret_borrow<py::array>(obj) : py::array();
    if (!ndarray || !(buffer.flags() & py::array::c_style) || !buffer.writeable())
      raise(pair_words(input, output) +
            ": the buffer bound in place must be a writable C-contiguous numpy array (host memory) or an object "
            "exposing __cuda_array_interface__ (device memory; a device pointer as an int: bind_in_place_device)");
    std::vector<int64_t> capacity(buffer.shape(), buffer.shape() + buffer.ndim());
    ctx_.bind_in_place(input, output, buffer.mutable_data(), kiln_dtype_of(buffer.dtype(), input_dtype(input), input),
                       capacity);
    keep_pair(input, output, buffer);
  }

  // A raw device pointer (an int: a CUdeviceptr of the engine's device, as
  // torch's data_ptr() or cuMemAlloc give it) of `nbytes` bytes, holding
  // `capacity` elements of `dtype` (numpy's name); GPU engines only. The
  // caller keeps the allocation alive while it is bound.
  void bind_in_place_device(const std::string& input, const std::string& output, const py::object& ptr, int64_t nbytes,
                            const std::vector<int64_t>& capacity, const py::object& dtype) {
    if (!py::isinstance<py::int_>(ptr))
      raise(pair_words(input, output) + ": the device pointer must be an int, not " +
            std::string(py::str(py::type::of(ptr).attr("__name__"))));
    const auto address = ptr.cast<unsigned long long>();  // negative or too large: pybind11's TypeError
    const py::dtype dt = py::module_::import("numpy").attr("dtype")(dtype);
    bind_device(input, output, address, nbytes, capacity, dt, py::none());
  }

  std::vector<int64_t> input_shape(const std::string& name) const { return ctx_.input_shape(name); }

  // Binds `tensor` (any object implementing DLPack) as input or output
  // `name` for the runs that follow, until it is bound again; holds its
  // buffer meanwhile (run_context.cpp).
  void bind(const std::string& name, bool output, const py::object& tensor, const py::object& stream);

  // kiln_context_enqueue on `stream` (dlpack_bind.h's forms) with the
  // tensors bound ahead: every input and output must be (a run's feed lasts
  // that run only).
  void enqueue(const py::object& stream);

  std::vector<int> launch_variants() const { return ctx_.launch_variants(); }
  // [(symbol, node, bound, value)] of the last run (kiln_context_data_dependent_size).
  py::list data_dependent_sizes() const;

  // Runs with `feed` (every input not bound in place); returns the outputs
  // not bound in place.
  py::dict run(const py::dict& feed) {
    std::set<std::string> skip;
    for (const auto& [in, pair] : pairs_) {
      skip.insert(in);
      skip.insert(pair.first);
    }
    for (auto item : feed) {
      const std::string key = py::str(item.first);
      if (bound_inputs_.count(key))
        raise("input \"" + key + "\" is bound (Context.bind_input): it is read from its tensor, not the feed");
    }
    for (const auto& [name, owner] : bound_inputs_) skip.insert(name);
    for (const auto& [name, owner] : bound_outputs_) skip.insert(name);
    py::dict result;
    FeedKeep keep;
    std::map<std::string, std::vector<int64_t>> bound;
    bind_feed(ctx_, device_, inputs_, outputs_, skip, feed, result, keep, bound);
    {
      py::gil_scoped_release unlocked;
      ctx_.run();
    }
    trim_data_dependent(ctx_, bound, result);
    return result;
  }

 private:
  static std::string pair_words(const std::string& input, const std::string& output) {
    return "input \"" + input + "\" and output \"" + output + "\"";
  }

  kiln_dtype input_dtype(const std::string& input) const {
    for (const auto& t : inputs_)
      if (t.name == input) return t.dtype;
    return KILN_F32;  // an unknown name: kiln's own check names it
  }

  // __cuda_array_interface__ (version 2 or 3, as Numba documents it): a
  // dense C-order buffer, writable (the present is written into it), no mask.
  void bind_cuda_array(const std::string& input, const std::string& output, const py::object& obj) {
    const std::string who = pair_words(input, output) + ": __cuda_array_interface__";
    py::object iface_obj = obj.attr("__cuda_array_interface__");
    if (!py::isinstance<py::dict>(iface_obj)) raise(who + " is not a dict");
    py::dict iface = iface_obj;
    for (const char* key : {"shape", "typestr", "data"})
      if (!iface.contains(key)) raise(who + " has no \"" + key + "\"");
    if (iface.contains("mask") && !iface["mask"].is_none()) raise(who + " has a mask; a masked buffer cannot be bound");
    py::tuple data = iface["data"];
    if (data.size() != 2) raise(who + ": \"data\" is not (pointer, read_only)");
    if (data[1].cast<bool>()) raise(who + " is read-only; the present is written into the buffer");
    std::vector<int64_t> capacity = iface["shape"].cast<std::vector<int64_t>>();
    const py::dtype dt = py::module_::import("numpy").attr("dtype")(iface["typestr"]);
    const auto item = dt.attr("itemsize").cast<int64_t>();
    if (iface.contains("strides") && !iface["strides"].is_none()) {
      // Strides in bytes; C-contiguous ones are allowed (dims of 1 may have any).
      auto strides = iface["strides"].cast<std::vector<int64_t>>();
      int64_t want = item;
      for (size_t k = capacity.size(); k-- > 0;) {
        if (k < strides.size() && capacity[k] != 1 && strides[k] != want)
          raise(who + " is not C-contiguous (strides " + std::string(py::str(iface["strides"])) +
                " bytes); bind a contiguous tensor (torch: .contiguous())");
        want *= capacity[k];
      }
    }
    int64_t nbytes = item;
    for (int64_t d : capacity) nbytes *= d;
    bind_device(input, output, data[0].cast<unsigned long long>(), nbytes, capacity, dt, obj);
  }

  // The checks kiln's runtime cannot make (it gets a pointer, not an
  // allocation): the buffer's bytes cover the capacity. The runtime checks
  // the rest (the engine runs on the GPU, the pair, dtype, dims, 256-byte
  // alignment) and names the input in its message.
  void bind_device(const std::string& input, const std::string& output, unsigned long long address, int64_t nbytes,
                   const std::vector<int64_t>& capacity, const py::dtype& dt, const py::object& owner) {
    const kiln_dtype kd = kiln_dtype_of(dt, input_dtype(input), input);
    int64_t need = dt.attr("itemsize").cast<int64_t>();
    for (int64_t d : capacity) {
      if (d < 0)
        raise(pair_words(input, output) + ": a negative dim in the capacity " +
              std::string(py::str(py::cast(capacity))));
      need *= d;
    }
    if (nbytes < need)
      raise(pair_words(input, output) + ": the device buffer holds " + std::to_string(nbytes) + " bytes but " +
            std::string(py::str(py::cast(capacity))) + " of " + dt.attr("name").cast<std::string>() + " needs " +
            std::to_string(need));
    ctx_.bind_in_place(input, output, reinterpret_cast<void*>(static_cast<uintptr_t>(address)), kd, capacity,
                       KILN_MEMORY_DEVICE);
    keep_pair(input, output, owner);
  }

  // Binding either of a pair again ends the pairing (the runtime's rule):
  // drop any pair that shared a name with this one.
  void keep_pair(const std::string& input, const std::string& output, const py::object& owner) {
    for (auto it = pairs_.begin(); it != pairs_.end();)
      it = it->second.first == output || it->first == input ? pairs_.erase(it) : std::next(it);
    pairs_[input] = {output, owner};
    bound_inputs_.erase(input);
    bound_outputs_.erase(output);
  }

  // input -> (output, the object holding the buffer: an array, a CUDA
  // array's owner, or None for a raw pointer the caller keeps alive)
  std::map<std::string, std::pair<std::string, py::object>> pairs_;
  // The producers' buffers of the tensors bound with bind(), by name.
  // These and pairs_ are declared before ctx_, so destroyed after it:
  // destroying the context waits for enqueued work that reads them.
  std::map<std::string, std::shared_ptr<void>> bound_inputs_, bound_outputs_;
  kiln::Context ctx_;
  int device_;  // the engine's CUDA device; -1: the CPU
  std::vector<kiln::TensorInfo> inputs_, outputs_;
};

}  // namespace kiln_py
