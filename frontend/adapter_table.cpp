#include <cctype>

#include "frontend/import_context.h"

namespace kiln {

void AdapterTable::add(const std::string& onnx_op, Adapter a) {
  KILN_CHECK(!table_.count(onnx_op), "adapter for {} registered twice", onnx_op);
  table_[onnx_op] = std::move(a);
}

const Adapter* AdapterTable::find(const std::string& onnx_op) const {
  auto it = table_.find(onnx_op);
  return it == table_.end() ? nullptr : &it->second;
}

Adapter since_opset(int64_t first, Adapter a) {
  return [first, a = std::move(a)](ImportContext& c) {
    if (c.opset() < first)
      c.fail("{} exists from opset {} on; the model imports opset {}", c.op_type(), first, c.opset());
    a(c);
  };
}

std::string domain_adapter_key(const std::string& domain, const std::string& op_type) { return domain + ":" + op_type; }

const AdapterTable& adapter_table() {
  static const AdapterTable table = [] {
    AdapterTable t;
    adapters::register_elementwise(t);
    adapters::register_shape(t);
    adapters::register_index(t);
    adapters::register_reduction(t);
    adapters::register_normalization(t);
    adapters::register_nn(t);
    adapters::register_linalg(t);
    adapters::register_misc(t);
    adapters::register_sequence(t);
    adapters::register_transformer(t);
    adapters::register_image(t);
    adapters::register_stateful(t);
    adapters::register_preview(t);
    adapters::register_training(t);
    adapters::register_ml(t);
    adapters::register_tree_ensembles(t);
    adapters::register_image_decoder(t);
    adapters::register_optional(t);
    adapters::register_control_flow(t);
    adapters::register_low_bit(t);
    adapters::register_string(t);
    return t;
  }();
  return table;
}

std::string default_kiln_name(const std::string& op) {
  // Names whose CamelCase split reads badly.
  static const std::map<std::string, std::string> exceptions = {
      {"MatMul", "matmul"},
      {"MatMulInteger", "matmul_integer"},
      {"QLinearMatMul", "qlinear_matmul"},
      {"QLinearConv", "qlinear_conv"},
      {"ArgMax", "argmax"},
      {"ArgMin", "argmin"},
      {"GatherND", "gather_nd"},
      {"ScatterND", "scatter_nd"},
      {"PRelu", "prelu"},
      {"IsNaN", "isnan"},
      {"IsInf", "isinf"},
      {"TopK", "topk"},
      {"CumSum", "cumsum"},
      {"CumProd", "cumprod"},
      {"NonZero", "nonzero"},
      {"LRN", "lrn"},
      {"LSTM", "lstm"},
      {"GRU", "gru"},
      {"RNN", "rnn"},
      {"DFT", "dft"},
      {"STFT", "stft"},
      {"RoiAlign", "roi_align"},
      {"MaxRoiPool", "max_roi_pool"},
      {"NonMaxSuppression", "non_max_suppression"},
      {"LpNormalization", "lp_normalization"},
      {"LpPool", "lp_pool"},
  };
  if (auto it = exceptions.find(op); it != exceptions.end()) return it->second;
  std::string r;
  for (size_t i = 0; i < op.size(); ++i) {
    char c = op[i];
    if (std::isupper(static_cast<unsigned char>(c))) {
      bool prev_lower = i > 0 && std::islower(static_cast<unsigned char>(op[i - 1]));
      bool next_lower = i + 1 < op.size() && std::islower(static_cast<unsigned char>(op[i + 1]));
      bool prev_upper = i > 0 && std::isupper(static_cast<unsigned char>(op[i - 1]));
      if (i > 0 && (prev_lower || (prev_upper && next_lower))) r += '_';
      r += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      r += c;
    }
  }
  return r;
}

}  // namespace kiln
