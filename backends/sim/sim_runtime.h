// kiln's CUDA kernel simulator: runs CUDA C kernels compiled by the host
// compiler (against cuda_sim.h) on the CPU. Every CUDA thread of a block is a
// fiber (Boost.Context) so __syncthreads and warp collectives behave as on a
// GPU; the blocks of a grid are spread over a few OS threads, one block at a
// time per OS thread (which is what makes `__shared__` = thread_local right).
//
// Kernel pointer arguments are kiln::sim::Ptr<T>: checked pointers whose
// out-of-bounds accesses stop the kernel with "kernel K: argument A: index I
// out of bounds [0, N)" instead of touching memory.
#pragma once
#include <vector_types.h>  // uint3, dim3 from the CUDA toolkit (host mode)

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "ir/error.h"

namespace kiln::sim {

// An error found while simulating a kernel (out-of-bounds access, divergent
// barrier, deadlock). launch() throws the first one after the grid stopped.
class SimError : public kiln::Error {
 public:
  explicit SimError(const std::string& what) : kiln::Error(what) {}
};

namespace detail {

// The CUDA index variables of the fiber running now (set by the scheduler
// before it resumes a fiber; fibers never move between OS threads).
struct ThreadIndex {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  unsigned lane;  // linear thread id % 32
};
extern thread_local ThreadIndex* tls_thread;
inline const ThreadIndex& cur() { return *tls_thread; }

// Throws SimError "kernel K: argument A: index I out of bounds [0, N) (block
// ..., thread ...)". Out of line: the cold path of every checked access.
[[noreturn]] void out_of_bounds(const char* arg, int64_t index, int64_t count);
[[noreturn]] void misaligned_cast(const char* arg, int64_t offset, size_t from, size_t to);
// Throws SimError naming the kernel, block and thread that is running.
[[noreturn]] void kernel_error(const std::string& what);

// Block barrier (__syncthreads); `file:line` names the call site. Returns
// how many threads passed a nonzero `pred` (__syncthreads_count/_and/_or).
int block_barrier(const char* file, int line, int pred = 0);
// A warp collective: the calling lane publishes `value` and waits until every
// lane of `mask` (that exists in the block) published its value for the same
// collective; returns the 32 slots and the set of lanes that took part. The
// slots stay valid until the caller's next collective.
struct WarpSlots {
  const uint64_t* slots;
  unsigned lanes;
};
WarpSlots warp_collective(unsigned mask, uint64_t value, const char* what);
// A warpgroup collective (wgmma): the 128 threads 128 g .. 128 g + 127 of the
// block each publish `value`; returns the 128 slots (valid until the
// caller's next warpgroup collective) and whether the caller was the last to
// arrive (it runs first after the collective, before any other thread of the
// warpgroup resumes). A block whose size is not a multiple of 128 has no
// whole last warpgroup: its threads calling this is an error, as on the GPU.
struct WarpGroupSlots {
  const uint64_t* slots;
  bool last;
};
WarpGroupSlots warpgroup_collective(uint64_t value, const char* what);
unsigned active_mask();
void* dynamic_shared(size_t* bytes);

}  // namespace detail

// A checked pointer to a kernel argument's buffer: base, element count and
// argument name. p[i], *p, p + i, p - i, ++/-- and conversion to Ptr<const T>
// work as on a raw pointer; every dereference checks the index against the
// argument's whole extent [0, count), so p + i may point anywhere until used.
template <typename T>
class Ptr {
 public:
  using element_type = T;
  Ptr() = default;
  Ptr(T* base, int64_t count, const char* name) : base_(base), count_(count), off_(0), name_(name) {}
  template <typename U>
  requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>) Ptr(const Ptr<U>& o)
      : base_(o.base()), count_(o.count()), off_(o.offset()), name_(o.name()) {}

  template <std::integral I>
  T& operator[](I i) const {
    return *at(off_ + static_cast<int64_t>(i));
  }
  T& operator*() const { return *at(off_); }
  T* operator->() const { return at(off_); }

  template <std::integral I>
  Ptr operator+(I i) const {
    Ptr p = *this;
    p.off_ += static_cast<int64_t>(i);
    return p;
  }
  template <std::integral I>
  Ptr operator-(I i) const {
    Ptr p = *this;
    p.off_ -= static_cast<int64_t>(i);
    return p;
  }
  template <std::integral I>
  friend Ptr operator+(I i, const Ptr& p) {
    return p + i;
  }
  int64_t operator-(const Ptr& o) const { return off_ - o.off_; }
  template <std::integral I>
  Ptr& operator+=(I i) {
    off_ += static_cast<int64_t>(i);
    return *this;
  }
  template <std::integral I>
  Ptr& operator-=(I i) {
    off_ -= static_cast<int64_t>(i);
    return *this;
  }
  Ptr& operator++() {
    ++off_;
    return *this;
  }
  Ptr& operator--() {
    --off_;
    return *this;
  }
  Ptr operator++(int) {
    Ptr p = *this;
    ++off_;
    return p;
  }
  Ptr operator--(int) {
    Ptr p = *this;
    --off_;
    return p;
  }
  bool operator==(const Ptr& o) const { return base_ == o.base_ && off_ == o.off_; }

