#include "runtime/gpu_executor.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "ir/error.h"
#include "runtime/log.h"
#include "runtime/plan_control_run.h"

namespace kiln::rt {

using detail::alloc;

CUdeviceptr GpuContext::address(const Slot& sl, const plan::BufferRef& b) const {
  switch (b.kind) {
    case plan::BufferKind::Arena:
      return arena_ + b.offset;
    case plan::BufferKind::Input:
      return sl.bound_in.at(b.index) + b.offset;
    case plan::BufferKind::Output:
      return sl.bound_out.at(b.index) + b.offset;
    case plan::BufferKind::Weight:
      return e_.weights_ + e_.plan_.weights.at(b.index).offset + b.offset;
    case plan::BufferKind::None:
      return 0;  // an absent optional operand: the kernel gets a null pointer
  }
  return 0;
}

GpuContext::GpuContext(const GpuEngine& e) : e_(e), in_bytes_(e.input_bytes_), out_bytes_(e.output_bytes_) {
  const CudaDriver& d = e.d_;
  e.check_usable();
  CtxScope scope(d, e.ctx_);
  try {
    e.guarded([&] {
      arena_ = alloc(d, e.plan_.memory.arena_bytes, "allocating the activation arena");
      d.check(d.cuStreamCreate(&upload_stream_, kStreamNonBlocking), "cuStreamCreate (uploads)");
      d.check(d.cuStreamCreate(&download_stream_, kStreamNonBlocking), "cuStreamCreate (downloads)");
      d.check(d.cuStreamCreate(&stream_, kStreamNonBlocking), "cuStreamCreate");
      d.check(d.cuEventCreate(&enqueued_, kEventDisableTiming), "cuEventCreate");
      zero_once();
      add_slot();
    });
  } catch (...) {
    release();
    throw;
  }
}

// The arena's zeroed region (plan::Memory::zeroed_offset: the tile counters
// of folded split-K kernels) is zeroed once, here: its kernels leave it zero,
// so every later run finds it so. cuMemAlloc does not zero memory. The host
// waits for the copy, so any stream a run is later enqueued on sees it.
void GpuContext::zero_once() {
  const plan::Memory& m = e_.plan_.memory;
  if (m.zeroed_bytes == 0) return;
  const CudaDriver& d = e_.d_;
  const std::vector<uint8_t> zeros(m.zeroed_bytes, 0);
  d.check(d.cuMemcpyHtoDAsync(arena_ + m.zeroed_offset, zeros.data(), zeros.size(), upload_stream_),
          "zeroing the split-K tile counters");
  d.check(d.cuStreamSynchronize(upload_stream_), "zeroing the split-K tile counters");
}

void GpuContext::add_slot() {
  auto owned = std::make_unique<Slot>();
  Slot& sl = *owned;
  try {
    fill_slot(sl);
  } catch (...) {
    free_slot(sl);
    throw;
  }
  slots_.push_back(std::move(owned));
}

void GpuContext::fill_slot(Slot& sl) {
  const CudaDriver& d = e_.d_;
  for (size_t n : e_.input_bytes_) sl.inputs.push_back(alloc(d, n, "allocating an input buffer"));
  for (size_t n : e_.output_bytes_) sl.outputs.push_back(alloc(d, n, "allocating an output buffer"));
  // Pinned staging for host bindings: DMA-able, so uploads and downloads
  // are truly asynchronous to the host.
  auto pinned = [&](size_t n, const char* what) {
    void* p = nullptr;
    if (n) d.check(d.cuMemHostAlloc(&p, n, kMemHostAllocPortable), what);
    return p;
  };
  for (size_t n : e_.input_bytes_) sl.staged_in.push_back(pinned(n, "allocating pinned staging for an input"));
  for (size_t n : e_.output_bytes_) sl.staged_out.push_back(pinned(n, "allocating pinned staging for an output"));
  for (CUevent* ev : {&sl.up_begin, &sl.up_end, &sl.graph_begin, &sl.graph_end})
    d.check(d.cuEventCreate(ev, kEventDefault), "cuEventCreate");
  for (size_t i = 0; i < e_.output_bytes_.size(); ++i) {
    sl.downloaded.push_back(nullptr);
    d.check(d.cuEventCreate(&sl.downloaded.back(), kEventDefault), "cuEventCreate");
  }
  // The launch list, captured once per slot; every address is fixed until
  // zero-copy bindings change (rebind), so the graph is replayed as is.
  sl.bound_in = sl.inputs;
  sl.bound_out = sl.outputs;
  // A plan with shape profiles captures one graph per shape on first use
  // (select_graph); its tables hold addresses only, shared by those graphs.
  if (!e_.host_driven() && !dynamic()) {
    capture_graph(sl);
  } else if (!e_.host_driven()) {
    upload_tables(sl);  // no capture to upload them before
  } else {
    upload_tables(sl);  // before the segments' captures: a synchronous copy
    capture_segments(sl);
  }
}

CUdeviceptr GpuContext::upload_tables(Slot& sl) {
  if (!e_.table_words_) return 0;
  const CudaDriver& d = e_.d_;
  std::vector<uint64_t> words(e_.table_words_);
  for (const auto& [step, at] : e_.table_at_) {
    const plan::Step& s = *step;
    uint64_t* t = words.data() + at;
    for (size_t j = 0; j < s.args.size(); ++j) {
      t[j] = address(sl, s.args[j]);
      t[s.args.size() + j] = static_cast<uint64_t>(s.args[j].elements);
    }
  }
  CUdeviceptr fresh = alloc(d, words.size() * 8, "allocating the kernels' pointer tables");
  CUresult r = d.cuMemcpyHtoD(fresh, words.data(), words.size() * 8);
  if (r) d.cuMemFree(fresh);
  d.check(r, "uploading the kernels' pointer tables");
  return std::exchange(sl.tables, fresh);
}

void GpuContext::capture_graph(Slot& sl) {
  const CudaDriver& d = e_.d_;
  // Before the capture: a synchronous copy. A dynamic plan's graphs share
  // the slot's tables (uploaded with its bindings).
  const CUdeviceptr old_tables = dynamic() ? 0 : upload_tables(sl);
  d.check(d.cuStreamBeginCapture(stream_, kCaptureModeThreadLocal), "cuStreamBeginCapture");
  try {
    issue_steps(sl, stream_, nullptr);
  } catch (...) {
    // End the capture before anything else: while this thread captures, the
    // driver refuses the frees and synchronization of the cleanup
    // (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and the stream stays capturing.
    CUgraph partial = nullptr;
    if (d.cuStreamEndCapture(stream_, &partial) == 0 && partial) d.cuGraphDestroy(partial);
    if (old_tables) d.cuMemFree(old_tables);
    throw;
  }
  CUgraph graph = nullptr;
  const CUresult ended = d.cuStreamEndCapture(stream_, &graph);
  // After the capture (a free is refused during one); waits for a graph of
  // the old bindings that may still read them.
  if (old_tables) d.cuMemFree(old_tables);
  d.check(ended, "cuStreamEndCapture");
  CUresult r = d.cuGraphInstantiateWithFlags(&sl.exec, graph, 0);
  d.cuGraphDestroy(graph);
  d.check(r, "cuGraphInstantiate");
}

void GpuContext::issue_steps(const Slot& sl, CUstream stream, CUevent* after) {
  // Errors say which: a capture (every run's graph) or launches issued
  // directly (a profiling run, a plan with control flow).
  const std::string doing = after || e_.host_driven() ? "launching" : "capturing";
  if (!dynamic() || e_.host_driven()) return issue_list(sl, e_.plan_.steps, stream, after, doing);
  // A plan with shape profiles: the launch list at the current shape, with
  // the launch variants chosen for it (set_shape). Per-step events stay per
  // step of the plan's own list: a variant's time goes to the first step it
  // replaces, and the others get none.
  const CudaDriver& d = e_.d_;
  size_t plan_step = 0;
  for (size_t k = 0; k < active_.size(); ++k) {
    const plan::ActiveStep& a = active_[k];
    issue_step(sl, *a.step, stream, doing);
    if (!after) continue;
    if (a.variant < 0) {
      d.check(d.cuEventRecord(after[plan_step++], stream), "cuEventRecord");
    } else if (k + 1 == active_.size() || active_[k + 1].variant != a.variant) {
      for (uint32_t n = 0; n < e_.plan_.launch_variants[a.variant].count; ++n)
        d.check(d.cuEventRecord(after[plan_step++], stream), "cuEventRecord");
    }
  }
}

void GpuContext::run_graph(const Slot& sl, CUstream stream) {
  if (sl.exec) e_.d_.check(e_.d_.cuGraphLaunch(sl.exec, stream), "cuGraphLaunch");
  else issue_steps(sl, stream, nullptr);  // host-driven control flow: no graph
}

void GpuContext::issue_list(const Slot& sl, const std::vector<plan::Step>& steps, CUstream stream, CUevent* after,
                            const std::string& doing, size_t begin, size_t end) {
  const CudaDriver& d = e_.d_;
  for (size_t i = begin; i < std::min(end, steps.size()); ++i) {
    const plan::Step& s = steps[i];
    if (auto seg = sl.segments.find(&s); !after && !capturing_segments_ && seg != sl.segments.end()) {
      d.check(d.cuGraphLaunch(seg->second.exec, stream), "cuGraphLaunch (a segment between control-flow steps)");
      i += seg->second.steps - 1;
    } else if (s.kind == plan::StepKind::Control) {
      run_control_step(sl, e_.plan_.control.at(s.kernel), stream, doing);
    } else if (s.kind == plan::StepKind::Copy) {
      if (size_t n = copy_bytes(s))
        d.check(d.cuMemcpyDtoDAsync(address(sl, s.args[0]), address(sl, s.args[1]), n, stream),
                (doing + " a copy").c_str());
    } else {
      issue_step(sl, s, stream, doing);
    }
    if (after) d.check(d.cuEventRecord(after[i], stream), "cuEventRecord");
  }
}

void GpuContext::issue_step(const Slot& sl, const plan::Step& s, CUstream stream, const std::string& doing) {
  // A KV cache bound in place: its append runs in the concat's place.
  if (auto in_place = replaced_.find(&s); in_place != replaced_.end())
    return issue_step(sl, *in_place->second, stream, doing);
  const CudaDriver& d = e_.d_;
  if (s.kind == plan::StepKind::Copy) {
    if (size_t n = copy_bytes(s))
      d.check(d.cuMemcpyDtoDAsync(address(sl, s.args[0]), address(sl, s.args[1]), n, stream),
              (doing + " a copy").c_str());
    return;
  }
  std::vector<CUdeviceptr> ptrs;
  if (s.param_table) ptrs.push_back(sl.tables + 8 * e_.table_at_.at(&s));  // the buffers are in its table
  else
    for (const plan::BufferRef& b : s.args) ptrs.push_back(address(sl, b));
  std::vector<void*> params;
  for (CUdeviceptr& p : ptrs) params.push_back(&p);
  // A shape-generic kernel: its grid at the current shape, and the
  // symbols' values as its last (by-value) parameter.
  plan::Dim3 grid = s.grid;
  auto generic = generic_.find(&s);
  if (generic != generic_.end()) {
    grid = generic->second.grid;
    params.push_back(&generic->second.syms);
  }
  if (grid.x && grid.y && grid.z)  // a generic launch's output may be empty at this shape
    d.check(d.cuLaunchKernel(e_.functions_[s.kernel], grid.x, grid.y, grid.z, s.block.x, s.block.y, s.block.z,
                             s.shared_bytes, stream, params.data(), nullptr),
            (doing + " kernel " + e_.plan_.kernels[s.kernel].name).c_str());
}

// The host-driven run of one control-flow node (runtime/plan_control_run.h)
// on `stream`: a condition is read with a device-to-host copy into host
// memory that returns once the stream got there.
void GpuContext::run_control_step(const Slot& sl, const plan::ControlFlow& c, CUstream stream,
                                  const std::string& doing) {
  struct Device : plan::ControlDevice {
    GpuContext& ctx;
    const CudaDriver& d;
    const Slot& sl;
    CUstream stream;
    const std::string& doing;
    Device(GpuContext& x, const CudaDriver& dr, const Slot& s, CUstream st, const std::string& dg)
        : ctx(x), d(dr), sl(s), stream(st), doing(dg) {}
    uint64_t address(const plan::BufferRef& b) override { return ctx.address(sl, b); }
    void copy(uint64_t dst, uint64_t src, size_t n) override {
      d.check(d.cuMemcpyDtoDAsync(dst, src, n, stream), (doing + " a control-flow copy").c_str());
    }
    void read(void* host, uint64_t src, size_t n) override {
      d.check(d.cuMemcpyDtoHAsync(host, src, n, stream), "reading a control-flow condition");
      d.check(d.cuStreamSynchronize(stream), "waiting for a control-flow condition");
    }
    void write(uint64_t dst, const void* host, size_t n) override {
      d.check(d.cuMemcpyHtoDAsync(dst, host, n, stream), "writing a loop's iteration number");
    }
    void run_steps(const std::vector<plan::Step>& steps) override { ctx.issue_list(sl, steps, stream, nullptr, doing); }
  } dev(*this, e_.d_, sl, stream, doing);
  plan::run_control(e_.plan_, c, dev, "plan");
}

void GpuContext::rebind(Slot& sl, const std::vector<DeviceBinding>& in, const std::vector<DeviceBinding>& out) {
  std::vector<CUdeviceptr> want_in = sl.inputs, want_out = sl.outputs;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].zero_copy) want_in[i] = reinterpret_cast<CUdeviceptr>(in[i].ptr);
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].zero_copy) want_out[i] = reinterpret_cast<CUdeviceptr>(out[i].ptr);
  if (want_in == sl.bound_in && want_out == sl.bound_out) return;
  // A new graph with the new addresses (an exec still running is freed by
  // the driver once it is done: cuGraphExecDestroy).
  const CudaDriver& d = e_.d_;
  if (dynamic()) drop_graphs(sl);  // every shape's graph has the old addresses
  else if (sl.exec) d.check(d.cuGraphExecDestroy(sl.exec), "cuGraphExecDestroy");
  sl.exec = nullptr;
  sl.bound_in = std::move(want_in);
  sl.bound_out = std::move(want_out);
  if (!e_.host_driven() && !dynamic()) {
    capture_graph(sl);
  } else {
    drop_segments(sl);  // they hold the old addresses
    const CUdeviceptr old_tables = upload_tables(sl);
    if (e_.host_driven()) capture_segments(sl);  // a dynamic plan's graphs are captured per shape (select_graph)
    if (old_tables) {
      // Launches of an earlier run may still read the old tables.
      d.check(d.cuStreamSynchronize(stream_), "waiting for the launches that read the old pointer tables");
      d.cuMemFree(old_tables);
    }
  }
}

