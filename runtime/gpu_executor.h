// The GPU path of the runtime: a plan's kernels and launch list on a CUDA
// device through the driver API (runtime/cuda_driver.h).
//
// GpuEngine (immutable, shared by contexts): its device's primary context (the
// device the caller chose, else the current context's, else device 0), one
// module per kernel (its CUBIN when built for this GPU's arch, else its PTX,
// which the driver JIT-compiles), the weights uploaded once into one device
// allocation.
// GpuContext (one per thread/stream): the activation arena (one allocation of
// the memory plan's size), and per run in flight (a "slot": one, a second
// made on first need by submit()) a device buffer per graph input and
// output, pinned staging (cuMemHostAlloc) per input and output, events, and
// the whole launch list captured once as a CUDA Graph on the compute stream.
// A plan with control flow (if/loop/scan) cannot be one graph: at a
// control-flow step the host reads the condition or trip count (a small
// device-to-host copy that waits for the stream) and runs the chosen
// region's launch list (runtime/plan_control_run.h). The straight-line runs
// of launches and copies between control-flow steps -- in the plan's list
// and in every region's -- are captured per slot as CUDA Graphs ("segments",
// runtime/gpu_segments.cpp) and replayed where the list reaches them.
// submit() copies host inputs into staging and uploads them on the upload
// stream; the compute stream waits for them (an event) and replays the
// slot's graph between two timing events; the download stream waits for the
// graph's end and downloads the outputs into staging, one event per output.
// wait() copies each output out of staging as its event completes. So the
// host's copy of one buffer overlaps the DMA of the next, and with two runs
// in flight one's transfers overlap the other's graph (the upload stream
// never waits for a graph). run() is submit() + wait(). enqueue(stream)
// copies the bound inputs in, replays the graph and copies the outputs out,
// all on the caller's stream (host buffers are copied directly, unstaged:
// staging needs the host to copy out of the pinned buffer after the
// download, which an asynchronous call cannot wait for).
//
// enqueue(stream) is ordered against the context's own streams with an
// event: the caller's stream waits for the previous enqueue, and the next
// run/submit (upload and compute streams) waits for this one, since both
// use slot 0's buffers and the arena; destruction waits for it too.
//
// Errors: every driver call is checked; a sticky error (cuda_driver.h)
// marks the device lost for the process and every later call on the engine
// or any context of it throws DeviceLost with the first error's text.
// Destructors never throw. A capture is always ended (and its graph
// destroyed) before anything else is done after an error inside it: the
// driver refuses frees and synchronization while a thread captures.
//
// A kernel with more buffers than the parameter space holds takes one pointer
// to a table of their addresses (codegen/param_table.h): each slot has one
// device allocation holding every such step's table, built from the slot's
// bindings and uploaded before each capture of its graph (a synchronous copy
// may not be made during one); new bindings (rebind) get new tables, and the
// old ones are freed once captured anew (cuMemFree waits for the work that
// may still read them).
//
// A plan with shape profiles (docs/dynamic_shapes.md): buffers and the arena
// are allocated for the largest shapes; set_shape() gives the symbols' values
// of the next runs, from which the shape-generic launches get their grids
// and `kiln_syms` parameter and the copies their sizes. Each slot captures
// one CUDA Graph per distinct shape on first use and keeps at most
// kMaxCachedGraphs, the least recently used destroyed first
// (runtime/gpu_shape_graphs.cpp).
//
// A KV cache bound in place (Context::bind_in_place, runtime/plan_in_place.h):
// the past and the present are one zero-copy buffer; set_in_place() makes
// the pair's append kernel launch in place of its concat (only the new
// positions written), and the capacity symbol in the shape's bindings gives
// the readers of the present its row stride.
//
// Tested against a fake driver as strict as the hardware (docs/testing.md).
#pragma once
#include <list>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/symbolic_dim.h"
#include "runtime/cuda_driver.h"
#include "runtime/plan_launch_variants.h"
#include "runtime/plan_format.h"

