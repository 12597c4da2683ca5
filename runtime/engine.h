// The runtime's engine and context (what the C API in include/kiln/kiln.h
// wraps). An Engine is a loaded plan, immutable after load and shared by
// contexts on any thread; it runs on the GPU when the plan has GPU kernels
// and a CUDA driver, a device and a fitting arch are present, else on the CPU
// reference path (the plan's graph through backends/reference), and says
// which and why in info(). A Context holds one thread's or stream's bindings
// (and, on the GPU, its arena and captured CUDA Graph).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/in_place_cache.h"
#include "runtime/plan_format.h"

namespace kiln {
class ReferenceExecutor;
}

namespace kiln::rt {

enum class Backend { Auto, Cpu, Gpu };

struct TensorDesc {
  std::string name;
  TensorType type;  // may hold symbolic dims (a plan with shape profiles)
  // The shape as the C API reports it: -1 for a dim that is symbolic.
  std::vector<int64_t> api_shape;
  bool dynamic() const;
};

class GpuEngine;
class GpuContext;
struct DeviceBinding;
class InputShapes;

class Engine {
 public:
  // Throws kiln::Error: a plan that does not load, or Backend::Gpu where the
  // GPU path is impossible (the message says why). `device`: the CUDA device
  // ordinal; -1: the calling thread's current CUDA context's device, else 0.
  static std::shared_ptr<const Engine> load(const uint8_t* data, size_t size, const std::string& what, Backend backend,
                                            int device = -1);
  static std::shared_ptr<const Engine> load_file(const std::string& path, Backend backend, int device = -1);
  ~Engine();

  const std::vector<TensorDesc>& inputs() const { return inputs_; }
  const std::vector<TensorDesc>& outputs() const { return outputs_; }
  // The position of the input/output `name`; kiln::Error "the model has no
  // input named ..." (listing the names) when there is none.
  size_t input_index(const std::string& name) const;
  size_t output_index(const std::string& name) const;
  bool on_gpu() const { return gpu_ != nullptr; }
  // "CPU reference path (no CUDA driver (...))" / "GPU sm_90 (CUBIN, ...)".
  const std::string& info() const { return info_; }
  const plan::Plan& plan() const { return plan_; }
  const Graph& graph() const { return *graph_; }
  const GpuEngine* gpu() const { return gpu_.get(); }
  // A plan compiled with shape profiles (runtime/plan_profiles.h): its inputs'
  // shapes are set per context (Context::set_input_shape).
  bool dynamic() const { return !plan_.shapes.empty(); }
  // Result sizes decided at run time (a CPU plan, ir/data_dependent.h): the
  // CPU path runs the graph stage by stage; outputs are bound at their upper
  // bound and hold the run's real shape afterwards (Context::output_shape).
  bool data_dependent() const { return data_dependent_; }
  // A GPU plan computed at the bounds of its data-dependent sizes
  // (runtime/plan_bounded_sizes.h): null for any other plan. Its graph's
  // outputs are the user's (outputs(), whose data-dependent dims are
  // symbolic) followed by one count per size; runs trim the outputs.
  const plan::BoundedSizes* bounded_sizes() const {
    return plan_.bounded_sizes.empty() ? nullptr : &plan_.bounded_sizes;
  }
  // Output `i`'s shape at the bounds (what it is bound with before a run).
  const Shape& output_at_bound(size_t i) const { return graph_->outputs().at(i)->shape(); }
  // Inputs and outputs that may share one buffer (a KV cache bound in
  // place, runtime/in_place_cache.h).
  const std::vector<InPlacePair>& in_place_pairs() const { return in_place_; }

 private:
  Engine() = default;
  plan::Plan plan_;
  std::unique_ptr<Graph> graph_;
  std::vector<TensorDesc> inputs_, outputs_;
  std::unique_ptr<GpuEngine> gpu_;
  std::string info_;
  bool data_dependent_ = false;
  std::vector<InPlacePair> in_place_;
};

// GPU event times of a context's last run() (runtime/gpu_executor.h).
struct RunTiming {
  float upload_ms = 0, compute_ms = 0, download_ms = 0;
};

struct Binding {
  void* ptr = nullptr;
  bool device = false;
  bool bound = false;
  bool zero_copy = false;  // a device buffer the captured graph reads/writes in place
  Shape shape;             // as bound (checked against the shapes set, for plans with profiles)
  // One buffer of shape `capacity` bound as an input and an output of an
  // in-place pair (Context::bind_in_place): the pair's index.
  int in_place = -1;
  Shape capacity;
};

// One step of a profiled run: the kernel (GPU) or node (CPU), the graph node
// it computes and its op, and its time.
struct ProfileEntry {
  std::string name, node, op;
  float ms = 0;
};

class Context {
 public:
  explicit Context(std::shared_ptr<const Engine> e);
  ~Context();