namespace {
bool any_zero_copy(const std::vector<DeviceBinding>& bs) {
  for (const DeviceBinding& b : bs)
    if (b.zero_copy) return true;
  return false;
}
}  // namespace

GpuContext::~GpuContext() { release(); }

void GpuContext::free_slot(Slot& sl) {
  const CudaDriver& d = e_.d_;
  if (!sl.graphs.empty()) {
    for (auto& [shape, exec] : sl.graphs) d.cuGraphExecDestroy(exec);
    sl.graphs.clear();
  } else if (sl.exec) {
    d.cuGraphExecDestroy(sl.exec);
  }
  sl.exec = nullptr;
  drop_segments(sl);
  for (CUevent ev : {sl.up_begin, sl.up_end, sl.graph_begin, sl.graph_end})
    if (ev) d.cuEventDestroy(ev);
  for (CUevent ev : sl.downloaded)
    if (ev) d.cuEventDestroy(ev);
  for (void* p : sl.staged_in)
    if (p) d.cuMemFreeHost(p);
  for (void* p : sl.staged_out)
    if (p) d.cuMemFreeHost(p);
  for (CUdeviceptr p : sl.inputs) d.cuMemFree(p);
  for (CUdeviceptr p : sl.outputs) d.cuMemFree(p);
  if (sl.tables) d.cuMemFree(sl.tables);
}

