#include "passes/precision_policy.h"

#include <algorithm>
#include <limits>

namespace kiln {

std::string_view precision_class_name(PrecisionClass c) {
  switch (c) {
    case PrecisionClass::Reduced:
      return "reduced";
    case PrecisionClass::Float32:
      return "f32";
    case PrecisionClass::Follow:
      return "follow";
    case PrecisionClass::Cast:
      return "cast";
  }
  return "?";
}

namespace {

using P = PrecisionClass;

// Keep sorted by name (checked by the unit test); docs/precision.md explains
// each group.
const std::vector<std::pair<std::string_view, PrecisionClass>> kTable = {
    {"abs", P::Follow},
    {"acos", P::Float32},
    {"acosh", P::Float32},
    {"add", P::Follow},
    {"argmax", P::Follow},
    {"argmin", P::Follow},
    {"asin", P::Float32},
    {"asinh", P::Float32},
    {"atan", P::Follow},
    {"atanh", P::Float32},
    {"attention", P::Reduced},  // its kernel upcasts the softmax to f32 itself
    {"average_pool", P::Float32},
    {"batch_normalization", P::Float32},
    {"cast", P::Cast},
    {"ceil", P::Follow},
    {"celu", P::Follow},
    {"clip", P::Follow},
    {"concat", P::Follow},
    {"conv", P::Reduced},
    {"conv_transpose", P::Reduced},
    {"cos", P::Float32},
    {"cosh", P::Float32},
    {"cumprod", P::Float32},
    {"cumsum", P::Float32},
    {"depth_to_space", P::Follow},
    {"div", P::Follow},
    {"einsum", P::Reduced},
    {"elu", P::Follow},
    {"equal", P::Follow},
    {"erf", P::Float32},
    {"exp", P::Float32},
    {"expand", P::Follow},
    {"floor", P::Follow},
    {"gather", P::Follow},
    {"gather_elements", P::Follow},
    {"gather_nd", P::Follow},
    {"gelu", P::Follow},
    {"gemm", P::Reduced},
    {"global_average_pool", P::Float32},
    {"global_lp_pool", P::Float32},
    {"global_max_pool", P::Follow},
    {"greater", P::Follow},
    {"greater_or_equal", P::Follow},
    {"group_normalization", P::Float32},
    {"hard_sigmoid", P::Follow},
    {"hard_swish", P::Follow},
    {"hardmax", P::Follow},
    {"identity", P::Follow},
    {"instance_normalization", P::Float32},
    {"isinf", P::Follow},
    {"isnan", P::Follow},
    {"layer_normalization", P::Float32},
    {"leaky_relu", P::Follow},
    {"less", P::Follow},
    {"less_or_equal", P::Follow},
    {"log", P::Float32},
    {"log_softmax", P::Float32},
    {"lp_normalization", P::Float32},
    {"lp_pool", P::Float32},
    {"lrn", P::Float32},
    {"matmul", P::Reduced},
    {"max", P::Follow},
    {"max_pool", P::Follow},
    {"mean_variance_normalization", P::Float32},
    {"min", P::Follow},
    {"mish", P::Follow},
    {"mul", P::Follow},
    {"neg", P::Follow},
    {"one_hot", P::Follow},
    {"pad", P::Follow},
    {"pow", P::Float32},
    {"prelu", P::Follow},
    {"reciprocal", P::Float32},
    {"reduce_l1", P::Float32},
    {"reduce_l2", P::Float32},
    {"reduce_log_sum", P::Float32},
    {"reduce_log_sum_exp", P::Float32},
    {"reduce_max", P::Follow},
    {"reduce_mean", P::Float32},
    {"reduce_min", P::Follow},
    {"reduce_prod", P::Float32},
    {"reduce_sum", P::Float32},
    {"reduce_sum_square", P::Float32},
    {"relu", P::Follow},
    {"reshape", P::Follow},
    {"resize", P::Follow},
    {"reverse_sequence", P::Follow},
    {"round", P::Follow},
    {"selu", P::Follow},
    {"shrink", P::Follow},
    {"sigmoid", P::Follow},
    {"sign", P::Follow},
    {"sin", P::Float32},
    {"sinh", P::Float32},
    {"slice", P::Follow},
    {"softmax", P::Float32},
    {"softplus", P::Float32},
    {"softsign", P::Follow},
    {"space_to_depth", P::Follow},
    {"split", P::Follow},
    {"sqrt", P::Float32},
    {"sub", P::Follow},
    {"tan", P::Float32},
    {"tanh", P::Follow},
    {"thresholded_relu", P::Follow},
    {"tile", P::Follow},
    {"topk", P::Follow},
    {"transpose", P::Follow},
    {"trilu", P::Follow},
    {"where", P::Follow},
};

}  // namespace

const std::vector<std::pair<std::string_view, PrecisionClass>>& precision_table() { return kTable; }

PrecisionClass precision_class(std::string_view op) {
  auto it = std::lower_bound(kTable.begin(), kTable.end(), op,
                             [](const auto& e, std::string_view name) { return e.first < name; });
  if (it != kTable.end() && it->first == op) return it->second;
  if (op == "attention" || op.ends_with("_attention")) return P::Reduced;
  return P::Float32;
}

bool tf32_capable(std::string_view op) {
  return op == "conv" || op == "conv_transpose" || op == "gemm" || op == "matmul";
}

DType reduced_dtype(std::string_view precision) {
  if (precision == "fp16") return DType::F16;
  if (precision == "bf16") return DType::BF16;
  return DType::F32;
}

double max_finite(DType t) {
  if (t == DType::F16) return 65504.0;
  if (t == DType::BF16) return static_cast<double>(bf16_to_float(0x7F7F));
  return std::numeric_limits<double>::infinity();
}

}  // namespace kiln
