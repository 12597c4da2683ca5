#include "ops/symbolic_image.h"

#include "ir/floor_div_dims.h"
#include "ops/nn_shape.h"

namespace kiln::ops {

namespace {

// d + k for a constant k of any sign (a symbolic d stays a polynomial).
int64_t dim_plus(int64_t d, int64_t k) { return value_add(d, k); }

// Stand-in values for the symbolic spatial dims: large, odd, different, so a
// result dim that depends on the input's differs between them.
constexpr int64_t kStandIns[] = {50021, 50053};

}  // namespace

std::optional<int64_t> symbolic_window_out_dim(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                                               int64_t pad_end, int64_t dilation, bool ceil_mode, std::string& why) {
  if (!is_symbolic_dim(in)) {
    int64_t o = window_out_dim(in, kernel, stride, pad_begin, pad_end, dilation, ceil_mode);
    if (o < 1) why = "the window does not fit";
    return o < 1 ? std::nullopt : std::optional<int64_t>(o);
  }
  const int64_t span = dim_plus(in, pad_begin + pad_end - effective_kernel(kernel, dilation));
  auto q = ceil_mode ? dim_ceil_div(span, stride) : dim_floor_div(span, stride);
  if (!q) {
    why = fmt::format("floor(({}) / {}) over several symbols is not a polynomial", dim_str(span), stride);
    return std::nullopt;
  }
  int64_t out = dim_plus(*q, 1);
  if (ceil_mode) {
    // The last window must start inside the input or its begin padding:
    // (out - 1) * stride < in + pad_begin, decided only if the difference is constant.
    const int64_t diff = value_sub(value_mul(dim_plus(out, -1), stride), dim_plus(in, pad_begin));
    if (is_symbolic_dim(diff)) {
      why = fmt::format("with ceil_mode, whether the last window of {} starts inside the input depends on the symbols",
                        dim_str(out));
      return std::nullopt;
    }
    if (diff >= 0) out = dim_plus(out, -1);
  }
  return out;
}

std::vector<TensorType> infer_symbolic_image(InferContext& c,
                                             const std::function<std::vector<TensorType>(InferContext&)>& infer,
                                             const SpatialOut& spatial_out) {
  if (!c.has_input(0) || c.rank(0) < 3) return infer_symbolic_batch(c, infer);
  const Shape& xs = c.shape(0);
  const int r = c.rank(0);
  const bool nhwc = c.attrs().get_string("layout", "nchw") == "nhwc";
  const int first = nhwc ? 1 : 2, channel = nhwc ? r - 1 : 1;
  bool spatial = false;
  for (int d = first; d < first + r - 2; ++d) spatial |= is_symbolic_dim(xs[d]);
  if (!spatial) return infer_symbolic_batch(c, infer);
  if (is_symbolic_dim(xs[channel]))
    c.unsupported(
        "kiln infers {} with a symbolic batch and spatial dims, not a symbolic channel count: operand 0 is {}", c.op(),
        c.type(0).str());
  for (int i = 1; i < c.num_inputs(); ++i)
    if (c.has_input(i) && has_symbolic_dims(c.shape(i)))
      c.unsupported("kiln infers {} with symbolic dims in operand 0 only: operand {} is {}", c.op(), i,
                    c.type(i).str());
  // The static inference at two stand-ins of the spatial symbols.
  auto run = [&](int64_t stand_in) {
    auto stand_in_spatial = [&](TensorType& t) {
      for (int d = first; d < first + r - 2; ++d)
        if (is_symbolic_dim(t.shape[d])) t.shape[d] = stand_in;
    };
    return infer_with_operand0_as(c, stand_in_spatial,
                                  [&](InferContext& sub) { return infer_symbolic_batch(sub, infer); });
  };
  std::vector<TensorType> a = run(kStandIns[0]), b = run(kStandIns[1]);
  for (size_t j = 0; j < a.size(); ++j) {
    for (int k = 0; k < a[j].rank(); ++k) {
      if (a[j].shape[k] == b[j].shape[k]) continue;  // does not follow the spatial dims (a global pool's 1)
      const int axis = k - first;
      if (a[j].rank() != r || a[j].layout != c.type(0).layout || axis < 0 || axis >= r - 2 || !is_symbolic_dim(xs[k]))
        c.unsupported("kiln cannot infer {} with symbolic spatial dims: result {} dim {} follows them", c.op(), j, k);
      std::string why;
      std::optional<int64_t> out = spatial_out ? spatial_out(axis, xs[k], why) : std::optional<int64_t>(xs[k]);
      if (!out)
        c.unsupported("{} over the symbolic dim {} (spatial axis {} of {}): {}", c.op(), dim_str(xs[k]), axis,
                      c.type(0).str(), why);
      // The formula must be the static inference's (at the stand-ins), and
      // the symbolic result its value at every residue of small strides.
      for (int s = 0; s < 2; ++s) {
        std::string unused;
        const std::optional<int64_t> st =
            spatial_out ? spatial_out(axis, kStandIns[s], unused) : std::optional<int64_t>(kStandIns[s]);
        if (!st || *st != (s ? b : a)[j].shape[k])
          c.fail("internal: the spatial size formula of {} disagrees with its inference at {}", c.op(), kStandIns[s]);
      }
      for (int64_t v = 1009; v < 1009 + 24; ++v) {
        SymbolBindings bind;
        for (const std::string& sym : dim_symbols(xs[k])) bind[sym] = v;
        const int64_t in = eval_dim(xs[k], bind);
        std::string unused;
        const std::optional<int64_t> st = spatial_out ? spatial_out(axis, in, unused) : std::optional<int64_t>(in);
        if (st && *st != eval_dim(*out, bind))
          c.fail("internal: the symbolic spatial size {} gives {} where the input is {}, the formula {}", dim_str(*out),
                 eval_dim(*out, bind), in, *st);
      }
      a[j].shape[k] = *out;
    }
  }
  return a;
}

}  // namespace kiln::ops