void GpuContext::release() noexcept {
  const CudaDriver& d = e_.d_;
  CtxScope scope(d, e_.ctx_, std::nothrow);
  // Nothing may still be reading or writing what is freed: the context's
  // streams and the caller's stream of the last enqueue().
  for (CUstream s : {upload_stream_, stream_, download_stream_})
    if (s) d.cuStreamSynchronize(s);
  if (enqueued_) {
    d.cuEventSynchronize(enqueued_);
    d.cuEventDestroy(enqueued_);
    enqueued_ = nullptr;
  }
  for (auto& sl : slots_) free_slot(*sl);
  slots_.clear();
  queue_.clear();
  for (CUevent ev : profile_events_) d.cuEventDestroy(ev);
  profile_events_.clear();
  for (CUstream s : {upload_stream_, stream_, download_stream_})
    if (s) d.cuStreamDestroy(s);
  upload_stream_ = stream_ = download_stream_ = nullptr;
  if (arena_) d.cuMemFree(arena_);
  arena_ = 0;
}

void GpuContext::submit(const std::vector<DeviceBinding>& in, const std::vector<DeviceBinding>& out) {
  e_.check_usable();
  CtxScope scope(e_.d_, e_.ctx_);
  e_.guarded([&] { submit_unguarded(in, out); });
}

