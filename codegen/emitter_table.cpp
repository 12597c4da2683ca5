#include "codegen/emitter_table.h"

#include <algorithm>

#include "codegen/core/deciding_only.h"
#include "codegen/emitter_generic.h"
#include "codegen/emitter_node_adapters.h"
#include "codegen/param_table.h"
#include "codegen/emitters/data_movement/emit_injective.h"
#include "codegen/emitters/elementwise/emit_fused.h"
#include "codegen/emitters/elementwise/emit_pointwise.h"
#include "codegen/emitters/gemm_conv/emit_conv.h"
#include "codegen/emitters/gemm_conv/emit_einsum.h"
#include "codegen/emitters/gemm_conv/emit_epilogue.h"
#include "codegen/emitters/gemm_conv/emit_gemm.h"
#include "codegen/emitters/gemm_conv/emit_gemm_row_norm.h"
#include "codegen/emitters/pool_select_loss/emit_fused_pool.h"
#include "codegen/emitters/pool_select_loss/emit_loss.h"
#include "codegen/emitters/pool_select_loss/emit_pool.h"
#include "codegen/emitters/pool_select_loss/emit_select.h"
#include "codegen/emitters/reduction/emit_fused_reduction.h"
#include "codegen/emitters/reduction/emit_normalization.h"
#include "codegen/emitters/reduction/emit_reduction.h"
#include "codegen/emitters/reduction/emit_rowwise.h"
#include "ir/symbolic_dim.h"
#include "ir/error.h"
#include "ir/op_registry.h"
#include "ops/registry.h"
#include "ops/symbolic_values.h"

