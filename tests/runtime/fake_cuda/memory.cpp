// Device and pinned host memory, copies, and the race detector.
// - "Device memory" is host memory; cuMemAlloc fails past a byte budget
//   (fake_cuda_set_memory_limit) with CUDA_ERROR_OUT_OF_MEMORY, and a zero
//   byte allocation is CUDA_ERROR_INVALID_VALUE, as on the hardware.
// - Copies follow "API synchronization behavior" (CUDA Runtime API docs):
//   an asynchronous copy from pageable host memory takes the source at the
//   call (it is staged before the call returns); an asynchronous copy into
//   pageable host memory returns only once it is done; copies to and from
//   pinned memory (cuMemHostAlloc) run when their stream reaches them, so the
//   host must not touch the buffer before an event or a sync says so.
// - Freeing synchronizes the device (cuMemFree returns errors of earlier
//   asynchronous work), so no queued operation is left with freed memory.
// - The race detector: every copy and every kernel's pointer arguments are
//   accesses of an allocation; two accesses from different streams that
//   overlap, one of them a write, with neither ordered before the other by
//   stream order, events or host synchronization (vector clocks), are a race:
//   on a GPU the result would depend on timing. Races are logged
//   (fake_cuda_take_races, fake_cuda_stats) and printed to stderr.
//   What a kernel reads and writes comes from the test
//   (fake_cuda_set_kernel_buffers: the plan's kernel signatures, where a
//   `const` buffer is only read), and so do pointer tables: the buffers a
//   kernel reaches through a table in device memory (codegen/param_table.h:
//   N addresses, then N element counts) are read from the table when the
//   kernel runs, as the GPU would. Two such kernels on different streams that
//   touch the same bytes, one writing, unordered, are a race.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fake.h"