void GpuContext::submit_unguarded(const std::vector<DeviceBinding>& in, const std::vector<DeviceBinding>& out) {
  const CudaDriver& d = e_.d_;
  if (queue_.size() >= kMaxInFlight)
    fail("{} runs are in flight (the most a context pipelines): wait for one first", queue_.size());
  // After a failure, copies may still be reading staging buffers the host is
  // about to overwrite: let the streams drain first (their errors were
  // reported by the call that failed).
  if (!settled_) {
    for (CUstream s : {upload_stream_, stream_, download_stream_}) d.cuStreamSynchronize(s);
    settled_ = true;
  }
  // Zero-copy buffers are the caller's single copy: a second run in flight
  // would write the outputs the first one's caller has yet to read.
  bool zero_copy = any_zero_copy(in) || any_zero_copy(out);
  if (zero_copy && !queue_.empty())
    fail("zero-copy device bindings allow one run in flight ({} submitted); wait for it first", queue_.size());
  size_t k = 0;
  while (k < slots_.size() && std::find(queue_.begin(), queue_.end(), k) != queue_.end()) ++k;
  if (k == slots_.size()) add_slot();
  Slot& sl = *slots_[k];
  settled_ = false;
  rebind(sl, in, out);
  if (dynamic()) select_graph(sl);
  sl.out_bytes = out_bytes_;
  // After an enqueue() on the caller's stream: its graph may still read slot
  // 0's inputs and use the arena. Once the upload and compute streams wait
  // for it, their own order covers later submissions.
  if (enqueue_pending_) {
    d.check(d.cuStreamWaitEvent(upload_stream_, enqueued_, 0), "cuStreamWaitEvent");
    d.check(d.cuStreamWaitEvent(stream_, enqueued_, 0), "cuStreamWaitEvent");
    enqueue_pending_ = false;
  }
  // Uploads on the upload stream; the host fills staging buffer i+1 while
  // buffer i is on its way.
  d.check(d.cuEventRecord(sl.up_begin, upload_stream_), "cuEventRecord");
  for (size_t i = 0; i < in.size(); ++i) {
    size_t n = in_bytes_[i];
    if (!n || in[i].zero_copy) continue;
    if (in[i].device) {
      d.check(d.cuMemcpyDtoDAsync(sl.inputs[i], reinterpret_cast<CUdeviceptr>(in[i].ptr), n, upload_stream_),
              "copying an input");
    } else {
      std::memcpy(sl.staged_in[i], in[i].ptr, n);
      d.check(d.cuMemcpyHtoDAsync(sl.inputs[i], sl.staged_in[i], n, upload_stream_), "uploading an input");
    }
  }
  d.check(d.cuEventRecord(sl.up_end, upload_stream_), "cuEventRecord");
  // The graph on the compute stream once the inputs are there (other
  // submissions' graphs are ordered by the stream: they share the arena).
  d.check(d.cuStreamWaitEvent(stream_, sl.up_end, 0), "cuStreamWaitEvent");
  d.check(d.cuEventRecord(sl.graph_begin, stream_), "cuEventRecord");
  run_graph(sl, stream_);
  d.check(d.cuEventRecord(sl.graph_end, stream_), "cuEventRecord");
  // Downloads on the download stream once the graph is done, one event each.
  d.check(d.cuStreamWaitEvent(download_stream_, sl.graph_end, 0), "cuStreamWaitEvent");
  for (size_t i = 0; i < out.size(); ++i) {
    size_t n = out_bytes_[i];
    if (out[i].zero_copy) {
      // written in place by the graph
    } else if (n && out[i].device)
      d.check(d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(out[i].ptr), sl.outputs[i], n, download_stream_),
              "copying an output");
    else if (n)
      d.check(d.cuMemcpyDtoHAsync(sl.staged_out[i], sl.outputs[i], n, download_stream_), "downloading an output");
    d.check(d.cuEventRecord(sl.downloaded[i], download_stream_), "cuEventRecord");
  }
  sl.out = out;
  queue_.push_back(k);
  settled_ = true;
}