  // The checked address of element `off_ + 0` (for atomics and __ldg).
  T* checked() const { return at(off_); }
  T* base() const { return base_; }
  int64_t count() const { return count_; }
  int64_t offset() const { return off_; }
  const char* name() const { return name_; }

 private:
  T* at(int64_t i) const {
    if (i < 0 || i >= count_) [[unlikely]]
      detail::out_of_bounds(name_, i, count_);
    return base_ + i;
  }
  T* base_ = nullptr;
  int64_t count_ = 0;
  int64_t off_ = 0;
  const char* name_ = "?";
};

// Reinterprets a checked pointer as another element type (float -> float4):
// the extent becomes whole U elements; the offset must be a multiple of them
// and the address a multiple of U's alignment.
template <typename U, typename T>
Ptr<U> ptr_cast(const Ptr<T>& p) {
  int64_t bytes_off = p.offset() * static_cast<int64_t>(sizeof(T));
  // As on a GPU, the address must also be aligned for U (a 16-byte vector
  // access at an address that is not a multiple of 16 faults there).
  if (bytes_off % static_cast<int64_t>(sizeof(U)) != 0 ||
      (reinterpret_cast<uintptr_t>(p.base()) + static_cast<uintptr_t>(bytes_off)) % alignof(U) != 0)
    detail::misaligned_cast(p.name(), p.offset(), sizeof(T), sizeof(U));
  Ptr<U> r(reinterpret_cast<U*>(p.base()),
           p.count() * static_cast<int64_t>(sizeof(T)) / static_cast<int64_t>(sizeof(U)), p.name());
  return r + bytes_off / static_cast<int64_t>(sizeof(U));
}

// The address p points at, as an integer (KILN_PTR_ADDR: a kernel's test of
// whether a buffer is aligned for vector access; not checked against the extent).
template <typename T>
unsigned long long ptr_address(const Ptr<T>& p) {
  return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p.base())) +
         static_cast<unsigned long long>(p.offset()) * sizeof(T);
}

// Wraps a host buffer as a kernel argument.
template <typename T>
Ptr<T> arg(T* base, int64_t count, const char* name) {
  return Ptr<T>(base, count, name);
}

struct LaunchConfig {
  std::string kernel = "kernel";  // for messages
  dim3 grid{1, 1, 1};
  dim3 block{1, 1, 1};
  size_t shared_bytes = 0;  // dynamic shared memory (KILN_DYNAMIC_SHARED)
  int workers = 0;          // OS threads; 0: $KILN_SIM_THREADS or the core count (at most 8)
  size_t stack_bytes = 64 * 1024;
};

// Runs `body` as every thread of every block of `cfg`; throws SimError with
// the first error any thread hit (the grid stops at the first error).
void run_grid(const LaunchConfig& cfg, const std::function<void()>& body);

// launch(kernel, grid, block, shared_bytes, args...): the <<<grid, block,
// shared_bytes>>> launch. Arguments convert to the kernel's parameter types.
template <typename... P, typename... A>
void launch(const LaunchConfig& cfg, void (*kernel)(P...), A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch: wrong number of kernel arguments");
  std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  run_grid(cfg, [&] { std::apply(kernel, params); });
}
template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes, A&&... args) {
  LaunchConfig cfg;
  cfg.grid = grid;
  cfg.block = block;
  cfg.shared_bytes = shared_bytes;
  launch(cfg, kernel, std::forward<A>(args)...);
}
// Named form for messages: KILN_SIM_LAUNCH(k, grid, block, shared, args...).
template <typename... P, typename... A>
void launch_named(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t shared_bytes, A&&... args) {
  LaunchConfig cfg;
  cfg.kernel = name;
  cfg.grid = grid;
  cfg.block = block;
  cfg.shared_bytes = shared_bytes;
  launch(cfg, kernel, std::forward<A>(args)...);
}

}  // namespace kiln::sim

#define KILN_SIM_LAUNCH(kernel, grid, block, shared, ...) \
  ::kiln::sim::launch_named(#kernel, kernel, grid, block, shared, __VA_ARGS__)
