#include "codegen/emitter_table.h"

#include <algorithm>

#include "codegen/core/deciding_only.h"
#include "codegen/emitters/attention/emit_attention.h"
#include "codegen/emitters/data_movement/emit_index_select.h"
#include "codegen/emitters/data_movement/emit_injective.h"
#include "codegen/emitters/data_movement/emit_resize.h"
#include "codegen/emitters/data_movement/emit_sample.h"
#include "codegen/emitters/data_movement/emit_scatter.h"
#include "codegen/emitters/elementwise/emit_fused.h"
#include "codegen/emitters/elementwise/emit_pointwise.h"
#include "codegen/emitters/gemm_conv/emit_conv.h"
#include "codegen/emitters/gemm_conv/emit_conv_gather.h"
#include "codegen/emitters/gemm_conv/emit_einsum.h"
#include "codegen/emitters/gemm_conv/emit_epilogue.h"
#include "codegen/emitters/gemm_conv/emit_gemm.h"
#include "codegen/emitters/attention/emit_linear_attention.h"
#include "codegen/emitters/misc/emit_data_dependent.h"
#include "codegen/emitters/misc/emit_misc_ops.h"
#include "codegen/emitters/misc/emit_tfidf.h"
#include "codegen/emitters/pool_select_loss/emit_fused_pool.h"
#include "codegen/emitters/pool_select_loss/emit_loss.h"
#include "codegen/emitters/pool_select_loss/emit_pool.h"
#include "codegen/emitters/pool_select_loss/emit_select.h"
#include "codegen/emitters/reduction/emit_fused_reduction.h"
#include "codegen/emitters/reduction/emit_normalization.h"
#include "codegen/emitters/reduction/emit_reduction.h"
#include "codegen/emitters/reduction/emit_rowwise.h"
#include "codegen/emitters/rnn/emit_rnn.h"
#include "ir/symbolic_dim.h"
#include "ir/error.h"
#include "ir/op_registry.h"
#include "ops/registry.h"

