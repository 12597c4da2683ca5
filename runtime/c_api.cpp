// The C API (include/kiln/kiln.h) over runtime/engine.h: every entry point
// catches everything and turns it into a status plus the thread's last-error
// text.
#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "ir/error.h"
#include "kiln/kiln.h"
#include "runtime/cuda_driver.h"
#include "runtime/engine.h"
#include "runtime/gpu_executor.h"
#include "runtime/log.h"
#include "runtime/version.h"

struct kiln_engine {
  std::shared_ptr<const kiln::rt::Engine> engine;
};
struct kiln_context {
  kiln::rt::Context context;
  std::vector<kiln_profile_entry> profile;  // views of context.profile()'s strings
};

namespace {

thread_local std::string last_error;

kiln_status failed(kiln_status s, const std::string& message) {
  last_error = message;
  return s;
}

// Runs `f`, mapping exceptions to statuses; `on_error` is the status a
// kiln::Error means for this call.
template <typename F>
kiln_status guard(kiln_status on_error, F&& f) {
  try {
    f();
    return KILN_OK;
  } catch (const kiln::rt::DeviceLost& e) {  // a sticky CUDA error: nothing on this GPU works any more
    return failed(KILN_ERROR_DEVICE_LOST, e.what());
  } catch (const kiln::rt::CudaError& e) {  // the GPU failed, whatever the call
    return failed(KILN_ERROR_RUNTIME, e.what());
  } catch (const kiln::rt::GpuUnavailable& e) {  // a valid plan this machine's GPU or driver cannot run
    return failed(KILN_ERROR_UNAVAILABLE, e.what());
  } catch (const kiln::Error& e) {
    return failed(on_error, e.what());
  } catch (const std::bad_alloc&) {
    return failed(KILN_ERROR_RUNTIME, "out of memory");
  } catch (const std::exception& e) {
    return failed(KILN_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return failed(KILN_ERROR_INTERNAL, "internal error: unknown exception");
  }
}

#define KILN_REQUIRE(p)                                                           \
  do {                                                                            \
    if (!(p)) return failed(KILN_ERROR_INVALID_ARGUMENT, #p " must not be null"); \
  } while (0)

bool backend_from(kiln_backend b, kiln::rt::Backend* out) {
  switch (b) {
    case KILN_BACKEND_AUTO:
      *out = kiln::rt::Backend::Auto;
      return true;
    case KILN_BACKEND_CPU:
      *out = kiln::rt::Backend::Cpu;
      return true;
    case KILN_BACKEND_GPU:
      *out = kiln::rt::Backend::Gpu;
      return true;
    case KILN_BACKEND_MAX_ENUM:
      break;  // not a backend
  }
  return false;
}

template <typename Load>
kiln_status create_on(kiln_backend backend, int device, kiln_engine** engine, Load&& load) {
  KILN_REQUIRE(engine);
  *engine = nullptr;
  kiln::rt::Backend b;
  if (!backend_from(backend, &b)) return failed(KILN_ERROR_INVALID_ARGUMENT, "unknown backend");
  if (device < -1)
    return failed(KILN_ERROR_INVALID_ARGUMENT, fmt::format("device {} is not a CUDA device ordinal", device));
  std::shared_ptr<const kiln::rt::Engine> e;
  // A plan that loads but cannot run on the requested GPU (no driver, wrong
  // arch, driver too old) is KILN_ERROR_UNAVAILABLE (rt::GpuUnavailable).
  kiln_status s = guard(KILN_ERROR_INVALID_PLAN, [&] { e = load(b, device); });
  if (s != KILN_OK) return s;
  *engine = new kiln_engine{std::move(e)};
  return KILN_OK;
}

kiln_status create_from_file(const char* path, kiln_backend backend, int device, kiln_engine** engine) {
  KILN_REQUIRE(path);
  return create_on(backend, device, engine,
                   [&](kiln::rt::Backend b, int dev) { return kiln::rt::Engine::load_file(path, b, dev); });
}

kiln_status create_from_memory(const void* data, size_t size, kiln_backend backend, int device, kiln_engine** engine) {
  KILN_REQUIRE(data || size == 0);
  return create_on(backend, device, engine, [&](kiln::rt::Backend b, int dev) {
    return kiln::rt::Engine::load(static_cast<const uint8_t*>(data), size, "plan in memory", b, dev);
  });
}

kiln_status describe(const std::vector<kiln::rt::TensorDesc>& ds, int index, kiln_tensor_info* info, const char* kind) {
  if (index < 0 || size_t(index) >= ds.size())
    return failed(KILN_ERROR_NOT_FOUND,
                  fmt::format("{} index {} is out of range (the model has {})", kind, index, ds.size()));
  const kiln::rt::TensorDesc& d = ds[size_t(index)];
  info->name = d.name.c_str();
  info->dtype = static_cast<kiln_dtype>(d.type.dtype);
  info->rank = d.type.rank();
  info->shape = d.api_shape.data();  // -1 for a symbolic dim
  return KILN_OK;
}

kiln_status type_from(kiln_dtype dtype, const int64_t* shape, int rank, kiln::TensorType* out) {
  if (int(dtype) < 0 || int(dtype) >= kiln::kNumDTypes)
    return failed(KILN_ERROR_INVALID_ARGUMENT, fmt::format("dtype {} is not a kiln_dtype", int(dtype)));
  if (static_cast<kiln::DType>(dtype) == kiln::DType::String)  // no kiln_dtype; plans never hold strings
    return failed(KILN_ERROR_INVALID_ARGUMENT,
                  "string tensors cannot be bound through the runtime API: kiln runs them on its reference backend "
                  "only (kiln run --backend ref, kiln conformance)");
  if (rank < 0 || (rank > 0 && !shape))
    return failed(KILN_ERROR_INVALID_ARGUMENT, "shape must not be null when rank > 0 (and rank >= 0)");
  out->dtype = static_cast<kiln::DType>(dtype);
  out->shape.assign(shape, shape + rank);
  return KILN_OK;
}

kiln_status memory_check(kiln_memory memory) {
  if (memory == KILN_MEMORY_HOST || memory == KILN_MEMORY_DEVICE) return KILN_OK;
  return failed(KILN_ERROR_INVALID_ARGUMENT, fmt::format("memory {} is not a kiln_memory", int(memory)));
}

// Writes `shape` into dims[0..capacity) and its rank into *rank; a shape
// longer than `capacity` is INVALID_ARGUMENT with *rank still set (so a
// caller can size its buffer).
kiln_status write_shape(const kiln::Shape& shape, int64_t* dims, int capacity, int* rank) {
  *rank = int(shape.size());
  if (capacity < 0 || (capacity > 0 && !dims))
    return failed(KILN_ERROR_INVALID_ARGUMENT, "dims must not be null when capacity > 0 (and capacity >= 0)");
  if (shape.size() > size_t(capacity))
    return failed(KILN_ERROR_INVALID_ARGUMENT,
                  fmt::format("the shape has rank {}, dims holds {}", shape.size(), capacity));
  for (size_t i = 0; i < shape.size(); ++i) dims[i] = shape[i];
  return KILN_OK;
}

// Binding errors: a name the model lacks is NOT_FOUND, the rest INVALID_ARGUMENT.
kiln_status bind_status() {
  return last_error.rfind("the model has no ", 0) == 0 ? KILN_ERROR_NOT_FOUND : KILN_ERROR_INVALID_ARGUMENT;
}

}  // namespace

extern "C" {

const char* kiln_version(void) { return kiln::kKilnVersion; }

const char* kiln_status_message(kiln_status status) {
  switch (status) {
    case KILN_OK:
      return "ok";
    case KILN_ERROR_INVALID_ARGUMENT:
      return "invalid argument";
    case KILN_ERROR_NOT_FOUND:
      return "not found";
    case KILN_ERROR_INVALID_PLAN:
      return "invalid plan";
    case KILN_ERROR_UNAVAILABLE:
      return "backend unavailable";
    case KILN_ERROR_RUNTIME:
      return "runtime error";
    case KILN_ERROR_INTERNAL:
      return "internal error";
    case KILN_ERROR_DEVICE_LOST:
      return "GPU unusable (sticky CUDA error)";
    case KILN_STATUS_MAX_ENUM:
      break;  // not a status
  }
  return "unknown status";
}

const char* kiln_last_error(void) { return last_error.c_str(); }

const char* kiln_dtype_name(kiln_dtype dtype) {
  if (int(dtype) < 0 || int(dtype) >= kiln::kNumDTypes) return "?";
  return kiln::dtype_name(static_cast<kiln::DType>(dtype)).data();
}

size_t kiln_dtype_size(kiln_dtype dtype) {
  if (int(dtype) < 0 || int(dtype) >= kiln::kNumDTypes) return 0;
  return kiln::dtype_size(static_cast<kiln::DType>(dtype));
}

kiln_status kiln_engine_create_from_file(const char* path, kiln_backend backend, kiln_engine** engine) {
  return create_from_file(path, backend, -1, engine);
}

kiln_status kiln_engine_create_from_memory(const void* data, size_t size, kiln_backend backend, kiln_engine** engine) {
  return create_from_memory(data, size, backend, -1, engine);
}

kiln_status kiln_engine_create_from_file_on_device(const char* path, kiln_backend backend, int device,
                                                   kiln_engine** engine) {
  return create_from_file(path, backend, device, engine);
}

kiln_status kiln_engine_create_from_memory_on_device(const void* data, size_t size, kiln_backend backend, int device,
                                                     kiln_engine** engine) {
  return create_from_memory(data, size, backend, device, engine);
}

void kiln_engine_destroy(kiln_engine* engine) { delete engine; }

kiln_status kiln_engine_backend(const kiln_engine* engine, kiln_backend* backend) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(backend);
  *backend = engine->engine->on_gpu() ? KILN_BACKEND_GPU : KILN_BACKEND_CPU;
  return KILN_OK;
}

kiln_status kiln_engine_device(const kiln_engine* engine, int* device) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(device);
  // GpuEngine::device() is the ordinal the engine was created on (cuDeviceGet's handle for it).
  *device = engine->engine->on_gpu() ? engine->engine->gpu()->device() : -1;
  return KILN_OK;
}

kiln_status kiln_engine_info(const kiln_engine* engine, const char** text) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(text);
  *text = engine->engine->info().c_str();
  return KILN_OK;
}

