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
#include "python/src/py_common.h"
#include "python/src/run_context.h"

namespace py = pybind11;
using kiln_py::bind_feed;
using kiln_py::numpy_dtype_name;
using kiln_py::raise;
using kiln_py::RunContext;
using kiln_py::trim_data_dependent;

namespace {

// The Python exception class kiln.Error; set in the module initialiser.
PyObject* g_error = nullptr;

py::list describe(const std::vector<kiln::TensorInfo>& ts) {
  py::list r;
  for (const kiln::TensorInfo& t : ts)
    r.append(py::make_tuple(t.name, numpy_dtype_name(t.dtype), py::tuple(py::cast(t.shape))));
  return r;
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
    kiln_py::FeedKeep keep;  // what the bindings read, alive until the run ends
    std::map<std::string, std::vector<int64_t>> bound;
    bind_feed(ctx, engine_.device(), inputs_, outputs_, {}, feed, result, keep, bound);
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
                 const ShapeMap& max_shapes, const std::vector<ProfileMaps>& more_profiles,
                 const std::string& opt_variants) {
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
    o.opt_variants = opt_variants;  // checked by kiln/__init__.py (auto, all, none; all/none with a profile)
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
      .def_property_readonly("device", [](const PyEngine& e) { return e.engine().device(); })
      .def_property_readonly("target", &PyEngine::target)
      .def_property_readonly("precision", &PyEngine::precision)
      .def_property_readonly("profiles", &PyEngine::profiles)
      .def_property_readonly("num_data_dependent_sizes",
                             [](const PyEngine& e) { return e.engine().num_data_dependent_sizes(); })
      .def("input_index", &PyEngine::input_index, py::arg("name"))
      .def("output_index", &PyEngine::output_index, py::arg("name"))
      .def("profile", &PyEngine::profile, py::arg("inputs"))
      .def("plan_bytes", &PyEngine::plan_bytes)
      .def("save", &PyEngine::save, py::arg("path"))
      .def("run", &PyEngine::run, py::arg("inputs"));
  py::class_<RunContext>(m, "Context")
      .def(py::init([](const PyEngine& e) { return new RunContext(e.engine(), e.input_infos(), e.output_infos()); }),
           py::arg("engine"), py::keep_alive<1, 2>())
      .def("set_input_shape", &RunContext::set_input_shape, py::arg("name"), py::arg("shape"))
      .def("input_shape", &RunContext::input_shape, py::arg("name"))
      .def("output_shape", &RunContext::output_shape, py::arg("name"))
      .def("bind_in_place", &RunContext::bind_in_place, py::arg("input"), py::arg("output"), py::arg("buffer"))
      .def("bind_in_place_device", &RunContext::bind_in_place_device, py::arg("input"), py::arg("output"),
           py::arg("ptr"), py::kw_only(), py::arg("nbytes"), py::arg("shape"), py::arg("dtype"))
      .def(
          "bind_input",
          [](RunContext& c, const std::string& name, const py::object& t, const py::object& stream) {
            c.bind(name, false, t, stream);
          },
          py::arg("name"), py::arg("tensor"), py::kw_only(), py::arg("stream") = py::none())
      .def(
          "bind_output",
          [](RunContext& c, const std::string& name, const py::object& t, const py::object& stream) {
            c.bind(name, true, t, stream);
          },
          py::arg("name"), py::arg("tensor"), py::kw_only(), py::arg("stream") = py::none())
      .def("enqueue", &RunContext::enqueue, py::arg("stream") = py::none())
      .def("launch_variants", &RunContext::launch_variants)
      .def("data_dependent_sizes", &RunContext::data_dependent_sizes)
      .def("run", &RunContext::run, py::arg("inputs"));
  m.def("set_log_callback", &set_log_callback, py::arg("callback"));
  m.def("load", &load, py::arg("path"), py::arg("backend") = "auto");
  m.def("compile", &compile, py::arg("model"), py::arg("precision") = "fp32", py::arg("shapes") = ShapeMap{},
        py::arg("target") = "cpu", py::arg("backend") = "auto", py::arg("cache_dir") = "", py::arg("tuning_cache") = "",
        py::arg("min_shapes") = ShapeMap{}, py::arg("opt_shapes") = ShapeMap{}, py::arg("max_shapes") = ShapeMap{},
        py::arg("more_profiles") = std::vector<ProfileMaps>{}, py::arg("opt_variants") = "auto");
  m.attr("__version__") = kiln_version();
}