namespace kiln::rt {

class GpuEngine {
 public:
  // `input_bytes` / `output_bytes`: the graph inputs' and outputs' sizes.
  // `device`: the CUDA device ordinal; -1: default_device().
  GpuEngine(const CudaDriver& d, const plan::Plan& p, std::vector<size_t> input_bytes, std::vector<size_t> output_bytes,
            const std::string& what, int device = -1);
  ~GpuEngine();
  GpuEngine(const GpuEngine&) = delete;
  GpuEngine& operator=(const GpuEngine&) = delete;

  const std::string& description() const { return description_; }
  // A plan with control flow (if/loop/scan) runs host-driven: the host reads
  // each condition; the launches between control-flow steps replay as graphs.
  bool host_driven() const { return !plan_.control.empty(); }
  int device() const { return dev_; }
  // Throws DeviceLost when a sticky error made the device unusable.
  void check_usable() const;
  // Runs `f`; a sticky CudaError from it marks the device lost and becomes DeviceLost.
  template <typename F>
  auto guarded(F&& f) const -> decltype(f()) {
    check_usable();
    try {
      return f();
    } catch (const DeviceLost&) {
      throw;
    } catch (const CudaError& err) {
      if (!is_sticky_error(err.code())) throw;
      lose(err);
    }
  }

 private:
  [[noreturn]] void lose(const CudaError& err) const;
  friend class GpuContext;
  void release();  // frees what the constructor got so far
  const CudaDriver& d_;
  const plan::Plan& plan_;
  std::vector<size_t> input_bytes_, output_bytes_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::vector<CUmodule> modules_;
  std::vector<CUfunction> functions_;  // per plan kernel
  CUdeviceptr weights_ = 0;
  // Steps whose kernel takes a pointer table (plan::Step::param_table), the
  // control-flow regions' included: where its table starts in a slot's
  // tables, in u64 words, and the words of all of them.
  std::unordered_map<const plan::Step*, size_t> table_at_;
  size_t table_words_ = 0;
  std::string description_;
};

namespace detail {
// cuMemAlloc of `n` bytes (at least 1: a zero-byte allocation is an error in
// the driver), `what` naming it in the error.
CUdeviceptr alloc(const CudaDriver& d, size_t n, const char* what);
}  // namespace detail

// Makes the engine's CUDA context current for a scope. The nothrow form
// (for destructors) makes it current if it can and pops only what it pushed.
class CtxScope {
 public:
  CtxScope(const CudaDriver& d, CUcontext c);
  CtxScope(const CudaDriver& d, CUcontext c, std::nothrow_t) noexcept;
  ~CtxScope();

 private:
  const CudaDriver& d_;
  bool pushed_ = false;
};

struct DeviceBinding {
  void* ptr = nullptr;
  bool device = false;     // a CUdeviceptr (else host memory)
  bool zero_copy = false;  // (device) the graph uses it in place of the slot's buffer: no copy
};

// CUDA-event times of the last run(): the uploads on the copy stream, the
// graph on the compute stream, the downloads (from the graph's end).
struct GpuRunTiming {
  float upload_ms = 0, compute_ms = 0, download_ms = 0;
};

class GpuContext {
 public:
  // Pipelined submissions in flight at most (each has its own buffers).
  static constexpr size_t kMaxInFlight = 2;

  // CUDA Graphs kept per slot for a plan with shape profiles (one per shape).
  static constexpr size_t kMaxCachedGraphs = 8;

  explicit GpuContext(const GpuEngine& e);
  ~GpuContext();

