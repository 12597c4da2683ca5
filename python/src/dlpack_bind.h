// Binding a DLPack tensor (dlpack_import.h) to a runtime context: host
// memory as kiln_context_bind_input/output buffers, CUDA device memory
// zero-copy (kiln_context_bind_input/output_device: the kernels read and
// write the tensor itself). See docs/python.md, "DLPack".
#pragma once
#include <pybind11/pybind11.h>

#include <memory>

#include "kiln/kiln.hpp"

namespace kiln_py {

// Binds `obj` as input (`output` false) or output `t` of `ctx`, whose
// engine runs on CUDA device `engine_device` (-1: the CPU). The runtime
// checks a host tensor's dtype and shape; for device memory, where it takes
// only the pointer, this checks them first (a dynamic input's shape is set
// from the tensor; an output's must be the shape the inputs give), and that
// the tensor is on the engine's device. `stream`: as import_dlpack's.
// Returns the producer's buffer, to hold while bound.
std::shared_ptr<void> bind_dlpack(kiln::Context& ctx, int engine_device, const kiln::TensorInfo& t, bool output,
                                  const pybind11::object& obj, const pybind11::object& stream);

// A CUDA stream from Python as a CUstream: None (0), an int, or a stream
// object: __cuda_stream__() (the CUDA Python protocol), torch's
// .cuda_stream, CuPy's .ptr. `who` names the call in the error.
uintptr_t stream_handle(const pybind11::object& stream, const std::string& who);

}  // namespace kiln_py
