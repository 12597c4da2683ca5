// Selections whose result shape depends on data. compress and unique need
// the deciding operand's value at compile time (a constant, a frozen input,
// or something computed from constants); nonzero may also leave its count to
// run time (ops/data_dependent_size.h).
//
//   nonzero(x) -> i64[rank, count]: coordinates of the non-zero elements in
//     row-major order (a scalar reads as a 1-element vector); count is a
//     number (x known at compile time), the size symbol the node names
//     ({size_symbol="s"}: i64[rank, s]), or, bounded ({bounded=1}), the
//     result is i64[rank, numel(x)] (columns past the count 0) plus the
//     count as i64[]
//   compress {axis?}(x, condition: bool[n]) -> the slices along `axis` where
//     condition is true (x flattened when axis is absent); a condition
//     shorter than the axis drops the rest
//   unique {sorted, axis?}(x) -> (y, indices, inverse_indices, counts): the
//     distinct elements (or slices along axis) in ascending order when sorted,
//     else in order of first occurrence; indices: first occurrence of each,
//     inverse_indices: for each input element/slice, its position in y
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <type_traits>

#include "ops/data_dependent_size.h"
#include "ops/index_common.h"

namespace kiln::ops::index {

namespace {

// 1 where an element is non-zero (NaN counts as non-zero, -0.0 as zero).
std::vector<uint8_t> nonzero_mask(const Tensor& t) {
  std::vector<uint8_t> mask(t.numel());
  dispatch_storage(t.dtype(), [&](auto z) {
    using S = decltype(z);
    const S* p = t.data<S>();
    const bool half = t.dtype() == DType::F16 || t.dtype() == DType::BF16;
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<S, uint16_t>) {
        if (half) {
          mask[i] = (p[i] & 0x7fff) != 0;
          continue;
        }
      }
      mask[i] = p[i] != S(0);
    }
  });
  return mask;
}

// ---------------------------------------------------------------------------
// nonzero

std::vector<TensorType> infer_nonzero(InferContext& c) {
  const int64_t rank = std::max(c.rank(0), 1);
  const SizeForm form = size_form(c);
  if (c.num_outputs() != (form == SizeForm::Bounded ? 2 : 1))
    c.fail("{} results, but this form of nonzero has {}", c.num_outputs(), form == SizeForm::Bounded ? 2 : 1);
  if (form == SizeForm::Symbol) return {TensorType(DType::I64, {rank, size_symbol_dim(c)})};
  if (form == SizeForm::Bounded) {
    if (has_symbolic_dims(c.shape(0))) c.fail("bounded nonzero needs a static input, got {}", c.type(0).str());
    return {TensorType(DType::I64, {rank, shape_numel(c.shape(0))}), TensorType(DType::I64, {})};
  }
  const Tensor& x = c.require_value(0, "nonzero's input (its count of non-zeros sets the result shape)");
  if (x.dtype() == DType::I64)
    for (int64_t i = 0; i < x.numel(); ++i)
      if (x.data<int64_t>()[i] < 0 && is_symbolic_dim(x.data<int64_t>()[i]))
        c.unsupported("kiln cannot compute nonzero on symbolic shape values yet: operand 0 holds {}",
                      dim_str(x.data<int64_t>()[i]));
  std::vector<uint8_t> mask = nonzero_mask(x);
  int64_t count = std::count(mask.begin(), mask.end(), uint8_t(1));
  return {TensorType(DType::I64, {std::max(c.rank(0), 1), count})};
}

