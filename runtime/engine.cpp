#include "runtime/engine.h"

#include <fmt/ranges.h>

#include <fstream>

#include "backends/reference/executor.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/file_io.h"
#include "runtime/cuda_driver.h"
#include "runtime/gpu_executor.h"
#include "runtime/input_shapes.h"
#include "runtime/log.h"
#include "runtime/plan_graph.h"

namespace kiln::rt {

std::shared_ptr<const Engine> Engine::load(const uint8_t* data, size_t size, const std::string& what, Backend backend,
                                           int device) {
  std::shared_ptr<Engine> e(new Engine());
  e->plan_ = plan::deserialize(data, size, what);
  e->graph_ = plan::load_graph(e->plan_, what);
  auto desc = [](const Value* v) {
    TensorDesc d{v->name(), v->type(), {}};
    for (int64_t dim : v->shape()) d.api_shape.push_back(is_symbolic_dim(dim) ? -1 : dim);
    return d;
  };
  for (const Value* v : e->graph_->inputs()) e->inputs_.push_back(desc(v));
  for (const Value* v : e->graph_->outputs()) e->outputs_.push_back(desc(v));
  std::vector<size_t> count_bytes;  // a plan with bounded sizes: its counts, the graph's last outputs
  if (const plan::BoundedSizes* b = e->bounded_sizes()) {
    e->outputs_.resize(b->outputs.size());
    for (size_t i = 0; i < e->outputs_.size(); ++i) {
      e->outputs_[i].type.shape = plan::symbolic_shape(*b, i);
      for (size_t d = 0; d < e->outputs_[i].type.shape.size(); ++d)
        if (is_symbolic_dim(e->outputs_[i].type.shape[d])) e->outputs_[i].api_shape[d] = -1;
    }
    for (const plan::SizeCount& c : b->counts) count_bytes.push_back(e->graph_->outputs()[c.output]->type().nbytes());
  }
  e->data_dependent_ = has_data_dependent_sizes(*e->graph_);
  e->in_place_ = find_in_place_pairs(*e->graph_);
  // Why the GPU path is not taken (empty: it is).
  std::string no_gpu;
  const CudaDriver* driver = nullptr;
  if (backend == Backend::Cpu) {
    no_gpu = "the CPU backend was requested";
  } else if (!e->plan_.meta.gpu_kernels) {
    no_gpu = "the plan has no GPU kernels: " + e->plan_.meta.no_gpu_reason;
  } else {
    driver = cuda_driver(&no_gpu);
  }
  if (driver) {
    std::vector<size_t> in, out;
    // A plan with shape profiles: buffers for the largest shapes (each
    // symbol at the top of its range); each run moves its shape's bytes.
    SymbolBindings largest;
    for (const SymbolDecl& sd : e->graph_->symbols()) largest[sd.name] = sd.max;
    auto max_bytes = [&](const TensorDesc& d) {
      return e->dynamic() ? TensorType(d.type.dtype, eval_shape(d.type.shape, largest)).nbytes() : d.type.nbytes();
    };
    for (const auto& d : e->inputs_) in.push_back(max_bytes(d));
    for (size_t i = 0; i < e->outputs_.size(); ++i)
      out.push_back(e->bounded_sizes() ? e->graph_->outputs()[i]->type().nbytes() : max_bytes(e->outputs_[i]));
    out.insert(out.end(), count_bytes.begin(), count_bytes.end());
    try {
      e->gpu_ = std::make_unique<GpuEngine>(*driver, e->plan_, in, out, what, device);
      e->info_ = e->gpu_->description();
    } catch (const DeviceLost& err) {
      if (backend == Backend::Gpu) throw DeviceLost(what + ": " + err.what(), err.code());
      no_gpu = err.what();
    } catch (const CudaError& err) {
      // The plan is fine; the GPU failed (out of memory...): name the plan.
      if (backend == Backend::Gpu) throw CudaError(what + ": " + err.what(), err.code());
      no_gpu = err.what();
    } catch (const Error& err) {
      // GpuUnavailable (wrong arch, driver too old) keeps its type: the C API's KILN_ERROR_UNAVAILABLE.
      if (backend == Backend::Gpu) throw;
      no_gpu = err.what();
    }
  }
  if (!e->gpu_) {
    if (backend == Backend::Gpu)
      throw GpuUnavailable(fmt::format("{}: the GPU backend is not available: {}", what, no_gpu));
    e->info_ = "CPU reference path (" + no_gpu + ")";
  }
  // The AUTO backend's fallback is the one choice the caller did not make.
  bool fell_back = backend == Backend::Auto && !e->gpu_;
  log(fell_back ? LogLevel::Warning : LogLevel::Info,
      fmt::format("{}: {}{}", what, fell_back ? "the AUTO backend runs on the " : "runs on the ", e->info_));
  return e;
}

std::shared_ptr<const Engine> Engine::load_file(const std::string& path, Backend backend, int device) {
  reject_directory(path, "a plan file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open plan file", path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return load(bytes.data(), bytes.size(), path, backend, device);
}

Engine::~Engine() = default;

bool TensorDesc::dynamic() const { return has_symbolic_dims(type.shape); }

Context::Context(std::shared_ptr<const Engine> e) : engine_(std::move(e)) {
  inputs_.resize(engine_->inputs().size());
  outputs_.resize(engine_->outputs().size());
  if (engine_->gpu()) gpu_ = std::make_unique<GpuContext>(*engine_->gpu());
  if (engine_->dynamic()) shapes_ = std::make_unique<InputShapes>(*engine_);
  if (const plan::BoundedSizes* b = engine_->bounded_sizes()) counts_.assign(b->counts.size(), 0);
}

Context::~Context() = default;

namespace {
size_t find(const std::vector<TensorDesc>& ds, const std::string& name, const char* kind) {
  for (size_t i = 0; i < ds.size(); ++i)
    if (ds[i].name == name) return i;
  std::vector<std::string> names;
  for (const auto& d : ds) names.push_back('"' + d.name + '"');
  fail("the model has no {} named \"{}\" ({}s: {})", kind, name, kind, fmt::join(names, ", "));
}

void check_type(const TensorDesc& d, const TensorType& as, const char* kind) {
  if (as.dtype != d.type.dtype || as.shape != d.type.shape)
    fail("{} \"{}\" is {} but was bound as {}", kind, d.name, TensorType(d.type.dtype, d.type.shape).str(),
         TensorType(as.dtype, as.shape).str());
}
}  // namespace

size_t Engine::input_index(const std::string& name) const { return find(inputs_, name, "input"); }
size_t Engine::output_index(const std::string& name) const { return find(outputs_, name, "output"); }

void Context::set_input_shape(const std::string& name, const Shape& shape) {
  size_t i = find(engine_->inputs(), name, "input");
  if (!shapes_) {
    if (shape != engine_->inputs()[i].type.shape)
      fail("input \"{}\" is [{}] and the plan has no shape profiles: its shape cannot be set to [{}]", name,
           fmt::join(engine_->inputs()[i].type.shape, ","), fmt::join(shape, ","));
    return;
  }
  shapes_->set(i, shape);
  run_shapes_.clear();
}

Shape Context::input_shape(const std::string& name) const {
  size_t i = find(engine_->inputs(), name, "input");
  return shapes_ ? shapes_->input(i) : engine_->inputs()[i].type.shape;
}

Shape Context::output_shape(const std::string& name) const {
  size_t i = find(engine_->outputs(), name, "output");
  if (i < run_shapes_.size() && run_shapes_[i]) return *run_shapes_[i];  // the data's, after a run
  if (engine_->bounded_sizes()) return engine_->output_at_bound(i);      // the bound, before one
  return shapes_ ? shapes_->output(i) : engine_->outputs()[i].type.shape;
}

void Context::bind_input(const std::string& name, const void* data, const TensorType& as, bool device) {
  size_t i = find(engine_->inputs(), name, "input");
  const TensorDesc& d = engine_->inputs()[i];
  if (shapes_ && d.dynamic()) {
    // A dynamic input bound with its shape: as set_input_shape, then bound.
    if (as.dtype != d.type.dtype)
      fail("input \"{}\" is {} but was bound as {}", name, dtype_name(d.type.dtype), dtype_name(as.dtype));
    shapes_->set(i, as.shape);
    if (inputs_[i].shape != as.shape) run_shapes_.clear();
  } else {
    check_type(d, as, "input");
  }
  if (device && !gpu_) fail("input \"{}\": device memory bound but the engine runs on the CPU", name);
  if (!data && as.nbytes()) fail("input \"{}\": null data pointer", name);
  inputs_[i] = {const_cast<void*>(data), device, true, false, as.shape, -1, {}};
  // Sizes the data decides: new inputs, new sizes; until the next run the
  // outputs' shapes are their bounds again (what they are bound with).
  if (engine_->bounded_sizes()) run_shapes_.clear();
}

void Context::bind_output(const std::string& name, void* data, const TensorType& as, bool device) {
  size_t i = find(engine_->outputs(), name, "output");
  if (shapes_) {
    TensorDesc now = engine_->outputs()[i];
    now.type.shape = shapes_->output(i);
    check_type(now, as, "output");
  } else if (engine_->bounded_sizes()) {
    // Bound at the upper bound; after a run it holds the real shape at its front.
    TensorDesc now = engine_->outputs()[i];
    now.type.shape = engine_->output_at_bound(i);
    check_type(now, as, "output");
    if (device && engine_->outputs()[i].dynamic())
      fail(
          "output \"{}\": its size is decided at run time and the runtime trims it on the host after the run; "
          "device memory for such an output is not supported yet (bind host memory)",
          name);
  } else {
    check_type(engine_->outputs()[i], as, "output");
  }
  if (device && !gpu_) fail("output \"{}\": device memory bound but the engine runs on the CPU", name);
  if (!data && as.nbytes()) fail("output \"{}\": null data pointer", name);
  outputs_[i] = {data, device, true, false, as.shape, -1, {}};
}

// A zero-copy buffer is read and written by the kernels in place of an arena
// tensor, and the kernels assume the arena's alignment (128-bit vector loads
// and stores, cp.async): an unaligned pointer would be a misaligned-address
// fault on the GPU, which is sticky for the whole context. 256 bytes is what
// cuMemAlloc returns and what the arena guarantees (TensorRT asks the same of
// its I/O buffers).
void Context::check_device_alignment(const char* what, const std::string& name, unsigned long long ptr) {
  constexpr unsigned long long kDeviceAlignment = 256;
  if (ptr % kDeviceAlignment)
    fail(
        "{} \"{}\": device pointer 0x{:x} is not {}-byte aligned (zero-copy buffers must be, as cuMemAlloc returns them)",
        what, name, ptr, kDeviceAlignment);
}

void Context::bind_input_device(const std::string& name, unsigned long long ptr) {
  size_t i = engine_->input_index(name);
  if (!gpu_) fail("input \"{}\": zero-copy device binding but the engine runs on the CPU ({})", name, engine_->info());
  // A plan with shape profiles: the buffer holds the shape set now (set the
  // input's shape first); a run at another shape needs it bound again.
  const Shape shape = shapes_ ? shapes_->input(i) : engine_->inputs()[i].type.shape;
  if (!ptr && TensorType(engine_->inputs()[i].type.dtype, shape).nbytes())
    fail("input \"{}\": null device pointer", name);
  check_device_alignment("input", name, ptr);
  inputs_[i] = {reinterpret_cast<void*>(ptr), true, true, true, shapes_ ? shape : Shape{}, -1, {}};
  if (engine_->bounded_sizes()) run_shapes_.clear();  // as bind_input
}

void Context::bind_output_device(const std::string& name, unsigned long long ptr) {
  size_t i = engine_->output_index(name);
  if (!gpu_) fail("output \"{}\": zero-copy device binding but the engine runs on the CPU ({})", name, engine_->info());
  if (engine_->bounded_sizes() && engine_->outputs()[i].dynamic())
    fail(
        "output \"{}\": its size is decided at run time and the runtime trims it on the host after the run; "
        "zero-copy device memory for such an output is not supported yet (bind host memory)",
        name);
  const Shape shape = shapes_ ? shapes_->output(i) : engine_->outputs()[i].type.shape;  // as for inputs
  if (!ptr && TensorType(engine_->outputs()[i].type.dtype, shape).nbytes())
    fail("output \"{}\": null device pointer", name);
  check_device_alignment("output", name, ptr);
  outputs_[i] = {reinterpret_cast<void*>(ptr), true, true, true, shapes_ ? shape : Shape{}, -1, {}};
}

void Context::check_bound() const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (!inputs_[i].bound) fail("input \"{}\" is not bound", engine_->inputs()[i].name);
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (!outputs_[i].bound) fail("output \"{}\" is not bound", engine_->outputs()[i].name);
  // A pair bound in place: the buffer must still be both, and hold the present.
  for (size_t o = 0; o < outputs_.size(); ++o) {
    if (outputs_[o].in_place < 0) continue;
    const InPlacePair& p = engine_->in_place_pairs()[outputs_[o].in_place];
    if (inputs_[p.input].in_place != outputs_[o].in_place || inputs_[p.input].ptr != outputs_[o].ptr)
      fail(
          "output \"{}\" was bound in place with input \"{}\", which was bound again on its own since: bind the "
          "pair again (kiln_context_bind_in_place), or the output on its own",
          engine_->outputs()[o].name, engine_->inputs()[p.input].name);
    check_in_place_capacity(p, engine_->graph(), outputs_[o].capacity, output_shape(engine_->outputs()[o].name));
  }
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].in_place >= 0 &&
        outputs_[engine_->in_place_pairs()[inputs_[i].in_place].output].in_place != inputs_[i].in_place)
      fail(
          "input \"{}\" was bound in place with output \"{}\", which was bound again on its own since: bind the "
          "pair again (kiln_context_bind_in_place), or the input on its own",
          engine_->inputs()[i].name, engine_->outputs()[engine_->in_place_pairs()[inputs_[i].in_place].output].name);
  if (!shapes_) return;
  // Shapes set after a buffer was bound: the buffer holds the old shape's
  // bytes (a buffer bound in place holds every shape up to its capacity).
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (Shape now = shapes_->input(i); inputs_[i].in_place < 0 && inputs_[i].shape != now)
      fail("input \"{}\" was bound as [{}] but its shape is now [{}]: bind it again", engine_->inputs()[i].name,
           fmt::join(inputs_[i].shape, ","), fmt::join(now, ","));
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (Shape now = shapes_->output(i); outputs_[i].in_place < 0 && outputs_[i].shape != now)
      fail("output \"{}\" was bound as [{}] but the input shapes give [{}]: bind it again", engine_->outputs()[i].name,
           fmt::join(outputs_[i].shape, ","), fmt::join(now, ","));
}

