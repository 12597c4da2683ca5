#include "codegen/emitters/pool_select_loss/emit_fused_pool.h"

#include "codegen/emitters/reduction/emit_fused_reduction.h"
#include "codegen/emitters/pool_select_loss/emit_pool.h"
#include "codegen/emitters/pool_select_loss/emit_select.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

bool anchor_op(const std::string& op) {
  return (pool_supported(op) && op != "max_unpool") || op == "argmax" || op == "argmin" || op == "hardmax";
}

}  // namespace

bool is_pool_select_fused(const Node& n, const OpRegistry& ops) { return is_reduction_fused_with(n, ops, anchor_op); }

std::vector<OpKernel> emit_pool_select_fused(const Node& n, const OpRegistry& ops, std::vector<Tensor>* constants) {
  if (!is_pool_select_fused(n, ops))
    unsupported("codegen: {} is not a fused reduction node with a pool/argmax anchor", n.describe());
  FusedAnchor fa = fused_anchor_io(n, ops);
  const Node& a = *fa.anchor;
  const bool window = a.op() == "max_pool" || a.op() == "average_pool" || a.op() == "lp_pool";
  if (window && fa.io.has_records)
    unsupported("codegen: {}: prologue values are results, but {} reads overlapping windows (no read-once pass)",
                n.describe(), a.op());
  KernelSeams seams;
  for (const KernelBuffer& b : fa.io.buffers) seams.buffers.push_back({b.dtype, b.name, b.written});
  seams.dtypes = fa.io.dtypes;
  seams.setup = fa.io.setup;
  const AnchorIO io = fa.io;
  seams.load_x = [io](const std::string& idx, bool once) { return io.load(0, idx, once); };
  seams.store = [io](int r, const std::string& idx, const std::string& value) { return io.store(r, idx, value, ""); };
  std::vector<TensorType> operands, results;
  for (Value* v : a.inputs()) operands.push_back(v->type());
  for (int r = 0; r < a.num_outputs(); ++r) results.push_back(a.output(r)->type());
  if (constants) *constants = fa.constants;
  const OpDef& def = ops.get(a.op());
  if (pool_supported(a.op())) return emit_pool_op(def, a.attrs(), operands, results, &seams);
  return emit_select_op(def, a.attrs(), operands, results, &seams);
}

}  // namespace kiln::codegen
