// The fake CUDA driver's shared state (tests/runtime/fake_cuda/*.cpp; the
// rules and where they come from are in docs/testing.md, "The fake CUDA
// driver"). One mutex guards everything; each stream's worker thread takes it
// too and lets go of it only while a kernel runs on the test's simulator.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace fake {

using CUresult = int;
using CUdeviceptr = unsigned long long;

// The driver's error codes (cuda.h's CUresult values).
enum : CUresult {
  kInvalidValue = 1,
  kOutOfMemory = 2,
  kNoDevice = 100,
  kInvalidDevice = 101,
  kNoBinaryForGpu = 209,
  kInvalidContext = 201,
  kInvalidPtx = 218,
  kUnsupportedPtxVersion = 222,
  kInvalidImage = 200,
  kInvalidHandle = 400,
  kNotFound = 500,
  kNotReady = 600,
  kIllegalAddress = 700,
  kLaunchOutOfResources = 701,
  kLaunchFailed = 719,
  kNotSupported = 801,  // also: parameters over 4 KiB where the driver or GPU has only 4 KiB
  kCaptureUnsupported = 900,
  kCaptureInvalidated = 901,
  kCaptureWrongThread = 908,
};

// The rules, each switchable off with KILN_FAKE_CUDA_DISABLE=name[,name...]
// so a test can prove it depends on the rule (tests/runtime/rule_must_fail.sh).
struct Rules {
  bool async = true;          // streams run on worker threads; host calls return before the work is done
  bool races = true;          // unordered accesses of one buffer from two streams are reported
  bool launch_limits = true;  // per-block threads, registers, shared memory; grid limits
  bool capture = true;        // unsafe calls during a capture fail and invalidate it
  bool sticky = true;         // 700-class errors poison the context
  bool modules = true;        // PTX ISA version vs the driver, CUBIN arch vs the device
  bool context = true;        // calls need a current context
  bool params = true;         // kernel parameters within the parameter space (32,764 / 4,096 bytes)
  bool kernel_races = true;   // two kernels' unordered accesses (what each reads and writes) are compared
  bool table_races = true;    // the buffers a kernel reaches through a pointer table are accesses too
};

// A device's properties (cuDeviceGetAttribute); presets by FAKE_CUDA_DEVICE.
struct Device {
  std::string name = "Fake GPU (kiln tests)";
  int major = 9, minor = 0;
  int max_threads = 1024, max_block[3] = {1024, 1024, 64};
  int max_grid[3] = {2147483647, 65535, 65535};
  int regs_per_block = 65536;
  int shared_per_block = 48 * 1024;  // without opt-in
  int shared_optin = 227 * 1024;     // cuFuncSetAttribute's ceiling
  int sms = 132;
  size_t memory = size_t(80) << 30;
};

// What a module says about one kernel (CUBIN .nv.info / .nv.shared.<name>).
struct Function {
  std::string name;
  int registers = 0;  // 0: unknown (PTX: the JIT decides)
  int static_shared = 0;
  int max_dynamic_shared;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (default 48 KiB - static)
  // The parameter layout the driver reads from the image (cuLaunchKernel's
  // kernelParams holds one pointer per parameter): CUBIN .nv.info.<name>
  // EIATTR_KPARAM_INFO / EIATTR_CBANK_PARAM_SIZE, PTX the .entry's .param list.
  struct Param {
    int offset = 0, size = 0;
  };
  std::vector<Param> params;
  int param_bytes = 0;
  bool params_known = false;  // false: a CUBIN without the attributes (the test's arg_count decides)
};
struct Module {
  bool ptx;
  std::map<std::string, std::unique_ptr<Function>> functions;
};

// A vector clock: per stream id, how many operations of that stream are
// known to have completed (ordered before).
using VClock = std::vector<uint64_t>;
void join(VClock& a, const VClock& b);

struct Event;
struct Exec;
struct Op {
  enum Kind { Copy, Launch, Record, Wait, Graph } kind;
  explicit Op(Kind k) : kind(k) {}
  const Function* fn = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, shared = 0;
  std::vector<CUdeviceptr> args;
  CUdeviceptr dst = 0, src = 0;
  size_t bytes = 0;
  std::shared_ptr<std::vector<uint8_t>> snapshot;  // a pageable source copied at the call
  // Launch: parameters wider than a pointer (a shape-generic kernel's by-value
  // kiln_syms), copied at the call as the driver does; `args` holds their addresses.
  std::vector<std::shared_ptr<std::vector<uint8_t>>> by_value;
  Event* event = nullptr;
  uint64_t gen = 0;  // Record: the generation it completes; Wait: the one it waits for
  const Exec* exec = nullptr;
  VClock host;  // what the host had synchronized with when it issued the op
};

struct Capture;
struct Stream {
  int id;
  std::deque<Op> queue;  // the front runs (stays queued until done)
  bool stop = false;
  std::thread worker;
  VClock vc;
  double time_ms = 0;  // the stream's own fake clock
  Capture* capture = nullptr;
};