void Context::run() { enqueue(nullptr); }

namespace {
std::vector<DeviceBinding> device_bindings(const std::vector<Binding>& bs) {
  std::vector<DeviceBinding> r;
  for (const Binding& b : bs) r.push_back({b.ptr, b.device, b.zero_copy});
  return r;
}
}  // namespace

std::vector<DeviceBinding> Context::output_bindings() {
  std::vector<DeviceBinding> r = device_bindings(outputs_);
  for (int64_t& c : counts_) r.push_back({&c, false, false});
  return r;
}

// The counts the run wrote, checked against their bounds, give each output's
// real shape; its entries move to the front of its buffer (bound at the bound).
void Context::trim_to_counts() {
  const plan::BoundedSizes& b = *engine_->bounded_sizes();
  SymbolBindings at = plan::bind_counts(b, counts_);
  run_shapes_.assign(outputs_.size(), std::nullopt);
  for (size_t i = 0; i < outputs_.size(); ++i) {
    Shape real = plan::real_shape(b, i, at);
    plan::trim_in_place(outputs_[i].ptr, engine_->outputs()[i].type.dtype, engine_->output_at_bound(i), real);
    run_shapes_[i] = std::move(real);
  }
}

std::optional<int64_t> Context::data_dependent_size(size_t i) const {
  const plan::BoundedSizes* b = engine_->bounded_sizes();
  const size_t n = b ? b->counts.size() : 0;
  if (i >= n) fail("data-dependent size {} is out of range (the plan has {})", i, n);
  // run_shapes_ holds the last run's shapes until inputs change (bind_input).
  if (run_shapes_.empty()) return std::nullopt;
  return counts_.at(i);
}