  // A plan with shape profiles: the symbols' values and the inputs' and
  // outputs' bytes of the runs that follow (checked by the caller, runtime/
  // input_shapes.h). Throws kiln::Error when the plan has no profiles.
  void set_shape(const SymbolBindings& b, std::vector<size_t> input_bytes, std::vector<size_t> output_bytes);
  // Per-shape graphs: captured so far, destroyed by the bound, held now (all slots).
  struct GraphCacheStats {
    size_t captures = 0, evictions = 0, cached = 0;
  };
  GraphCacheStats graph_cache_stats() const;
  // What the runs at the current shape launch (runs since the last
  // set_shape): per step of the plan's own launch list, the launch variant
  // that replaces it (index into plan::Plan::launch_variants; -1: the step's
  // own launch, always so for a static or host-driven plan), and for a step,
  // the one launched in its place (a KV cache's append bound in place of its
  // concat; else the step itself). Context::profile names what ran by them.
  std::vector<int> variant_per_step() const;
  const plan::Step& launched_for(const plan::Step& s) const;
  // A plan with KV cache pairs (plan::Plan::in_place_appends): per pair,
  // whether it is bound in place for the runs that follow (its append then
  // launches in place of its concat). A change drops the captured graphs.
  void set_in_place(const std::vector<bool>& bound);
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  // Asynchronous on `stream`.
  void enqueue(const std::vector<DeviceBinding>& inputs, const std::vector<DeviceBinding>& outputs, CUstream stream);
  // Synchronous, staged through pinned memory on the upload, compute and
  // download streams (above); returns the event times. Refused while
  // submissions are in flight.
  GpuRunTiming run(const std::vector<DeviceBinding>& inputs, const std::vector<DeviceBinding>& outputs);
  // Pipelined runs: submit() copies the host inputs into pinned staging (the
  // caller may refill them on return) and enqueues upload, graph and download
  // without waiting; wait() waits for the oldest submission and copies its
  // outputs into the buffers bound at its submit(). Each in-flight submission
  // has its own device inputs/outputs, staging and captured graph (a second
  // set is made on first need), so one submission's uploads and downloads
  // run on their streams while another's graph runs on the compute stream.
  void submit(const std::vector<DeviceBinding>& inputs, const std::vector<DeviceBinding>& outputs);
  GpuRunTiming wait();
  size_t in_flight() const { return queue_.size(); }
  // One synchronous run on the compute stream with the launch list issued
  // un-captured and a timing event after each step: per plan step, its
  // milliseconds. Refused while submissions are in flight.
  std::vector<float> profile(const std::vector<DeviceBinding>& inputs, const std::vector<DeviceBinding>& outputs);