namespace kiln::codegen {

namespace {

// The launch every emitter's kernel struct describes (name, source, grid,
// block), as a NodeKernel. Dynamic shared memory, a result subset and extra
// buffers are set by the caller where the kernel has them (some structs'
// `shared_bytes` count static shared memory, which is not launch state).
template <class K>
NodeKernel node_kernel(const K& k, std::vector<Tensor> extra = {}) {
  NodeKernel nk;
  nk.name = k.name;
  nk.source = k.source;
  nk.grid = k.grid;
  nk.block = k.block;
  nk.extra = std::move(extra);
  if constexpr (requires { k.symbols; }) {
    if (!k.symbols.empty()) {
      nk.symbols = k.symbols;
      nk.grid_expr[0] = k.grid_expr;
      nk.grid_expr[1] = {1, 1, 0};
      nk.grid_expr[2] = {1, 1, 0};
    }
  }
  return nk;
}

// Every operand present: the executor passes each input as a buffer.
bool operands_present(const Node& n) {
  for (Value* v : n.inputs())
    if (!v) return false;
  return true;
}

bool handles_pointwise(const Node& n) {
  if (n.body() || n.num_outputs() != 1) return false;
  const OpDef* def = op_registry().find(n.op());
  if (!def || def->category != OpCategory::Pointwise || !def->expr) return false;
  return operands_present(n);
}

std::vector<NodeKernel> emit_pointwise_node(const Node& n) {
  std::vector<TensorType> operands;
  for (Value* v : n.inputs()) operands.push_back(v->type());
  return {node_kernel(emit_pointwise_op(op_registry().get(n.op()), n.attrs(), operands, n.output(0)->type()))};
}

std::vector<NodeKernel> emit_fused_node(const Node& n) {
  FusedPointwiseKernel fk = emit_fused_pointwise(n, op_registry());
  return {node_kernel(fk.kernel, std::move(fk.constants))};
}

std::vector<NodeKernel> emit_fused_on_demand_node(const Node& n) {
  FusedPointwiseKernel fk = emit_fused_on_demand(n, op_registry());
  return {node_kernel(fk.kernel, std::move(fk.constants))};
}

bool handles_injective(const Node& n) {
  if (n.body() || !injective_supported(n.op())) return false;
  return operands_present(n);
}

// One kernel per result (split).
std::vector<NodeKernel> emit_injective_node(const Node& n) {
  std::vector<TensorType> operands, outs;
  for (Value* v : n.inputs()) operands.push_back(v->type());
  for (int r = 0; r < n.num_outputs(); ++r) outs.push_back(n.output(r)->type());
  std::vector<NodeKernel> ks;
  for (int r = 0; r < n.num_outputs(); ++r) {
    NodeKernel nk = node_kernel(emit_injective_op(op_registry().get(n.op()), n.attrs(), operands, outs, r));
    nk.results = {r};
    ks.push_back(std::move(nk));
  }
  return ks;
}

bool handles_reduction(const Node& n) {
  if (n.body() || n.num_inputs() != 1 || !n.input(0) || n.num_outputs() != 1) return false;
  if (n.op() == "softmax" || n.op() == "log_softmax") return is_float(n.input(0)->dtype());
  return ops::find_reduction_spec(n.op()) != nullptr;
}

std::vector<NodeKernel> emit_reduction_node(const Node& n) {
  const OpDef& def = op_registry().get(n.op());
  ReductionKernel k = n.op() == "softmax" || n.op() == "log_softmax"
                          ? emit_softmax_op(def, n.attrs(), n.input(0)->type())
                          : emit_reduction_op(def, n.attrs(), n.input(0)->type(), n.output(0)->type());
  return {node_kernel(k)};
}

// matmul/gemm and conv/conv_transpose, bare or anchoring a fused epilogue (codegen/emitters/gemm_conv/emit_gemm.h,
// emit_conv.h).
bool is_fused_kind(const Node& n, const char* kind) {
  return n.op() == "fused" && n.body() && n.attrs().get_string("kind", "") == kind;
}
bool anchor_operands_present(const Node& n) { return operands_present(n) && n.num_inputs() >= 2; }
bool handles_gemm(const Node& n) {
  if (is_fused_kind(n, "gemm_epilogue")) return true;
  return !n.body() &&
         (n.op() == "matmul" || n.op() == "gemm" || n.op() == "matmul_integer" || n.op() == "qlinear_matmul") &&
         anchor_operands_present(n);
}
bool handles_conv(const Node& n) {
  if (is_fused_kind(n, "conv_epilogue")) return true;
  if (n.op() == "conv_integer" || n.op() == "qlinear_conv") return !n.body() && anchor_operands_present(n);
  return !n.body() && (n.op() == "conv" || n.op() == "conv_transpose") && anchor_operands_present(n) &&
         is_float(n.input(0)->dtype());
}
std::vector<NodeKernel> from_compute(const std::vector<ComputeKernel>& ks, const Epilogue& ep) {
  std::vector<NodeKernel> out;
  for (const ComputeKernel& k : ks) {
    NodeKernel nk = node_kernel(k, ep.constants());
    nk.shared_bytes = k.shared_bytes;  // dynamic for these kernels
    nk.workspace_f32 = k.workspace_f32;
    nk.tile_counters = k.tile_counters;
    out.push_back(std::move(nk));
  }
  return out;
}
Epilogue epilogue_of(const Node& n, std::vector<std::string> anchors) {
  return n.body() ? Epilogue::from_fused(n, op_registry(), anchors) : Epilogue::from_node(n);
}
std::vector<NodeKernel> emit_gemm_node(const Node& n) {
  Epilogue ep = epilogue_of(n, {"matmul", "gemm"});
  return from_compute(emit_matmul_gemm(ep), ep);
}
std::vector<NodeKernel> emit_conv_node(const Node& n) {
  Epilogue ep = epilogue_of(n, {"conv", "conv_transpose"});
  return from_compute(emit_conv(ep), ep);
}

bool handles_einsum(const Node& n) {
  if (n.body() || n.op() != "einsum" || n.num_inputs() < 1) return false;
  return operands_present(n);
}
std::vector<NodeKernel> emit_einsum_node(const Node& n) {
  Epilogue ep = Epilogue::from_node(n);
  return from_compute({emit_einsum(ep)}, ep);
}

bool handles_normalization(const Node& n) {
  if (n.body() || !normalization_supported(n.op())) return false;
  return operands_present(n);
}

std::vector<NodeKernel> emit_normalization_node(const Node& n) {
  std::vector<TensorType> operands, results;
  for (Value* v : n.inputs()) operands.push_back(v->type());
  for (int r = 0; r < n.num_outputs(); ++r) results.push_back(n.output(r)->type());
  return {node_kernel(emit_normalization(op_registry().get(n.op()), n.attrs(), operands, results))};
}

std::vector<NodeKernel> emit_fused_reduction_node(const Node& n) {
  std::vector<Tensor> constants;
  ReductionKernel k = emit_fused_reduction(n, op_registry(), &constants);
  return {node_kernel(k, std::move(constants))};
}

// Pool, select/scan and loss nodes (emit_pool, emit_select, emit_loss): each
// kernel takes the results its `results` list names (all when empty).
bool handles_op_kernels(const Node& n) {
  if (n.body() || !(pool_supported(n.op()) || select_supported(n.op()) || loss_supported(n.op()))) return false;
  return operands_present(n);
}

std::vector<NodeKernel> to_node_kernels(std::vector<OpKernel> ks, const std::vector<Tensor>& extra = {}) {
  std::vector<NodeKernel> out;
  for (OpKernel& k : ks) {
    NodeKernel nk;
    nk.name = std::move(k.name);
    nk.source = std::move(k.source);
    nk.grid = k.grid;
    nk.block = k.block;
    nk.shared_bytes = k.shared_bytes;
    nk.results = std::move(k.results);
    nk.extra = extra;
    if (!k.symbols.empty()) {
      nk.symbols = std::move(k.symbols);
      nk.grid_expr[0] = k.grid_expr;
      nk.grid_expr[1] = {1, 1, 0};
      nk.grid_expr[2] = {1, 1, 0};
    }
    out.push_back(std::move(nk));
  }
  return out;
}

// A fused reduction node whose anchor is a pool or argmax/argmin/hardmax.
std::vector<NodeKernel> emit_fused_pool_node(const Node& n) {
  std::vector<Tensor> constants;
  std::vector<OpKernel> ks = emit_pool_select_fused(n, op_registry(), &constants);
  return to_node_kernels(std::move(ks), constants);
}

std::vector<NodeKernel> emit_op_kernels_node(const Node& n) {
  std::vector<TensorType> operands, results;
  for (Value* v : n.inputs()) operands.push_back(v->type());
  for (int r = 0; r < n.num_outputs(); ++r) results.push_back(n.output(r)->type());
  const OpDef& def = op_registry().get(n.op());
  std::vector<OpKernel> ks = pool_supported(n.op())     ? emit_pool_op(def, n.attrs(), operands, results)
                             : select_supported(n.op()) ? emit_select_op(def, n.attrs(), operands, results)
                                                        : emit_loss_op(def, n.attrs(), operands, results);
  return to_node_kernels(std::move(ks));
}

bool handles_attention(const Node& n) {
  if (n.op() == "fused") return n.body() && n.attrs().get_string("kind", "") == "attention";
  if (n.op() != "attention" || n.body() || n.num_outputs() != 1) return false;
  return operands_present(n);
}

std::vector<NodeKernel> emit_attention_node(const Node& n) {
  if (n.op() == "fused") {
    FusedAttentionKernel fk = emit_fused_attention(n);
    NodeKernel nk = node_kernel(fk.kernel, std::move(fk.constants));
    nk.workspace_f32 = fk.kernel.workspace_f32;
    nk.tile_counters = fk.kernel.tile_counters;
    return {nk};
  }
  std::vector<TensorType> operands;
  for (Value* v : n.inputs()) operands.push_back(v->type());
  const AttentionKernel k = emit_attention_op(n.attrs(), operands, n.output(0)->type());
  NodeKernel nk = node_kernel(k);
  nk.workspace_f32 = k.workspace_f32;
  nk.tile_counters = k.tile_counters;
  return {nk};
}

bool handles_rnn(const Node& n) { return !n.body() && (n.op() == "rnn" || n.op() == "gru" || n.op() == "lstm"); }

// One persistent block per (direction, batch entry); absent operands are null buffers.
std::vector<NodeKernel> emit_rnn_node(const Node& n) {
  std::vector<TensorType> operands, results;
  std::vector<bool> present;
  for (Value* v : n.inputs()) {
    operands.push_back(v ? v->type() : TensorType());
    present.push_back(v != nullptr);
  }
  for (int r = 0; r < n.num_outputs(); ++r) results.push_back(n.output(r)->type());
  return {node_kernel(emit_rnn_op(n.op(), n.attrs(), operands, present, results))};
}

bool handles_linear_attention(const Node& n) { return !n.body() && n.op() == "linear_attention"; }

// Absent optional operands (past_state, decay, beta) are null buffers.
std::vector<NodeKernel> emit_linear_attention_node(const Node& n) {
  std::vector<TensorType> operands, results;
  std::vector<bool> present;
  for (Value* v : n.inputs()) {
    operands.push_back(v ? v->type() : TensorType());
    present.push_back(v != nullptr);
  }
  for (int r = 0; r < n.num_outputs(); ++r) results.push_back(n.output(r)->type());
  return {node_kernel(emit_linear_attention(n.attrs(), operands, present, results))};
}

bool handles_misc(const Node& n) {
  if (n.body() || !n.input(0)) return false;
  if (n.op() == "range")
    return n.num_inputs() == 3 && n.input(1) && n.input(2) &&
           (n.input(0)->dtype() == DType::F32 || n.input(0)->dtype() == DType::F64 || is_int(n.input(0)->dtype()));
  return n.op() == "dft" || n.op() == "stft" || n.op() == "det" || n.op() == "dynamic_quantize_linear";
}

// dft, stft, det, range, dynamic_quantize_linear (codegen/emitters/misc/emit_misc_ops.h). A
// node's scratch (det's f64 matrices, dynamic_quantize_linear's partial min/max that
// its next kernels read) is the node's workspace in the arena, bound after the
// operands: per context, so two contexts of one engine never share it (as weights
// they would race).
std::vector<NodeKernel> emit_misc_node(const Node& n) {
  std::vector<SimpleKernel> ks;
  const TensorType& x = n.input(0)->type();
  if (n.op() == "dft") {
    ks = {emit_dft(n.attrs(), x, n.output(0)->type())};
  } else if (n.op() == "stft") {
    const bool win = n.num_inputs() > 1 && n.input(1);
    ks = {
        emit_stft(n.attrs(), x, win, win ? n.input(1)->type() : TensorType(), n.output(0)->type(), n.num_inputs() > 1)};
  } else if (n.op() == "det") {
    ks = {emit_det(x, n.output(0)->type())};
  } else if (n.op() == "range") {
    ks = {emit_range(x.dtype, n.output(0)->type())};
  } else {
    std::vector<TensorType> results;
    for (int r = 0; r < n.num_outputs(); ++r) results.push_back(n.output(r)->type());
    ks = emit_dynamic_quantize_linear(x, results);
  }
  int64_t scratch_bytes = 0;
  int scratch_buffers = 0;
  for (const SimpleKernel& k : ks)
    for (const TensorType& t : k.scratch) scratch_bytes += t.nbytes(), ++scratch_buffers;
  KILN_CHECK(scratch_buffers <= 1, "{}: {} scratch buffers, the workspace is one", n.describe(), scratch_buffers);
  std::vector<NodeKernel> out;
  for (const SimpleKernel& k : ks) {
    out.push_back(node_kernel(k));
    if (scratch_bytes > 0) out.back().workspace_f32 = (scratch_bytes + 3) / 4;  // f32 units; f64 scratch is 8-aligned
  }
  return out;
}

// The bounded forms of nonzero and non_max_suppression (ops/data_dependent_size.h;
// codegen/emitters/misc/emit_data_dependent.h): non_max_suppression's scratch (the
// order and the kept boxes) is the node's workspace, as misc ops' scratch is.
bool handles_data_dependent(const Node& n) {
  if (n.body() || !operands_present(n) || n.attrs().get_int("bounded", 0) != 1) return false;
  return (n.op() == "nonzero" && n.num_inputs() == 1) || (n.op() == "non_max_suppression" && n.num_inputs() == 2);
}

std::vector<NodeKernel> emit_data_dependent_node(const Node& n) {
  std::vector<TensorType> results;
  for (int r = 0; r < n.num_outputs(); ++r) results.push_back(n.output(r)->type());
  SimpleKernel k = n.op() == "nonzero" ? emit_nonzero_bounded(n.input(0)->type(), results)
                                       : emit_nms_bounded(n.attrs(), n.input(0)->type(), n.input(1)->type(), results);
  NodeKernel nk = node_kernel(k);
  int64_t scratch_bytes = 0;
  for (const TensorType& t : k.scratch) scratch_bytes += t.nbytes();
  KILN_CHECK(k.scratch.size() <= 1, "{}: {} scratch buffers, the workspace is one", n.describe(), k.scratch.size());
  if (scratch_bytes > 0) nk.workspace_f32 = (scratch_bytes + 3) / 4;
  return {nk};
}

bool handles_tfidf(const Node& n) { return !n.body() && n.op() == "tfidf_vectorizer" && operands_present(n); }

// The n-gram table (and weights) go after the tokens (NodeKernel::extra).
std::vector<NodeKernel> emit_tfidf_node(const Node& n) {
  TfIdfKernel k = emit_tfidf_vectorizer(n.attrs(), n.input(0)->type(), n.output(0)->type());
  return {node_kernel(k.kernel, std::move(k.tables))};
}

bool all_inputs_present(const Node& n) { return !n.body() && operands_present(n); }

std::vector<TensorType> input_types(const Node& n) {
  std::vector<TensorType> t;
  for (Value* v : n.inputs()) t.push_back(v->type());
  return t;
}

bool handles_index_select(const Node& n) { return index_select_supported(n.op()) && all_inputs_present(n); }

std::vector<NodeKernel> emit_index_select_node(const Node& n) {
  return {node_kernel(emit_index_select_op(n.op(), n.attrs(), input_types(n), n.output(0)->type()))};
}

bool handles_scatter(const Node& n) { return scatter_supported(n.op()) && all_inputs_present(n); }

std::vector<NodeKernel> emit_scatter_node(const Node& n) {
  return {node_kernel(emit_scatter_op(op_registry().get(n.op()), n.attrs(), input_types(n), n.output(0)->type()))};
}

bool handles_resize(const Node& n) {
  return n.op() == "resize" && n.num_inputs() == 1 && all_inputs_present(n) && n.num_outputs() == 1;
}

// The taps/weights tables go after the input (NodeKernel::extra).
std::vector<NodeKernel> emit_resize_node(const Node& n) {
  ResizeKernel k = emit_resize_op(n.attrs(), n.input(0)->type(), n.output(0)->type());
  NodeKernel nk = node_kernel(k.kernel);
  nk.extra = std::move(k.tables);
  return {nk};
}

bool handles_sample(const Node& n) { return sample_supported(n.op()) && all_inputs_present(n); }

std::vector<NodeKernel> emit_sample_node(const Node& n) {
  return {node_kernel(emit_sample_op(n.op(), n.attrs(), input_types(n), n.output(0)->type()))};
}

// deform_conv's optional operands must be a prefix (no mask without a bias).
bool handles_conv_gather(const Node& n) { return conv_gather_supported(n.op()) && all_inputs_present(n); }

std::vector<NodeKernel> emit_conv_gather_node(const Node& n) {
  return {node_kernel(emit_conv_gather_op(n.op(), n.attrs(), input_types(n), n.output(0)->type()))};
}

// Shape-generic predicates (KernelEmitter::shape_generic).
bool any_node(const Node&) { return true; }

// Whether every symbolic dim of `s` is its first (the batch).
bool batch_only_symbolic(const Shape& s) {
  for (size_t d = 1; d < s.size(); ++d)
    if (is_symbolic_dim(s[d])) return false;
  return true;
}

// softmax / log_softmax over a static last axis whose rows fit the register
// row kernel (codegen/emitters/reduction/emit_rowwise.h): the row count may
// be symbolic.
bool generic_softmax(const Node& n) {
  if (n.body() || (n.op() != "softmax" && n.op() != "log_softmax") || !n.input(0)) return false;
  const Shape& s = n.input(0)->shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  int64_t axis = n.attrs().get_int("axis", -1);
  if (axis < 0) axis += rank;
  return rank > 0 && axis == rank - 1 && !is_symbolic_dim(s.back()) && s.back() >= 1 && s.back() <= kMaxRegisterRow &&
         is_float(n.input(0)->dtype());
}

// reduce_* over static axes (emit_reduction.h) whose symbolic dims all come
// before the first reduced axis: a symbolic outer extent (rows), constant
// strides and a constant reduced count.
bool generic_reduce(const Node& n) {
  if (n.body() || !ops::find_reduction_spec(n.op()) || !n.input(0) || n.num_inputs() != 1) return false;
  const Shape& s = n.input(0)->shape();
  std::vector<int64_t> axes = n.attrs().get_ints("axes");
  if (axes.empty()) return false;
  int64_t first = static_cast<int64_t>(s.size());
  for (int64_t a : axes) first = std::min(first, a < 0 ? a + static_cast<int64_t>(s.size()) : a);
  for (size_t d = 0; d < s.size(); ++d)
    if (is_symbolic_dim(s[d]) && static_cast<int64_t>(d) >= first) return false;
  return true;
}

bool generic_reduction(const Node& n) { return generic_softmax(n) || generic_reduce(n); }

// A fused reduction body over a symbolic batch: its one reduction-category
// node passes `anchor_generic`, its other ops are pointwise over a batch-only
// symbolic shape (the body evaluator splits the other dims by constants), and
// an operand with a symbolic dim has its op's result shape (no broadcasting
// along a symbol).
bool generic_fused_body(const Node& n, bool (*anchor_generic)(const Node&)) {
  for (const Value* v : n.inputs())
    if (v && !batch_only_symbolic(v->shape())) return false;
  int anchors = 0;
  for (const auto& bn : n.body()->nodes()) {
    const OpDef* def = op_registry().find(bn->op());
    if (!def) return false;
    if (def->category == OpCategory::Reduction) {
      ++anchors;
      if (!anchor_generic(*bn)) return false;
      continue;
    }
    if (def->category != OpCategory::Pointwise || bn->num_outputs() != 1) return false;
    const Shape& os = bn->output(0)->shape();
    if (!batch_only_symbolic(os)) return false;
    for (const Value* v : bn->inputs())
      if (v && has_symbolic_dims(v->shape()) && v->shape() != os) return false;
  }
  return anchors == 1;
}

// A fused reduction (codegen/emitters/reduction/emit_fused_reduction.h) around
// a shape-generic reduce_* or softmax.
bool generic_fused_reduction(const Node& n) {
  return is_reduction_fused(n, op_registry()) && generic_fused_body(n, generic_reduction);
}

// layer_normalization whose normalized dims (from `axis` on) are static and
// fit the register row kernel, scale and bias static: the rows may be symbolic.
bool generic_layer_norm(const Node& n) {
  if (n.body() || n.op() != "layer_normalization" || n.num_inputs() < 2) return false;
  const Shape& s = n.input(0)->shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  int64_t axis = n.attrs().get_int("axis", -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  int64_t count = 1;
  for (int64_t d = axis; d < rank; ++d) {
    if (is_symbolic_dim(s[d])) return false;
    count *= s[d];
  }
  for (int i = 1; i < n.num_inputs(); ++i)
    if (n.input(i) && has_symbolic_dims(n.input(i)->shape())) return false;
  return count >= 1 && count <= kMaxRegisterRow && is_float(n.input(0)->dtype());
}

// batch_normalization (inference) that survived folding, over a symbolic
// batch: one thread per element, the channel from constant extents.
bool generic_batch_norm(const Node& n) {
  if (n.body() || n.op() != "batch_normalization" || n.num_inputs() != 5 || !n.input(0)) return false;
  for (int i = 1; i < 5; ++i)
    if (!n.input(i) || has_symbolic_dims(n.input(i)->shape())) return false;
  return batch_only_symbolic(n.input(0)->shape());
}

bool generic_normalization(const Node& n) { return generic_layer_norm(n) || generic_batch_norm(n); }

// A bare f32 matmul / gemm (SIMT: no tf32) of a 2-D A [M, K] whose M alone is
// symbolic, B static (a dynamic-batch MLP's layers).
bool generic_gemm(const Node& n) {
  if (n.body() || (n.op() != "matmul" && n.op() != "gemm") || n.num_inputs() < 2) return false;
  const Value *a = n.input(0), *b = n.input(1);
  if (!a || !b || a->dtype() != DType::F32 || n.attrs().get_int("tf32", 0) != 0) return false;
  if (a->shape().size() != 2 || b->shape().size() != 2 || has_symbolic_dims(b->shape())) return false;
  if (is_symbolic_dim(a->shape()[1]) || n.attrs().get_int("trans_a", 0) != 0) return false;
  return n.num_inputs() < 3 || !n.input(2) || n.input(2)->shape().empty() ||
         !is_symbolic_dim(n.input(2)->shape().back());
}

// conv / conv_transpose in a float dtype whose batch alone is symbolic
// (codegen/emitters/gemm_conv/emit_conv.h): NCHW on the SIMT or tensor-core
// core (the batch is the GEMM batch, only the grid follows it), nhwc on the
// SIMT core only (the batch is part of M, which only it takes symbolic),
// depthwise; bare or anchoring a conv_epilogue of pointwise ops: an epilogue
// operand with a symbolic dim has the element's own shape (a residual), the
// others are static and broadcast (per-channel scales).
bool generic_conv(const Node& n) {
  auto conv_anchor = [](const Node& a) {
    if ((a.op() != "conv" && a.op() != "conv_transpose") || a.num_inputs() < 2 || !a.input(0) ||
        !is_float(a.input(0)->dtype()))
      return false;
    // nhwc makes the batch part of M, which only the SIMT core takes symbolic.
    const bool simt = a.input(0)->dtype() == DType::F32 && a.attrs().get_int("tf32", 0) == 0;
    return simt || a.attrs().get_string("layout", "nchw") != "nhwc";
  };
  auto batch_only = [](const Node& a) {
    for (const Value* v : a.inputs())
      if (v && !batch_only_symbolic(v->shape())) return false;
    for (const Value* v : a.outputs())
      if (!batch_only_symbolic(v->shape())) return false;
    return true;
  };
  if (!n.body()) return conv_anchor(n) && batch_only(n);
  if (!is_fused_kind(n, "conv_epilogue") || !batch_only(n)) return false;
  int anchors = 0;
  for (const auto& bn : n.body()->nodes()) {
    if (conv_anchor(*bn)) {
      ++anchors;
      if (!batch_only(*bn)) return false;
      continue;
    }
    const OpDef* def = op_registry().find(bn->op());
    if (!def || def->category != OpCategory::Pointwise || bn->num_outputs() != 1) return false;
    const Shape& os = bn->output(0)->shape();
    if (!batch_only_symbolic(os)) return false;
    for (const Value* v : bn->inputs())
      if (v && has_symbolic_dims(v->shape()) && v->shape() != os) return false;
  }
  return anchors == 1;
}

// The pools over a symbolic batch (codegen/emitters/pool_select_loss/emit_pool.h):
// max (without the indices result), average and lp windows and the global
// pools, other dims static.
bool generic_pool(const Node& n) {
  if (n.body() || n.num_inputs() < 1 || !n.input(0) || n.num_outputs() != 1) return false;
  const std::string& op = n.op();
  if (op != "max_pool" && op != "average_pool" && op != "lp_pool" && op != "global_average_pool" &&
      op != "global_max_pool" && op != "global_lp_pool")
    return false;
  const Value* x = n.input(0);
  if (!is_float(x->dtype())) return false;
  return batch_only_symbolic(x->shape()) && batch_only_symbolic(n.output(0)->shape());  // nhwc: batch first too
}

// A fused pool (codegen/emitters/pool_select_loss/emit_fused_pool.h) around
// a shape-generic pool: the pool kernel with the fused body's seams.
bool generic_fused_pool(const Node& n) {
  return is_pool_select_fused(n, op_registry()) && generic_fused_body(n, generic_pool);
}

// The dispatch table: add a row per emitter (first match wins).
const KernelEmitter kEmitters[] = {
    {"pointwise", handles_pointwise, emit_pointwise_node, any_node},
    {"fused pointwise", [](const Node& n) { return is_pointwise_fused(n, op_registry()); }, emit_fused_node, any_node,
     [](const Node& n) { check_fused_pointwise(n, op_registry()); }},
    {"fused on demand", [](const Node& n) { return is_on_demand_fused(n, op_registry()); }, emit_fused_on_demand_node},
    {"injective", handles_injective, emit_injective_node},
    {"reduction", handles_reduction, emit_reduction_node, generic_reduction},
    {"index select", handles_index_select, emit_index_select_node},
    {"scatter", handles_scatter, emit_scatter_node},
    {"resize", handles_resize, emit_resize_node},
    {"sample", handles_sample, emit_sample_node},
    {"conv gather", handles_conv_gather, emit_conv_gather_node},
    {"gemm", handles_gemm, emit_gemm_node, generic_gemm},
    {"conv", handles_conv, emit_conv_node, generic_conv},
    {"einsum", handles_einsum, emit_einsum_node},
    {"normalization", handles_normalization, emit_normalization_node, generic_normalization},
    {"fused reduction", [](const Node& n) { return is_reduction_fused(n, op_registry()); }, emit_fused_reduction_node,
     generic_fused_reduction},
    {"pool/select/loss", handles_op_kernels, emit_op_kernels_node, generic_pool},
    {"fused pool/argmax", [](const Node& n) { return is_pool_select_fused(n, op_registry()); }, emit_fused_pool_node,
     generic_fused_pool},
    {"attention", handles_attention, emit_attention_node},
    {"recurrent", handles_rnn, emit_rnn_node},
    {"linear attention", handles_linear_attention, emit_linear_attention_node},
    {"misc (dft, stft, det, dynamic_quantize_linear)", handles_misc, emit_misc_node},
    {"tfidf vectorizer", handles_tfidf, emit_tfidf_node},
    {"data-dependent size (bounded nonzero, non_max_suppression)", handles_data_dependent, emit_data_dependent_node},
};
}  // namespace

int64_t node_workspace_bytes(const std::vector<NodeKernel>& kernels) {
  int64_t f32 = 0;
  for (const NodeKernel& k : kernels) f32 = std::max(f32, k.workspace_f32);
  return f32 * 4;
}

int64_t node_tile_counters(const std::vector<NodeKernel>& kernels) {
  int64_t n = 0;
  for (const NodeKernel& k : kernels) n = std::max(n, k.tile_counters);
  return n;
}

const KernelEmitter* emitter_for(const Node& n) {
  for (const KernelEmitter& e : kEmitters)
    if (e.handles(n)) return &e;
  return nullptr;
}

std::string why_not_shape_generic(const Node& n) {
  bool symbolic = false;
  for (const Value* v : n.inputs()) symbolic = symbolic || (v && has_symbolic_dims(v->shape()));
  for (const Value* v : n.outputs()) symbolic = symbolic || has_symbolic_dims(v->shape());
  if (!symbolic || (!n.body() && (n.op() == "reshape" || n.op() == "identity"))) return "";
  const KernelEmitter* e = emitter_for(n);
  if (!e) return "no kernel emitter handles it";
  if (e->shape_generic && e->shape_generic(n)) return "";
  return fmt::format("its kernel family ({}) has no shape-generic kernel for it yet", e->name);
}

namespace {

// Runs the emitter's check (without one, the emitter deciding only,
// codegen/core/deciding_only.h), or with `emit` set the emitter in full, and
// turns its refusal into a message.
std::string ask_emitter(const Node& n, bool emit) {
  const KernelEmitter* e = emitter_for(n);
  if (!e) return fmt::format("codegen: no emitter handles {}", n.describe());
  try {
    if (emit) {
      e->emit(n);
    } else if (e->check) {
      e->check(n);
    } else {
      DecidingOnly deciding;
      e->emit(n);
    }
  } catch (const Error& err) {
    return err.what();
  } catch (const std::exception& err) {
    // An emitter's internal check failing on a candidate group: no kernel
    // for it either, and the fuser should not form it (a compile for the
    // reference backend must not stop on it).
    return fmt::format("codegen: {}: emitter '{}' failed: {}", n.describe(), e->name, err.what());
  }
  return "";
}

}  // namespace

std::string why_no_kernel(const Node& n) { return ask_emitter(n, false); }

std::string why_no_kernel_by_emitting(const Node& n) { return ask_emitter(n, true); }

}  // namespace kiln::codegen
