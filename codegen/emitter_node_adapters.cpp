// The irregular op families' node adapters (codegen/emitter_node_adapters.h).
#include "codegen/emitter_node_adapters.h"

#include "codegen/emitters/attention/attention_dims.h"
#include "codegen/emitters/attention/emit_attention.h"
#include "codegen/emitters/attention/emit_linear_attention.h"
#include "codegen/emitters/data_movement/emit_index_select.h"
#include "codegen/emitters/data_movement/emit_resize.h"
#include "codegen/emitters/data_movement/emit_resize_generic.h"
#include "codegen/emitters/data_movement/emit_sample.h"
#include "codegen/emitters/data_movement/emit_scatter.h"
#include "codegen/emitters/gemm_conv/emit_conv_gather.h"
#include "codegen/emitters/misc/emit_data_dependent.h"
#include "codegen/emitters/misc/emit_misc_ops.h"
#include "codegen/emitters/misc/emit_tfidf.h"
#include "codegen/emitters/rnn/emit_rnn.h"
#include "ir/error.h"
#include "ir/symbolic_dim.h"
#include "ops/registry.h"
#include "ops/symbolic_values.h"

namespace kiln::codegen::node_adapters {

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
    if (!fk.kernel.generic_symbols.empty()) {  // its epilogue over symbolic sizes too
      nk.symbols = fk.kernel.generic_symbols;
      for (int a = 0; a < 3; ++a) nk.grid_expr[a] = fk.kernel.grid_axes[a];
    }
    return {nk};
  }
  std::vector<TensorType> operands;
  for (Value* v : n.inputs()) operands.push_back(v->type());
  SymbolBindings lo, hi;
  symbol_ranges_of(n, lo, hi);
  const AttentionKernel k = emit_attention_op(n.attrs(), operands, n.output(0)->type(), lo, hi);
  NodeKernel nk = node_kernel(k);
  nk.workspace_f32 = k.workspace_f32;
  nk.tile_counters = k.tile_counters;
  if (!k.generic_symbols.empty()) {  // grids per axis (codegen/emitters/attention/attention_dims.h)
    nk.symbols = k.generic_symbols;
    for (int a = 0; a < 3; ++a) nk.grid_expr[a] = k.grid_axes[a];
  }
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
    // A start or delta holding a symbolic shape value (range(past, past + seq)) is computed from `ks`.
    auto symbolic_scalar = [&](int i) -> std::optional<int64_t> {
      const Value* v = n.input(i);
      if (!v->is_constant() || !v->has_data() || !holds_symbolic_values(v->data())) return std::nullopt;
      return v->data().data<int64_t>()[0];
    };
    ks = {emit_range(x.dtype, n.output(0)->type(), symbolic_scalar(0), symbolic_scalar(2))};
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
  return (n.op() == "nonzero" && n.num_inputs() == 1) ||
         (n.op() == "non_max_suppression" && (n.num_inputs() == 2 || n.num_inputs() == 3));
}

std::vector<NodeKernel> emit_data_dependent_node(const Node& n) {
  std::vector<TensorType> results;
  for (int r = 0; r < n.num_outputs(); ++r) results.push_back(n.output(r)->type());
  SimpleKernel k = n.op() == "nonzero" ? emit_nonzero_bounded(n.input(0)->type(), results)
                                       : emit_nms_bounded(n.attrs(), n.input(0)->type(), n.input(1)->type(), results,
                                                          n.num_inputs() == 3);
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

namespace {

bool all_inputs_present(const Node& n) { return !n.body() && operands_present(n); }

std::vector<TensorType> input_types(const Node& n) {
  std::vector<TensorType> t;
  for (Value* v : n.inputs()) t.push_back(v->type());
  return t;
}

}  // namespace

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

// The taps/weights tables go after the input (NodeKernel::extra); symbolic
// sizes: the generic kernel computing its taps (emit_resize_generic.h).
std::vector<NodeKernel> emit_resize_node(const Node& n) {
  if (has_symbolic_dims(n.input(0)->shape()) || has_symbolic_dims(n.output(0)->shape()))
    return {node_kernel(emit_resize_generic(n.attrs(), n.input(0)->type(), n.output(0)->type()))};
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

}  // namespace kiln::codegen::node_adapters
