// Streams as the hardware has them: each created stream has a worker thread
// that runs its operations in order, after the call that issued them has
// returned (CUDA Programming Guide, "Asynchronous Concurrent Execution");
// events complete when the stream reaches them, cuStreamWaitEvent makes a
// stream wait for the event's most recent record at the time of the call
// (cuStreamWaitEvent's documentation), and nothing else orders two streams.
// Each stream keeps a vector clock so the race detector (memory.cpp) sees
// exactly the order the program asked for, whatever the threads happened to
// do. The fake clock that timing tests read is per stream too: an operation
// advances its stream's clock by its cost, a wait moves the waiting stream's
// clock to the event's, so event times do not depend on thread scheduling.
#include <algorithm>
#include <cstring>
#include <vector>

#include "fake.h"

namespace fake {

namespace {

double cost_ms(const Op& op) {
  if (op.kind == Op::Copy) return double(op.bytes) / 1e7;  // 10 GB/s
  double blocks = double(op.grid[0]) * op.grid[1] * op.grid[2];
  if (blocks <= 0) blocks = 1;
  return st().inverse_blocks ? 1.0 / blocks : 0.005 + 0.001 * blocks;
}

// Runs `op` as stream `s`'s next operation; the lock is held, and let go of
// while a kernel runs.
void execute(const Op& op, Stream& s, Lock& lock) {
  join(s.vc, op.host);
  if (s.vc.size() <= size_t(s.id)) s.vc.resize(size_t(s.id) + 1, 0);
  ++s.vc[size_t(s.id)];
  switch (op.kind) {
    case Op::Copy: {
      if (st().sticky) return;  // a dead context runs nothing
      access(op.src, op.bytes, false, false, s, "copy source");
      access(op.dst, op.bytes, true, false, s, "copy destination");
      s.time_ms += cost_ms(op);
      const void* from =
          op.snapshot ? static_cast<const void*>(op.snapshot->data()) : reinterpret_cast<const void*>(op.src);
      std::memmove(reinterpret_cast<void*>(op.dst), from, op.bytes);
      return;
    }
    case Op::Launch: {
      if (st().sticky) return;
      kernel_accesses(op, s);  // memory.cpp: its buffers, directly or through a pointer table
      s.time_ms += cost_ms(op);
      auto* launch = st().launch;
      if (!launch) return;  // timing only (no simulator in this process)
      // The test's callback reads as many arguments as its arg_count says
      // (the buffers the plan binds); a kernel whose image declares fewer
      // (one of a node's kernels taking a prefix of its bindings) never got
      // the rest from the driver: they reach the callback as null.
      std::vector<CUdeviceptr> args = op.args;
      if (st().arg_count)
        args.resize(std::max<size_t>(args.size(), size_t(std::max(0, st().arg_count(op.fn->name.c_str())))), 0);
      lock.unlock();
      CUresult r = launch(op.fn->name.c_str(), op.grid, op.block, op.shared, args.data());
      lock.lock();
      if (r) {
        if (st().rules.sticky && is_sticky(r)) poison(r);
        else if (!st().async_error) st().async_error = r;
      }
      return;
    }
    case Op::Record:
      op.event->completed = std::max(op.event->completed, op.gen);
      op.event->time_ms = s.time_ms;
      op.event->vc = s.vc;
      st().cv.notify_all();
      return;
    case Op::Wait:
      st().cv.wait(lock, [&] { return op.event->completed >= op.gen || st().sticky; });
      s.time_ms = std::max(s.time_ms, op.event->time_ms);
      join(s.vc, op.event->vc);
      return;
    case Op::Graph:
      for (const Op& g : op.exec->g.ops) {
        Op c = g;
        c.host = op.host;
        execute(c, s, lock);
      }
      return;
  }
}

void work(Stream* s) {
  Lock lock(st().mu);
  for (;;) {
    st().cv.wait(lock, [&] { return (s->stop && s->queue.empty()) || (!s->queue.empty() && !st().paused); });
    if (s->queue.empty()) return;
    execute(s->queue.front(), *s, lock);  // deque: push_back elsewhere keeps the front's address
    s->queue.pop_front();
    st().cv.notify_all();
  }
}

Stream* make_stream(Lock&) {
  auto* s = new Stream;
  if (!st().free_stream_ids.empty()) {
    s->id = st().free_stream_ids.back();
    st().free_stream_ids.pop_back();
  } else {
    s->id = st().next_stream_id++;
  }
  // A reused id continues its clock: every access of the old stream is
  // ordered before the host's present (the old stream was drained).
  s->vc = st().host;
  if (s->vc.size() <= size_t(s->id)) s->vc.resize(size_t(s->id) + 1, 0);
  st().streams.insert(s);
  if (st().rules.async) s->worker = std::thread(work, s);
  return s;
}

}  // namespace

Stream* stream_of(void* p) {
  if (p) return static_cast<Stream*>(p);
  if (!st().null_stream) {
    auto* s = new Stream;
    s->id = 0;
    st().streams.insert(s);
    if (st().rules.async) s->worker = std::thread(work, s);
    st().null_stream = s;
  }
  return st().null_stream;
}

CUresult submit(Op op, Stream* s, Lock& lock) {
  if (s->capture) {
    if (s->capture->invalidated) return kCaptureInvalidated;
    st().captured_launches += op.kind == Op::Launch;
    s->capture->graph.ops.push_back(std::move(op));
    return 0;
  }
  st().direct_launches += op.kind == Op::Launch;
  op.host = st().host;
  if (!st().rules.async) {
    // The old, kind fake: everything runs at the call.
    execute(op, *s, lock);
    return 0;
  }
  s->queue.push_back(std::move(op));
  st().cv.notify_all();
  return 0;
}

void drain(Stream* s, Lock& lock) {
  st().cv.wait(lock, [&] { return s->queue.empty(); });
  join(st().host, s->vc);
  prune_accesses();
}

void drain_all(Lock& lock) {
  for (Stream* s : st().streams) st().cv.wait(lock, [&] { return s->queue.empty(); });
  for (Stream* s : st().streams) join(st().host, s->vc);
  prune_accesses();
}

void stop_stream(Stream* s, Lock& lock) {
  drain(s, lock);
  s->stop = true;
  st().cv.notify_all();
  if (s->worker.joinable()) {
    lock.unlock();
    s->worker.join();
    lock.lock();
  }
  st().streams.erase(s);
  if (s->id) st().free_stream_ids.push_back(s->id);
  delete s;
}

// The first error a synchronizing call reports.
CUresult sync_error() {
  if (st().sticky) return st().sticky;
  CUresult e = st().async_error;
  st().async_error = 0;
  return e;
}

}  // namespace fake

