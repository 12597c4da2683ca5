#include "codegen/emitters/data_movement/emit_index_select.h"

#include <cstring>

#include <fmt/format.h>

#include "codegen/core/emit_expr.h"
#include "ir/error.h"
#include "ir/shape_utils.h"

namespace kiln::codegen {

namespace {

const char* uint_type(size_t bytes) {
  switch (bytes) {
    case 1:
      return "unsigned char";
    case 2:
      return "unsigned short";
    case 4:
      return "unsigned int";
    default:
      return "unsigned long long";
  }
}

// The bits of `v` in dtype `t`, as a constant of the element type.
std::string const_bits(DType t, double v) {
  Tensor s = Tensor::scalar(t, v);
  uint64_t bits = 0;
  std::memcpy(&bits, s.raw(), dtype_size(t));
  return fmt::format("({})0x{:x}ULL", uint_type(dtype_size(t)), bits);
}

std::string coords(const Shape& s) {
  std::string b = "    long long rem = i;\n";
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d)
    b += fmt::format("    const long long o{0} = rem % {1}LL; rem /= {1}LL;\n", d, s[d]);
  return b + "    (void)rem;\n";
}

// Sum of coordinate * stride terms (coordinate names given).
std::string linear(const std::vector<std::string>& co, const std::vector<int64_t>& st) {
  std::string s;
  for (size_t d = 0; d < co.size(); ++d)
    if (st[d] != 0) s += fmt::format("{}{} * {}LL", s.empty() ? "" : " + ", co[d], st[d]);
  return s.empty() ? "0LL" : s;
}

OneLaunchKernel emit_one_hot(const AttrMap& a, const std::vector<TensorType>& in, const TensorType& out) {
  const DType idt = in.at(0).dtype;
  if (idt == DType::F16 || idt == DType::BF16 || idt == DType::Bool)
    fail("codegen: one_hot: {} indices are not supported by the emitter", dtype_name(idt));
  const int64_t depth = a.require_int("depth");
  const int r = out.rank();
  int64_t ax = a.get_int("axis", -1);
  if (ax < 0) ax += r;
  if (ax < 0 || ax >= r || in.at(1).numel() != 2) fail("codegen: one_hot: operands do not fit");
  std::vector<std::string> ico;
  for (int d = 0; d < r; ++d)
    if (d != ax) ico.push_back(fmt::format("o{}", d));
  const std::string ix = fmt::format("in0[{}]", linear(ico, strides_of(in[0].shape)));
  std::string b = coords(out.shape);
  b += "    long long pos = -1;\n";
  if (idt == DType::F32 || idt == DType::F64) {
    b += fmt::format("    const double t = trunc((double){});\n", ix);
    b += fmt::format("    if (t >= -{0}.0 && t < {0}.0) {{ pos = (long long)t; if (pos < 0) pos += {0}LL; }}\n", depth);
  } else if (idt == DType::U64) {
    b += fmt::format("    const unsigned long long u = {};\n    if (u < {}ULL) pos = (long long)u;\n", ix, depth);
  } else {
    b += fmt::format("    long long iv = (long long){};\n    if (iv < 0) iv += {}LL;\n", ix, depth);
    b += fmt::format("    if (iv >= 0 && iv < {}LL) pos = iv;\n", depth);
  }
  b += fmt::format("    out[i] = in1[pos == o{} ? 1 : 0];\n", ax);
  const std::string E = uint_type(dtype_size(out.dtype));
  return make_simple_kernel(
      "idx", "one_hot", {{E, "out"}, {"const " + std::string(cuda_storage_type(idt)), "in0"}, {"const " + E, "in1"}},
      "", b, out.numel(), {});
}

OneLaunchKernel emit_eye_like(const AttrMap& a, const std::vector<TensorType>& in, const TensorType& out) {
  if (out.rank() != 2) fail("codegen: eye_like: rank {} != 2", out.rank());
  const int64_t k = a.get_int("k", 0);
  const std::string E = uint_type(dtype_size(out.dtype));
  std::string b = coords(out.shape);
  b += fmt::format("    out[i] = o1 - o0 == {}LL ? {} : {};\n", k, const_bits(out.dtype, 1.0),
                   const_bits(out.dtype, 0.0));
  // The operand is only the shape; never read.
  return make_simple_kernel("idx", "eye_like",
                            {{E, "out"}, {"const " + std::string(uint_type(dtype_size(in.at(0).dtype))), "in0"}}, "", b,
                            out.numel(), {});
}

OneLaunchKernel emit_compress(const AttrMap& a, const std::vector<TensorType>& in, const TensorType& out) {
  const Shape& xs = in.at(0).shape;
  if (in.at(1).dtype != DType::Bool) fail("codegen: compress: condition must be bool");
  const bool has_axis = a.has("axis");
  const int r = static_cast<int>(xs.size());
  int64_t ax = has_axis ? a.get_int("axis", 0) : 0;
  if (has_axis && ax < 0) ax += r;
  if (has_axis && (ax < 0 || ax >= r)) fail("codegen: compress: axis out of range");
  const int64_t limit = has_axis ? xs[ax] : shape_numel(xs);
  std::string b = coords(out.shape);
  b += fmt::format("    const long long j = o{};\n    long long pos = -1, seen = 0;\n", has_axis ? ax : 0);
  b += fmt::format("    for (long long s = 0; s < {}LL; ++s)\n", in[1].numel());
  b += "      if (in1[s]) { if (seen == j) { pos = s; break; } ++seen; }\n";
  std::string off = "pos";
  if (has_axis) {
    std::vector<std::string> co;
    for (int d = 0; d < r; ++d) co.push_back(d == ax ? "pos" : fmt::format("o{}", d));
    off = linear(co, strides_of(xs));
  }
  const std::string E = uint_type(dtype_size(out.dtype));
  b += fmt::format("    out[i] = pos < 0 || pos >= {}LL ? ({})0 : in0[{}];\n", limit, E, off);
  return make_simple_kernel("idx", "compress", {{E, "out"}, {"const " + E, "in0"}, {"const unsigned char", "in1"}}, "",
                            b, out.numel(), {});
}

}  // namespace

bool index_select_supported(const std::string& op) { return op == "one_hot" || op == "eye_like" || op == "compress"; }

OneLaunchKernel emit_index_select_op(const std::string& op, const AttrMap& attrs,
                                     const std::vector<TensorType>& operands, const TensorType& out) {
  if (op == "one_hot") return emit_one_hot(attrs, operands, out);
  if (op == "eye_like") return emit_eye_like(attrs, operands, out);
  if (op == "compress") return emit_compress(attrs, operands, out);
  fail("codegen: op '{}' is not one_hot, eye_like or compress", op);
}

}  // namespace kiln::codegen