 private:
  struct Slot {
    std::vector<CUdeviceptr> inputs, outputs;
    std::vector<void*> staged_in, staged_out;  // pinned host memory (null for empty tensors)
    // Uploads begin/end (upload stream), graph begin/end (compute), one per output download (download).
    CUevent up_begin = nullptr, up_end = nullptr, graph_begin = nullptr, graph_end = nullptr;
    std::vector<CUevent> downloaded;
    CUgraphExec exec = nullptr;
    // The addresses the graph was captured with for each input and output:
    // the slot's own buffers, or the caller's zero-copy ones.
    std::vector<CUdeviceptr> bound_in, bound_out;
    std::vector<DeviceBinding> out;  // where wait() copies the outputs
    CUdeviceptr tables = 0;          // the pointer tables of its graph's bindings (0: none needed)
    // A plan with shape profiles: its graph per shape, most recently used
    // first (exec is the current one's), and its submission's sizes.
    std::list<std::pair<SymbolBindings, CUgraphExec>> graphs;
    std::vector<size_t> out_bytes;
    // A host-driven plan's segments: by first step, the steps it covers and its graph exec.
    struct Segment {
      size_t steps = 0;
      CUgraphExec exec = nullptr;
    };
    std::unordered_map<const plan::Step*, Segment> segments;
  };
  // A shape-generic step's grid and symbols at the current shape.
  struct GenericArgs {
    plan::Dim3 grid;
    plan::LaunchSymbols syms;
  };
  bool dynamic() const { return !e_.plan_.shapes.empty(); }
  // Dynamic plans: makes sl.exec the graph of the current shape, captured
  // on first use (evicting the least recently used past the bound).
  void select_graph(Slot& sl);
  void drop_graphs(Slot& sl);  // destroys every graph of the slot (new bindings)
  // Bytes a copy moves: the recorded size, clamped to the input's or
  // output's size at the current shape.
  size_t copy_bytes(const plan::Step& s) const;
  void zero_once();  // the arena's zeroed region (plan::Memory::zeroed_offset), at creation
  void add_slot();   // buffers, staging, events and the captured launch list
  void fill_slot(Slot& s);
  void capture_graph(Slot& s);  // the launch list as the slot's graph exec, with s.bound_in/out
  // The slot's graph on `stream`, or for a host-driven plan its launch list.
  void run_graph(const Slot& s, CUstream stream);
  // A launch list (the plan's or a control-flow region's) onto `stream`,
  // steps [begin, end); a captured segment is replayed unless `after` is given
  // (per-step events) or segments are being captured.
  void issue_list(const Slot& s, const std::vector<plan::Step>& steps, CUstream stream, CUevent* after,
                  const std::string& doing, size_t begin = 0, size_t end = SIZE_MAX);
  // One kernel launch or copy (not a control step).
  void issue_step(const Slot& s, const plan::Step& step, CUstream stream, const std::string& doing);
  // A host-driven plan's segments for the slot's bindings (gpu_segments.cpp);
  // its tables must be uploaded first. drop_segments destroys them.
  void capture_segments(Slot& s);
  void drop_segments(Slot& s) noexcept;
  void run_control_step(const Slot& s, const plan::ControlFlow& c, CUstream stream, const std::string& doing);
  // Uploads the slot's pointer tables for s.bound_in/out into a new
  // allocation; returns the one it replaces (0: none).
  CUdeviceptr upload_tables(Slot& s);
  // The launch list onto `stream` (capturing or not); `after` (if any) after each step.
  void issue_steps(const Slot& s, CUstream stream, CUevent* after);
  // Captures the slot's graph again when the zero-copy bindings changed its addresses.
  void rebind(Slot& s, const std::vector<DeviceBinding>& inputs, const std::vector<DeviceBinding>& outputs);
  void enqueue_on(const std::vector<DeviceBinding>& inputs, const std::vector<DeviceBinding>& outputs, CUstream stream);
  void free_slot(Slot& s);
  CUdeviceptr address(const Slot& s, const plan::BufferRef& b) const;
  void release() noexcept;
  const GpuEngine& e_;
  // The current shape (dynamic plans; static ones: the engine's sizes).
  std::optional<SymbolBindings> shape_;
  std::vector<size_t> in_bytes_, out_bytes_;
  std::unordered_map<const plan::Step*, GenericArgs> generic_;
  // The concats of pairs bound in place -> their appends (set_in_place).
  std::vector<bool> in_place_;
  std::unordered_map<const plan::Step*, const plan::Step*> replaced_;
  // A plan with shape profiles: the launch list at the current shape, with
  // the launch variants chosen for it (runtime/plan_launch_variants.h).
  std::vector<plan::ActiveStep> active_;
  GraphCacheStats graph_stats_;
  CUdeviceptr arena_ = 0;  // shared: the graphs run one at a time on the compute stream
  std::vector<std::unique_ptr<Slot>> slots_;
  bool capturing_segments_ = false;     // issue_list issues every step (capture_segments)
  std::vector<size_t> queue_;           // submitted slots, oldest first
  CUstream stream_ = nullptr;           // compute: the graphs
  CUstream upload_stream_ = nullptr;    // uploads of run()/submit()
  CUstream download_stream_ = nullptr;  // downloads of run()/submit()
  bool settled_ = true;                 // false after a submission or wait failed midway: drain the streams first
  // Recorded on the caller's stream at the end of each enqueue(): the next
  // enqueue, run/submit and destruction wait for it.
  CUevent enqueued_ = nullptr;
  bool enqueue_pending_ = false;         // recorded since the context's streams last waited for it
  std::vector<CUevent> profile_events_;  // profile(): one before the first step and one after each
  void submit_unguarded(const std::vector<DeviceBinding>& inputs, const std::vector<DeviceBinding>& outputs);
  GpuRunTiming wait_unguarded();
};

}  // namespace kiln::rt