kiln_status kiln_engine_num_inputs(const kiln_engine* engine, int* count) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(count);
  *count = int(engine->engine->inputs().size());
  return KILN_OK;
}

kiln_status kiln_engine_num_outputs(const kiln_engine* engine, int* count) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(count);
  *count = int(engine->engine->outputs().size());
  return KILN_OK;
}

kiln_status kiln_engine_input(const kiln_engine* engine, int index, kiln_tensor_info* info) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(info);
  return describe(engine->engine->inputs(), index, info, "input");
}

kiln_status kiln_engine_output(const kiln_engine* engine, int index, kiln_tensor_info* info) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(info);
  return describe(engine->engine->outputs(), index, info, "output");
}

kiln_status kiln_engine_input_index(const kiln_engine* engine, const char* name, int* index) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(name);
  KILN_REQUIRE(index);
  return guard(KILN_ERROR_NOT_FOUND, [&] { *index = int(engine->engine->input_index(name)); });
}

kiln_status kiln_engine_output_index(const kiln_engine* engine, const char* name, int* index) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(name);
  KILN_REQUIRE(index);
  return guard(KILN_ERROR_NOT_FOUND, [&] { *index = int(engine->engine->output_index(name)); });
}

kiln_status kiln_engine_target(const kiln_engine* engine, const char** target) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(target);
  *target = engine->engine->plan().meta.target.c_str();
  return KILN_OK;
}