struct Event {
  explicit Event(int i) : id(i) {}
  int id;
  bool timing = true;
  uint64_t recorded = 0, completed = 0;  // generations
  double time_ms = 0;
  VClock vc;
  Capture* captured = nullptr;  // last recorded inside this capture
};

struct Graph {
  std::vector<Op> ops;
};
struct Exec {
  Graph g;
  Event* done = nullptr;  // a graph exec never runs concurrently with itself
};

struct Capture {
  Capture(Stream* s, int m) : origin(s), mode(m), thread(std::this_thread::get_id()) {}
  Stream* origin;
  int mode;  // 0 global, 1 thread-local, 2 relaxed
  std::thread::id thread;
  bool invalidated = false;
  Graph graph;
};

// A buffer access the race detector remembers. `precise`: a kernel's access
// whose reads and writes are known (fake_cuda_set_kernel_buffers); a kernel
// access that is not counts as a write of the rest of the allocation and is
// compared with copies only.
struct Access {
  CUdeviceptr lo, hi;
  bool write, kernel, precise;
  int stream;
  uint64_t clock;
};
struct Allocation {
  size_t bytes;
  bool host;  // pinned host memory
  std::deque<Access> accesses;
};

struct Failure {
  int skip = 0;
  CUresult error = 0;
};

struct State {
  std::mutex mu;
  std::condition_variable cv;  // any queue or event changed
  Rules rules;
  Device dev;
  int device_count = 1;
  int driver_version = 13000;
  bool inverse_blocks = false, init_error = false;
  int paused = 0;  // fake_cuda_pause: the "GPU" runs nothing
  CUresult sticky = 0;
  CUresult async_error = 0;  // a failed kernel with sticky errors off: the next synchronizing call reports it
  int cubin_loads = 0, ptx_loads = 0, graph_launches = 0, captured_launches = 0, direct_launches = 0;
  std::map<CUdeviceptr, Allocation> allocs;  // device and pinned host allocations by start
  size_t live_bytes = 0, memory_limit = SIZE_MAX;
  int alloc_fill = -1;  // fake_cuda_set_alloc_fill: the byte new device allocations hold (-1: whatever malloc gave)
  int device_allocs = 0, pinned_live = 0, pinned_allocs = 0, events_recorded = 0, next_id = 1;
  std::string log, races;
  int race_count = 0;
  std::map<std::string, Failure> fail_next;
  std::set<Stream*> streams;
  std::vector<int> free_stream_ids;
  int next_stream_id = 1;  // 0: the null stream
  Stream* null_stream = nullptr;
  std::set<Capture*> captures;
  VClock host;
  int (*arg_count)(const char*) = nullptr;
  int (*launch)(const char*, const unsigned*, const unsigned*, unsigned, const CUdeviceptr*) = nullptr;
  // What a kernel does with its buffers (fake_cuda_set_kernel_buffers).
  int (*table_size)(const char*) = nullptr;
  int (*buffer_use)(const char*, int, unsigned long long*) = nullptr;
  State();
};
State& st();
using Lock = std::unique_lock<std::mutex>;

Device preset(const std::string& name);
// The error armed for this call of `fn` (0: none); `usual` when armed without one.
CUresult failing(const char* fn, CUresult usual);
bool is_sticky(CUresult r);
// An error the context reports to every later call (once sticky errors are on).
void poison(CUresult r);
// The entry point's common checks: sticky error, current context.
CUresult context_check();
void log(const std::string& line);

// streams.cpp
Stream* stream_of(void* s);  // null -> the null stream
CUresult submit(Op op, Stream* s, Lock& lock);
void drain(Stream* s, Lock& lock);  // wait for the stream's queue
void drain_all(Lock& lock);
void stop_stream(Stream* s, Lock& lock);

// capture.cpp: a call that may not be made while this thread (or a global
// capture) captures; invalidates the offending captures.
CUresult capture_forbids(const char* what);

// memory.cpp
// The race detector: `op` on stream `s` (its clock `vc`) accesses the range.
void access(CUdeviceptr lo, size_t bytes, bool write, bool kernel, const Stream& s, const std::string& what,
            bool precise = false);
// The accesses of launch `op` on stream `s` as it runs: its buffers,
// directly or through a pointer table.
void kernel_accesses(const Op& op, const Stream& s);
Allocation* allocation_of(CUdeviceptr p, CUdeviceptr* start);
void prune_accesses();

// modules.cpp
CUresult check_launch(const Function& f, const unsigned* grid, const unsigned* block, unsigned shared);
// The bytes of kernel parameters the device and driver accept: 32,764 on
// Volta and newer with a CUDA 12.1+ driver, else 4,096.
int param_space();
// The parameter-space rule for a launch of `f` (0: fits).
CUresult check_params(const Function& f);

}  // namespace fake