GpuRunTiming GpuContext::wait() {
  if (queue_.empty()) fail("no run is in flight: nothing to wait for");
  e_.check_usable();
  CtxScope scope(e_.d_, e_.ctx_);
  return e_.guarded([&] { return wait_unguarded(); });
}

GpuRunTiming GpuContext::wait_unguarded() {
  const CudaDriver& d = e_.d_;
  Slot& sl = *slots_[queue_.front()];
  queue_.erase(queue_.begin());  // waited for, even if waiting fails
  try {
    // The host copies each output out of staging as it arrives.
    for (size_t i = 0; i < sl.out.size(); ++i) {
      d.check(d.cuEventSynchronize(sl.downloaded[i]), "waiting for an output");
      size_t n = sl.out_bytes[i];
      if (n && !sl.out[i].device) std::memcpy(sl.out[i].ptr, sl.staged_out[i], n);
    }
    d.check(d.cuEventSynchronize(sl.graph_end), "waiting for the graph");
    GpuRunTiming t;
    d.check(d.cuEventElapsedTime(&t.upload_ms, sl.up_begin, sl.up_end), "cuEventElapsedTime (uploads)");
    d.check(d.cuEventElapsedTime(&t.compute_ms, sl.graph_begin, sl.graph_end), "cuEventElapsedTime (graph)");
    if (!sl.downloaded.empty())
      d.check(d.cuEventElapsedTime(&t.download_ms, sl.graph_end, sl.downloaded.back()),
              "cuEventElapsedTime (downloads)");
    return t;
  } catch (...) {
    settled_ = false;
    throw;
  }
}