kiln_status kiln_engine_precision(const kiln_engine* engine, const char** precision) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(precision);
  *precision = engine->engine->plan().meta.precision.c_str();
  return KILN_OK;
}

kiln_status kiln_engine_num_profiles(const kiln_engine* engine, int* count) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(count);
  *count = int(engine->engine->plan().shapes.profiles.size());
  return KILN_OK;
}

kiln_status kiln_engine_profile_shape(const kiln_engine* engine, int profile, const char* input,
                                      kiln_profile_bound bound, int64_t* dims, int capacity, int* rank) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(input);
  KILN_REQUIRE(rank);
  if (bound != KILN_PROFILE_MIN && bound != KILN_PROFILE_OPT && bound != KILN_PROFILE_MAX)
    return failed(KILN_ERROR_INVALID_ARGUMENT, fmt::format("bound {} is not a kiln_profile_bound", int(bound)));
  const kiln::plan::ShapeProfiles& sp = engine->engine->plan().shapes;
  if (profile < 0 || size_t(profile) >= sp.profiles.size())
    return failed(KILN_ERROR_NOT_FOUND,
                  fmt::format("profile {} is out of range (the plan has {})", profile, sp.profiles.size()));
  kiln::Shape shape;
  kiln_status s = guard(KILN_ERROR_NOT_FOUND, [&] {
    const kiln::rt::TensorDesc& d = engine->engine->inputs()[engine->engine->input_index(input)];
    shape = d.type.shape;  // a static input: its own shape in every profile
    for (const kiln::plan::InputProfile& ip : sp.profiles[size_t(profile)].inputs)
      if (ip.input == d.name) shape = bound == KILN_PROFILE_MIN ? ip.min : bound == KILN_PROFILE_OPT ? ip.opt : ip.max;
  });
  if (s != KILN_OK) return s;
  return write_shape(shape, dims, capacity, rank);
}