  const Engine& engine() const { return *engine_; }
  // A plan with shape profiles: the shape of input `name` for the next runs.
  // kiln::Error naming the input, the dim and the profile's range when it is
  // outside every profile, or when it differs from the plan's fixed dims.
  void set_input_shape(const std::string& name, const Shape& shape);
  // The shape of input / output `name` for the input shapes set (a static
  // plan: its own). kiln::Error naming the input whose shape is not set yet.
  Shape input_shape(const std::string& name) const;
  Shape output_shape(const std::string& name) const;
  // Binds by name; the dtype and shape must be the engine's (else
  // kiln::Error saying both). A dynamic input bound with a shape sets it
  // (set_input_shape); an output must have the shape output_shape() gives.
  // Device memory only on a GPU engine.
  void bind_input(const std::string& name, const void* data, const TensorType& as, bool device);
  void bind_output(const std::string& name, void* data, const TensorType& as, bool device);
  // Zero-copy (GPU engines only): the kernels read the input from / write the
  // output into this device buffer directly, without copies. The first run
  // with a new set of such buffers captures the launch list again with their
  // addresses; later runs replay it. At most one run in flight.
  // A KV cache in place (runtime/in_place_cache.h): `data`, of
  // shape `capacity` (the input's shape with the appended axis at the most
  // positions it holds), is both input `input` (its first positions along
  // the axis, as many as the input's shape set) and output `output` (the
  // run writes only the positions it appends). On a GPU engine `data` is
  // device memory (`device`), 256-byte aligned, that the kernels read and
  // append to in place (zero-copy; the plan's in-place append launches in
  // place of the concat, runtime/plan_in_place.h). kiln::Error naming both
  // when the plan has no such pair, the dtype or a dim off the axis differs,
  // the memory is not the engine's kind, or the GPU plan cannot run the pair
  // in place (saying which node reads the past or present densely); a
  // buffer too short is refused at the run.
  void bind_in_place(const std::string& input, const std::string& output, void* data, const TensorType& capacity,
                     bool device);
  // Bytes the last run wrote into buffers bound in place (the appended
  // positions only).
  size_t last_in_place_bytes() const { return in_place_bytes_; }
  // CPU engines, for tests and benchmarks of the KV cache in place: bytes of
  // the past the last run copied out of buffers bound in place into tensors
  // of their own (0 unless a node besides the appending concat reads the
  // past); bytes copied to assemble the present for its consumers (0 where
  // the buffer's first positions are contiguous); and how many runs so far
  // ran a copy of the graph specialised to their shapes (0 unless the graph
  // has control flow with symbolic types).
  size_t last_past_bytes_copied() const { return past_bytes_copied_; }
  size_t last_present_bytes_copied() const { return present_bytes_copied_; }
  size_t specialised_runs() const { return specialised_runs_; }
  void bind_input_device(const std::string& name, unsigned long long ptr);
  void bind_output_device(const std::string& name, unsigned long long ptr);
  // Runs with the bound buffers (all must be bound); synchronous. On a GPU
  // engine host buffers are staged through pinned memory on a copy stream.
  void run();
  // The CUDA-event times of the last successful run() (or null-stream
  // enqueue); kiln::Error on a CPU engine or before such a run.
  RunTiming last_timing() const;
  // Pipelined runs (at most 2 in flight): submit() takes the bound inputs
  // (copied at the call: they may be refilled on return) and starts a run;
  // wait() finishes the oldest, writing its outputs into the buffers bound
  // at its submit(). On the GPU one run's transfers overlap another's
  // compute; on the CPU submit() runs at once and wait() only counts.
  void submit();
  void wait();
  size_t in_flight() const;
  // On a GPU engine: asynchronous on `stream` (a CUstream). On the CPU:
  // `stream` must be null and it runs synchronously.
  void enqueue(void* stream);
  // One more synchronous run with the bound buffers that times each step:
  // on the GPU the launch list is issued un-captured with CUDA events around
  // each kernel (the captured graph has no per-kernel times); on the CPU each
  // node of the reference executor by the wall clock. The outputs are written
  // as by run(). Valid until the next profile() or the context's end.
  const std::vector<ProfileEntry>& profile();
  // A plan computed at the bounds (Engine::bounded_sizes): the value count
  // `i` (plan::BoundedSizes::counts: intermediate results' counts too) had
  // in the last run; nullopt before a run, after a failed one and once an
  // input is bound again. kiln::Error for `i` past the plan's counts.
  std::optional<int64_t> data_dependent_size(size_t i) const;
  // The launch variants (indices into the plan's launch_variants) the last
  // run issued in place of shape-generic launches, in launch-list order;
  // none on the CPU path and before a run.
  std::vector<int> launch_variants_run() const;
  // The GPU context (null on the CPU path), for tests of its graph cache.
  const GpuContext* gpu_context() const { return gpu_.get(); }

 private:
  void check_bound() const;
  // The plan's in-place append for pair `p` (GPU plans), or null.
  const plan::InPlaceAppend* gpu_append(const InPlacePair& p) const;
  void check_device_alignment(const char* what, const std::string& name, unsigned long long ptr);
  void set_gpu_shape();  // a plan with shape profiles on the GPU: the shapes set, before a run
  // The reference executor over the plan's graph; `profile`: time each node.
  void run_on_cpu(std::vector<ProfileEntry>* profile);
  std::shared_ptr<const Engine> engine_;
  std::vector<Binding> inputs_, outputs_;
  std::unique_ptr<GpuContext> gpu_;
  bool timed_ = false;
  RunTiming timing_;
  size_t cpu_in_flight_ = 0;
  std::vector<ProfileEntry> profile_;
  std::unique_ptr<InputShapes> shapes_;  // a plan with shape profiles; null for a static plan
  // A plan with data-dependent sizes: each output's shape from the last run
  // (empty before one, and after the input shapes change).
  std::vector<std::optional<Shape>> run_shapes_;
  size_t in_place_bytes_ = 0;
  // A plan with bounded sizes: where a run's counts land (one i64 each),
  // bound as the graph's last outputs; then the outputs trimmed to them.
  std::vector<int64_t> counts_;
  std::vector<DeviceBinding> output_bindings();
  void trim_to_counts();
  size_t past_bytes_copied_ = 0, present_bytes_copied_ = 0, specialised_runs_ = 0;
  std::unique_ptr<ReferenceExecutor> cpu_executor_;  // over the plan's graph, built on the first CPU run
};

}  // namespace kiln::rt