GpuRunTiming GpuContext::run(const std::vector<DeviceBinding>& in, const std::vector<DeviceBinding>& out) {
  if (!queue_.empty()) fail("run: {} submitted run(s) in flight; wait for them first", queue_.size());
  submit(in, out);
  return wait();
}

void GpuContext::enqueue(const std::vector<DeviceBinding>& in, const std::vector<DeviceBinding>& out, CUstream stream) {
  const CudaDriver& d = e_.d_;
  if (!queue_.empty())
    fail("enqueue: {} submitted run(s) in flight on this context; wait for them first", queue_.size());
  e_.check_usable();
  CtxScope scope(d, e_.ctx_);
  e_.guarded([&] { enqueue_on(in, out, stream); });
}

void GpuContext::enqueue_on(const std::vector<DeviceBinding>& in, const std::vector<DeviceBinding>& out,
                            CUstream stream) {
  const CudaDriver& d = e_.d_;
  Slot& sl = *slots_[0];
  CUstream s = stream ? stream : stream_;
  // Slot 0's buffers and the arena are shared with earlier work: the
  // previous enqueue (perhaps on another stream) must be done with them.
  // Runs and submissions before this call were waited for by the host.
  d.check(d.cuStreamWaitEvent(s, enqueued_, 0), "cuStreamWaitEvent");
  rebind(sl, in, out);
  if (dynamic()) select_graph(sl);
  for (size_t i = 0; i < in.size(); ++i) {
    size_t n = in_bytes_[i];
    if (!n || in[i].zero_copy) continue;
    if (in[i].device)
      d.check(d.cuMemcpyDtoDAsync(sl.inputs[i], reinterpret_cast<CUdeviceptr>(in[i].ptr), n, s), "copying an input");
    else d.check(d.cuMemcpyHtoDAsync(sl.inputs[i], in[i].ptr, n, s), "copying an input");
  }
  run_graph(sl, s);
  for (size_t i = 0; i < out.size(); ++i) {
    size_t n = out_bytes_[i];
    if (!n || out[i].zero_copy) continue;
    if (out[i].device)
      d.check(d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(out[i].ptr), sl.outputs[i], n, s), "copying an output");
    else d.check(d.cuMemcpyDtoHAsync(out[i].ptr, sl.outputs[i], n, s), "copying an output");
  }
  // The next enqueue, run/submit and the context's destruction wait for this.
  d.check(d.cuEventRecord(enqueued_, s), "cuEventRecord");
  enqueue_pending_ = true;
  if (!stream) d.check(d.cuStreamSynchronize(s), "cuStreamSynchronize");
}

}  // namespace kiln::rt
