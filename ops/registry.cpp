#include "ops/registry.h"

#include "ops/families.h"
#include "ops/pointwise_eval.h"

namespace kiln {

const OpRegistry& op_registry() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    ops::register_elementwise_ops(r);
    ops::register_shape_ops(r);
    ops::register_index_ops(r);
    ops::register_reduction_ops(r);
    ops::register_normalization_ops(r);
    ops::register_nn_ops(r);
    ops::register_linalg_ops(r);
    ops::register_misc_ops(r);
    ops::register_bitcast_op(r);
    ops::register_string_ops(r);
    return r;
  }();
  return registry;
}

std::vector<Tensor> evaluate_op(const OpDef& def, const AttrMap& attrs, const std::vector<const Tensor*>& inputs,
                                const std::vector<TensorType>& out_types, const std::string& label) {
  std::vector<Tensor> outs;
  outs.reserve(out_types.size());
  for (const TensorType& t : out_types) {
    try {
      outs.emplace_back(TensorType(t.dtype, t.shape));
    } catch (const Error& e) {
      fail("{}: result {}", label, e.what());  // over the size limit: name the node
    }
  }
  if (def.category == OpCategory::Pointwise) {
    std::vector<DType> dts;
    for (const Tensor* t : inputs) dts.push_back(t ? t->dtype() : DType::F32);
    ExprBuilder b(dts);
    Expr e = def.expr(b, attrs);
    eval_pointwise(e, inputs, outs[0]);
    return outs;
  }
  if (!def.reference) throw Unsupported(fmt::format("{}: op '{}' has no reference kernel", label, def.name));
  KernelContext ctx{attrs, inputs, outs, label};
  def.reference(ctx);
  return outs;
}

}  // namespace kiln
