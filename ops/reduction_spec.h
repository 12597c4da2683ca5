// What a reduce_* op computes, as data: "a combiner plus an index map"
// (design.md section 4). Every reduce_* op reads its operand along the kept
// dims (outer) and the reduced dims (inner, named by the `axes` attribute) and
// folds the reduced elements with one description:
//
//   m      = shift_by_max ? max(x over the reduced elements) : 0   (0 when that max is not finite)
//   acc    = init(combiner)
//   acc    = combine(acc, pre(x - m))        for every reduced element x
//   result = post(acc, count) + m            count = number of reduced elements
//
// The reference kernel (ops/reduction_ops.cpp) interprets this struct, and
// codegen is meant to emit reduction kernels from the same struct, so a
// reduce op's meaning is written once. Look a spec up by kiln op name with
// find_reduction_spec("reduce_l2").
//
// Empty-set reductions (a reduced dim of size 0) fall out of the description:
// sum 0, prod 1, max -inf (the dtype's lowest for integers), min +inf (highest),
// log_sum log(0) = -inf, log_sum_exp -inf, mean 0/0 = NaN (0 for integers).
#pragma once
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

namespace kiln::ops {

enum class ReduceCombiner : uint8_t { Sum, Prod, Max, Min };

// Elementwise maps applied before (pre) or after (post) folding. DivCount
// divides by the number of reduced elements (mean); it is only a post map.
enum class ReduceMap : uint8_t { Identity, Abs, Square, Exp, Log, Sqrt, DivCount };

struct ReductionSpec {
  std::string_view op;      // kiln op name, "reduce_sum"
  ReduceMap pre;            // applied to each element read
  ReduceCombiner combiner;  // folds the mapped elements, starting from its identity
  ReduceMap post;           // applied once to the folded value
  // Subtract the max of the reduced elements before `pre` and add it back after
  // `post`. Valid only where post(fold(pre(x - m))) + m == post(fold(pre(x)))
  // mathematically (log_sum_exp); it keeps exp from overflowing.
  bool shift_by_max = false;
  std::string_view doc;  // one line for docs/ops.md
};

// Every reduce_* op kiln has, in a fixed order.
std::span<const ReductionSpec> reduction_specs();
// The spec of a kiln op, or nullptr when `op` is not a reduce_* op.
const ReductionSpec* find_reduction_spec(std::string_view op);

std::string_view reduce_combiner_name(ReduceCombiner c);
std::string_view reduce_map_name(ReduceMap m);

// True when the map keeps integers integral (integer dtypes can then
// accumulate exactly in 64-bit integers).
constexpr bool map_is_integral(ReduceMap m) {
  return m == ReduceMap::Identity || m == ReduceMap::Abs || m == ReduceMap::Square || m == ReduceMap::DivCount;
}

// Scalar semantics shared by the reference kernel and (later) codegen's
// simulator checks. T is the accumulation type: double for floating dtypes,
// int64_t / uint64_t for integers (with integral maps only).
template <typename T>
inline T apply_reduce_map(ReduceMap m, T x, int64_t count) {
  switch (m) {
    case ReduceMap::Identity:
      return x;
    case ReduceMap::Abs:
      if constexpr (std::is_unsigned_v<T>) return x;
      else return x < 0 ? -x : x;
    case ReduceMap::Square:
      return x * x;
    case ReduceMap::Exp:
      return static_cast<T>(std::exp(static_cast<double>(x)));
    case ReduceMap::Log:
      return static_cast<T>(std::log(static_cast<double>(x)));
    case ReduceMap::Sqrt:
      return static_cast<T>(std::sqrt(static_cast<double>(x)));
    case ReduceMap::DivCount:
      if constexpr (std::is_floating_point_v<T>) return x / static_cast<T>(count);
      else return count == 0 ? T(0) : static_cast<T>(x / static_cast<T>(count));
  }
  return x;
}

// One fold step. Max/Min propagate NaN: once a NaN is seen it stays.
template <typename T>
inline T reduce_combine(ReduceCombiner c, T acc, T v) {
  switch (c) {
    case ReduceCombiner::Sum:
      return acc + v;
    case ReduceCombiner::Prod:
      return acc * v;
    case ReduceCombiner::Max:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(v)) return v;
      }
      return v > acc ? v : acc;
    case ReduceCombiner::Min:
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(v)) return v;
      }
      return v < acc ? v : acc;
  }
  return acc;
}

}  // namespace kiln::ops
