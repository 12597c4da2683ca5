// Shape and data-movement ops, part 1: reshape (the one op behind ONNX
// Reshape/Flatten/Squeeze/Unsqueeze), transpose, expand, tile,
// depth_to_space, space_to_depth, range; and the strided byte copy every
// movement kernel uses. concat/split/slice/pad live in movement_ops.cpp.
//
// Kernels move bytes (dtype_size per element), never convert, so every dtype
// (bool, f16, bf16, ...) works the same way. Each injective op is a strided
// view of its input: the kernel computes the view's strides once and hands
// them to copy_strided, which merges contiguous dims into memcpy runs.
#include "ops/shape_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/families.h"
#include "ops/op_helpers.h"
#include "ir/symbolic_dim.h"

namespace kiln::ops {

// ---------------------------------------------------------------------------
// Byte-level helpers.

void fill_bytes(void* dst, const void* value, size_t es, int64_t count) {
  if (count <= 0) return;
  auto* d = static_cast<uint8_t*>(dst);
  std::memcpy(d, value, es);
  size_t total = es * static_cast<size_t>(count), filled = es;
  while (filled < total) {
    size_t n = std::min(filled, total - filled);
    std::memcpy(d + filled, d, n);
    filled += n;
  }
}

namespace {

template <typename T>
void strided_loop(const uint8_t* s, int64_t ss, uint8_t* d, int64_t ds, int64_t n) {
  // memcpy of sizeof(T) compiles to a plain load/store and keeps aliasing legal.
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, s + i * ss * int64_t(sizeof(T)), sizeof(T));
    std::memcpy(d + i * ds * int64_t(sizeof(T)), &v, sizeof(T));
  }
}

void strided_run(const uint8_t* s, int64_t ss, uint8_t* d, int64_t ds, int64_t n, size_t es) {
  if (ss == 1 && ds == 1) {
    std::memcpy(d, s, static_cast<size_t>(n) * es);
    return;
  }
  if (ss == 0 && ds == 1) {
    fill_bytes(d, s, es, n);
    return;
  }
  switch (es) {
    case 1:
      strided_loop<uint8_t>(s, ss, d, ds, n);
      return;
    case 2:
      strided_loop<uint16_t>(s, ss, d, ds, n);
      return;
    case 4:
      strided_loop<uint32_t>(s, ss, d, ds, n);
      return;
    case 8:
      strided_loop<uint64_t>(s, ss, d, ds, n);
      return;
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * ds * int64_t(es), s + i * ss * int64_t(es), es);
  }
}

// dst[i*di + j*dj] = src[i*si + j*sj] for i < ni, j < nj, in 32x32 tiles.
template <typename T>
void tiled_2d_t(const uint8_t* s, int64_t si, int64_t sj, uint8_t* d, int64_t di, int64_t dj, int64_t ni, int64_t nj) {
  constexpr int64_t B = 32;
  const int64_t z = sizeof(T);
  for (int64_t i0 = 0; i0 < ni; i0 += B) {
    const int64_t i1 = std::min(ni, i0 + B);
    for (int64_t j0 = 0; j0 < nj; j0 += B) {
      const int64_t j1 = std::min(nj, j0 + B);
      for (int64_t i = i0; i < i1; ++i) {
        const uint8_t* srow = s + i * si * z;
        uint8_t* drow = d + i * di * z;
        for (int64_t j = j0; j < j1; ++j) {
          T v;
          std::memcpy(&v, srow + j * sj * z, sizeof(T));
          std::memcpy(drow + j * dj * z, &v, sizeof(T));
        }
      }
    }
  }
}

void tiled_2d(const uint8_t* s, int64_t si, int64_t sj, uint8_t* d, int64_t di, int64_t dj, int64_t ni, int64_t nj,
              size_t es) {
  switch (es) {
    case 1:
      return tiled_2d_t<uint8_t>(s, si, sj, d, di, dj, ni, nj);
    case 2:
      return tiled_2d_t<uint16_t>(s, si, sj, d, di, dj, ni, nj);
    case 4:
      return tiled_2d_t<uint32_t>(s, si, sj, d, di, dj, ni, nj);
    case 8:
      return tiled_2d_t<uint64_t>(s, si, sj, d, di, dj, ni, nj);
    default:
      for (int64_t i = 0; i < ni; ++i) strided_run(s + i * si * int64_t(es), sj, d + i * di * int64_t(es), dj, nj, es);
  }
}

}  // namespace