void nonzero_kernel(KernelContext& ctx) {
  if (ctx.attrs.has(kSizeSymbolAttr)) refuse_unlowered(ctx);
  const bool bounded = ctx.attrs.get_int("bounded", 0) != 0;
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out();
  std::vector<uint8_t> mask = nonzero_mask(x);
  const int64_t count = std::count(mask.begin(), mask.end(), uint8_t(1));
  KILN_CHECK(y.rank() == 2 && y.shape()[0] == std::max(x.rank(), 1), "{}: result {} was not inferred", ctx.label,
             y.type().str());
  if (!bounded && y.shape()[1] != count)
    throw Error(fmt::format("{}: input has {} non-zero elements but the result was compiled for {}", ctx.label, count,
                            y.shape()[1]));
  // Row d holds the d-th coordinates: the count of them, or (bounded) the
  // bound with zeros after the count.
  const int64_t stride = y.shape()[1];
  std::fill(y.data<int64_t>(), y.data<int64_t>() + y.numel(), int64_t(0));
  if (bounded) ctx.out(1).data<int64_t>()[0] = count;
  const Shape shape = x.rank() == 0 ? Shape{1} : x.shape();
  const int r = static_cast<int>(shape.size());
  int64_t* out = y.data<int64_t>();
  std::vector<int64_t> coord(r, 0);
  int64_t k = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (mask[i]) {
      for (int d = 0; d < r; ++d) out[d * stride + k] = coord[d];
      ++k;
    }
    for (int d = r - 1; d >= 0; --d) {
      if (++coord[d] < shape[d]) break;
      coord[d] = 0;
    }
  }
}

// ---------------------------------------------------------------------------
// compress

// The positions along the selected axis (or of the flattened input) to keep.
std::vector<int64_t> compress_positions(const Tensor& cond, int64_t limit, const std::string& label) {
  std::vector<uint8_t> mask = nonzero_mask(cond);
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < static_cast<int64_t>(mask.size()); ++i) {
    if (!mask[i]) continue;
    if (i >= limit)
      throw Error(
          fmt::format("{}: condition is true at {} but the selected axis has only {} entries", label, i, limit));
    pos.push_back(i);
  }
  return pos;
}

std::optional<int> compress_axis(const AttrMap& a, int rank) {
  if (!a.has("axis")) return std::nullopt;
  return normalize_axis(a.get_int("axis", 0), rank);
}

std::vector<TensorType> infer_compress(InferContext& c) {
  if (c.dtype(1) != DType::Bool) c.fail("condition must be bool, got {}", dtype_name(c.dtype(1)));
  if (c.rank(1) != 1) c.fail("condition must be 1-D, got rank {}", c.rank(1));
  std::optional<int> axis;
  try {
    axis = compress_axis(c.attrs(), c.rank(0));
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  if (axis && c.rank(0) < 1) c.fail("axis is given but the input is a scalar");
  const int64_t limit = axis ? c.shape(0)[*axis] : shape_numel(c.shape(0));
  const Tensor& cond = c.require_value(1, "compress's condition (it sets the result shape)");
  std::vector<int64_t> pos = compress_positions(cond, limit, c.label());
  if (!axis) return {TensorType(c.dtype(0), {static_cast<int64_t>(pos.size())})};
  Shape out = c.shape(0);
  out[*axis] = static_cast<int64_t>(pos.size());
  return {TensorType(c.dtype(0), out)};
}

void compress_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  Tensor& y = ctx.out();
  std::optional<int> axis = compress_axis(ctx.attrs, x.rank());
  const int64_t outer = axis ? dims_product(x.shape(), 0, *axis) : 1;
  const int64_t n = axis ? x.shape()[*axis] : x.numel();
  const int64_t inner = axis ? dims_product(x.shape(), *axis + 1, x.shape().size()) : 1;
  std::vector<int64_t> pos = compress_positions(ctx.in(1), n, ctx.label);
  const int64_t kept = static_cast<int64_t>(pos.size());
  if (y.numel() != outer * kept * inner)
    throw Error(fmt::format("{}: condition keeps {} entries but the result was compiled for shape [{}]", ctx.label,
                            kept, fmt::join(y.shape(), ",")));
  const size_t row = static_cast<size_t>(inner) * dtype_size(x.dtype());
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  if (row == 0) return;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < kept; ++k)
      std::memcpy(dst + static_cast<size_t>(o * kept + k) * row, src + static_cast<size_t>(o * n + pos[k]) * row, row);
}

// ---------------------------------------------------------------------------
// unique

