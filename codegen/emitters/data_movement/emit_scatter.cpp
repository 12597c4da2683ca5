#include "codegen/emitters/data_movement/emit_scatter.h"

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "ir/error.h"
#include "ir/shape_utils.h"

namespace kiln::codegen {

namespace {

// Quiet NaNs with the bit patterns std::numeric_limits<T>::quiet_NaN() has
// (the reference's max/min result for a NaN operand).
constexpr const char* kHelpers = R"(#ifndef KILN_SCATTER_HELPERS_
#define KILN_SCATTER_HELPERS_
__device__ inline float kiln_scatter_qnan(float) { unsigned int b = 0x7fc00000u; float f; memcpy(&f, &b, 4); return f; }
__device__ inline double kiln_scatter_qnan(double) {
  unsigned long long b = 0x7ff8000000000000ull; double f; memcpy(&f, &b, 8); return f;
}
#endif
)";

// Statements `v = combine(v, u)` for dtype t (v, u of the storage type).
std::string combine_code(DType t, const std::string& red) {
  if (red == "none") return "      v = u;\n";
  if (t == DType::Bool) {
    const bool any = red == "add" || red == "max";
    return fmt::format("      v = (unsigned char)((v != 0) {} (u != 0));\n", any ? "||" : "&&");
  }
  if (is_float(t)) {
    const std::string c(cuda_compute_type(t));  // float or double
    std::string s =
        fmt::format("      {{ const {0} a = {1}, b = {2}; {0} r;\n", c, cuda_load(t, "v"), cuda_load(t, "u"));
    if (red == "add") s += "        r = a + b;\n";
    else if (red == "mul") s += "        r = a * b;\n";
    else
      s += fmt::format("        r = (a != a || b != b) ? kiln_scatter_qnan(a) : (b {} a ? b : a);\n",
                       red == "max" ? ">" : "<");
    return s + fmt::format("        v = {}; }}\n", cuda_store(t, "r"));
  }
  const std::string T(cuda_storage_type(t));
  if (red == "add") return fmt::format("      v = ({})((unsigned long long)v + (unsigned long long)u);\n", T);
  if (red == "mul") return fmt::format("      v = ({})((unsigned long long)v * (unsigned long long)u);\n", T);
  return fmt::format("      v = u {} v ? u : v;\n", red == "max" ? ">" : "<");
}

std::string offset_expr(const std::vector<std::string>& co, const std::vector<int64_t>& st) {
  std::string s;
  for (size_t d = 0; d < co.size(); ++d)
    if (st[d] != 0) s += fmt::format("{}{} * {}LL", s.empty() ? "" : " + ", co[d], st[d]);
  return s.empty() ? "0LL" : s;
}

}  // namespace

bool scatter_supported(const std::string& op) { return op == "scatter_elements" || op == "scatter_nd"; }

OneLaunchKernel emit_scatter_op(const OpDef& def, const AttrMap& attrs, const std::vector<TensorType>& operands,
                                const TensorType& out) {
  if (!scatter_supported(def.name)) fail("codegen: op '{}' is not a scatter", def.name);
  if (operands.size() != 3) fail("codegen: {}: expected data, indices, updates", def.name);
  const TensorType& data = operands[0];
  const TensorType& idx = operands[1];
  const TensorType& upd = operands[2];
  if (idx.dtype != DType::I32 && idx.dtype != DType::I64)
    fail("codegen: {}: indices must be i32 or i64, got {}", def.name, dtype_name(idx.dtype));
  if (upd.dtype != data.dtype || out.dtype != data.dtype || out.shape != data.shape)
    fail("codegen: {}: data {}, updates {} and result {} must agree", def.name, data.str(), upd.str(), out.str());
  const std::string red = attrs.get_string("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    fail("codegen: {}: reduction '{}' is not supported", def.name, red);
  const DType t = data.dtype;
  const std::string T(cuda_storage_type(t));
  const std::string I = idx.dtype == DType::I32 ? "int" : "long long";
  const Shape& ds = data.shape;
  const int r = static_cast<int>(ds.size());
  std::string b;
  b += fmt::format("    {} v = in0[i];\n", T);
  const std::string combine = combine_code(t, red);
  if (def.name == "scatter_elements") {
    const Shape& is = idx.shape;
    int64_t a = attrs.get_int("axis", 0);
    if (a < 0) a += r;
    if (a < 0 || a >= r || static_cast<int>(is.size()) != r || upd.shape != is)
      fail("codegen: scatter_elements: operands {} {} {} do not fit axis {}", data.str(), idx.str(), upd.str(),
           attrs.get_int("axis", 0));
    std::string inside = "true";
    std::vector<std::string> co;
    for (int d = 0; d < r; ++d) {
      co.push_back(d == a ? "j" : fmt::format("p{}", d));
      if (d != a) inside += fmt::format(" && p{} < {}LL", d, is[d]);
    }
    // Result coordinates.
    b += "    long long rem = i;\n";
    for (int d = r - 1; d >= 0; --d)
      b += fmt::format("    const long long p{0} = rem % {1}LL; rem /= {1}LL;\n", d, ds[d]);
    b += "    (void)rem;\n";
    b += fmt::format("    if ({}) {{\n", inside);
    b += fmt::format("    for (long long j = 0; j < {}LL; ++j) {{\n", is[a]);
    b += fmt::format("      const long long e = {};\n", offset_expr(co, strides_of(is)));
    b += "      long long ix = (long long)in1[e];\n";
    b += fmt::format("      if (ix < 0) ix += {}LL;\n", ds[a]);
    b += fmt::format("      if (ix != p{}) continue;\n", a);
    b += fmt::format("      const {} u = in2[e];\n", T);
    b += combine;
    b += "    }\n    }\n";
  } else {
    const Shape& is = idx.shape;
    if (is.empty()) fail("codegen: scatter_nd: indices must have rank >= 1");
    const int64_t k = is.back();
    if (k < 1 || k > r) fail("codegen: scatter_nd: indices' last dim {} for data rank {}", k, r);
    int64_t slice = 1;
    for (int d = static_cast<int>(k); d < r; ++d) slice *= ds[d];
    int64_t tuples = 1;
    for (size_t d = 0; d + 1 < is.size(); ++d) tuples *= is[d];
    if (upd.numel() != tuples * slice) fail("codegen: scatter_nd: updates {} do not fit", upd.str());
    // q: p's position among the data's first k dims, in their row-major order.
    b += fmt::format("    const long long q = i / {}LL, e = i % {}LL;\n", slice, slice);
    b += fmt::format("    for (long long t = 0; t < {}LL; ++t) {{\n", tuples);
    b += "      long long lin = 0;\n      bool bad = false;\n";
    for (int64_t j = 0; j < k; ++j) {
      b += fmt::format("      {{ long long ix = (long long)in1[t * {}LL + {}];\n", k, j);
      b += fmt::format("        if (ix < 0) ix += {0}LL;\n        bad = bad || ix < 0 || ix >= {0}LL;\n", ds[j]);
      b += fmt::format("        lin = lin * {}LL + ix; }}\n", ds[j]);
    }
    b += "      if (bad || lin != q) continue;\n";
    b += fmt::format("      const {} u = in2[t * {}LL + e];\n", T, slice);
    b += combine;
    b += "    }\n";
  }
  b += "    out[i] = v;\n";
  std::vector<LaunchParam> params = {{T, "out"}, {"const " + T, "in0"}, {"const " + I, "in1"}, {"const " + T, "in2"}};
  return make_simple_kernel("scatter", def.name, params, kHelpers, b, out.numel(), {t});
}

}  // namespace kiln::codegen