void copy_strided(const void* src, const std::vector<int64_t>& src_strides, void* dst,
                  const std::vector<int64_t>& dst_strides, const Shape& shape, size_t es) {
  KILN_CHECK(src_strides.size() == shape.size() && dst_strides.size() == shape.size(), "copy_strided: rank mismatch");
  int64_t n = shape_numel(shape);
  if (n == 0) return;
  struct Dim {
    int64_t size, s, d;
  };
  // Inner to outer, size-1 dims dropped, mergeable neighbours merged.
  std::vector<Dim> dims;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    Dim x{shape[i], src_strides[i], dst_strides[i]};
    if (!dims.empty() && x.s == dims.back().s * dims.back().size && x.d == dims.back().d * dims.back().size)
      dims.back().size *= x.size;
    else dims.push_back(x);
  }
  const auto* sp = static_cast<const uint8_t*>(src);
  auto* dp = static_cast<uint8_t*>(dst);
  if (dims.empty()) {
    std::memcpy(dp, sp, es);
    return;
  }
  const Dim in = dims.front();
  std::vector<Dim> outer(dims.rbegin(), dims.rend() - 1);  // outer to inner, without the innermost
  // A transpose-like copy (the innermost dim jumps in src while some other
  // dim is contiguous there) goes through cache-sized 2-D tiles of those two dims.
  int tile_dim = -1;
  if (in.s != 1 && in.size >= 8)
    for (size_t j = 0; j < outer.size(); ++j)
      if (outer[j].s == 1 && outer[j].size >= 8) tile_dim = static_cast<int>(j);
  Dim t{1, 0, 0};
  if (tile_dim >= 0) {
    t = outer[tile_dim];
    outer.erase(outer.begin() + tile_dim);
  }
  size_t k = outer.size();
  std::vector<int64_t> idx(k, 0);
  int64_t so = 0, dof = 0;
  const int64_t iters = n / (in.size * t.size);
  const int64_t ies = static_cast<int64_t>(es);
  for (int64_t it = 0; it < iters; ++it) {
    if (tile_dim >= 0) {
      tiled_2d(sp + so * ies, in.s, t.s, dp + dof * ies, in.d, t.d, in.size, t.size, es);
    } else {
      strided_run(sp + so * ies, in.s, dp + dof * ies, in.d, in.size, es);
    }
    for (size_t j = k; j-- > 0;) {
      if (++idx[j] < outer[j].size) {
        so += outer[j].s;
        dof += outer[j].d;
        break;
      }
      idx[j] = 0;
      so -= outer[j].s * (outer[j].size - 1);
      dof -= outer[j].d * (outer[j].size - 1);
    }
  }
}

