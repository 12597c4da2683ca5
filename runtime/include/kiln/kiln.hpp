// Header-only C++ wrapper over the kiln C API (kiln.h): RAII handles, errors
// as kiln::runtime_error exceptions (thrown in the caller's code, never
// across the C boundary). See docs/embedding.md.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln {

class runtime_error : public std::runtime_error {
 public:
  runtime_error(kiln_status s, const std::string& what) : std::runtime_error(what), status_(s) {}
  kiln_status status() const { return status_; }

 private:
  kiln_status status_;
};

inline void check(kiln_status s) {
  if (s != KILN_OK) throw runtime_error(s, std::string(kiln_status_message(s)) + ": " + kiln_last_error());
}

struct TensorInfo {
  std::string name;
  kiln_dtype dtype;
  std::vector<int64_t> shape;  // -1 for a dynamic dim (a plan with shape profiles)
  bool dynamic() const {
    for (int64_t d : shape)
      if (d < 0) return true;
    return false;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t nbytes() const { return size_t(numel()) * kiln_dtype_size(dtype); }
};

struct ProfileEntry {
  std::string name, node, op;
  float ms;
};

// A size the data decided in a GPU plan computed at the bounds
// (kiln_context_data_dependent_size): its symbol, the node that decides it,
// its range [0, bound] and its value in the last run.
struct DataDependentSize {
  std::string symbol, node;
  int64_t bound = 0, value = 0;
};

// The runtime's messages (kiln_set_log_callback); an empty function removes
// the callback. Process-wide, like the C call.
inline void set_log_callback(std::function<void(kiln_log_level, const std::string&)> fn) {
  static std::function<void(kiln_log_level, const std::string&)> current;
  if (!fn) {
    kiln_set_log_callback(nullptr, nullptr);  // returns once the old callback cannot run
    current = nullptr;
    return;
  }
  kiln_set_log_callback(nullptr, nullptr);
  current = std::move(fn);
  kiln_set_log_callback(
      [](kiln_log_level l, const char* m, void* f) {
        (*static_cast<std::function<void(kiln_log_level, const std::string&)>*>(f))(l, m);
      },
      &current);
}

// Immutable and shareable: copies share the same engine.
class Engine {
 public:
  // `device`: a CUDA device ordinal; -1: the current CUDA context's device, else 0.
  static Engine from_file(const std::string& path, kiln_backend backend = KILN_BACKEND_AUTO, int device = -1) {
    kiln_engine* e = nullptr;
    check(kiln_engine_create_from_file_on_device(path.c_str(), backend, device, &e));
    return Engine(e);
  }
  static Engine from_memory(const void* data, size_t size, kiln_backend backend = KILN_BACKEND_AUTO, int device = -1) {
    kiln_engine* e = nullptr;
    check(kiln_engine_create_from_memory_on_device(data, size, backend, device, &e));
    return Engine(e);
  }

  kiln_backend backend() const {
    kiln_backend b;
    check(kiln_engine_backend(get(), &b));
    return b;
  }
  // The CUDA device ordinal of a GPU engine; -1 on the CPU.
  int device() const {
    int d = -1;
    check(kiln_engine_device(get(), &d));
    return d;
  }
  std::string info() const {
    const char* t = nullptr;
    check(kiln_engine_info(get(), &t));
    return t;
  }
  std::vector<TensorInfo> inputs() const { return list(kiln_engine_num_inputs, kiln_engine_input); }
  std::vector<TensorInfo> outputs() const { return list(kiln_engine_num_outputs, kiln_engine_output); }
  // Position of the input/output `name` in inputs()/outputs(); throws (not found) when there is none.
  int input_index(const std::string& name) const {
    int i = 0;
    check(kiln_engine_input_index(get(), name.c_str(), &i));
    return i;
  }
  int output_index(const std::string& name) const {
    int i = 0;
    check(kiln_engine_output_index(get(), name.c_str(), &i));
    return i;
  }
  // The plan's target ("sm_90") and precision ("fp32", "fp16", "bf16").
  std::string target() const {
    const char* t = nullptr;
    check(kiln_engine_target(get(), &t));
    return t;
  }
  std::string precision() const {
    const char* p = nullptr;
    check(kiln_engine_precision(get(), &p));
    return p;
  }
  // Sizes the data decides in a GPU plan computed at the bounds (0 for any other plan).
  int num_data_dependent_sizes() const {
    int n = 0;
    check(kiln_engine_num_data_dependent_sizes(get(), &n));
    return n;
  }
  // Shape profiles (0 for a static plan) and one input's min/opt/max in one.
  int num_profiles() const {
    int n = 0;
    check(kiln_engine_num_profiles(get(), &n));
    return n;
  }
  std::vector<int64_t> profile_shape(int profile, const std::string& input, kiln_profile_bound bound) const {
    return read_shape([&](int64_t* d, int cap, int* r) {
      return kiln_engine_profile_shape(get(), profile, input.c_str(), bound, d, cap, r);
    });
  }
  kiln_engine* get() const { return e_.get(); }

  // Calls `f(dims, capacity, rank)` with room for the rank it reports.
  template <typename F>
  static std::vector<int64_t> read_shape(F&& f) {
    std::vector<int64_t> dims(8);
    int rank = 0;
    kiln_status s = f(dims.data(), int(dims.size()), &rank);
    if (s == KILN_ERROR_INVALID_ARGUMENT && rank > int(dims.size())) {
      dims.resize(size_t(rank));
      s = f(dims.data(), int(dims.size()), &rank);
    }
    check(s);
    dims.resize(size_t(rank));
    return dims;
  }