struct UniqueResult {
  std::vector<int64_t> first;    // per unique entry (in result order): first occurrence
  std::vector<int64_t> inverse;  // per input entry: position in the result
  std::vector<int64_t> counts;   // per unique entry
};

// Total order on keys: NaN after everything and equal to NaN, so sorting is
// well defined and all NaNs collapse into one entry.
template <typename K>
int key_cmp(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) {
    bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
  }
  return a < b ? -1 : (b < a ? 1 : 0);
}

template <typename K>
UniqueResult unique_with_keys(const std::vector<K>& keys, int64_t n, int64_t len, bool sorted) {
  // keys[s * len + l]: element l of entry s.
  auto cmp = [&](int64_t a, int64_t b) {
    for (int64_t l = 0; l < len; ++l) {
      int c = key_cmp<K>(keys[a * len + l], keys[b * len + l]);
      if (c) return c;
    }
    return 0;
  };
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  // Runs of equal entries; stability makes each run's head its first occurrence.
  std::vector<int64_t> group_of(n), heads, counts;
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || cmp(order[i - 1], order[i]) != 0) {
      heads.push_back(order[i]);
      counts.push_back(0);
    }
    group_of[order[i]] = static_cast<int64_t>(heads.size()) - 1;
    ++counts.back();
  }
  const int64_t u = static_cast<int64_t>(heads.size());
  std::vector<int64_t> rank(u);  // group -> position in the result
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(u);
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return heads[a] < heads[b]; });
    for (int64_t p = 0; p < u; ++p) rank[by_first[p]] = p;
  }
  UniqueResult r;
  r.first.resize(u);
  r.counts.resize(u);
  r.inverse.resize(n);
  for (int64_t g = 0; g < u; ++g) {
    r.first[rank[g]] = heads[g];
    r.counts[rank[g]] = counts[g];
  }
  for (int64_t s = 0; s < n; ++s) r.inverse[s] = rank[group_of[s]];
  return r;
}

struct UniqueLayout {
  int64_t outer, n, inner;
};

UniqueLayout unique_layout(const Shape& s, std::optional<int> axis) {
  if (!axis) return {1, shape_numel(s), 1};
  return {dims_product(s, 0, *axis), s[*axis], dims_product(s, *axis + 1, s.size())};
}

UniqueResult compute_unique(const Tensor& x, std::optional<int> axis, bool sorted) {
  const UniqueLayout lay = unique_layout(x.shape(), axis);
  const int64_t len = lay.outer * lay.inner;
  return dispatch_storage(x.dtype(), [&](auto z) {
    using S = decltype(z);
    // Keys compare by value: f16/bf16 through float, other dtypes as stored.
    using K = std::conditional_t<std::is_same_v<S, uint16_t>, double, S>;
    const bool half = x.dtype() == DType::F16 || x.dtype() == DType::BF16;
    const S* p = x.data<S>();
    std::vector<K> keys(static_cast<size_t>(lay.n * len));
    for (int64_t o = 0; o < lay.outer; ++o)
      for (int64_t s = 0; s < lay.n; ++s)
        for (int64_t i = 0; i < lay.inner; ++i) {
          S v = p[(o * lay.n + s) * lay.inner + i];
          K k;
          if constexpr (std::is_same_v<S, uint16_t>) {
            k = !half ? double(v) : x.dtype() == DType::F16 ? double(half_to_float(v)) : double(bf16_to_float(v));
          } else {
            k = v;
          }
          keys[s * len + o * lay.inner + i] = k;
        }
    return unique_with_keys<K>(keys, lay.n, len, sorted);
  });
}

std::optional<int> unique_axis(const AttrMap& a, int rank) {
  if (!a.has("axis")) return std::nullopt;
  return normalize_axis(a.get_int("axis", 0), rank);
}