namespace fake {

namespace {
bool ordered(const VClock& now, const Access& a) {
  return size_t(a.stream) < now.size() && now[size_t(a.stream)] >= a.clock;
}
}  // namespace

Allocation* allocation_of(CUdeviceptr p, CUdeviceptr* start) {
  auto it = st().allocs.upper_bound(p);
  if (it == st().allocs.begin()) return nullptr;
  --it;
  if (p >= it->first + it->second.bytes) return nullptr;
  if (start) *start = it->first;
  return &it->second;
}

void access(CUdeviceptr lo, size_t bytes, bool write, bool kernel, const Stream& s, const std::string& what,
            bool precise) {
  CUdeviceptr start = 0;
  Allocation* al = allocation_of(lo, &start);
  if (!al || !bytes) return;
  const uint64_t clock = s.vc[size_t(s.id)];
  if (st().rules.races) {
    for (const Access& a : al->accesses) {
      if (a.stream == s.id || ordered(s.vc, a)) continue;
      if (!(a.write || write)) continue;
      // Two kernels are compared only when both say what they write.
      if (a.kernel && kernel && !(a.precise && precise)) continue;
      if (a.hi <= lo || lo + bytes <= a.lo) continue;
      std::string line = "race: " + what + " on stream " + std::to_string(s.id) + " and an unordered " +
                         (a.write ? "write" : "read") + " on stream " + std::to_string(a.stream) + " of " +
                         (al->host ? "pinned host" : "device") + " allocation +" + std::to_string(lo - start) + " (" +
                         std::to_string(bytes) + " bytes)";
      std::fprintf(stderr, "fake CUDA: %s\n", line.c_str());
      st().races += line + "\n";
      ++st().race_count;
      break;
    }
  }
  al->accesses.push_back({lo, lo + bytes, write, kernel, precise, s.id, clock});
  if (al->accesses.size() > 64) al->accesses.pop_front();  // forgetting old accesses only misses races
}

void kernel_accesses(const Op& op, const Stream& s) {
  const std::string what = "kernel " + op.fn->name;
  const char* name = op.fn->name.c_str();
  // Not known: a write of the rest of the argument's allocation, compared
  // with copies only.
  auto whole = [&](CUdeviceptr a) {
    CUdeviceptr start = 0;
    if (Allocation* al = allocation_of(a, &start)) access(a, al->bytes - (a - start), true, true, s, what);
  };
  // Buffer `i` at `a`: read or written as the test says.
  auto buffer = [&](CUdeviceptr a, int i) {
    unsigned long long bytes = 0;
    const int use = st().rules.kernel_races && st().buffer_use ? st().buffer_use(name, i, &bytes) : -1;
    CUdeviceptr start = 0;
    Allocation* al = allocation_of(a, &start);
    if (!al) return;
    if (use < 0) return whole(a);
    const size_t rest = al->bytes - (a - start);
    access(a, bytes && bytes < rest ? bytes : rest, use == 1, true, s, what, true);
  };
  // -1: not known; 0: its buffers are its parameters; N: its one parameter
  // is a table of N buffers.
  const int table = st().table_size ? st().table_size(name) : -1;
  if (table > 0) {
    // The rule off, or not the one parameter it should be: only the table is seen.
    if (!st().rules.table_races || op.args.size() != 1) {
      for (CUdeviceptr a : op.args) whole(a);
      return;
    }
    // The kernel reads its table (addresses, then counts) and then the
    // buffers the addresses name, as it runs.
    CUdeviceptr start = 0;
    Allocation* al = allocation_of(op.args[0], &start);
    const size_t words = size_t(table) * 2;
    if (!al || al->bytes - (op.args[0] - start) < words * 8) return whole(op.args[0]);
    access(op.args[0], words * 8, false, true, s, what + " (its pointer table)", true);
    const auto* t = reinterpret_cast<const uint64_t*>(op.args[0]);
    for (int i = 0; i < table; ++i) buffer(t[i], i);
    return;
  }
  for (size_t i = 0; i < op.args.size(); ++i) {
    if (table < 0) whole(op.args[i]);
    else buffer(op.args[i], int(i));
  }
}

// An access is forgotten once it is ordered before all later work: before
// the host's present (future calls) and before what every queued operation
// was issued after (an operation issued before the host synchronized knows
// less than the host does now).
void prune_accesses() {
  VClock floor = st().host;
  for (const Stream* s : st().streams)
    for (const Op& op : s->queue)
      for (size_t i = 0; i < floor.size(); ++i) floor[i] = std::min(floor[i], i < op.host.size() ? op.host[i] : 0);
  for (auto& [p, al] : st().allocs) {
    std::deque<Access> keep;
    for (const Access& a : al.accesses)
      if (!ordered(floor, a)) keep.push_back(a);
    al.accesses.swap(keep);
  }
}

}  // namespace fake

using namespace fake;
#define FAKE_LOCK Lock lock(st().mu)

