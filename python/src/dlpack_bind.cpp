// See dlpack_bind.h.
#include "python/src/dlpack_bind.h"

#include "python/src/dlpack_import.h"
#include "python/src/py_common.h"

namespace kiln_py {

std::shared_ptr<void> bind_dlpack(kiln::Context& ctx, int engine_device, const kiln::TensorInfo& t, bool output,
                                  const py::object& obj, const py::object& stream) {
  const std::string who = std::string(output ? "output" : "input") + " \"" + t.name + "\"";
  // The stream as the protocol takes it: None or an int (-1: no synchronisation).
  py::object dl_stream =
      stream.is_none() || py::isinstance<py::int_>(stream) ? stream : py::object(py::int_(stream_handle(stream, who)));
  DlpackTensor d = import_dlpack(obj, who, t.dtype, output, dl_stream);
  if (!d.device) {
    if (output) ctx.bind_output(t.name, d.data, d.dtype, d.shape);
    else ctx.bind_input(t.name, d.data, d.dtype, d.shape);
    return d.owner;
  }
  // Another GPU's memory: the kernels would fault on it (a sticky error
  // that ends the process's use of the GPU). A CPU engine: the runtime's
  // refusal below says so.
  if (engine_device >= 0 && !d.managed && d.device_id != engine_device)
    raise(who + ": the DLPack tensor is on " + d.device_text + " but the engine runs on CUDA device " +
          std::to_string(engine_device));
  // Zero-copy: the runtime gets only the pointer, so the dtype and shape are
  // checked here, in the words of its own binding check.
  std::vector<int64_t> want = t.shape;
  if (output) {
    want = ctx.output_shape(t.name);  // the shape the inputs set give (refused, named, before they are set)
  } else if (t.dynamic()) {
    if (d.dtype == t.dtype) ctx.set_input_shape(t.name, d.shape);  // inside a profile, or refused naming the dim
    want = ctx.input_shape(t.name);
  }
  if (d.dtype != t.dtype || d.shape != want)
    raise(who + " is " + type_text(t.dtype, want) + " but the DLPack tensor (" + d.device_text + ") is " +
          type_text(d.dtype, d.shape));
  const auto ptr = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(d.data));
  if (output) ctx.bind_output_device(t.name, ptr);
  else ctx.bind_input_device(t.name, ptr);
  return d.owner;
}

uintptr_t stream_handle(const py::object& stream, const std::string& who) {
  if (stream.is_none()) return 0;
  py::object h = stream;
  if (py::hasattr(stream, "__cuda_stream__")) {
    py::tuple v = stream.attr("__cuda_stream__")();
    if (v.size() != 2) raise(who + ": __cuda_stream__() did not return (version, handle)");
    h = v[1];
  } else if (py::hasattr(stream, "cuda_stream")) {  // torch.cuda.Stream
    h = stream.attr("cuda_stream");
  } else if (py::hasattr(stream, "ptr")) {  // cupy.cuda.Stream
    h = stream.attr("ptr");
  }
  if (!py::isinstance<py::int_>(h) || py::isinstance<py::bool_>(h))
    raise(who +
          ": the stream must be None, an int (a CUstream) or a stream object (__cuda_stream__, torch's "
          ".cuda_stream, CuPy's .ptr), not " +
          std::string(py::str(py::type::of(stream).attr("__name__"))));
  return h.cast<uintptr_t>();
}

}  // namespace kiln_py