kiln_status kiln_context_create(kiln_engine* engine, kiln_context** context) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(context);
  *context = nullptr;
  return guard(KILN_ERROR_RUNTIME, [&] { *context = new kiln_context{kiln::rt::Context(engine->engine), {}}; });
}

void kiln_context_destroy(kiln_context* context) { delete context; }

kiln_status kiln_context_set_input_shape(kiln_context* context, const char* name, const int64_t* dims, int rank) {
  KILN_REQUIRE(context);
  KILN_REQUIRE(name);
  if (rank < 0 || (rank > 0 && !dims))
    return failed(KILN_ERROR_INVALID_ARGUMENT, "dims must not be null when rank > 0 (and rank >= 0)");
  kiln_status s = guard(KILN_ERROR_INVALID_ARGUMENT,
                        [&] { context->context.set_input_shape(name, kiln::Shape(dims, dims + rank)); });
  return s == KILN_ERROR_INVALID_ARGUMENT ? bind_status() : s;
}

kiln_status kiln_context_input_shape(const kiln_context* context, const char* name, int64_t* dims, int capacity,
                                     int* rank) {
  KILN_REQUIRE(context);
  KILN_REQUIRE(name);
  KILN_REQUIRE(rank);
  kiln::Shape shape;
  kiln_status s = guard(KILN_ERROR_INVALID_ARGUMENT, [&] { shape = context->context.input_shape(name); });
  if (s != KILN_OK) return s == KILN_ERROR_INVALID_ARGUMENT ? bind_status() : s;
  return write_shape(shape, dims, capacity, rank);
}

kiln_status kiln_context_output_shape(const kiln_context* context, const char* name, int64_t* dims, int capacity,
                                      int* rank) {
  KILN_REQUIRE(context);
  KILN_REQUIRE(name);
  KILN_REQUIRE(rank);
  kiln::Shape shape;
  kiln_status s = guard(KILN_ERROR_INVALID_ARGUMENT, [&] { shape = context->context.output_shape(name); });
  if (s != KILN_OK) return s == KILN_ERROR_INVALID_ARGUMENT ? bind_status() : s;
  return write_shape(shape, dims, capacity, rank);
}

