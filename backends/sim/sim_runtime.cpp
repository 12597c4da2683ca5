// The simulator's scheduler: one Boost.Context fiber per CUDA thread, one
// block at a time per OS thread, blocks handed out to a few OS threads.
//
// A block runs until no fiber is ready: a fiber runs until it waits (block
// barrier, warp collective) or returns. A barrier releases its waiters when
// every fiber it names arrived; a thread that returns while others wait at a
// barrier it can no longer reach is a divergent barrier and an error, and a
// block with waiting fibers and none ready is a deadlock, reported with what
// each fiber waits for. The first error stops the grid.
#include "backends/sim/sim_runtime.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/context/fiber.hpp>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace ctx = boost::context;

namespace kiln::sim {
namespace detail {

thread_local ThreadIndex* tls_thread = nullptr;

namespace {

// ---- Stacks: mmap'ed with a guard page below, pooled across launches. ----
class StackPool {
 public:
  explicit StackPool(size_t bytes) : bytes_(bytes) {}
  ~StackPool() {
    for (void* s : free_) munmap(s, bytes_ + page());
  }
  std::vector<void*> take(size_t n) {
    std::vector<void*> out;
    {
      std::lock_guard lock(mu_);
      while (out.size() < n && !free_.empty()) {
        out.push_back(free_.back());
        free_.pop_back();
      }
    }
    while (out.size() < n) {
      void* p = mmap(nullptr, bytes_ + page(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw SimError("kernel simulator: out of memory for fiber stacks");
      mprotect(p, page(), PROT_NONE);  // a stack overflow faults instead of corrupting
      out.push_back(p);
    }
    return out;
  }
  void give(std::vector<void*>& stacks) {
    std::lock_guard lock(mu_);
    free_.insert(free_.end(), stacks.begin(), stacks.end());
    stacks.clear();
  }
  size_t bytes() const { return bytes_; }
  static size_t page() {
    static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return p;
  }

 private:
  size_t bytes_;
  std::mutex mu_;
  std::vector<void*> free_;
};

StackPool& pool_for(size_t bytes) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<StackPool>> pools;
  std::lock_guard lock(mu);
  for (auto& p : pools)
    if (p->bytes() == bytes) return *p;
  pools.push_back(std::make_unique<StackPool>(bytes));
  return *pools.back();
}

// Hands one preallocated stack to one fiber; the block returns it to the pool.
struct GivenStack {
  void* mem;
  size_t bytes;
  ctx::stack_context allocate() {
    ctx::stack_context sc;
    sc.size = bytes;
    sc.sp = static_cast<char*>(mem) + StackPool::page() + bytes;
    return sc;
  }
  void deallocate(ctx::stack_context&) noexcept {}
};

enum class Wait { none, block, warp, warpgroup };

struct Block;

struct Thread : ThreadIndex {
  int tid = 0;
  Block* block = nullptr;
  ctx::fiber fiber;  // this thread, while suspended
  ctx::fiber sink;   // the scheduler, while this thread runs
  Wait wait = Wait::none;
  bool done = false;
};

struct Warp {
  unsigned existing = 0;  // lanes that exist in the block
  unsigned exited = 0;
  unsigned pending = 0;  // lanes of the collective being gathered
  unsigned arrived = 0;
  const char* what = nullptr;
  unsigned gen = 0;
  uint64_t slots[2][32] = {};
};

// A warpgroup collective (wgmma): threads 128 g .. 128 g + 127 of the block.
struct WarpGroup {
  int arrived = 0;
  const char* what = nullptr;
  unsigned gen = 0;
  uint64_t slots[2][128] = {};
};

// Shared by all blocks of one launch.
struct Grid {
  const LaunchConfig* cfg;
  const std::function<void()>* body;
  std::atomic<int64_t> next_block{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::optional<std::string> error;
  void fail(const std::string& msg) {
    std::lock_guard lock(mu);
    if (!error) error = msg;
    failed = true;
  }
};

struct Block {
  Grid* grid = nullptr;
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  std::vector<WarpGroup> warpgroups;
  std::deque<int> ready;
  int live = 0;
  int exited = 0;
  int at_barrier = 0;
  int barrier_count = 0;   // nonzero predicates of the barrier being gathered
  int barrier_result = 0;  // ... of the barrier released last
  const char* barrier_file = nullptr;
  int barrier_line = 0;
  std::vector<unsigned char> dyn_shared;
  bool stop = false;  // an error was recorded: suspend nothing more, unwind
};

std::string dim_str(unsigned x, unsigned y, unsigned z) { return fmt::format("({},{},{})", x, y, z); }

std::string where(const Thread& t) {
  return fmt::format("block {} thread {}", dim_str(t.block_idx.x, t.block_idx.y, t.block_idx.z),
                     dim_str(t.thread_idx.x, t.thread_idx.y, t.thread_idx.z));
}

Thread& me() { return *static_cast<Thread*>(tls_thread); }

// Suspends the running fiber; the scheduler resumes it once released.
void suspend(Thread& t) {
  t.sink = std::move(t.sink).resume();
  tls_thread = &t;
  if (t.block->stop) throw SimError("stopped");  // not reported: an error is already recorded
}

void release_warp(Block& b, int warp, unsigned lanes) {
  for (int lane = 0; lane < 32; ++lane) {
    if (!(lanes >> lane & 1u)) continue;
    Thread& o = b.threads[static_cast<size_t>(warp * 32 + lane)];
    if (o.wait == Wait::warp && &o != tls_thread) {
      o.wait = Wait::none;
      b.ready.push_back(o.tid);
    }
  }
}

// A thread returned: any barrier still waiting for it can never complete.
void on_exit(Thread& t) {
  Block& b = *t.block;
  t.done = true;
  --b.live;
  ++b.exited;
  if (b.at_barrier > 0)
    b.grid->fail(fmt::format(
        "kernel {}: divergent __syncthreads: thread {} of block {} returned while {} thread(s) "
        "wait at the barrier at {}:{}",
        b.grid->cfg->kernel, dim_str(t.thread_idx.x, t.thread_idx.y, t.thread_idx.z),
        dim_str(t.block_idx.x, t.block_idx.y, t.block_idx.z), b.at_barrier, b.barrier_file, b.barrier_line));
  Warp& w = b.warps[static_cast<size_t>(t.tid / 32)];
  w.exited |= 1u << t.lane;
  if (w.arrived != 0 && (w.pending >> t.lane & 1u))
    b.grid->fail(fmt::format("kernel {}: divergent {}: lane {} of {} returned while other lanes of its mask wait",
                             b.grid->cfg->kernel, w.what, t.lane, where(t)));
  if (static_cast<size_t>(t.tid / 128) < b.warpgroups.size()) {
    const WarpGroup& wg = b.warpgroups[static_cast<size_t>(t.tid / 128)];
    if (wg.arrived != 0)
      b.grid->fail(fmt::format("kernel {}: divergent {}: {} returned while {} thread(s) of its warpgroup wait",
                               b.grid->cfg->kernel, wg.what, where(t), wg.arrived));
  }
}

void run_block(Grid& g, int64_t linear, std::vector<void*>& stacks, Block& b) {
  const LaunchConfig& cfg = *g.cfg;
  const unsigned bx = cfg.block.x, by = cfg.block.y, bz = cfg.block.z;
  const int n = static_cast<int>(bx * by * bz);
  const uint3 bidx{static_cast<unsigned>(linear % cfg.grid.x), static_cast<unsigned>(linear / cfg.grid.x % cfg.grid.y),
                   static_cast<unsigned>(linear / (static_cast<int64_t>(cfg.grid.x) * cfg.grid.y))};
  // The vectors are reused from the previous block of this OS thread.
  b.grid = &g;
  b.threads.resize(static_cast<size_t>(n));
  b.warps.assign(static_cast<size_t>((n + 31) / 32), Warp{});
  b.warpgroups.assign(static_cast<size_t>(n / 128), WarpGroup{});
  b.ready.clear();
  b.live = n;
  b.exited = b.at_barrier = b.barrier_count = b.barrier_result = 0;
  b.stop = false;
  if (cfg.shared_bytes) b.dyn_shared.assign(cfg.shared_bytes, 0xff);  // NaN / -1: uninitialized reads show
  for (int i = 0; i < n; ++i) {
    Thread& t = b.threads[static_cast<size_t>(i)];
    t.wait = Wait::none;
    t.done = false;
    t.tid = i;
    t.block = &b;
    t.thread_idx =
        uint3{static_cast<unsigned>(i) % bx, static_cast<unsigned>(i) / bx % by, static_cast<unsigned>(i) / (bx * by)};
    t.block_idx = bidx;
    t.block_dim = cfg.block;
    t.grid_dim = cfg.grid;
    t.lane = static_cast<unsigned>(i % 32);
    b.warps[static_cast<size_t>(i / 32)].existing |= 1u << t.lane;
    t.fiber = ctx::fiber(std::allocator_arg, GivenStack{stacks[static_cast<size_t>(i)], cfg.stack_bytes},
                         [&t, &g](ctx::fiber&& sink) {
                           t.sink = std::move(sink);
                           tls_thread = &t;
                           try {
                             (*g.body)();
                           } catch (const ctx::detail::forced_unwind&) {
                             throw;
                           } catch (const std::exception& e) {
                             if (!t.block->stop) g.fail(e.what());
                           } catch (...) {
                             if (!t.block->stop)
                               g.fail(fmt::format("kernel {}: unknown exception in {}", g.cfg->kernel, where(t)));
                           }
                           on_exit(t);
                           return std::move(t.sink);
                         });
    b.ready.push_back(i);
  }
  while (!b.ready.empty() && !g.failed) {
    Thread& t = b.threads[static_cast<size_t>(b.ready.front())];
    b.ready.pop_front();
    tls_thread = &t;
    t.fiber = std::move(t.fiber).resume();
  }
  if (!g.failed && b.live > 0) {
    std::string waits;
    for (const Thread& t : b.threads) {
      if (t.done) continue;
      if (waits.size() > 400) {
        waits += "; ...";
        break;
      }
      const Warp& w = b.warps[static_cast<size_t>(t.tid / 32)];
      const char* what = t.wait == Wait::warpgroup ? b.warpgroups[static_cast<size_t>(t.tid / 128)].what : w.what;
      waits += fmt::format("; thread {} at {}", dim_str(t.thread_idx.x, t.thread_idx.y, t.thread_idx.z),
                           t.wait == Wait::block ? fmt::format("__syncthreads {}:{}", b.barrier_file, b.barrier_line)
                                                 : std::string(what ? what : "?"));
    }
    g.fail(fmt::format("kernel {}: deadlock in block {}{}", cfg.kernel, dim_str(bidx.x, bidx.y, bidx.z), waits));
  }
  // Unwind the fibers still suspended (after an error) before their stacks go back.
  b.stop = true;
  for (Thread& t : b.threads)
    if (t.fiber) {
      tls_thread = &t;
      t.fiber = ctx::fiber{};
    }
  tls_thread = nullptr;
}

int worker_count(const LaunchConfig& cfg, int64_t blocks) {
  int w = cfg.workers;
  if (w <= 0) {
    // A bad value is an error, not the default: "KILN_SIM_THREADS=1" set to
    // make a run deterministic must not be silently replaced by 8 threads.
    if (const char* env = std::getenv("KILN_SIM_THREADS"); env && *env) {
      char* end = nullptr;
      long v = std::strtol(env, &end, 10);
      if (*end != '\0' || v <= 0 || v > 4096)
        throw SimError(fmt::format(
            "KILN_SIM_THREADS='{}' is not a number of threads (1 to 4096; unset, the core count up to 8)", env));
      w = static_cast<int>(v);
    }
    if (w <= 0) w = std::min(8, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  }
  return static_cast<int>(std::min<int64_t>(w, blocks));
}

}  // namespace

[[noreturn]] void kernel_error(const std::string& what) {
  const Thread& t = me();
  throw SimError(fmt::format("kernel {}: {} ({})", t.block->grid->cfg->kernel, what, where(t)));
}

[[noreturn]] void out_of_bounds(const char* arg, int64_t index, int64_t count) {
  if (!tls_thread) throw SimError(fmt::format("argument {}: index {} out of bounds [0, {})", arg, index, count));
  const Thread& t = me();
  throw SimError(fmt::format("kernel {}: argument {}: index {} out of bounds [0, {}) ({})", t.block->grid->cfg->kernel,
                             arg, index, count, where(t)));
}

[[noreturn]] void misaligned_cast(const char* arg, int64_t offset, size_t from, size_t to) {
  kernel_error(
      fmt::format("argument {}: offset {} (elements of {} bytes) is not a multiple of the {}-byte element "
                  "it is cast to, or the address is not aligned for it",
                  arg, offset, from, to));
}

int block_barrier(const char* file, int line, int pred) {
  Thread& t = me();
  Block& b = *t.block;
  if (b.exited > 0)
    kernel_error(fmt::format("divergent __syncthreads at {}:{}: {} thread(s) of the block already returned", file, line,
                             b.exited));
  if (b.at_barrier == 0) {
    b.barrier_file = file;
    b.barrier_line = line;
  } else if (line != b.barrier_line || std::strcmp(file, b.barrier_file) != 0) {
    kernel_error(fmt::format("divergent __syncthreads: this thread is at {}:{} while {} other(s) wait at {}:{}", file,
                             line, b.at_barrier, b.barrier_file, b.barrier_line));
  }
  b.barrier_count += pred != 0;
  if (++b.at_barrier == b.live) {
    // The released threads read barrier_result before any of them can
    // complete another barrier, so one snapshot suffices.
    b.barrier_result = b.barrier_count;
    b.at_barrier = b.barrier_count = 0;
    for (Thread& o : b.threads)
      if (o.wait == Wait::block) {
        o.wait = Wait::none;
        b.ready.push_back(o.tid);
      }
    return b.barrier_result;
  }
  t.wait = Wait::block;
  suspend(t);
  return b.barrier_result;
}

WarpSlots warp_collective(unsigned mask, uint64_t value, const char* what) {
  Thread& t = me();
  Block& b = *t.block;
  Warp& w = b.warps[static_cast<size_t>(t.tid / 32)];
  if (!(mask >> t.lane & 1u))
    kernel_error(fmt::format("{} with mask {:#010x} that leaves out the calling lane {}", what, mask, t.lane));
  const unsigned lanes = mask & w.existing;
  if (lanes & w.exited)
    kernel_error(fmt::format("divergent {}: lanes {:#010x} of the mask {:#010x} already returned", what,
                             lanes & w.exited, mask));
  if (w.arrived == 0) {
    w.pending = lanes;
    w.what = what;
  } else if (w.pending != lanes || std::strcmp(w.what, what) != 0) {
    kernel_error(
        fmt::format("divergent warp collectives: {} with lanes {:#010x} while lanes {:#010x} wait in {} "
                    "with lanes {:#010x}",
                    what, lanes, w.arrived, w.what, w.pending));
  }
  const unsigned buf = w.gen & 1u;
  w.slots[buf][t.lane] = value;
  w.arrived |= 1u << t.lane;
  if (w.arrived == lanes) {
    w.arrived = 0;
    ++w.gen;
    release_warp(b, t.tid / 32, lanes);
  } else {
    t.wait = Wait::warp;
    suspend(t);
  }
  return {w.slots[buf], lanes};
}

WarpGroupSlots warpgroup_collective(uint64_t value, const char* what) {
  Thread& t = me();
  Block& b = *t.block;
  const size_t g = static_cast<size_t>(t.tid / 128);
  if (g >= b.warpgroups.size())
    kernel_error(
        fmt::format("{} needs all 128 threads of a warpgroup; the block has {} thread(s), so threads {}.. "
                    "form no whole warpgroup",
                    what, b.threads.size(), b.warpgroups.size() * 128));
  for (size_t i = g * 128; i < g * 128 + 128; ++i)
    if (b.threads[i].done)
      kernel_error(fmt::format("divergent {}: thread {} of the warpgroup already returned", what, i));
  WarpGroup& w = b.warpgroups[g];
  if (w.arrived == 0) {
    w.what = what;
  } else if (std::strcmp(w.what, what) != 0) {
    kernel_error(fmt::format("divergent warpgroup collectives: {} while {} thread(s) of the warpgroup wait in {}", what,
                             w.arrived, w.what));
  }
  const unsigned buf = w.gen & 1u;
  w.slots[buf][t.tid % 128] = value;
  if (++w.arrived == 128) {
    w.arrived = 0;
    ++w.gen;
    for (size_t i = g * 128; i < g * 128 + 128; ++i) {
      Thread& o = b.threads[i];
      if (o.wait == Wait::warpgroup && &o != &t) {
        o.wait = Wait::none;
        b.ready.push_back(o.tid);
      }
    }
    return {w.slots[buf], true};
  }
  t.wait = Wait::warpgroup;
  suspend(t);
  return {w.slots[buf], false};
}

unsigned active_mask() {
  Thread& t = me();
  const Warp& w = t.block->warps[static_cast<size_t>(t.tid / 32)];
  return w.existing & ~w.exited;
}

void* dynamic_shared(size_t* bytes) {
  Block& b = *me().block;
  *bytes = b.dyn_shared.size();
  return b.dyn_shared.data();
}

}  // namespace detail

void run_grid(const LaunchConfig& cfg, const std::function<void()>& body) {
  using namespace detail;
  const int64_t blocks = static_cast<int64_t>(cfg.grid.x) * cfg.grid.y * cfg.grid.z;
  const int64_t threads = static_cast<int64_t>(cfg.block.x) * cfg.block.y * cfg.block.z;
  if (blocks <= 0 || threads <= 0 || threads > 1024 || cfg.block.z > 64 || cfg.grid.y > 65535 || cfg.grid.z > 65535)
    throw SimError(fmt::format("kernel {}: invalid launch: grid {} block {}", cfg.kernel,
                               dim_str(cfg.grid.x, cfg.grid.y, cfg.grid.z),
                               dim_str(cfg.block.x, cfg.block.y, cfg.block.z)));
  Grid g;
  g.cfg = &cfg;
  g.body = &body;
  StackPool& pool = pool_for(cfg.stack_bytes);
  auto work = [&] {
    std::vector<void*> stacks;
    auto block = std::make_unique<Block>();
    try {
      stacks = pool.take(static_cast<size_t>(threads));
      for (int64_t i; !g.failed && (i = g.next_block.fetch_add(1)) < blocks;) run_block(g, i, stacks, *block);
    } catch (const std::exception& e) {
      g.fail(e.what());
    }
    block.reset();
    pool.give(stacks);
  };
  const int workers = worker_count(cfg, blocks);
  std::vector<std::thread> pool_threads;
  for (int i = 1; i < workers; ++i) pool_threads.emplace_back(work);
  work();
  for (auto& th : pool_threads) th.join();
  if (g.error) throw SimError(*g.error);
}

}  // namespace kiln::sim
