// ONNX adapters for the linalg family (see import_context.h). MatMul,
// Einsum, Det, MatMulInteger, QLinearMatMul and DynamicQuantizeLinear import
// 1:1 under the kiln op of the same meaning, named here (an ONNX op name is
// never looked up in kiln's op table).
#include "frontend/import_context.h"

namespace kiln::adapters {

namespace {

// Gemm: transA/transB renamed; opset < 7 `broadcast` checked and dropped.
void gemm(ImportContext& c) {
  const AttrMap& a = c.attrs();
  AttrMap k;
  for (auto& [name, v] : a) {
    if (name == "transA") k.set("trans_a", v);
    else if (name == "transB") k.set("trans_b", v);
    else if (name == "alpha" || name == "beta") k.set(name, v);
    else if (name == "broadcast" && c.opset() < 7) continue;
    else c.unsupported("attribute '{}' is not supported", name);
  }
  std::vector<Value*> ins{c.input(0), c.input(1)};
  if (c.has_input(2)) {
    ins.push_back(c.input(2));
    if (c.opset() < 7 && a.get_int("broadcast", 0) == 0) {
      // Without broadcast, C must already be [M, N].
      const Shape &sa = c.input(0)->shape(), &sb = c.input(1)->shape(), &sc = c.input(2)->shape();
      if (sa.size() == 2 && sb.size() == 2) {
        int64_t m = a.get_int("transA", 0) ? sa[1] : sa[0], n = a.get_int("transB", 0) ? sb[0] : sb[1];
        if (sc != Shape{m, n}) c.fail("C has shape [{}] but broadcast=0 requires [{},{}]", fmt::join(sc, ","), m, n);
      }
    }
  } else if (c.opset() < 11) {
    c.fail("C (operand 2) is required before opset 11");
  }
  c.set_outputs(c.emit("gemm", ins, k));
}

// Output spatial dims for auto_pad SAME_*: ceil(in / stride); VALID: no pads.
std::vector<int64_t> resolve_pads(ImportContext& c, const Shape& x, const Shape& w, const std::vector<int64_t>& strides,
                                  const std::vector<int64_t>& dilations) {
  const AttrMap& a = c.attrs();
  size_t nd = x.size() - 2;
  std::string ap = a.get_string("auto_pad", "NOTSET");
  if (ap == "NOTSET") {
    std::vector<int64_t> pads = a.get_ints("pads", std::vector<int64_t>(2 * nd, 0));
    if (pads.size() != 2 * nd) c.fail("pads has {} values; expected {}", pads.size(), 2 * nd);
    return pads;
  }
  if (a.has("pads")) c.fail("pads and auto_pad={} are both given", ap);
  std::vector<int64_t> pads(2 * nd, 0);
  if (ap == "VALID") return pads;
  if (ap != "SAME_UPPER" && ap != "SAME_LOWER") c.unsupported("auto_pad={} is not supported", ap);
  for (size_t i = 0; i < nd; ++i) {
    int64_t s = strides[i], in = x[i + 2], span = (w[i + 2] - 1) * dilations[i] + 1;
    if (s < 1) c.fail("strides must be >= 1");
    int64_t out = (in + s - 1) / s;
    int64_t total = std::max<int64_t>(0, (out - 1) * s + span - in);
    int64_t small = total / 2, big = total - small;
    pads[i] = ap == "SAME_UPPER" ? small : big;
    pads[i + nd] = ap == "SAME_UPPER" ? big : small;
  }
  return pads;
}

// ConvInteger / QLinearConv: explicit strides, pads, dilations, group.
void integer_conv(ImportContext& c, const std::string& kiln_op, int x_index, int w_index) {
  const AttrMap& a = c.attrs();
  for (auto& [name, v] : a)
    if (name != "auto_pad" && name != "dilations" && name != "group" && name != "kernel_shape" && name != "pads" &&
        name != "strides")
      c.unsupported("attribute '{}' is not supported", name);
  const Shape &x = c.input(x_index)->shape(), &w = c.input(w_index)->shape();
  if (x.size() < 3 || w.size() != x.size())
    c.fail("input rank {} and weight rank {} must be equal and >= 3", x.size(), w.size());
  size_t nd = x.size() - 2;
  std::vector<int64_t> strides = a.get_ints("strides", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> dilations = a.get_ints("dilations", std::vector<int64_t>(nd, 1));
  if (strides.size() != nd || dilations.size() != nd)
    c.fail("strides and dilations need {} values (got {} and {})", nd, strides.size(), dilations.size());
  if (a.has("kernel_shape")) {
    std::vector<int64_t> ks = a.get_ints("kernel_shape");
    if (ks != std::vector<int64_t>(w.begin() + 2, w.end()))
      c.fail("kernel_shape [{}] does not match the weight's spatial dims [{}]", fmt::join(ks, ","),
             fmt::join(std::vector<int64_t>(w.begin() + 2, w.end()), ","));
  }
  AttrMap k;
  k.set("strides", strides);
  k.set("dilations", dilations);
  k.set("pads", resolve_pads(c, x, w, strides, dilations));
  k.set("group", a.get_int("group", 1));
  std::vector<Value*> ins;
  for (int i = 0; i < c.num_inputs(); ++i) ins.push_back(c.has_input(i) ? c.input(i) : nullptr);
  c.set_outputs(c.emit(kiln_op, ins, k));
}

}  // namespace

void register_linalg(AdapterTable& t) {
  const std::pair<const char*, const char*> one_to_one[] = {
      {"MatMul", "matmul"},
      {"Einsum", "einsum"},
      {"Det", "det"},
      {"MatMulInteger", "matmul_integer"},
      {"QLinearMatMul", "qlinear_matmul"},
      {"DynamicQuantizeLinear", "dynamic_quantize_linear"},
  };
  for (auto& [onnx_op, kiln_op] : one_to_one)
    t.add(onnx_op, [k = std::string(kiln_op)](ImportContext& c) { c.import_as(k); });
  t.add("Gemm", gemm);
  t.add("ConvInteger", [](ImportContext& c) { integer_conv(c, "conv_integer", 0, 1); });
  t.add("QLinearConv", [](ImportContext& c) { integer_conv(c, "qlinear_conv", 0, 3); });
}

}  // namespace kiln::adapters