namespace {
bool is_pinned(const void* p) {
  CUdeviceptr start = 0;
  Allocation* a = allocation_of(reinterpret_cast<CUdeviceptr>(p), &start);
  return a && a->host;
}
Op copy(CUdeviceptr d, CUdeviceptr s, size_t n) {
  Op op(Op::Copy);
  op.dst = d;
  op.src = s;
  op.bytes = n;
  return op;
}
}  // namespace

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (CUresult e = capture_forbids("cuMemAlloc")) return e;
  if (CUresult e = failing("cuMemAlloc_v2", kOutOfMemory)) return e;
  if (n == 0) return kInvalidValue;
  if (n > st().memory_limit - st().live_bytes) return kOutOfMemory;
  void* m = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (!m) return kOutOfMemory;
  if (st().alloc_fill >= 0) std::memset(m, st().alloc_fill, n);
  st().allocs[reinterpret_cast<CUdeviceptr>(m)] = {n, false, {}};
  st().live_bytes += n;
  ++st().device_allocs;
  *p = reinterpret_cast<CUdeviceptr>(m);
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  FAKE_LOCK;
  // A dead context's memory goes with it; the call still reports the error.
  CUresult sticky = st().sticky;
  if (!sticky) {
    if (CUresult e = context_check()) return e;
    if (CUresult e = capture_forbids("cuMemFree")) return e;
  }
  auto it = st().allocs.find(p);
  if (it == st().allocs.end() || it->second.host) return kInvalidValue;
  drain_all(lock);
  it = st().allocs.find(p);
  st().live_bytes -= it->second.bytes;
  st().allocs.erase(it);
  --st().device_allocs;
  std::free(reinterpret_cast<void*>(p));
  return sticky;
}
// Free and total "device" memory: total is the memory limit (or the device's).
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  FAKE_LOCK;
  size_t total = st().memory_limit == SIZE_MAX ? st().dev.memory : st().memory_limit;
  *total_bytes = total;
  *free_bytes = total > st().live_bytes ? total - st().live_bytes : 0;
  return 0;
}
CUresult cuMemHostAlloc(void** p, size_t n, unsigned) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (CUresult e = capture_forbids("cuMemHostAlloc")) return e;
  if (CUresult e = failing("cuMemHostAlloc", kOutOfMemory)) return e;
  if (n == 0) return kInvalidValue;
  void* m = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (!m) return kOutOfMemory;
  st().allocs[reinterpret_cast<CUdeviceptr>(m)] = {n, true, {}};
  ++st().pinned_live;
  ++st().pinned_allocs;
  *p = m;
  return 0;
}
CUresult cuMemFreeHost(void* p) {
  FAKE_LOCK;
  CUresult sticky = st().sticky;
  if (!sticky)
    if (CUresult e = capture_forbids("cuMemFreeHost")) return e;
  auto it = st().allocs.find(reinterpret_cast<CUdeviceptr>(p));
  if (it == st().allocs.end() || !it->second.host) return kInvalidValue;
  drain_all(lock);
  st().allocs.erase(reinterpret_cast<CUdeviceptr>(p));
  --st().pinned_live;
  std::free(p);
  return sticky;
}
// Synchronous: on the null stream, returns when the copy is done.
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (CUresult e = capture_forbids("cuMemcpyHtoD")) return e;
  Stream* null = stream_of(nullptr);
  if (CUresult e = submit(copy(d, reinterpret_cast<CUdeviceptr>(s), n), null, lock)) return e;
  drain(null, lock);
  return st().sticky;
}
CUresult cuMemcpyDtoH_v2(void* d, CUdeviceptr s, size_t n) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (CUresult e = capture_forbids("cuMemcpyDtoH")) return e;
  Stream* null = stream_of(nullptr);
  if (CUresult e = submit(copy(reinterpret_cast<CUdeviceptr>(d), s, n), null, lock)) return e;
  drain(null, lock);
  return st().sticky;
}
// What destroying the primary context does (cuDevicePrimaryCtxReset): every
// allocation is freed. For tests that leave memory no context can free.
void fake_cuda_reset_memory() {
  FAKE_LOCK;
  drain_all(lock);
  for (auto& [p, a] : st().allocs) std::free(reinterpret_cast<void*>(p));
  st().allocs.clear();
  st().live_bytes = 0;
  st().device_allocs = st().pinned_live = 0;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, void* p) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  if (CUresult e = failing("cuMemcpyHtoDAsync", kInvalidValue)) return e;
  Stream* stream = stream_of(p);
  bool pinned = is_pinned(s);
  if (!stream->capture)
    log(std::string("htod ") + (pinned ? "pinned" : "pageable") + " s" + std::to_string(stream->id));
  Op op = copy(d, reinterpret_cast<CUdeviceptr>(s), n);
  if (!pinned && !stream->capture) {
    const auto* b = static_cast<const uint8_t*>(s);
    op.snapshot = std::make_shared<std::vector<uint8_t>>(b, b + n);
  }
  return submit(std::move(op), stream, lock);
}
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, void* p) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  Stream* stream = stream_of(p);
  bool pinned = is_pinned(d);
  if (!stream->capture)
    log(std::string("dtoh ") + (pinned ? "pinned" : "pageable") + " s" + std::to_string(stream->id));
  if (CUresult e = submit(copy(reinterpret_cast<CUdeviceptr>(d), s, n), stream, lock)) return e;
  if (!pinned && !stream->capture) drain(stream, lock);  // into pageable memory: returns once done
  return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void* p) {
  FAKE_LOCK;
  if (CUresult e = context_check()) return e;
  Stream* stream = stream_of(p);
  if (!stream->capture) log("dtod s" + std::to_string(stream->id));
  return submit(copy(d, s, n), stream, lock);
}

}  // extern "C"