kiln_status kiln_context_bind_input(kiln_context* context, const char* name, const void* data, kiln_dtype dtype,
                                    const int64_t* shape, int rank, kiln_memory memory) {
  KILN_REQUIRE(context);
  KILN_REQUIRE(name);
  kiln::TensorType t;
  if (kiln_status s = type_from(dtype, shape, rank, &t); s != KILN_OK) return s;
  if (kiln_status s = memory_check(memory); s != KILN_OK) return s;
  kiln_status s = guard(KILN_ERROR_INVALID_ARGUMENT,
                        [&] { context->context.bind_input(name, data, t, memory == KILN_MEMORY_DEVICE); });
  return s == KILN_ERROR_INVALID_ARGUMENT ? bind_status() : s;
}

kiln_status kiln_context_bind_output(kiln_context* context, const char* name, void* data, kiln_dtype dtype,
                                     const int64_t* shape, int rank, kiln_memory memory) {
  KILN_REQUIRE(context);
  KILN_REQUIRE(name);
  kiln::TensorType t;
  if (kiln_status s = type_from(dtype, shape, rank, &t); s != KILN_OK) return s;
  if (kiln_status s = memory_check(memory); s != KILN_OK) return s;
  kiln_status s = guard(KILN_ERROR_INVALID_ARGUMENT,
                        [&] { context->context.bind_output(name, data, t, memory == KILN_MEMORY_DEVICE); });
  return s == KILN_ERROR_INVALID_ARGUMENT ? bind_status() : s;
}

kiln_status kiln_context_bind_in_place(kiln_context* context, const char* input, const char* output, void* data,
                                       kiln_dtype dtype, const int64_t* capacity, int rank, kiln_memory memory) {
  KILN_REQUIRE(context);
  KILN_REQUIRE(input);
  KILN_REQUIRE(output);
  kiln::TensorType t;
  if (kiln_status s = type_from(dtype, capacity, rank, &t); s != KILN_OK) return s;
  if (kiln_status s = memory_check(memory); s != KILN_OK) return s;
  kiln_status s = guard(KILN_ERROR_INVALID_ARGUMENT,
                        [&] { context->context.bind_in_place(input, output, data, t, memory == KILN_MEMORY_DEVICE); });
  return s == KILN_ERROR_INVALID_ARGUMENT ? bind_status() : s;
}

kiln_status kiln_context_bind_input_device(kiln_context* context, const char* name, uint64_t ptr) {
  KILN_REQUIRE(context);
  KILN_REQUIRE(name);
  kiln_status s = guard(KILN_ERROR_INVALID_ARGUMENT, [&] { context->context.bind_input_device(name, ptr); });
  return s == KILN_ERROR_INVALID_ARGUMENT ? bind_status() : s;
}

kiln_status kiln_context_bind_output_device(kiln_context* context, const char* name, uint64_t ptr) {
  KILN_REQUIRE(context);
  KILN_REQUIRE(name);
  kiln_status s = guard(KILN_ERROR_INVALID_ARGUMENT, [&] { context->context.bind_output_device(name, ptr); });
  return s == KILN_ERROR_INVALID_ARGUMENT ? bind_status() : s;
}

kiln_status kiln_context_run(kiln_context* context) {
  KILN_REQUIRE(context);
  return guard(KILN_ERROR_RUNTIME, [&] { context->context.run(); });
}

kiln_status kiln_context_enqueue(kiln_context* context, void* stream) {
  KILN_REQUIRE(context);
  return guard(KILN_ERROR_RUNTIME, [&] { context->context.enqueue(stream); });
}

kiln_status kiln_context_submit(kiln_context* context) {
  KILN_REQUIRE(context);
  return guard(KILN_ERROR_RUNTIME, [&] { context->context.submit(); });
}

