#include "codegen/emitters/data_movement/emit_resize.h"

#include <cstring>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ops/resize_plan.h"

namespace kiln::codegen {

namespace {

Tensor table_i64(const std::vector<int64_t>& v) {
  Tensor t(TensorType(DType::I64, {static_cast<int64_t>(std::max<size_t>(v.size(), 1))}));
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * 8);
  else t.data<int64_t>()[0] = 0;
  return t;
}

}  // namespace

ResizeKernel emit_resize_op(const AttrMap& attrs, const TensorType& in, const TensorType& out) {
  const int r = in.rank();
  if (r < 1 || out.rank() != r || out.dtype != in.dtype)
    fail("codegen: resize: result {} does not fit input {}", out.str(), in.str());
  ops::ResizePlan plan = ops::resize_plan(attrs, in.shape, "resize");
  const std::vector<int64_t> ist = strides_of(in.shape);
  // Tables: axis d's entries start at bbase[d] (begin), obase[d] (outside).
  std::vector<int64_t> begin, tap, bbase, obase;
  std::vector<double> weight;
  std::vector<uint8_t> outside;
  bool any_outside = false;
  for (int d = 0; d < r; ++d) {
    const ops::ResizeAxisTaps& a = plan.axes[d];
    if (static_cast<int64_t>(a.outside.size()) != out.shape[d])
      fail("codegen: resize: axis {} plans {} coordinates for a result of {}", d, a.outside.size(), out.shape[d]);
    bbase.push_back(static_cast<int64_t>(begin.size()));
    obase.push_back(static_cast<int64_t>(outside.size()));
    const int64_t t0 = static_cast<int64_t>(tap.size());
    for (int64_t b : a.begin) begin.push_back(t0 + b);
    for (int64_t x : a.index) tap.push_back(x * ist[d]);
    weight.insert(weight.end(), a.weight.begin(), a.weight.end());
    for (uint8_t o : a.outside) {
      outside.push_back(o);
      any_outside = any_outside || o;
    }
  }
  const DType t = in.dtype;
  const std::string T(cuda_storage_type(t));
  std::string b;
  b += "    long long rem = i;\n";
  for (int d = r - 1; d >= 0; --d)
    b += fmt::format("    const long long o{0} = rem % {1}LL; rem /= {1}LL;\n", d, out.shape[d]);
  b += "    (void)rem;\n";
  if (any_outside) {
    // Outside the crop: extrapolation_value in the dtype (its bits, as the
    // reference's set_double stores it).
    Tensor ev = Tensor::scalar(t, plan.extrapolation);
    uint64_t bits = 0;
    std::memcpy(&bits, ev.raw(), dtype_size(t));
    const char* U = dtype_size(t) == 1   ? "unsigned char"
                    : dtype_size(t) == 2 ? "unsigned short"
                    : dtype_size(t) == 4 ? "unsigned int"
                                         : "unsigned long long";
    std::string cond;
    for (int d = 0; d < r; ++d) cond += fmt::format("{}outside[{}LL + o{}]", d ? " || " : "", obase[d], d);
    b += fmt::format(
        "    if ({}) {{ const {} bits = ({})0x{:x}ULL; memcpy(&out[i], &bits, sizeof(bits)); continue; }}\n", cond, U,
        U, bits);
  }
  if (plan.nearest) {
    std::string off;
    for (int d = 0; d < r; ++d) off += fmt::format("{}tap[begin[{}LL + o{}]]", d ? " + " : "", bbase[d], d);
    b += fmt::format("    out[i] = in0[{}];\n", off);
  } else {
    if (!is_float(t)) fail("codegen: resize: interpolating {} is not supported", dtype_name(t));
    b += "    double acc = 0;\n";
    std::string ind = "    ";
    for (int d = 0; d < r; ++d) {
      b += fmt::format("{0}for (long long t{1} = begin[{2}LL + o{1}]; t{1} < begin[{2}LL + o{1} + 1]; ++t{1}) {{\n",
                       ind, d, bbase[d]);
      ind += "  ";
      b += fmt::format("{}const double w{} = {} * weight[t{}];\n", ind, d, d ? fmt::format("w{}", d - 1) : "1.0", d);
      b += fmt::format("{}const long long f{} = {}tap[t{}];\n", ind, d, d ? fmt::format("f{} + ", d - 1) : "", d);
    }
    const std::string x = fmt::format("(double){}", cuda_load(t, fmt::format("in0[f{}]", r - 1)));
    b += fmt::format("{}acc += w{} * {};\n", ind, r - 1, x);
    for (int d = r - 1; d >= 0; --d) {
      ind.resize(ind.size() - 2);
      b += ind + "}\n";
    }
    const std::string c(cuda_compute_type(t));
    b += fmt::format("    out[i] = {};\n", cuda_store(t, fmt::format("({})acc", c)));
  }
  std::vector<LaunchParam> params = {{T, "out"},
                                     {"const " + T, "in0"},
                                     {"const long long", "begin"},
                                     {"const long long", "tap"},
                                     {"const double", "weight"},
                                     {"const unsigned char", "outside"}};
  ResizeKernel k;
  k.kernel = make_simple_kernel("resize", plan.nearest ? "nearest" : "interp", params, "", b, out.numel(), {t});
  k.tables.push_back(table_i64(begin));
  k.tables.push_back(table_i64(tap));
  Tensor w(TensorType(DType::F64, {static_cast<int64_t>(std::max<size_t>(weight.size(), 1))}));
  w.data<double>()[0] = 0;
  if (!weight.empty()) std::memcpy(w.raw(), weight.data(), weight.size() * 8);
  k.tables.push_back(w);
  Tensor o(TensorType(DType::U8, {static_cast<int64_t>(std::max<size_t>(outside.size(), 1))}));
  o.data<uint8_t>()[0] = 0;
  if (!outside.empty()) std::memcpy(o.raw(), outside.data(), outside.size());
  k.tables.push_back(o);
  return k;
}

}  // namespace kiln::codegen