 private:
  explicit Engine(kiln_engine* e) : e_(e, kiln_engine_destroy) {}
  template <typename Count, typename At>
  std::vector<TensorInfo> list(Count count, At at) const {
    int n = 0;
    check(count(get(), &n));
    std::vector<TensorInfo> r;
    for (int i = 0; i < n; ++i) {
      kiln_tensor_info t;
      check(at(get(), i, &t));
      r.push_back({t.name, t.dtype, std::vector<int64_t>(t.shape, t.shape + t.rank)});
    }
    return r;
  }
  std::shared_ptr<kiln_engine> e_;
};

// One per thread or stream; keeps its engine alive.
class Context {
 public:
  explicit Context(const Engine& e) : engine_(e) {
    kiln_context* c = nullptr;
    check(kiln_context_create(e.get(), &c));
    c_.reset(c);
  }
  // A plan with shape profiles: the shape of a dynamic input for the next
  // runs (binding it with its shape does the same), and the shapes they give.
  void set_input_shape(const std::string& name, const std::vector<int64_t>& shape) {
    check(kiln_context_set_input_shape(c_.get(), name.c_str(), shape.data(), int(shape.size())));
  }
  std::vector<int64_t> input_shape(const std::string& name) const {
    return Engine::read_shape(
        [&](int64_t* d, int cap, int* r) { return kiln_context_input_shape(c_.get(), name.c_str(), d, cap, r); });
  }
  std::vector<int64_t> output_shape(const std::string& name) const {
    return Engine::read_shape(
        [&](int64_t* d, int cap, int* r) { return kiln_context_output_shape(c_.get(), name.c_str(), d, cap, r); });
  }
  void bind_input(const std::string& name, const void* data, kiln_dtype dtype, const std::vector<int64_t>& shape,
                  kiln_memory memory = KILN_MEMORY_HOST) {
    check(kiln_context_bind_input(c_.get(), name.c_str(), data, dtype, shape.data(), int(shape.size()), memory));
  }
  void bind_output(const std::string& name, void* data, kiln_dtype dtype, const std::vector<int64_t>& shape,
                   kiln_memory memory = KILN_MEMORY_HOST) {
    check(kiln_context_bind_output(c_.get(), name.c_str(), data, dtype, shape.data(), int(shape.size()), memory));
  }
  // One buffer of shape `capacity` as input `input` and output `output` (a
  // KV cache in place; see kiln_context_bind_in_place).
  void bind_in_place(const std::string& input, const std::string& output, void* data, kiln_dtype dtype,
                     const std::vector<int64_t>& capacity, kiln_memory memory = KILN_MEMORY_HOST) {
    check(kiln_context_bind_in_place(c_.get(), input.c_str(), output.c_str(), data, dtype, capacity.data(),
                                     int(capacity.size()), memory));
  }
  // Zero-copy device buffers (GPU engines; see kiln_context_bind_input_device).
  void bind_input_device(const std::string& name, uint64_t ptr) {
    check(kiln_context_bind_input_device(c_.get(), name.c_str(), ptr));
  }
  void bind_output_device(const std::string& name, uint64_t ptr) {
    check(kiln_context_bind_output_device(c_.get(), name.c_str(), ptr));
  }
  void run() { check(kiln_context_run(c_.get())); }
  void enqueue(void* stream) { check(kiln_context_enqueue(c_.get(), stream)); }
  // Pipelined runs (at most 2 in flight; see kiln_context_submit).
  void submit() { check(kiln_context_submit(c_.get())); }
  void wait() { check(kiln_context_wait(c_.get())); }
  // GPU event times of the last synchronous run (throws on a CPU engine).
  kiln_run_timing last_timing() const {
    kiln_run_timing t{};
    check(kiln_context_last_timing(c_.get(), &t));
    return t;
  }
  // One more run, timing each kernel (GPU) or node (CPU): see kiln_context_profile.
  std::vector<ProfileEntry> profile() {
    const kiln_profile_entry* e = nullptr;
    int n = 0;
    check(kiln_context_profile(c_.get(), &e, &n));
    std::vector<ProfileEntry> r;
    for (int i = 0; i < n; ++i) r.push_back({e[i].name, e[i].node, e[i].op, e[i].ms});
    return r;
  }
  // Every data-dependent size of the last run (kiln::runtime_error with
  // KILN_ERROR_UNAVAILABLE before a run or after a failed one).
  std::vector<DataDependentSize> data_dependent_sizes() const {
    int n = 0;
    check(kiln_engine_num_data_dependent_sizes(engine_.get(), &n));
    std::vector<DataDependentSize> r;
    for (int i = 0; i < n; ++i) {
      kiln_data_dependent_size d{};
      check(kiln_context_data_dependent_size(c_.get(), i, &d));
      r.push_back({d.symbol, d.node, d.bound, d.value});
    }
    return r;
  }
  // The launch variants the last run issued (indices as `kiln inspect` lists them).
  std::vector<int> launch_variants() const {
    int n = 0;
    check(kiln_context_launch_variants(c_.get(), nullptr, 0, &n));
    std::vector<int> r(static_cast<size_t>(n));
    if (n) check(kiln_context_launch_variants(c_.get(), r.data(), n, &n));
    return r;
  }
  kiln_context* get() const { return c_.get(); }

 private:
  struct Deleter {
    void operator()(kiln_context* c) const { kiln_context_destroy(c); }
  };
  Engine engine_;  // its engine (held: the C context holds it too)
  std::unique_ptr<kiln_context, Deleter> c_;
};

}  // namespace kiln