std::vector<int> Context::launch_variants_run() const {
  std::vector<int> run;
  if (!gpu_) return run;
  for (int v : gpu_->variant_per_step())
    if (v >= 0 && (run.empty() || run.back() != v)) run.push_back(v);
  return run;
}

RunTiming Context::last_timing() const {
  if (!gpu_) fail("no GPU timing: the engine runs on the CPU ({})", engine_->info());
  if (!timed_) fail("no GPU timing yet: the context has not run synchronously (run, or enqueue on a null stream)");
  return timing_;
}

// A plan with shape profiles: the GPU context gets the shapes' symbol
// values and byte sizes before each run (its graphs are per shape).
void Context::set_gpu_shape() {
  if (!gpu_ || !shapes_) return;
  std::vector<size_t> in, out;
  for (size_t i = 0; i < inputs_.size(); ++i)
    in.push_back(TensorType(engine_->inputs()[i].type.dtype, shapes_->input(i)).nbytes());
  for (size_t i = 0; i < outputs_.size(); ++i)
    out.push_back(TensorType(engine_->outputs()[i].type.dtype, shapes_->output(i)).nbytes());
  // A KV cache pair's capacity symbol: the buffer bound in place's
  // positions along the axis, else the present's own (a dense output).
  SymbolBindings b = shapes_->bindings();
  const auto& appends = engine_->plan().in_place_appends;
  std::vector<bool> bound;
  in_place_bytes_ = 0;
  for (const plan::InPlaceAppend& a : appends) {
    const bool on = inputs_[a.input].in_place >= 0 && outputs_[a.output].in_place == inputs_[a.input].in_place;
    bound.push_back(on);
    b[a.capacity_symbol] = on ? inputs_[a.input].capacity.at(a.axis) : shapes_->output(a.output).at(a.axis);
    if (on) in_place_bytes_ += out.at(a.output) - in.at(a.input);  // what the append writes
  }
  if (!appends.empty()) gpu_->set_in_place(bound);
  gpu_->set_shape(b, std::move(in), std::move(out));
}

