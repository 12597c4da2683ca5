// Helpers shared by the extension's files (module.cpp, run_context.cpp):
// numpy dtypes in kiln's terms, and binding a feed of numpy arrays and fresh
// output arrays to a runtime context.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ir/error.h"
#include "kiln/kiln.hpp"

namespace kiln_py {

namespace py = pybind11;

[[noreturn]] inline void raise(const std::string& msg) { throw kiln::Error(msg); }

// numpy's name for a kiln dtype. numpy has no bfloat16: bf16 tensors travel
// as their uint16 bit patterns (docs/python.md).
const char* numpy_dtype_name(kiln_dtype d);

// The kiln dtype a numpy array's elements have, so that kiln's own binding
// check compares it with the model's and reports a mismatch in its words.
// `expected` resolves uint16, which is both u16 and bf16 bits.
kiln_dtype kiln_dtype_of(const py::dtype& dt, kiln_dtype expected, const std::string& name);

std::string names_of(const std::vector<kiln::TensorInfo>& ts);

// What a run's bindings read until it ends: the contiguous input arrays and
// the buffers of DLPack tensors.
struct FeedKeep {
  std::vector<py::array> arrays;
  std::vector<std::shared_ptr<void>> dlpack;
};

// Binds `feed` to `ctx` (every input but those bound in place: the names in
// `skip`) and fresh output arrays (into `result`; outputs in `skip` are
// written into their in-place buffers instead). A feed value is a numpy
// array (or what numpy.asarray takes), or any other object implementing
// DLPack (a torch or CuPy tensor; dlpack_bind.h: device tensors zero-copy,
// on the engine's CUDA device `engine_device`).
// `keep` holds what the bindings read until the run ends; `bound` gets each
// dynamic output's shape as bound.
void bind_feed(kiln::Context& ctx, int engine_device, const std::vector<kiln::TensorInfo>& inputs,
               const std::vector<kiln::TensorInfo>& outputs, const std::set<std::string>& skip, const py::dict& feed,
               py::dict& result, FeedKeep& keep, std::map<std::string, std::vector<int64_t>>& bound);

// Sizes decided by the data: an output bound at its upper bound holds the
// run's real shape at the front of its buffer (a copy of that part).
void trim_data_dependent(const kiln::Context& ctx, const std::map<std::string, std::vector<int64_t>>& bound,
                         py::dict& result);

}  // namespace kiln_py