using namespace fake;
#define FAKE_LOCK Lock lock(st().mu)

namespace {
int id_of(Stream* s) { return s->id; }
Event* ev(void* e) { return static_cast<Event*>(e); }
}  // namespace

extern "C" {

CUresult cuStreamCreate(void** s, unsigned) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  *s = make_stream(lock);
  return 0;
}
CUresult cuStreamDestroy_v2(void* p) {
  FAKE_LOCK;
  if (!p) return kInvalidHandle;
  Stream* s = stream_of(p);
  if (s->capture) {
    st().captures.erase(s->capture);
    delete s->capture;
    s->capture = nullptr;
  }
  // Resources are released once the stream's work is done (cuStreamDestroy).
  stop_stream(s, lock);
  return st().sticky;
}
CUresult cuStreamSynchronize(void* p) {
  FAKE_LOCK;
  if (CUresult e = failing("cuStreamSynchronize", kLaunchFailed)) return e;
  if (st().sticky) return st().sticky;
  Stream* s = stream_of(p);
  // "It is invalid to synchronize ... a stream which is being captured"
  // (Programming Guide, CUDA Graphs, "Prohibited and Unhandled Operations").
  if (st().rules.capture && s->capture) {
    s->capture->invalidated = true;
    return kCaptureUnsupported;
  }
  drain(s, lock);
  return sync_error();
}
CUresult cuCtxSynchronize() {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (st().rules.capture && !st().captures.empty()) {
    for (Capture* c : st().captures) c->invalidated = true;
    return kCaptureUnsupported;
  }
  drain_all(lock);
  return sync_error();
}
CUresult cuEventCreate(void** e, unsigned flags) {
  FAKE_LOCK;
  if (CUresult r = context_check()) return r;
  auto* x = new Event(st().next_id++);
  x->timing = !(flags & 2);  // CU_EVENT_DISABLE_TIMING
  *e = x;
  return 0;
}
CUresult cuEventDestroy_v2(void* e) {
  FAKE_LOCK;
  if (!e) return kInvalidHandle;
  // Released once its record completes (cuEventDestroy): queued work may refer to it.
  drain_all(lock);
  delete ev(e);
  return 0;
}
CUresult cuEventRecord(void* e, void* p) {
  FAKE_LOCK;
  if (!e) return kInvalidHandle;
  if (CUresult r = context_check()) return r;
  Stream* s = stream_of(p);
  Event* x = ev(e);
  ++st().events_recorded;
  log("record e" + std::to_string(x->id) + " s" + std::to_string(id_of(s)));
  if (s->capture) {
    if (s->capture->invalidated) return kCaptureInvalidated;
    x->captured = s->capture;
    Op op(Op::Record);
    op.event = x;
    op.gen = ++x->recorded;
    s->capture->graph.ops.push_back(op);
    return 0;
  }
  x->captured = nullptr;
  Op op(Op::Record);
  op.event = x;
  op.gen = ++x->recorded;
  return submit(std::move(op), s, lock);
}
CUresult cuEventSynchronize(void* e) {
  FAKE_LOCK;
  if (CUresult r = failing("cuEventSynchronize", kLaunchFailed)) return r;
  if (!e) return kInvalidHandle;
  if (st().sticky) return st().sticky;
  Event* x = ev(e);
  if (st().rules.capture && x->captured) return kCaptureUnsupported;  // a captured event is no work
  uint64_t gen = x->recorded;
  st().cv.wait(lock, [&] { return x->completed >= gen || st().sticky; });
  join(st().host, x->vc);
  prune_accesses();
  return sync_error();
}
CUresult cuEventQuery(void* e) {
  FAKE_LOCK;
  if (!e) return kInvalidHandle;
  if (st().sticky) return st().sticky;
  Event* x = ev(e);
  if (st().rules.capture && x->captured) return kCaptureUnsupported;
  if (x->completed < x->recorded) return kNotReady;
  join(st().host, x->vc);
  return 0;
}
CUresult cuEventElapsedTime(float* ms, void* a, void* b) {
  FAKE_LOCK;
  if (st().sticky) return st().sticky;
  Event *ea = ev(a), *eb = ev(b);
  if (!ea || !eb) return kInvalidHandle;
  if (!ea->timing || !eb->timing) return kInvalidHandle;  // created with CU_EVENT_DISABLE_TIMING
  if (!ea->recorded || !eb->recorded || ea->completed < ea->recorded || eb->completed < eb->recorded) return kNotReady;
  *ms = float(eb->time_ms - ea->time_ms);
  return 0;
}
CUresult cuStreamWaitEvent(void* p, void* e, unsigned) {
  FAKE_LOCK;
  if (!e) return kInvalidHandle;
  if (CUresult r = context_check()) return r;
  Stream* s = stream_of(p);
  Event* x = ev(e);
  log("wait s" + std::to_string(id_of(s)) + " e" + std::to_string(x->id));
  Op op(Op::Wait);
  op.event = x;
  op.gen = x->recorded;  // the record most recent at the call
  return submit(std::move(op), s, lock);
}
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void* p, void** params, void** extra) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (!f) return kInvalidHandle;
  auto* fn = static_cast<Function*>(f);
  if (extra) return kInvalidValue;
  Stream* s = stream_of(p);
  if (CUresult e = failing("cuLaunchKernel", kLaunchFailed)) {
    if (s->capture) s->capture->invalidated = true;
    return e;
  }
  Op op(Op::Launch);
  op.fn = fn;
  op.grid[0] = gx, op.grid[1] = gy, op.grid[2] = gz;
  op.block[0] = bx, op.block[1] = by, op.block[2] = bz;
  op.shared = shared;
  CUresult refused = st().rules.launch_limits ? check_launch(*fn, op.grid, op.block, shared) : 0;
  if (!refused) refused = check_params(*fn);
  if (refused) {
    // An invalid operation invalidates the capture it was made in.
    if (s->capture && st().rules.capture) s->capture->invalidated = true;
    return refused;
  }
  // As many parameters as the image says (the driver reads no more, and
  // copies each before returning); without the image's layout, as many as
  // the test's simulator entry binds.
  int n = fn->params_known ? int(fn->params.size()) : st().arg_count ? st().arg_count(fn->name.c_str()) : 0;
  if (n < 0) return kNotFound;
  if (n > 0 && !params) return kInvalidValue;
  for (int i = 0; i < n; ++i) {
    CUdeviceptr v = 0;  // kiln's parameters are pointers; a smaller one is zero-extended
    const int size = fn->params_known ? fn->params[size_t(i)].size : 8;
    if (size > 8) {
      // A by-value struct: its bytes as of this call (a capture keeps them),
      // handed to the test's callback by address.
      auto bytes = std::make_shared<std::vector<uint8_t>>(size_t(size));
      std::memcpy(bytes->data(), params[i], size_t(size));
      v = reinterpret_cast<CUdeviceptr>(bytes->data());
      op.by_value.push_back(std::move(bytes));
    } else {
      std::memcpy(&v, params[i], size_t(size));
    }
    op.args.push_back(v);
  }
  return submit(std::move(op), s, lock);
}
CUresult cuGraphLaunch(void* exec, void* p) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (!exec) return kInvalidHandle;
  if (CUresult e = failing("cuGraphLaunch", kLaunchFailed)) return e;
  Stream* s = stream_of(p);
  auto* x = static_cast<Exec*>(exec);
  ++st().graph_launches;
  log("graph s" + std::to_string(id_of(s)));
  // "A graph exec cannot run concurrently with itself": a launch waits for
  // the previous one, wherever it was launched (cuGraphLaunch).
  Op wait(Op::Wait);
  wait.event = x->done;
  wait.gen = x->done->recorded;
  if (CUresult e = submit(std::move(wait), s, lock)) return e;
  Op run(Op::Graph);
  run.exec = x;
  if (CUresult e = submit(std::move(run), s, lock)) return e;
  Op done(Op::Record);
  done.event = x->done;
  done.gen = ++x->done->recorded;
  return submit(std::move(done), s, lock);
}

}  // extern "C"