void Context::submit() {
  check_bound();
  if (gpu_ && engine_->bounded_sizes())
    fail(
        "submit: the plan's result sizes are decided at run time and its outputs are trimmed after each run; "
        "pipelined runs of such a plan are not supported yet (use run)");
  set_gpu_shape();
  if (gpu_) {
    gpu_->submit(device_bindings(inputs_), device_bindings(outputs_));
    return;
  }
  if (cpu_in_flight_ >= GpuContext::kMaxInFlight)
    fail("{} runs are in flight (the most a context pipelines): wait for one first", cpu_in_flight_);
  enqueue(nullptr);
  ++cpu_in_flight_;
}

void Context::wait() {
  if (gpu_) {
    if (!gpu_->in_flight()) fail("no run is in flight: nothing to wait for");
    timed_ = false;  // a failed wait leaves no timing
    GpuRunTiming t = gpu_->wait();
    timing_ = {t.upload_ms, t.compute_ms, t.download_ms};
    timed_ = true;
    return;
  }
  if (!cpu_in_flight_) fail("no run is in flight: nothing to wait for");
  --cpu_in_flight_;
}

size_t Context::in_flight() const { return gpu_ ? gpu_->in_flight() : cpu_in_flight_; }

void Context::enqueue(void* stream) {
  check_bound();
  set_gpu_shape();
  if (gpu_) {
    std::vector<DeviceBinding> in = device_bindings(inputs_), out = device_bindings(outputs_);
    if (stream && engine_->bounded_sizes())
      fail(
          "enqueue: the plan's result sizes are decided at run time and its outputs are trimmed after the run, on "
          "the host; enqueue on a stream is not supported for it yet (use run)");
    if (stream) {
      gpu_->enqueue(in, out, static_cast<CUstream>(stream));
      return;
    }
    if (engine_->bounded_sizes()) {
      out = output_bindings();
      run_shapes_.clear();  // a failed run leaves no shapes of an earlier one
    }
    timed_ = false;  // a failed run leaves no timing
    GpuRunTiming t = gpu_->run(in, out);
    timing_ = {t.upload_ms, t.compute_ms, t.download_ms};
    timed_ = true;
    if (engine_->bounded_sizes()) trim_to_counts();
    return;
  }
  if (stream) fail("enqueue: the engine runs on the CPU ({}); pass a null stream", engine_->info());
  run_on_cpu(nullptr);
}