kiln_status kiln_context_wait(kiln_context* context) {
  KILN_REQUIRE(context);
  return guard(KILN_ERROR_RUNTIME, [&] { context->context.wait(); });
}

kiln_status kiln_context_last_timing(const kiln_context* context, kiln_run_timing* timing) {
  KILN_REQUIRE(context);
  KILN_REQUIRE(timing);
  return guard(KILN_ERROR_UNAVAILABLE, [&] {
    kiln::rt::RunTiming t = context->context.last_timing();
    *timing = {t.upload_ms, t.compute_ms, t.download_ms};
  });
}

kiln_status kiln_context_profile(kiln_context* context, const kiln_profile_entry** entries, int* count) {
  KILN_REQUIRE(context);
  KILN_REQUIRE(entries);
  KILN_REQUIRE(count);
  *entries = nullptr;
  *count = 0;
  return guard(KILN_ERROR_RUNTIME, [&] {
    context->profile.clear();
    for (const kiln::rt::ProfileEntry& p : context->context.profile())
      context->profile.push_back({p.name.c_str(), p.node.c_str(), p.op.c_str(), p.ms});
    *entries = context->profile.data();
    *count = int(context->profile.size());
  });
}

kiln_status kiln_engine_num_data_dependent_sizes(const kiln_engine* engine, int* count) {
  KILN_REQUIRE(engine);
  KILN_REQUIRE(count);
  const kiln::plan::BoundedSizes* b = engine->engine->bounded_sizes();
  *count = b ? int(b->counts.size()) : 0;
  return KILN_OK;
}

kiln_status kiln_context_data_dependent_size(const kiln_context* context, int index, kiln_data_dependent_size* size) {
  KILN_REQUIRE(context);
  KILN_REQUIRE(size);
  const kiln::plan::BoundedSizes* b = context->context.engine().bounded_sizes();
  const int n = b ? int(b->counts.size()) : 0;
  if (index < 0 || index >= n)
    return failed(KILN_ERROR_NOT_FOUND,
                  fmt::format("data-dependent size {} is out of range (the plan has {})", index, n));
  const kiln::plan::SizeCount& c = b->counts[size_t(index)];
  std::optional<int64_t> value;
  kiln_status s = guard(KILN_ERROR_NOT_FOUND, [&] { value = context->context.data_dependent_size(size_t(index)); });
  if (s != KILN_OK) return s;
  if (!value)
    return failed(KILN_ERROR_UNAVAILABLE,
                  fmt::format("data-dependent size {} ({}, decided by {}) is not known: no run since the inputs were "
                              "bound, or the last run failed",
                              index, c.symbol, c.node));
  *size = {c.symbol.c_str(), c.node.c_str(), c.bound, *value};
  return KILN_OK;
}

kiln_status kiln_context_launch_variants(const kiln_context* context, int* variants, int capacity, int* count) {
  KILN_REQUIRE(context);
  KILN_REQUIRE(count);
  std::vector<int> run;
  kiln_status s = guard(KILN_ERROR_RUNTIME, [&] { run = context->context.launch_variants_run(); });
  if (s != KILN_OK) return s;
  *count = int(run.size());
  if (run.empty() || !variants) return KILN_OK;  // NULL variants: the count only
  if (capacity < int(run.size()))
    return failed(KILN_ERROR_INVALID_ARGUMENT,
                  fmt::format("{} launch variants ran; capacity {} is too small", run.size(), capacity));
  std::copy(run.begin(), run.end(), variants);
  return KILN_OK;
}

void kiln_set_log_callback(kiln_log_callback callback, void* user_data) {
  if (!callback) return kiln::rt::set_log_callback(nullptr);
  kiln::rt::set_log_callback([callback, user_data](kiln::rt::LogLevel level, const std::string& message) {
    callback(static_cast<kiln_log_level>(level), message.c_str(), user_data);
  });
}

}  // extern "C"
