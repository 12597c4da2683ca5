// Tensors from any object implementing the DLPack protocol (__dlpack__ and
// __dlpack_device__: torch, CuPy, JAX, numpy >= 1.22), read as the kiln
// runtime binds them: host memory (a CPU or pinned tensor) or CUDA device
// memory, with kiln's dtype, the shape, and the producer's buffer kept alive
// until the binding ends. See docs/python.md, "DLPack".
#pragma once
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln_py {

struct DlpackTensor {
  void* data = nullptr;  // the first element (the producer's data plus its byte offset)
  kiln_dtype dtype = KILN_F32;
  std::vector<int64_t> shape;
  bool device = false;      // CUDA device (or managed) memory; false: host memory
  bool managed = false;     // CUDA managed memory: any device may read it
  int device_id = 0;        // the CUDA device ordinal of device memory
  std::string device_text;  // "cpu", "cuda:0", ... for messages
  // Calls the producer's deleter when the last holder lets go.
  std::shared_ptr<void> owner;
};

// Whether `obj` offers the protocol (and is not a numpy array, which the
// callers read through the buffer protocol as before).
bool has_dlpack(const pybind11::handle& obj);

// Takes `obj`'s tensor through __dlpack__. `who` names it in every message
// ('input "x"'); `expected` is the model's dtype (resolving uint16, which is
// also bf16's bits, as for numpy arrays); `writable`: kiln writes into it (an
// output), so a read-only or copied export is refused. `stream` goes to
// __dlpack__(stream=...) for CUDA tensors (the producer orders its pending
// work before that stream; None: the protocol's default). Refuses, naming the
// tensor: a non-contiguous layout, vector lanes, a dtype kiln has no
// equivalent for, a device other than the CPU or CUDA.
DlpackTensor import_dlpack(const pybind11::object& obj, const std::string& who, kiln_dtype expected, bool writable,
                           const pybind11::object& stream);

// "f32[1,3,32,32]", as the runtime's messages write a tensor type.
std::string type_text(kiln_dtype dtype, const std::vector<int64_t>& shape);

}  // namespace kiln_py
