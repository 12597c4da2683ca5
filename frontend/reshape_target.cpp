// ONNX Reshape's target resolved against the input shape (frontend/reshape_target.h).
#include "frontend/reshape_target.h"

#include <optional>

#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"

namespace kiln::adapters {

namespace {

// resolve_reshape with symbolic dims in the input or the target.
Shape resolve_symbolic_reshape(ImportContext& c, const Shape& in, const std::vector<int64_t>& spec, bool allowzero) {
  // Polynomial arithmetic errors (overflow) name the node.
  auto checked = [&](auto f) {
    try {
      return f();
    } catch (const Error& e) {
      c.fail("{}", e.what());
    }
  };
  Shape out(spec.size());
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t v = spec[i];
    if (v == -1) {
      if (infer_at >= 0) c.fail("shape [{}] has more than one -1", dims_str(spec));
      infer_at = static_cast<int>(i);
      continue;
    }
    if (v < -1 && !is_symbolic_dim(v)) c.fail("shape [{}] has invalid dim {}", dims_str(spec), v);
    if (v == 0 && !allowzero) {
      if (i >= in.size())
        c.fail("shape [{}] copies dim {} (0) but the input {} has rank {}", dims_str(spec), i, shape_str(in),
               in.size());
      v = in[i];
    }
    out[i] = v;
    known = checked([&] { return dim_mul(known, v); });
  }
  if (infer_at >= 0) {
    int64_t numel = checked([&] { return dim_product(in); });
    std::optional<int64_t> q = known == 0 ? std::nullopt : checked([&] { return dim_div_exact(numel, known); });
    if (!q)
      c.fail(
          "cannot infer the -1 of shape [{}] for input [{}]: {} elements are not a multiple of {} for every value "
          "of the symbols",
          dims_str(spec), dims_str(in), dim_str(numel), dim_str(known));
    out[infer_at] = *q;
  }
  return out;
}

}  // namespace

Shape resolve_reshape(ImportContext& c, const Shape& in, const std::vector<int64_t>& spec, bool allowzero) {
  // Symbolic dims (a target computed from Shape of a dynamic input, or an
  // input dim copied by 0) multiply as polynomials; -1 is the quotient of
  // the element counts where it is exact for every value of the symbols.
  if (has_symbolic_dims(in) || has_symbolic_dims(spec)) return resolve_symbolic_reshape(c, in, spec, allowzero);
  Shape out(spec.size());
  int infer_at = -1;
  bool has_zero = false;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t v = spec[i];
    if (v == -1) {
      if (infer_at >= 0) c.fail("shape [{}] has more than one -1", fmt::join(spec, ","));
      infer_at = static_cast<int>(i);
      continue;
    }
    if (v < -1) c.fail("shape [{}] has invalid dim {}", fmt::join(spec, ","), v);
    if (v == 0 && !allowzero) {
      if (i >= in.size())
        c.fail("shape [{}] copies dim {} (0) but the input {} has rank {}", fmt::join(spec, ","), i, shape_str(in),
               in.size());
      v = in[i];
    }
    if (v == 0) has_zero = true;
    out[i] = v;
    if (v != 0 && known > (int64_t(1) << 62) / v) c.fail("shape [{}] overflows", fmt::join(spec, ","));
    known *= v;
  }
  int64_t numel = shape_numel(in);
  if (infer_at >= 0) {
    if (allowzero && has_zero) c.fail("shape [{}] has both 0 and -1 with allowzero=1", fmt::join(spec, ","));
    if (known == 0) {
      if (numel != 0) c.fail("cannot reshape {} elements to [{}]", numel, fmt::join(spec, ","));
      c.fail("shape [{}]: -1 is ambiguous next to a zero-sized dim", fmt::join(spec, ","));
    }
    if (numel % known != 0)
      c.fail("cannot reshape input [{}] ({} elements) to [{}]", fmt::join(in, ","), numel, fmt::join(spec, ","));
    out[infer_at] = numel / known;
  }
  return out;
}

}  // namespace kiln::adapters