const std::vector<ProfileEntry>& Context::profile() {
  check_bound();
  if (in_flight()) fail("profile: {} submitted run(s) in flight; wait for them first", in_flight());
  profile_.clear();
  if (!gpu_) {
    run_on_cpu(&profile_);
    return profile_;
  }
  set_gpu_shape();
  if (engine_->bounded_sizes()) run_shapes_.clear();
  std::vector<float> ms =
      gpu_->profile(device_bindings(inputs_), engine_->bounded_sizes() ? output_bindings() : device_bindings(outputs_));
  if (engine_->bounded_sizes()) trim_to_counts();
  const plan::Plan& p = engine_->plan();
  std::vector<const Node*> nodes;  // Step::node indexes the graph's node list
  for (const auto& n : engine_->graph().nodes()) nodes.push_back(n.get());
  // Each entry names what ran at this shape: a launch variant's kernels
  // (timed on the first step it replaces), a KV cache's append bound in
  // place of its concat, else the step's own kernel.
  const std::vector<int> variant = gpu_->variant_per_step();
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const plan::Step& s = gpu_->launched_for(p.steps[i]);
    const Node* n = s.node < nodes.size() ? nodes[s.node] : nullptr;
    bool copy = s.kind == plan::StepKind::Copy;
    // A control-flow step's time is its whole host-driven run (every
    // launch of the regions it ran).
    bool control = s.kind == plan::StepKind::Control;
    std::string name = copy      ? fmt::format("copy (step {})", i)
                       : control ? fmt::format("control flow (step {})", i)
                                 : p.kernels[s.kernel].name;
    if (const int v = variant[i]; v >= 0) {
      const plan::LaunchVariant& lv = p.launch_variants[static_cast<size_t>(v)];
      std::vector<std::string> ran;
      for (const plan::Step& vs : lv.steps)
        ran.push_back(vs.kind == plan::StepKind::Kernel ? p.kernels[vs.kernel].name : std::string("copy"));
      name = i == lv.first ? fmt::format("{}", fmt::join(ran, " + "))
                           : fmt::format("launch variant {} (timed at step {})", v, lv.first);
      copy = false;
    }
    profile_.push_back({std::move(name), n ? n->name() : std::string(),
                        copy ? "copy"
                        : n  ? n->op()
                             : std::string(),
                        ms[i]});
  }
  return profile_;
}

}  // namespace kiln::rt