namespace {

// Row-major copy of a strided view of `in` into `out` (out's own layout).
void view_copy(const Tensor& in, const std::vector<int64_t>& src_strides, const Shape& view_shape, Tensor& out) {
  copy_strided(in.raw(), src_strides, out.raw(), strides_of(view_shape), view_shape, dtype_size(in.dtype()));
}

std::vector<int64_t> attr_ints(InferContext& c, const char* name) { return c.attrs().get_ints(name); }

// ---------------------------------------------------------------------------
// reshape

OpDef reshape_op() {
  OpDef d;
  d.name = "reshape";
  d.symbolic_dims = true;  // element counts compare as polynomials
  d.category = OpCategory::Injective;
  d.attrs = {{"shape", AttrKind::Ints, true}};
  d.infer = [](InferContext& c) {
    Shape s = attr_ints(c, "shape");
    for (int64_t v : s)
      if (v < 0 && !is_symbolic_dim(v))
        c.fail("shape [{}] has negative dim {} (kiln's reshape takes final dims; the ONNX adapter resolves 0 and -1)",
               fmt::join(s, ","), v);
    // Element counts as polynomials of the symbols: equal for every value of
    // the symbols, or the reshape is refused.
    int64_t n = 0, have = 0;
    try {
      n = dim_product(s);
      have = dim_product(c.shape(0));
      if (!is_symbolic_dim(n)) shape_numel(s);  // (the static overflow limit)
    } catch (const Error& e) {
      c.fail("{}", e.what());
    }
    if (n != have)
      c.fail("cannot reshape {} ({} elements) to [{}] ({} elements)", c.type(0).str(), dim_str(have), dims_str(s),
             dim_str(n));
    return std::vector<TensorType>{TensorType(c.dtype(0), s)};
  };
  d.reference = [](KernelContext& k) {
    // Same bytes, new shape: share the storage (tensors are immutable once computed).
    k.out(0) = k.in(0).reshaped(k.out(0).shape());
  };
  d.doc =
      "Same elements in row-major order under a new shape; `shape` holds the final dims (no 0 or -1). "
      "ONNX Reshape, Flatten, Squeeze and Unsqueeze all import as reshape.";
  return d;
}

// ---------------------------------------------------------------------------
// transpose

OpDef transpose_op() {
  OpDef d;
  d.name = "transpose";
  d.symbolic_dims = true;  // dims are permuted, never computed
  d.category = OpCategory::Injective;
  d.attrs = {{"perm", AttrKind::Ints, true}, {"layout", AttrKind::String}};
  d.infer = [](InferContext& c) {
    std::vector<int64_t> perm = attr_ints(c, "perm");
    int r = c.rank(0);
    if (static_cast<int>(perm.size()) != r)
      c.fail("perm [{}] has {} entries for rank {}", fmt::join(perm, ","), perm.size(), r);
    std::vector<bool> seen(r, false);
    Shape out(r);
    for (int i = 0; i < r; ++i) {
      if (perm[i] < 0 || perm[i] >= r || seen[perm[i]])
        c.fail("perm [{}] is not a permutation of 0..{}", fmt::join(perm, ","), r - 1);
      seen[perm[i]] = true;
      out[i] = c.shape(0)[perm[i]];
    }
    // layout="nhwc": a transpose into channels-last (docs/ir.md "Layouts").
    if (nhwc_layout(c.attrs(), c.label())) {
      if (r < 3 || perm != channels_last_perm(r))
        c.fail("layout nhwc needs the channels-last perm of a rank >= 3 operand, got [{}] for rank {}",
               fmt::join(perm, ","), r);
      return std::vector<TensorType>{TensorType(c.dtype(0), out, Layout::NHWC)};
    }
    return std::vector<TensorType>{TensorType(c.dtype(0), out)};
  };
  d.reference = [](KernelContext& k) {
    const Tensor& in = k.in(0);
    std::vector<int64_t> perm = k.attrs.get_ints("perm");
    std::vector<int64_t> ist = strides_of(in.shape()), src(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) src[i] = ist[perm[i]];
    view_copy(in, src, k.out(0).shape(), k.out(0));
  };
  d.doc =
      "Permutes dims: result dim i is operand dim perm[i] (perm is explicit, never defaulted); "
      "layout=\"nhwc\" marks a transpose into channels-last (perm [0,2,..,r-1,1], result tagged {nhwc}).";
  return d;
}

// ---------------------------------------------------------------------------
// expand

OpDef expand_op() {
  OpDef d;
  d.name = "expand";
  d.category = OpCategory::Injective;
  d.symbolic_dims = true;  // dims compare as in broadcasting (equal, or 1 against anything)
  d.attrs = {{"shape", AttrKind::Ints, true}};
  d.infer = [](InferContext& c) {
    Shape s = attr_ints(c, "shape");
    if (s.size() < c.shape(0).size())
      c.fail("shape [{}] has lower rank than the operand {}", dims_str(s), c.type(0).str());
    for (int64_t v : s)
      if (v < 0 && !is_symbolic_dim(v)) c.fail("shape [{}] has a negative dim", dims_str(s));
    Shape b;
    try {
      b = broadcast_shapes(c.shape(0), s);
    } catch (const Error& e) {
      c.fail("{}", e.what());
    }
    if (b != s)
      c.fail("operand {} does not broadcast to [{}] (the result shape must be given in full)", c.type(0).str(),
             dims_str(s));
    if (has_symbolic_dims(s)) return std::vector<TensorType>{TensorType(c.dtype(0), s)};
    try {
      shape_numel(s);
    } catch (const Error& e) {
      c.fail("{}", e.what());
    }
    return std::vector<TensorType>{TensorType(c.dtype(0), s)};
  };
  d.reference = [](KernelContext& k) {
    const Shape& os = k.out(0).shape();
    view_copy(k.in(0), broadcast_strides(k.in(0).shape(), os), os, k.out(0));
  };
  d.doc =
      "Numpy-style broadcast of the operand to `shape`, the full result shape (ONNX Expand's "
      "bidirectional broadcast is resolved at import).";
  return d;
}

// ---------------------------------------------------------------------------
// tile

OpDef tile_op() {
  OpDef d;
  d.name = "tile";
  d.category = OpCategory::Injective;
  d.attrs = {{"repeats", AttrKind::Ints, true}};
  d.infer = [](InferContext& c) {
    std::vector<int64_t> rep = attr_ints(c, "repeats");
    if (static_cast<int>(rep.size()) != c.rank(0))
      c.fail("repeats [{}] has {} entries for rank {}", fmt::join(rep, ","), rep.size(), c.rank(0));
    Shape out(rep.size());
    for (size_t i = 0; i < rep.size(); ++i) {
      if (rep[i] < 0) c.fail("repeats [{}] has a negative entry", fmt::join(rep, ","));
      int64_t dim = c.shape(0)[i];
      if (dim != 0 && rep[i] > (int64_t(1) << 62) / dim) c.fail("tiled dim {} overflows", i);
      out[i] = dim * rep[i];
    }
    try {
      shape_numel(out);
    } catch (const Error& e) {
      c.fail("{}", e.what());
    }
    return std::vector<TensorType>{TensorType(c.dtype(0), out)};
  };
  d.reference = [](KernelContext& k) {
    // Result viewed as [r0, d0, r1, d1, ...] reads input [d0, d1, ...] with
    // stride 0 along the repeat dims.
    const Tensor& in = k.in(0);
    std::vector<int64_t> rep = k.attrs.get_ints("repeats");
    std::vector<int64_t> ist = strides_of(in.shape());
    Shape view;
    std::vector<int64_t> src;
    for (size_t i = 0; i < rep.size(); ++i) {
      view.push_back(rep[i]);
      src.push_back(0);
      view.push_back(in.shape()[i]);
      src.push_back(ist[i]);
    }
    view_copy(in, src, view, k.out(0));
  };
  d.doc = "Repeats the operand repeats[i] times along each dim i (result dim = dim * repeats[i]).";
  return d;
}

// ---------------------------------------------------------------------------
// depth_to_space / space_to_depth

void check_rank4_block(InferContext& c, int64_t b) {
  if (c.rank(0) != 4) c.fail("operand must be rank 4 (NCHW), got {}", c.type(0).str());
  if (b <= 0) c.fail("blocksize {} must be positive", b);
}

OpDef depth_to_space_op() {
  OpDef d;
  d.name = "depth_to_space";
  d.category = OpCategory::Injective;
  d.attrs = {{"blocksize", AttrKind::Int, true}, {"mode", AttrKind::String}};
  d.infer = [](InferContext& c) {
    int64_t b = c.attrs().require_int("blocksize");
    check_rank4_block(c, b);
    std::string mode = c.attrs().get_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") c.fail("mode '{}' must be DCR or CRD", mode);
    const Shape& s = c.shape(0);
    if (b > (int64_t(1) << 31) || s[1] % (b * b) != 0)
      c.fail("channels {} are not divisible by blocksize^2 ({}^2)", s[1], b);
    Shape out{s[0], s[1] / (b * b), 0, 0};
    if (__builtin_mul_overflow(s[2], b, &out[2]) || __builtin_mul_overflow(s[3], b, &out[3]))
      c.fail("result dims overflow");
    return std::vector<TensorType>{TensorType(c.dtype(0), out)};
  };
  d.reference = [](KernelContext& k) {
    const Tensor& in = k.in(0);
    int64_t b = k.attrs.require_int("blocksize");
    bool dcr = k.attrs.get_string("mode", "DCR") == "DCR";
    const Shape& s = in.shape();
    int64_t N = s[0], C = s[1] / (b * b), H = s[2], W = s[3];
    int64_t HW = H * W;
    // Input channel index is (b1 * b + b2) * C + c (DCR) or (c * b + b1) * b + b2 (CRD).
    int64_t sc = dcr ? HW : b * b * HW, sb1 = dcr ? b * C * HW : b * HW, sb2 = dcr ? C * HW : HW;
    // Result [N, C, H, b1, W, b2].
    view_copy(in, {s[1] * HW, sc, W, sb1, 1, sb2}, {N, C, H, b, W, b}, k.out(0));
  };
  d.doc =
      "Moves blocks of channels into spatial blocks: [N, C*b*b, H, W] -> [N, C, H*b, W*b]; "
      "mode DCR (channel = (b1*b+b2)*C + c) or CRD (channel = (c*b+b1)*b + b2).";
  return d;
}

OpDef space_to_depth_op() {
  OpDef d;
  d.name = "space_to_depth";
  d.category = OpCategory::Injective;
  d.attrs = {{"blocksize", AttrKind::Int, true}};
  d.infer = [](InferContext& c) {
    int64_t b = c.attrs().require_int("blocksize");
    check_rank4_block(c, b);
    const Shape& s = c.shape(0);
    if (s[2] % b != 0 || s[3] % b != 0) c.fail("spatial dims {}x{} are not divisible by blocksize {}", s[2], s[3], b);
    if (b > (int64_t(1) << 31)) c.fail("blocksize {} is too large", b);
    Shape out{s[0], 0, s[2] / b, s[3] / b};
    if (__builtin_mul_overflow(s[1], b * b, &out[1])) c.fail("result channels overflow");
    try {
      shape_numel(out);
    } catch (const Error& e) {
      c.fail("{}", e.what());
    }
    return std::vector<TensorType>{TensorType(c.dtype(0), out)};
  };
  d.reference = [](KernelContext& k) {
    const Tensor& in = k.in(0);
    int64_t b = k.attrs.require_int("blocksize");
    const Shape& s = in.shape();
    int64_t N = s[0], C = s[1], H = s[2], W = s[3];
    // Input viewed as [N, C, H/b, b1, W/b, b2]; result [N, b1, b2, C, H/b, W/b].
    view_copy(in, {C * H * W, W, 1, H * W, b * W, b}, {N, b, b, C, H / b, W / b}, k.out(0));
  };
  d.doc =
      "Moves spatial blocks into channels: [N, C, H, W] -> [N, C*b*b, H/b, W/b], "
      "result channel = (b1*b + b2)*C + c (inverse of depth_to_space DCR).";
  return d;
}

// ---------------------------------------------------------------------------
// range

// Number of elements of range(start, limit, delta), or -1 when delta is 0.
int64_t range_count(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  if (is_float(start.dtype())) {
    double s = start.get_double(0), l = limit.get_double(0), dl = delta.get_double(0);
    if (dl == 0 || std::isnan(dl)) return -1;
    double n = std::ceil((l - s) / dl);
    if (std::isnan(n)) return -2;
    if (n > double(int64_t(1) << 32)) return -3;
    return n > 0 ? static_cast<int64_t>(n) : 0;
  }
  // Integers: exact ceiling division in 128-bit (limit - start cannot overflow there).
  __int128 s = start.get_int(0), l = limit.get_int(0), dl = delta.get_int(0);
  if (start.dtype() == DType::U64) {
    s = static_cast<uint64_t>(start.get_int(0));
    l = static_cast<uint64_t>(limit.get_int(0));
    dl = static_cast<uint64_t>(delta.get_int(0));
  }
  if (dl == 0) return -1;
  __int128 diff = l - s;
  __int128 q = diff / dl;
  if ((diff % dl != 0) && ((diff > 0) == (dl > 0))) ++q;  // ceil
  if (q <= 0) return 0;
  if (q > (__int128(1) << 32)) return -3;
  return static_cast<int64_t>(q);
}

constexpr int64_t kNotSymbolic = -1;  // never a length, nor a handle

// The length of a range whose start or limit is a symbolic shape value:
// limit - start as a polynomial, for an integer range with the constant step
// 1 (a length ceil((limit - start) / delta) is a polynomial only then), and
// refused by name otherwise. kNotSymbolic when no operand is symbolic.
int64_t symbolic_range_count(InferContext& c, const Tensor& s, const Tensor& l, const Tensor& dl) {
  auto symbolic = [](const Tensor& t) { return t.dtype() == DType::I64 && is_symbolic_dim(t.get_int(0)); };
  if (!symbolic(s) && !symbolic(l) && !symbolic(dl)) return kNotSymbolic;
  if (symbolic(dl) || dl.get_int(0) != 1)
    c.unsupported("range({}, {}, {}): with a symbolic start or limit kiln needs the step 1", dim_str(s.get_int(0)),
                  dim_str(l.get_int(0)), dim_str(dl.get_int(0)));
  DimPoly n = dim_poly(l.get_int(0));
  for (const auto& [mono, coeff] : dim_poly(s.get_int(0)))
    if ((n[mono] -= coeff) == 0) n.erase(mono);
  // A length that could be negative for some values of the symbols would be
  // clamped to 0 by ONNX, which no polynomial says: refused.
  for (const auto& [mono, coeff] : n)
    if (coeff < 0)
      c.unsupported("range({}, {}, 1): the length {} - ({}) may be negative", dim_str(s.get_int(0)),
                    dim_str(l.get_int(0)), dim_str(l.get_int(0)), dim_str(s.get_int(0)));
  return n.empty() ? 0 : dim_of_poly(n);
}

OpDef range_op() {
  OpDef d;
  d.name = "range";
  d.category = OpCategory::Compute;
  d.min_inputs = d.max_inputs = 3;
  // A start or limit holding a symbolic shape value (range(past, past + seq),
  // what a decoder computes its positions with) gives a symbolic length.
  d.symbolic_dims = true;
  d.infer = [](InferContext& c) {
    require_same_dtype(c);
    if (c.dtype(0) == DType::Bool) c.fail("bool operands are not numbers");
    const char* what[] = {"range start", "range limit", "range delta"};
    for (int i = 0; i < 3; ++i)
      if (c.type(i).numel() != 1) c.fail("{} must be a scalar, got {}", what[i], c.type(i).str());
    const Tensor& s = c.require_value(0, what[0]);
    const Tensor& l = c.require_value(1, what[1]);
    const Tensor& dl = c.require_value(2, what[2]);
    if (int64_t n = symbolic_range_count(c, s, l, dl); n != kNotSymbolic)
      return std::vector<TensorType>{TensorType(c.dtype(0), {n})};
    int64_t n = range_count(s, l, dl);
    if (n == -1) c.fail("delta is zero");
    if (n == -2) c.fail("range({}, {}, {}) has no defined length", s.get_double(0), l.get_double(0), dl.get_double(0));
    if (n < 0)
      c.unsupported("range({}, {}, {}) has more than 2^32 elements", s.get_double(0), l.get_double(0),
                    dl.get_double(0));
    return std::vector<TensorType>{TensorType(c.dtype(0), {n})};
  };
  d.reference = [](KernelContext& k) {
    const Tensor &s = k.in(0), &dl = k.in(2);
    Tensor& out = k.out(0);
    if (is_float(out.dtype())) {
      double s0 = s.get_double(0), step = dl.get_double(0);
      for (int64_t i = 0; i < out.numel(); ++i) out.set_double(i, s0 + static_cast<double>(i) * step);
    } else {
      // Wrapping arithmetic in uint64 gives the right bits for every integer dtype.
      uint64_t s0 = static_cast<uint64_t>(s.get_int(0)), step = static_cast<uint64_t>(dl.get_int(0));
      for (int64_t i = 0; i < out.numel(); ++i)
        out.set_int(i, static_cast<int64_t>(s0 + static_cast<uint64_t>(i) * step));
    }
  };
  d.doc =
      "start + i*delta for i < max(ceil((limit-start)/delta), 0); operands are scalars whose values "
      "must be known at compile time (the result length depends on them), or, with step 1, symbolic "
      "shape values (range(past, past+seq) has length seq).";
  return d;
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  r.add(reshape_op());
  r.add(transpose_op());
  r.add(expand_op());
  r.add(tile_op());
  r.add(depth_to_space_op());
  r.add(space_to_depth_op());
  r.add(range_op());
  register_movement_ops(r);
}

}  // namespace kiln::ops