namespace kiln::codegen {

namespace {

using namespace node_adapters;

bool handles_pointwise(const Node& n) {
  if (n.body() || n.num_outputs() != 1) return false;
  const OpDef* def = op_registry().find(n.op());
  if (!def || def->category != OpCategory::Pointwise || !def->expr) return false;
  return operands_present(n);
}

// A scalar constant holding a symbolic shape value (`past`) is computed in
// the kernel from `ks` (emit_pointwise.h, SymbolicScalars).
std::vector<NodeKernel> emit_pointwise_node(const Node& n) {
  std::vector<TensorType> operands;
  SymbolicScalars scalars;
  for (Value* v : n.inputs()) {
    if (v->is_constant() && v->has_data() && holds_symbolic_values(v->data()) && v->data().numel() == 1)
      scalars[static_cast<int>(operands.size())] = v->data().data<int64_t>()[0];
    operands.push_back(v->type());
  }
  return {node_kernel(emit_pointwise_op(op_registry().get(n.op()), n.attrs(), operands, n.output(0)->type(), scalars))};
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

// A split along a symbolic dim (the parts' sizes constants that must sum to
// it when it runs): map_split refuses a shape-generic kernel for it.
bool splits_symbolic_axis(const Node& n) {
  if (n.op() != "split") return false;
  const Shape& s = n.input(0)->shape();
  int64_t axis = n.attrs().get_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(s.size());
  return axis >= 0 && axis < static_cast<int64_t>(s.size()) && is_symbolic_dim(s[axis]);
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
// A matmul whose epilogue ends in a layer norm (emit_gemm_row_norm.h): the
// split GEMM and the reduction kernel that normalizes, sharing the workspace.
std::vector<NodeKernel> emit_gemm_row_norm_node(const Node& n) {
  RowNormGemmKernels k = emit_gemm_row_norm(n, op_registry());
  NodeKernel gemm = node_kernel(k.gemm);
  gemm.shared_bytes = k.gemm.shared_bytes;
  gemm.workspace_f32 = k.workspace_f32;
  NodeKernel norm = node_kernel(k.norm, std::move(k.norm_constants));
  norm.workspace_f32 = k.workspace_f32;
  return {std::move(gemm), std::move(norm)};
}
std::vector<NodeKernel> emit_gemm_node(const Node& n) {
  if (row_norm_of(n)) return emit_gemm_row_norm_node(n);
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

// The dispatch table: add a row per emitter (first match wins).
const KernelEmitter kEmitters[] = {
    {"pointwise", handles_pointwise, emit_pointwise_node, generic::any_node},
    {"fused pointwise", [](const Node& n) { return is_pointwise_fused(n, op_registry()); }, emit_fused_node,
     generic::any_node, [](const Node& n) { check_fused_pointwise(n, op_registry()); }},
    {"fused on demand", [](const Node& n) { return is_on_demand_fused(n, op_registry()); }, emit_fused_on_demand_node,
     generic::generic_fused_on_demand},
    {"injective", handles_injective, emit_injective_node,
     [](const Node& n) { return !n.body() && injective_shape_generic(n.op()) && !splits_symbolic_axis(n); }},
    {"reduction", handles_reduction, emit_reduction_node, generic::generic_reduction},
    {"index select", handles_index_select, emit_index_select_node},
    {"scatter", handles_scatter, emit_scatter_node},
    {"resize", handles_resize, emit_resize_node, generic::generic_resize},
    {"sample", handles_sample, emit_sample_node},
    {"conv gather", handles_conv_gather, emit_conv_gather_node},
    {"gemm", handles_gemm, emit_gemm_node, generic::generic_gemm},
    {"conv", handles_conv, emit_conv_node, generic::generic_conv},
    {"einsum", handles_einsum, emit_einsum_node},
    {"normalization", handles_normalization, emit_normalization_node, generic::generic_normalization},
    {"fused reduction", [](const Node& n) { return is_reduction_fused(n, op_registry()); }, emit_fused_reduction_node,
     generic::generic_fused_reduction},
    {"pool/select/loss", handles_op_kernels, emit_op_kernels_node, generic::generic_pool_or_scan},
    {"fused pool/argmax", [](const Node& n) { return is_pool_select_fused(n, op_registry()); }, emit_fused_pool_node,
     generic::generic_fused_pool},
    {"attention", handles_attention, emit_attention_node, generic::generic_attention},
    {"recurrent", handles_rnn, emit_rnn_node},
    {"linear attention", handles_linear_attention, emit_linear_attention_node},
    {"misc (dft, stft, det, range, dynamic_quantize_linear)", handles_misc, emit_misc_node, generic::generic_range},
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

namespace {

// The first constant holding symbolic shape values that `n` (or its body) reads.
const Value* first_symbolic_constant(const Node& n) {
  auto symbolic = [](const Value* v) {
    return v && v->is_constant() && v->has_data() && holds_symbolic_values(v->data());
  };
  for (const Value* v : n.inputs())
    if (symbolic(v)) return v;
  if (n.body())
    for (const auto& bn : n.body()->nodes())
      for (const Value* v : bn->inputs())
        if (symbolic(v)) return v;
  return nullptr;
}

}  // namespace

const KernelEmitter* emitter_for(const Node& n) {
  for (const KernelEmitter& e : kEmitters)
    if (e.handles(n)) return &e;
  return nullptr;
}

std::string why_not_shape_generic(const Node& n) {
  // A constant holding symbolic shape values has no bytes a kernel could read
  // (process-local handles, zeros in a plan): only the kernels computing it
  // from `ks` may take one, whatever the node's shapes.
  if (const Value* c = first_symbolic_constant(n)) {
    const KernelEmitter* e = emitter_for(n);
    if (!e || !e->shape_generic || !e->shape_generic(n) || !generic::reads_symbolic_constants(n))
      return fmt::format(
          "it reads constant %{}, which holds symbolic shape values {}, and only pointwise kernels "
          "(a scalar) and range (its start and delta) compute such values",
          c->name(), describe_symbolic_values(c->data()));
  }
  bool symbolic = false;
  for (const Value* v : n.inputs()) symbolic = symbolic || (v && has_symbolic_dims(v->shape()));
  for (const Value* v : n.outputs()) symbolic = symbolic || has_symbolic_dims(v->shape());
  if (!symbolic || (!n.body() && (n.op() == "reshape" || n.op() == "identity"))) return "";
  const KernelEmitter* e = emitter_for(n);
  if (!e) return "no kernel emitter handles it";
  if (!e->shape_generic || !e->shape_generic(n))
    return fmt::format("its kernel family ({}) has no shape-generic kernel for it yet", e->name);
  return why_generic_kernel_needs_param_table(n, *e);
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
