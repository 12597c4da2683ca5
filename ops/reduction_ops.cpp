// Reduction family: reduce_* (this file), argmax/argmin/topk/cumsum
// (reduction_select_ops.cpp), softmax/log_softmax/hardmax (softmax_ops.cpp).
// register_reduction_ops is the family's single entry.
//
// Every reduce_* op is one ReductionSpec (ops/reduction_spec.h) run by one
// generic kernel: kept dims outer, reduced dims inner.
#include <array>
#include <limits>

#include "ops/families.h"
#include "ops/reduction_internal.h"
#include "ops/reduction_spec.h"

namespace kiln::ops {

namespace {

using M = ReduceMap;
using C = ReduceCombiner;

constexpr std::array<ReductionSpec, 10> kSpecs = {{
    {"reduce_sum", M::Identity, C::Sum, M::Identity, false, "sum of x over axes"},
    {"reduce_mean", M::Identity, C::Sum, M::DivCount, false, "mean of x over axes (integers truncate)"},
    {"reduce_max", M::Identity, C::Max, M::Identity, false, "max of x over axes; NaN propagates"},
    {"reduce_min", M::Identity, C::Min, M::Identity, false, "min of x over axes; NaN propagates"},
    {"reduce_prod", M::Identity, C::Prod, M::Identity, false, "product of x over axes"},
    {"reduce_l1", M::Abs, C::Sum, M::Identity, false, "sum of |x| over axes"},
    {"reduce_l2", M::Square, C::Sum, M::Sqrt, false, "sqrt of the sum of x^2 over axes"},
    {"reduce_log_sum", M::Identity, C::Sum, M::Log, false, "log of the sum of x over axes"},
    {"reduce_log_sum_exp", M::Exp, C::Sum, M::Log, true, "log(sum(exp(x))) over axes, computed stably"},
    {"reduce_sum_square", M::Square, C::Sum, M::Identity, false, "sum of x^2 over axes"},
}};

// Element offsets of every index combination of `dims` (row-major over dims).
std::vector<int64_t> offsets_of(const Shape& shape, const std::vector<int64_t>& strides, const std::vector<int>& dims) {
  int64_t count = 1;
  for (int d : dims) count *= shape[d];
  std::vector<int64_t> r;
  r.reserve(static_cast<size_t>(count));
  if (count == 0) return r;
  std::vector<int64_t> idx(dims.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < count; ++i) {
    r.push_back(off);
    for (int j = static_cast<int>(dims.size()) - 1; j >= 0; --j) {
      int d = dims[j];
      if (++idx[j] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (shape[d] - 1);
      idx[j] = 0;
    }
  }
  return r;
}

// The loop nest of one reduction. Kept dims are outer, reduced dims inner;
// the kept dims after the last reduced dim form a contiguous block of
// `inner` elements that is folded side by side, so every read is sequential
// whichever axes are reduced. Output element (k, j) = fold over r of
// x[kept[k] + red[r] + j].
struct ReduceLoops {
  std::vector<int64_t> kept;  // offsets of the outer kept index combinations
  std::vector<int64_t> red;   // offsets of the reduced index combinations
  int64_t inner = 1;          // elements in the trailing kept block
};

// The fold for one compile-time combiner and pre map. T is the element type
// read (the tensor's own storage for f32/f64/i64/u64, else a converted copy),
// A the accumulation type.
template <C Comb, M Pre, typename T, typename A>
void fold_all(const ReductionSpec& s, const T* x, const ReduceLoops& L, A init, A* out) {
  const int64_t count = static_cast<int64_t>(L.red.size()), inner = L.inner;
  const int64_t* red = L.red.data();
  std::vector<A> acc(inner), shift(inner, A(0));
  for (size_t k = 0; k < L.kept.size(); ++k) {
    A* o = out + static_cast<int64_t>(k) * inner;
    const T* base = count ? x + L.kept[k] : x;  // nothing is read when count is 0
    if constexpr (std::is_floating_point_v<A>) {
      if (s.shift_by_max) {
        std::fill(shift.begin(), shift.end(), -std::numeric_limits<A>::infinity());
        for (int64_t r = 0; r < count; ++r)
          for (int64_t j = 0; j < inner; ++j) shift[j] = reduce_combine(C::Max, shift[j], A(base[red[r] + j]));
        for (A& m : shift) m = std::isfinite(m) ? m : A(0);
      }
    }
    if (inner == 1) {  // the common case (trailing axes reduced): keep the accumulator in a register
      A a = init, sh = shift[0];
      for (int64_t r = 0; r < count; ++r)
        a = reduce_combine(Comb, a, apply_reduce_map(Pre, A(base[red[r]]) - sh, count));
      o[0] = apply_reduce_map(s.post, a, count) + sh;
      continue;
    }
    std::fill(acc.begin(), acc.end(), init);
    for (int64_t r = 0; r < count; ++r) {
      const T* row = base + red[r];
      for (int64_t j = 0; j < inner; ++j)
        acc[j] = reduce_combine(Comb, acc[j], apply_reduce_map(Pre, A(row[j]) - shift[j], count));
    }
    for (int64_t j = 0; j < inner; ++j) o[j] = apply_reduce_map(s.post, acc[j], count) + shift[j];
  }
}

template <C Comb, typename T, typename A>
void fold_pre(const ReductionSpec& s, const T* x, const ReduceLoops& L, A init, A* out) {
  switch (s.pre) {
    case M::Identity:
      return fold_all<Comb, M::Identity>(s, x, L, init, out);
    case M::Abs:
      return fold_all<Comb, M::Abs>(s, x, L, init, out);
    case M::Square:
      return fold_all<Comb, M::Square>(s, x, L, init, out);
    case M::Exp:
      return fold_all<Comb, M::Exp>(s, x, L, init, out);
    case M::Log:
      return fold_all<Comb, M::Log>(s, x, L, init, out);
    case M::Sqrt:
      return fold_all<Comb, M::Sqrt>(s, x, L, init, out);
    case M::DivCount:
      break;  // not a pre map
  }
  throw std::logic_error("reduction spec with a DivCount pre map");
}

template <typename T, typename A>
void fold(const ReductionSpec& s, const T* x, const ReduceLoops& L, A init, A* out) {
  switch (s.combiner) {
    case C::Sum:
      return fold_pre<C::Sum>(s, x, L, init, out);
    case C::Prod:
      return fold_pre<C::Prod>(s, x, L, init, out);
    case C::Max:
      return fold_pre<C::Max>(s, x, L, init, out);
    case C::Min:
      return fold_pre<C::Min>(s, x, L, init, out);
  }
}

template <typename A>
A reduce_init(C c, DType dt) {
  switch (c) {
    case C::Sum:
      return A(0);
    case C::Prod:
      return A(1);
    case C::Max:
      return dtype_lowest<A>(dt);
    case C::Min:
      return dtype_highest<A>(dt);
  }
  return A(0);
}

// Runs spec `s` on x with accumulation type A and stores into `out`.
template <typename A>
void reduce_with(const ReductionSpec& s, const Tensor& x, const ReduceLoops& L, Tensor& out) {
  std::vector<A> r(static_cast<size_t>(out.numel()));
  A init = reduce_init<A>(s.combiner, x.dtype());
  // Read f32/f64/i64/u64 in place; convert other dtypes to A first.
  if (x.dtype() == DType::F32 && std::is_same_v<A, double>) {
    fold(s, x.data<float>(), L, init, r.data());
  } else if ((x.dtype() == DType::F64 && std::is_same_v<A, double>) ||
             (x.dtype() == DType::I64 && std::is_same_v<A, int64_t>) ||
             (x.dtype() == DType::U64 && std::is_same_v<A, uint64_t>)) {
    fold(s, x.data<A>(), L, init, r.data());
  } else {
    std::vector<A> xs = load_all<A>(x);
    fold(s, xs.data(), L, init, r.data());
  }
  if (std::is_floating_point_v<A> && is_int(out.dtype())) {
    // Results such as log(0) are infinite: saturate rather than cast (UB).
    dispatch_storage(out.dtype(), [&](auto z) {
      using S = decltype(z);
      if constexpr (std::is_integral_v<S>) {
        S* p = out.data<S>();
        for (size_t i = 0; i < r.size(); ++i) p[i] = saturate_to_int<S>(static_cast<double>(r[i]));
      }
    });
    return;
  }
  store_all(out, r);
}

// Validated attributes of a reduce_* node: the reduced dims and keepdims.
struct ReduceAxes {
  std::vector<bool> reduced;
  bool keepdims = true;
};

ReduceAxes reduce_axes(InferContext& c) {
  std::vector<int64_t> axes = c.attrs().get_ints("axes");
  int r = c.rank(0);
  ReduceAxes ra;
  ra.reduced.assign(r, false);
  ra.keepdims = flag_attr(c, "keepdims", 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= r)
      c.fail("axes[{}] = {} is out of range for rank {} (kiln's axes are normalized to [0, rank))", i, axes[i], r);
    if (i > 0 && axes[i] <= axes[i - 1]) c.fail("axes must be strictly increasing, got [{}]", fmt::join(axes, ","));
    ra.reduced[axes[i]] = true;
  }
  return ra;
}

OpDef reduce_def(const ReductionSpec& s) {
  OpDef d;
  d.name = std::string(s.op);
  d.category = OpCategory::Reduction;
  d.symbolic_dims = true;  // kept dims are copied, reduced ones dropped or 1
  d.keeps_layout = true;
  d.attrs = {{"axes", AttrKind::Ints, true}, {"keepdims", AttrKind::Int}};
  d.infer = [&s](InferContext& c) {
    DType dt = c.dtype(0);
    bool min_max = s.combiner == C::Max || s.combiner == C::Min;
    if (dt == DType::Bool && !(min_max && s.pre == M::Identity && s.post == M::Identity))
      c.fail("operand 0 is bool; {} needs a numeric dtype", s.op);
    ReduceAxes ra = reduce_axes(c);
    Shape out;
    for (int i = 0; i < c.rank(0); ++i) {
      if (!ra.reduced[i]) out.push_back(c.shape(0)[i]);
      else if (ra.keepdims) out.push_back(1);
    }
    return std::vector<TensorType>{TensorType(dt, out)};
  };
  d.reference = [&s](KernelContext& k) {
    const Tensor& x = k.in(0);
    std::vector<int64_t> axes = k.attrs.get_ints("axes");
    std::vector<bool> reduced(x.rank(), false);
    for (int64_t a : axes) reduced[a] = true;
    // Trailing kept dims (after the last reduced one) form the inner block.
    int split = x.rank();
    while (split > 0 && !reduced[split - 1]) --split;
    ReduceLoops L;
    std::vector<int> kept_dims, red_dims;
    for (int i = 0; i < split; ++i) (reduced[i] ? red_dims : kept_dims).push_back(i);
    for (int i = split; i < x.rank(); ++i) L.inner *= x.shape()[i];
    std::vector<int64_t> strides = strides_of(x.shape());
    L.kept = offsets_of(x.shape(), strides, kept_dims);
    L.red = offsets_of(x.shape(), strides, red_dims);
    Tensor& out = k.out();
    bool integral = map_is_integral(s.pre) && map_is_integral(s.post) && !s.shift_by_max;
    if (is_float(x.dtype()) || !integral) {
      reduce_with<double>(s, x, L, out);
    } else {
      dispatch_int_accum(x.dtype(), [&](auto a) { reduce_with<decltype(a)>(s, x, L, out); });
    }
  };
  d.doc = std::string(s.doc);
  return d;
}

}  // namespace

std::span<const ReductionSpec> reduction_specs() { return kSpecs; }

const ReductionSpec* find_reduction_spec(std::string_view op) {
  for (const ReductionSpec& s : kSpecs)
    if (s.op == op) return &s;
  return nullptr;
}

std::string_view reduce_combiner_name(ReduceCombiner c) {
  switch (c) {
    case C::Sum:
      return "sum";
    case C::Prod:
      return "prod";
    case C::Max:
      return "max";
    case C::Min:
      return "min";
  }
  return "?";
}

std::string_view reduce_map_name(ReduceMap m) {
  switch (m) {
    case M::Identity:
      return "identity";
    case M::Abs:
      return "abs";
    case M::Square:
      return "square";
    case M::Exp:
      return "exp";
    case M::Log:
      return "log";
    case M::Sqrt:
      return "sqrt";
    case M::DivCount:
      return "div_count";
  }
  return "?";
}

void register_reduce_ops(OpRegistry& r) {
  for (const ReductionSpec& s : kSpecs) r.add(reduce_def(s));
}

void register_reduction_ops(OpRegistry& r) {
  register_reduce_ops(r);
  register_arg_topk_ops(r);
  register_scan_ops(r);
  register_softmax_ops(r);
}

}  // namespace kiln::ops
