// _kiln: the Python extension behind the `kiln` package (python/kiln). It
// compiles in process (compiler/compile_model.h, the pipeline `kiln compile
// -o` runs, with the same checks), keeps the plan bytes and loads them with the
// runtime's C API (kiln.hpp), so a compiled engine and a loaded plan run
// through the same code as an embedding application. Every kiln failure
// becomes a `kiln.Error` carrying kiln's message. See docs/python.md.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/graph.h"
#include "kiln/kiln.hpp"
#include "runtime/plan_format.h"
#include "compiler/compile_model.h"

namespace py = pybind11;

namespace {

// The Python exception class kiln.Error; set in the module initialiser.
PyObject* g_error = nullptr;

[[noreturn]] void raise(const std::string& msg) { throw kiln::Error(msg); }

// numpy's name for a kiln dtype. numpy has no bfloat16: bf16 tensors travel
// as their uint16 bit patterns (docs/python.md).
const char* numpy_dtype_name(kiln_dtype d) {
  switch (d) {
    case KILN_F32:
      return "float32";
    case KILN_F16:
      return "float16";
    case KILN_BF16:
      return "uint16";
    case KILN_F64:
      return "float64";
    case KILN_I8:
      return "int8";
    case KILN_I16:
      return "int16";
    case KILN_I32:
      return "int32";
    case KILN_I64:
      return "int64";
    case KILN_U8:
      return "uint8";
    case KILN_U16:
      return "uint16";
    case KILN_U32:
      return "uint32";
    case KILN_U64:
      return "uint64";
    case KILN_BOOL:
      return "bool";
    case KILN_DTYPE_MAX_ENUM:
      break;  // not a dtype
    default:
      return kiln_dtype_name(d);  // the low-bit types: ml_dtypes' names differ; kiln's own
  }
  return "unknown";
}

// The kiln dtype a numpy array's elements have, so that kiln's own binding
// check compares it with the model's and reports a mismatch in its words.
// `expected` resolves uint16, which is both u16 and bf16 bits.
kiln_dtype kiln_dtype_of(const py::dtype& dt, kiln_dtype expected, const std::string& name) {
  // Read through Python attributes: pybind11's descriptor accessors assume
  // numpy 1's struct layout, which numpy 2 changed.
  const char kind = dt.attr("kind").cast<std::string>()[0];
  const auto size = dt.attr("itemsize").cast<int64_t>();
  if (kind == 'b' && size == 1) return KILN_BOOL;
  if (kind == 'f') {
    if (size == 2) return KILN_F16;
    if (size == 4) return KILN_F32;
    if (size == 8) return KILN_F64;
  }
  if (kind == 'i') {
    if (size == 1) return KILN_I8;
    if (size == 2) return KILN_I16;
    if (size == 4) return KILN_I32;
    if (size == 8) return KILN_I64;
  }
  if (kind == 'u') {
    if (size == 1) return KILN_U8;
    if (size == 2) return expected == KILN_BF16 ? KILN_BF16 : KILN_U16;
    if (size == 4) return KILN_U32;
    if (size == 8) return KILN_U64;
  }
  raise("input \"" + name + "\": numpy dtype " + dt.attr("name").cast<std::string>() +
        " has no kiln equivalent (expected " + numpy_dtype_name(expected) + ")");
}

py::list describe(const std::vector<kiln::TensorInfo>& ts) {
  py::list r;
  for (const kiln::TensorInfo& t : ts)
    r.append(py::make_tuple(t.name, numpy_dtype_name(t.dtype), py::tuple(py::cast(t.shape))));
  return r;
}

std::string names_of(const std::vector<kiln::TensorInfo>& ts) {
  std::string s;
  for (const auto& t : ts) s += (s.empty() ? "\"" : ", \"") + t.name + "\"";
  return s;
}

std::string read_bytes(const std::string& path) {
  // A folder opens as a file on Linux and reads as nothing.
  kiln::reject_directory(path, "a plan file");
  std::ifstream in(path, std::ios::binary);
  if (!in) raise(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

kiln_backend parse_backend(const std::string& b) {
  if (b == "auto") return KILN_BACKEND_AUTO;
  if (b == "cpu") return KILN_BACKEND_CPU;
  if (b == "gpu") return KILN_BACKEND_GPU;
  raise("backend \"" + b + "\": expected auto, cpu or gpu");
}

// Binds `feed` to `ctx` (every input but those bound in place: the names in
// `skip`) and fresh output arrays (into `result`; outputs in `skip` are
// written into their in-place buffers instead). `keep` holds the contiguous
// input arrays until the run ends; `bound` gets each dynamic output's shape as bound.
void bind_feed(kiln::Context& ctx, const std::vector<kiln::TensorInfo>& inputs,
               const std::vector<kiln::TensorInfo>& outputs, const std::set<std::string>& skip, const py::dict& feed,
               py::dict& result, std::vector<py::array>& keep, std::map<std::string, std::vector<int64_t>>& bound) {
  for (auto item : feed) {
    const std::string key = py::str(item.first);
    bool known = false;
    for (const auto& t : inputs) known |= t.name == key;
    if (!known) raise("unknown input \"" + key + "\"; the model's inputs are " + names_of(inputs));
    if (skip.count(key)) raise("input \"" + key + "\" is bound in place: it is read from its buffer, not the feed");
  }
  for (const kiln::TensorInfo& t : inputs) {
    if (skip.count(t.name)) continue;
    if (!feed.contains(t.name)) raise("missing input \"" + t.name + "\"; the model's inputs are " + names_of(inputs));
    py::array a = py::array::ensure(feed[py::str(t.name)], py::array::c_style);
    if (!a) raise("input \"" + t.name + "\" is not convertible to a numpy array");
    std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
    ctx.bind_input(t.name, a.data(), kiln_dtype_of(a.dtype(), t.dtype, t.name), shape);
    keep.push_back(std::move(a));
  }
  py::object np_empty = py::module_::import("numpy").attr("empty");
  for (const kiln::TensorInfo& t : outputs) {
    if (skip.count(t.name)) continue;
    // A plan with shape profiles: the inputs bound above set the shapes.
    std::vector<int64_t> shape = t.dynamic() ? ctx.output_shape(t.name) : t.shape;
    // numpy.empty, not py::array(dtype, shape): pybind11 computes strides
    // from numpy 1's descriptor layout, which numpy 2 changed.
    py::array a = np_empty(py::tuple(py::cast(shape)), numpy_dtype_name(t.dtype));
    ctx.bind_output(t.name, a.mutable_data(), t.dtype, shape);
    result[py::str(t.name)] = a;
    if (t.dynamic()) bound[t.name] = std::move(shape);
  }
}

// Sizes decided by the data: an output bound at its upper bound holds the
// run's real shape at the front of its buffer (a copy of that part).
void trim_data_dependent(const kiln::Context& ctx, const std::map<std::string, std::vector<int64_t>>& bound,
                         py::dict& result) {
  for (const auto& [name, shape] : bound) {
    std::vector<int64_t> real = ctx.output_shape(name);
    if (real == shape) continue;
    int64_t n = 1;
    for (int64_t d : real) n *= d;
    py::object flat = result[py::str(name)].attr("reshape")(-1);
    result[py::str(name)] = flat[py::slice(0, n, 1)].attr("reshape")(py::tuple(py::cast(real))).attr("copy")();
  }
}

// One loaded plan and its bytes (for save()). Immutable; run() makes a
// context per call, so one engine may be used from several Python threads.
class PyEngine {
 public:
  PyEngine(std::string plan_bytes, kiln_backend backend)
      : bytes_(std::move(plan_bytes)),
        engine_(kiln::Engine::from_memory(bytes_.data(), bytes_.size(), backend)),
        inputs_(engine_.inputs()),
        outputs_(engine_.outputs()) {}

  py::list inputs() const { return describe(inputs_); }
  py::list outputs() const { return describe(outputs_); }
  std::string backend() const { return engine_.backend() == KILN_BACKEND_GPU ? "gpu" : "cpu"; }
  std::string info() const { return engine_.info(); }
  std::string target() const { return engine_.target(); }
  std::string precision() const { return engine_.precision(); }
  int input_index(const std::string& name) const { return engine_.input_index(name); }
  int output_index(const std::string& name) const { return engine_.output_index(name); }
  py::bytes plan_bytes() const { return py::bytes(bytes_); }
  const kiln::Engine& engine() const { return engine_; }
  const std::vector<kiln::TensorInfo>& input_infos() const { return inputs_; }
  const std::vector<kiln::TensorInfo>& output_infos() const { return outputs_; }

  // [{input: (min, opt, max), ...} per profile] for the dynamic inputs; [] for a static plan.
  py::list profiles() const {
    py::list r;
    for (int i = 0; i < engine_.num_profiles(); ++i) {
      py::dict p;
      for (const kiln::TensorInfo& t : inputs_)
        if (t.dynamic())
          p[py::str(t.name)] = py::make_tuple(py::tuple(py::cast(engine_.profile_shape(i, t.name, KILN_PROFILE_MIN))),
                                              py::tuple(py::cast(engine_.profile_shape(i, t.name, KILN_PROFILE_OPT))),
                                              py::tuple(py::cast(engine_.profile_shape(i, t.name, KILN_PROFILE_MAX))));
      r.append(p);
    }
    return r;
  }

  // As kiln compile -o (ir/file_io.h): a folder is named as one, and the plan
  // is written beside and renamed, so a failed write keeps the old file and
  // the message has the operating system's reason.
  void save(const std::string& path) const {
    kiln::reject_directory(path, "a plan file");
    kiln::write_file(path, bytes_.data(), bytes_.size());
  }

  py::dict run(const py::dict& feed) const {
    py::dict result;
    run_with(feed, result, [](kiln::Context& ctx) { ctx.run(); });
    return result;
  }

  // One more run timing each kernel (GPU) or node (CPU): (outputs, [{name,
  // node, op, ms}, ...]).
  py::tuple profile(const py::dict& feed) const {
    py::dict result;
    std::vector<kiln::ProfileEntry> entries;
    run_with(feed, result, [&](kiln::Context& ctx) { entries = ctx.profile(); });
    py::list rows;
    for (const kiln::ProfileEntry& e : entries) {
      py::dict row;
      row["name"] = e.name;
      row["node"] = e.node;
      row["op"] = e.op;
      row["ms"] = e.ms;
      rows.append(row);
    }
    return py::make_tuple(result, rows);
  }

 private:
  // Binds `feed` and fresh output arrays (into `result`) to a new context and
  // calls `go` on it without the GIL.
  template <typename Go>
  void run_with(const py::dict& feed, py::dict& result, Go&& go) const {
    kiln::Context ctx(engine_);
    std::vector<py::array> keep;  // the contiguous input arrays, alive until the run ends
    std::map<std::string, std::vector<int64_t>> bound;
    bind_feed(ctx, inputs_, outputs_, {}, feed, result, keep, bound);
    {
      py::gil_scoped_release unlocked;
      go(ctx);
    }
    trim_data_dependent(ctx, bound, result);
  }

  std::string bytes_;
  kiln::Engine engine_;
  std::vector<kiln::TensorInfo> inputs_, outputs_;
};

// A context of an engine kept across runs (kiln::Context), for what one
// run() cannot say: shapes set ahead and buffers bound in place (a KV cache,
// kiln_context_bind_in_place). Not for several threads at once.
class RunContext {
 public:
  explicit RunContext(const PyEngine& e) : ctx_(e.engine()), inputs_(e.input_infos()), outputs_(e.output_infos()) {}

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

  // Runs with `feed` (every input not bound in place); returns the outputs
  // not bound in place.
  py::dict run(const py::dict& feed) {
    std::set<std::string> skip;
    for (const auto& [in, pair] : pairs_) {
      skip.insert(in);
      skip.insert(pair.first);
    }
    py::dict result;
    std::vector<py::array> keep;
    std::map<std::string, std::vector<int64_t>> bound;
    bind_feed(ctx_, inputs_, outputs_, skip, feed, result, keep, bound);
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
  }

  kiln::Context ctx_;
  std::vector<kiln::TensorInfo> inputs_, outputs_;
  // input -> (output, the object holding the buffer: an array, a CUDA
  // array's owner, or None for a raw pointer the caller keeps alive)
  std::map<std::string, std::pair<std::string, py::object>> pairs_;
};

PyEngine load(const std::string& path, const std::string& backend) {
  kiln_backend b = parse_backend(backend);
  // From the file first, so a missing or corrupt plan fails with the
  // runtime's own message; then the bytes, kept for save().
  kiln::Engine::from_file(path, b);
  return PyEngine(read_bytes(path), b);
}

using ShapeMap = std::map<std::string, std::vector<int64_t>>;
// One shape profile from Python: (min, opt, max), each input name -> dims.
using ProfileMaps = std::tuple<ShapeMap, ShapeMap, ShapeMap>;

PyEngine compile(const std::string& model, const std::string& precision, const ShapeMap& shapes,
                 const std::string& target, const std::string& backend, const std::string& cache_dir,
                 const std::string& tuning_cache, const ShapeMap& min_shapes, const ShapeMap& opt_shapes,
                 const ShapeMap& max_shapes, const std::vector<ProfileMaps>& more_profiles) {
  kiln_backend b = parse_backend(backend);
  std::vector<uint8_t> bytes;
  {
    py::gil_scoped_release unlocked;
    // The CLI's pipeline and checks (compiler/compile_model.h): the coverage
    // check, --shapes names, the targets and precisions `kiln compile` takes,
    // the tuning cache.
    kiln::CompileModelOptions o;
    o.shape_option_names = kiln::ShapeOptionNames::python();  // messages name compile()'s parameters
    o.build.pass.target = target;
    o.build.pass.precision = precision;
    o.build.cache_dir = cache_dir;
    for (const auto& [name, dims] : shapes) o.input_shapes[name] = dims;
    // A shape profile (kiln compile --min/--opt/--max-shapes).
    for (const auto& [name, dims] : min_shapes) o.min_shapes[name] = dims;
    for (const auto& [name, dims] : opt_shapes) o.opt_shapes[name] = dims;
    for (const auto& [name, dims] : max_shapes) o.max_shapes[name] = dims;
    // Further profiles (kiln compile's repeated flags; TensorRT's
    // add_optimization_profile), in order after the first.
    for (const auto& [lo, opt, hi] : more_profiles) {
      kiln::CompileModelOptions::ShapeRanges r;
      for (const auto& [name, dims] : lo) r.min[name] = dims;
      for (const auto& [name, dims] : opt) r.opt[name] = dims;
      for (const auto& [name, dims] : hi) r.max[name] = dims;
      o.more_profiles.push_back(std::move(r));
    }
    o.tuning.cache_file = tuning_cache;
    bytes = kiln::compile_model(kiln::ModelSource::file(model), o).plan;
  }
  return PyEngine(std::string(bytes.begin(), bytes.end()), b);
}

// kiln.set_log_callback(fn): fn(level, message) with level "error",
// "warning" or "info"; None removes it.
void set_log_callback(py::object fn) {
  // Never destroyed: the runtime may outlive the interpreter's teardown.
  static py::object* current = new py::object();
  {
    // Without the GIL: kiln_set_log_callback waits for a callback running on
    // another thread, which may be waiting for the GIL.
    py::gil_scoped_release unlocked;
    kiln_set_log_callback(nullptr, nullptr);
  }
  *current = fn;
  if (fn.is_none()) return;
  py::gil_scoped_release unlocked;
  kiln_set_log_callback(
      [](kiln_log_level level, const char* message, void* f) {
        py::gil_scoped_acquire gil;
        const char* name = level == KILN_LOG_ERROR ? "error" : level == KILN_LOG_WARNING ? "warning" : "info";
        try {
          (*static_cast<py::object*>(f))(name, message);
        } catch (py::error_already_set& e) {
          e.discard_as_unraisable("kiln log callback");
        }
      },
      current);
}

}  // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "kiln: compile ONNX models and run them (the extension behind the kiln package)";
  // Registered on the module, which keeps it alive; g_error borrows it.
  py::exception<kiln::Error> error(m, "Error", PyExc_RuntimeError);
  g_error = error.ptr();
  // Both kiln's compiler errors and the runtime's statuses become kiln.Error.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kiln::Error& e) {
      PyErr_SetString(g_error, e.what());
    } catch (const kiln::runtime_error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });

  py::class_<PyEngine>(m, "Engine")
      .def_property_readonly("inputs", &PyEngine::inputs)
      .def_property_readonly("outputs", &PyEngine::outputs)
      .def_property_readonly("backend", &PyEngine::backend)
      .def_property_readonly("info", &PyEngine::info)
      .def_property_readonly("target", &PyEngine::target)
      .def_property_readonly("precision", &PyEngine::precision)
      .def_property_readonly("profiles", &PyEngine::profiles)
      .def("input_index", &PyEngine::input_index, py::arg("name"))
      .def("output_index", &PyEngine::output_index, py::arg("name"))
      .def("profile", &PyEngine::profile, py::arg("inputs"))
      .def("plan_bytes", &PyEngine::plan_bytes)
      .def("save", &PyEngine::save, py::arg("path"))
      .def("run", &PyEngine::run, py::arg("inputs"));
  py::class_<RunContext>(m, "Context")
      .def(py::init<const PyEngine&>(), py::arg("engine"), py::keep_alive<1, 2>())
      .def("set_input_shape", &RunContext::set_input_shape, py::arg("name"), py::arg("shape"))
      .def("input_shape", &RunContext::input_shape, py::arg("name"))
      .def("output_shape", &RunContext::output_shape, py::arg("name"))
      .def("bind_in_place", &RunContext::bind_in_place, py::arg("input"), py::arg("output"), py::arg("buffer"))
      .def("bind_in_place_device", &RunContext::bind_in_place_device, py::arg("input"), py::arg("output"),
           py::arg("ptr"), py::kw_only(), py::arg("nbytes"), py::arg("shape"), py::arg("dtype"))
      .def("run", &RunContext::run, py::arg("inputs"));
  m.def("set_log_callback", &set_log_callback, py::arg("callback"));
  m.def("load", &load, py::arg("path"), py::arg("backend") = "auto");
  m.def("compile", &compile, py::arg("model"), py::arg("precision") = "fp32", py::arg("shapes") = ShapeMap{},
        py::arg("target") = "cpu", py::arg("backend") = "auto", py::arg("cache_dir") = "", py::arg("tuning_cache") = "",
        py::arg("min_shapes") = ShapeMap{}, py::arg("opt_shapes") = ShapeMap{}, py::arg("max_shapes") = ShapeMap{},
        py::arg("more_profiles") = std::vector<ProfileMaps>{});
  m.attr("__version__") = kiln_version();
}
