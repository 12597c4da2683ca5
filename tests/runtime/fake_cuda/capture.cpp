// Stream capture and graphs, with the rules of the Programming Guide ("CUDA
// Graphs", "Prohibited and Unhandled Operations") and cuStreamBeginCapture /
// cuThreadExchangeStreamCaptureMode:
// - while a thread captures in CU_STREAM_CAPTURE_MODE_THREAD_LOCAL (or any
//   thread in _GLOBAL), that thread (any thread) may not make "potentially
//   unsafe API calls": cuMemAlloc, cuMemFree, cuMemHostAlloc, cuMemFreeHost,
//   synchronous copies. They fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
//   and invalidate the capture;
// - synchronizing a capturing stream or a captured event fails the same way;
// - work issued to an invalidated capture fails with
//   CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, and cuStreamEndCapture then
//   returns that error and no graph (the capture still ends);
// - a thread-local capture is ended by its own thread only
//   (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD).
#include "fake.h"

namespace fake {

CUresult capture_forbids(const char*) {
  if (!st().rules.capture) return 0;
  CUresult r = 0;
  for (Capture* c : st().captures) {
    if (c->mode == 2) continue;  // relaxed
    if (c->mode == 0 || c->thread == std::this_thread::get_id()) {
      c->invalidated = true;
      r = kCaptureUnsupported;
    }
  }
  return r;
}

}  // namespace fake

using namespace fake;
#define FAKE_LOCK Lock lock(st().mu)

extern "C" {

CUresult cuStreamBeginCapture_v2(void* p, int mode) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (!p) return kCaptureUnsupported;  // the legacy null stream cannot be captured
  Stream* s = stream_of(p);
  if (s->capture) return kInvalidValue;
  if (mode < 0 || mode > 2) return kInvalidValue;
  s->capture = new Capture(s, mode);
  st().captures.insert(s->capture);
  return 0;
}
CUresult cuStreamEndCapture(void* p, void** g) {
  FAKE_LOCK;
  if (!p) return kInvalidValue;
  Stream* s = stream_of(p);
  Capture* c = s->capture;
  if (!c) return kInvalidValue;
  if (st().rules.capture && c->mode == 1 && c->thread != std::this_thread::get_id()) return kCaptureWrongThread;
  s->capture = nullptr;
  st().captures.erase(c);
  std::unique_ptr<Capture> owned(c);
  *g = nullptr;
  if (st().sticky) return st().sticky;
  if (c->invalidated && st().rules.capture) return kCaptureInvalidated;
  *g = new Graph(std::move(c->graph));
  return 0;
}
CUresult cuStreamIsCapturing(void* p, int* status) {
  FAKE_LOCK;
  Stream* s = stream_of(p);
  *status = !s->capture ? 0 : s->capture->invalidated ? 2 : 1;
  return 0;
}
CUresult cuGraphInstantiateWithFlags(void** exec, void* g, unsigned long long) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (!g) return kInvalidValue;
  auto* x = new Exec{*static_cast<Graph*>(g)};
  x->done = new Event(st().next_id++);
  *exec = x;
  return 0;
}
CUresult cuGraphExecDestroy(void* e) {
  FAKE_LOCK;
  if (!e) return kInvalidHandle;
  drain_all(lock);  // released once its launches are done
  auto* x = static_cast<Exec*>(e);
  delete x->done;
  delete x;
  return 0;
}
CUresult cuGraphDestroy(void* g) {
  FAKE_LOCK;
  if (!g) return kInvalidHandle;
  delete static_cast<Graph*>(g);
  return 0;
}

}  // extern "C"