std::vector<TensorType> infer_unique(InferContext& c) {
  int64_t sorted = c.attrs().get_int("sorted", 1);
  if (sorted != 0 && sorted != 1) c.fail("sorted must be 0 or 1, got {}", sorted);
  if (c.attrs().has("axis") && c.rank(0) == 0) c.fail("axis is given but the input is a scalar");
  std::optional<int> axis;
  try {
    axis = unique_axis(c.attrs(), c.rank(0));
  } catch (const Error& e) {
    c.fail("{}", e.what());
  }
  const Tensor& x = c.require_value(0, "unique's input (its count of distinct entries sets the result shape)");
  UniqueResult u = compute_unique(x, axis, sorted == 1);
  const int64_t nu = static_cast<int64_t>(u.first.size());
  Shape ys = {nu};
  if (axis) {
    ys = c.shape(0);
    ys[*axis] = nu;
  }
  return {TensorType(c.dtype(0), ys), TensorType(DType::I64, {nu}),
          TensorType(DType::I64, {static_cast<int64_t>(u.inverse.size())}), TensorType(DType::I64, {nu})};
}

void unique_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const std::optional<int> axis = unique_axis(ctx.attrs, x.rank());
  const UniqueResult u = compute_unique(x, axis, ctx.attrs.get_int("sorted", 1) == 1);
  const int64_t nu = static_cast<int64_t>(u.first.size());
  const UniqueLayout lay = unique_layout(x.shape(), axis);
  Tensor& y = ctx.out(0);
  if (y.numel() != lay.outer * nu * lay.inner)
    throw Error(fmt::format("{}: input has {} distinct entries but the result was compiled for shape [{}]", ctx.label,
                            nu, fmt::join(y.shape(), ",")));
  const size_t row = static_cast<size_t>(lay.inner) * dtype_size(x.dtype());
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  uint8_t* dst = static_cast<uint8_t*>(y.raw());
  if (row)
    for (int64_t o = 0; o < lay.outer; ++o)
      for (int64_t k = 0; k < nu; ++k)
        std::memcpy(dst + static_cast<size_t>(o * nu + k) * row,
                    src + static_cast<size_t>(o * lay.n + u.first[k]) * row, row);
  const std::vector<int64_t>* rest[] = {&u.first, &u.inverse, &u.counts};
  for (int i = 1; i < static_cast<int>(ctx.outputs.size()); ++i) {
    const std::vector<int64_t>& v = *rest[i - 1];
    if (ctx.out(i).numel() != static_cast<int64_t>(v.size()))
      throw Error(fmt::format("{}: result {} has {} entries but was compiled for {}", ctx.label, i, v.size(),
                              ctx.out(i).numel()));
    std::copy(v.begin(), v.end(), ctx.out(i).data<int64_t>());
  }
}

}  // namespace

void register_select_ops(OpRegistry& r) {
  OpDef nz;
  nz.name = "nonzero";
  nz.category = OpCategory::Compute;
  nz.max_outputs = 2;
  nz.attrs = {{kSizeSymbolAttr, AttrKind::String}, {"bounded", AttrKind::Int}};
  nz.symbolic_dims = true;  // the rank is all the symbol form reads
  nz.infer = infer_nonzero;
  nz.reference = nonzero_kernel;
  nz.doc =
      "i64[rank, count]: coordinates of non-zero elements; count known at compile time, a size symbol bound at run "
      "time, or bounded (the bound plus the count)";
  r.add(std::move(nz));

  OpDef cp;
  cp.name = "compress";
  cp.category = OpCategory::Compute;
  cp.min_inputs = cp.max_inputs = 2;
  cp.attrs = {{"axis", AttrKind::Int}};
  cp.infer = infer_compress;
  cp.reference = compress_kernel;
  cp.doc = "slices along axis (flattened input when absent) where condition is true (condition needed at compile time)";
  r.add(std::move(cp));

  OpDef un;
  un.name = "unique";
  un.category = OpCategory::Compute;
  un.max_outputs = 4;
  un.attrs = {{"sorted", AttrKind::Int}, {"axis", AttrKind::Int}};
  un.infer = infer_unique;
  un.reference = unique_kernel;
  un.doc =
      "(y, indices, inverse_indices, counts) of the distinct elements or slices along axis "
      "(input needed at compile time)";
  r.add(std::move(un));
}

}  // namespace kiln::ops::index
