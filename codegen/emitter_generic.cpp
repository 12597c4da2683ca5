#include "codegen/emitter_generic.h"

#include <algorithm>
#include <set>

#include "codegen/core/emit_body_eval.h"
#include "codegen/emitters/attention/emit_attention.h"
#include "codegen/emitters/data_movement/emit_injective.h"
#include "codegen/emitters/gemm_conv/emit_epilogue.h"
#include "codegen/emitters/pool_select_loss/emit_fused_pool.h"
#include "codegen/emitters/reduction/emit_fused_reduction.h"
#include "codegen/emitters/reduction/emit_rowwise.h"
#include "ir/op_registry.h"
#include "ir/shape_utils.h"
#include "ir/symbolic_dim.h"
#include "ops/reduction_spec.h"
#include "ops/registry.h"
#include "ops/symbolic_values.h"

namespace kiln::codegen::generic {

namespace {

bool is_fused_kind(const Node& n, const char* kind) {
  return n.op() == "fused" && n.body() && n.attrs().get_string("kind", "") == kind;
}

}  // namespace

// Shape-generic predicates (KernelEmitter::shape_generic).
bool any_node(const Node&) { return true; }

// Whether every symbolic dim of `s` is its first (the batch).
bool batch_only_symbolic(const Shape& s) {
  for (size_t d = 1; d < s.size(); ++d)
    if (is_symbolic_dim(s[d])) return false;
  return true;
}

// Whether an image [N, C, S...] (nhwc: [N, S..., C]) has a static channel
// count: its batch and spatial dims may be symbolic (ops/symbolic_image.h).
bool static_channels(const Shape& s, bool nhwc) { return s.size() < 2 || !is_symbolic_dim(nhwc ? s.back() : s[1]); }

// softmax / log_softmax over the last axis: a static one whose rows fit the
// register row kernel (codegen/emitters/reduction/emit_rowwise.h), the row
// count symbolic, or a symbolic one (the multi-pass kernel).
bool generic_softmax(const Node& n) {
  if (n.body() || (n.op() != "softmax" && n.op() != "log_softmax") || !n.input(0)) return false;
  const Shape& s = n.input(0)->shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  int64_t axis = n.attrs().get_int("axis", -1);
  if (axis < 0) axis += rank;
  if (rank == 0 || axis != rank - 1 || !is_float(n.input(0)->dtype())) return false;
  // A symbolic row length: the multi-pass kernel with its sizes from `ks` (emit_reduction.cpp).
  return is_symbolic_dim(s.back()) || (s.back() >= 1 && s.back() <= kMaxRegisterRow);
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

// A fused reduction body over symbolic rows: its one reduction-category node
// passes `anchor_generic` (which decides where the symbols may be), its other
// ops are pointwise, and an operand with a symbolic dim has its op's result
// shape (no broadcasting along a symbol). With `prologue_movement`, the ops
// before the anchor (which the body evaluator computes, with symbolic
// strides) may also be shape-generic data movement and broadcast along a
// symbol (an embedding's gather plus its position rows); the epilogue keeps
// the rule above. With `epilogue_broadcast`, an epilogue operand may also
// broadcast along a symbol (a per-channel scale after a pool over a symbolic
// image): the store computes its offset from symbolic strides.
bool generic_fused_body(const Node& n, bool (*anchor_generic)(const Node&), bool prologue_movement = false,
                        bool epilogue_broadcast = false) {
  int anchors = 0;
  std::set<const Value*> after;  // values computed from the anchor's results
  for (const auto& bn : n.body()->nodes()) {
    const OpDef* def = op_registry().find(bn->op());
    if (!def) return false;
    if (def->category == OpCategory::Reduction) {
      ++anchors;
      if (!anchor_generic(*bn)) return false;
      for (const Value* v : bn->outputs()) after.insert(v);
      continue;
    }
    bool epilogue = false;
    for (const Value* v : bn->inputs()) epilogue = epilogue || after.count(v);
    if (epilogue)
      for (const Value* v : bn->outputs()) after.insert(v);
    if (prologue_movement && !epilogue) {
      // The emitter checks that the body uses only the anchor's symbols.
      if (!bn->body() && injective_shape_generic(bn->op())) continue;
      if (def->category == OpCategory::Pointwise && def->expr && bn->num_outputs() == 1) continue;
    }
    if (def->category != OpCategory::Pointwise || bn->num_outputs() != 1) return false;
    // An operand of another shape is read at the coordinates of `os`, which
    // the epilogue splits by constant extents below the outermost dim:
    // with a symbolic dim elsewhere (RMSNorm's [1, seq, 1] rows), only
    // static scalars are read so.
    if (epilogue_broadcast) continue;
    const Shape& os = bn->output(0)->shape();
    const bool batch_first = batch_only_symbolic(os);
    for (const Value* v : bn->inputs()) {
      if (!v || v->shape() == os) continue;
      if (has_symbolic_dims(v->shape()) || (!batch_first && shape_numel(v->shape()) != 1)) return false;
    }
  }
  return anchors == 1;
}

// A fused reduction (codegen/emitters/reduction/emit_fused_reduction.h) around
// a shape-generic reduce_*, softmax or layer norm (the row kernel takes the
// fused IO: an encoder's embedding sum before it, a cast after it); its
// prologue may hold data movement.
bool generic_layer_norm(const Node& n);

bool generic_fused_anchor(const Node& n) { return generic_reduction(n) || generic_layer_norm(n); }

bool generic_fused_reduction(const Node& n) {
  return is_reduction_fused(n, op_registry()) && generic_fused_body(n, generic_fused_anchor, true);
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

// instance_normalization / group_normalization over a symbolic batch and
// image size, channels, scale and bias static: a block per (image, group)
// folding its symbolic element count (emit_normalization.cpp, stat_kernel).
bool generic_group_norm(const Node& n) {
  if (n.body() || (n.op() != "instance_normalization" && n.op() != "group_normalization") || n.num_inputs() != 3 ||
      !n.input(0) || !is_float(n.input(0)->dtype()))
    return false;
  for (int i = 1; i < 3; ++i)
    if (!n.input(i) || has_symbolic_dims(n.input(i)->shape())) return false;
  return static_channels(n.input(0)->shape(), n.attrs().get_string("layout", "nchw") == "nhwc");
}

bool generic_normalization(const Node& n) {
  return generic_layer_norm(n) || generic_batch_norm(n) || generic_group_norm(n);
}

// A bare matmul or gemm in f32 (SIMT, or tensor cores with tf32 allowed),
// f16 or bf16 (tensor cores) with any symbolic batch dims, M, N and K: an
// encoder's projections over [batch, seq, d] and its attention scores, a
// dynamic-batch MLP's layers, a gemm with trans_b over a symbolic N (scores
// written as Gemm) or a symbolic K (probabilities times values), a bias C
// broadcast along a symbolic dim.
bool generic_gemm_anchor(const Node& n);

// An op of a shape-generic epilogue (codegen/emitters/gemm_conv/emit_epilogue.h,
// symbols()) of fused node `n`: pointwise, a reshape, a transpose (an
// attention's head merge, a projection's head split), a split along a static
// axis (a merged QKV projection's three parts), a slice cutting static dims
// only or a gather of one constant index along a static axis (rotary's
// halves of the head dim); coordinates split and joined by the sizes in `ks`.
bool generic_epilogue_op(const Node& n, const Node& bn) {
  const std::string& op = bn.op();
  if (op == "reshape" || op == "identity" || op == "transpose") return true;
  if (op == "slice") return symbolic_cut_refusal(bn).empty();
  if (op == "gather") {
    // Epilogue::from_fused takes the index from the body or a constant input of the node.
    const Value* iv = bn.input(1);
    const auto& ins = n.body()->inputs();
    if (iv && !iv->is_constant()) {
      auto it = std::find(ins.begin(), ins.end(), iv);
      iv = it == ins.end() ? nullptr : n.input(static_cast<int>(it - ins.begin()));
    }
    return iv && iv->is_constant() && iv->has_data() && iv->type().numel() == 1 && is_int(iv->dtype()) &&
           symbolic_cut_refusal(bn).empty();
  }
  if (op == "split") {
    const Shape& s = bn.input(0)->shape();
    int64_t axis = bn.attrs().get_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(s.size());
    return axis >= 0 && axis < static_cast<int64_t>(s.size()) && !is_symbolic_dim(s[axis]);
  }
  const OpDef* def = op_registry().find(op);
  return def && def->category == OpCategory::Pointwise && def->expr && !bn.body();
}

// A fused node of an anchored kind: its anchor (the first node passing
// `is_anchor`) when the rest are shape-generic epilogue ops, else null.
const Node* generic_epilogue_anchor(const Node& n, bool (*is_anchor)(const Node&)) {
  const Node* anchor = nullptr;
  for (const auto& bn : n.body()->nodes()) {
    if (!anchor && is_anchor(*bn)) {
      anchor = bn.get();
      continue;
    }
    if (!anchor || !generic_epilogue_op(n, *bn)) return nullptr;
  }
  return anchor;
}

// A gemm_epilogue fused node: a generic anchor, then shape-generic epilogue ops.
bool generic_gemm(const Node& n) {
  if (!n.body()) return generic_gemm_anchor(n);
  if (!is_fused_kind(n, "gemm_epilogue")) return false;
  const Node* a = generic_epilogue_anchor(n, [](const Node& x) { return x.op() == "matmul" || x.op() == "gemm"; });
  return a && generic_gemm_anchor(*a);
}

// The bare attention op (codegen/emitters/attention/emit_attention.h,
// attention_shape_generic), or a fused attention: the op, then its epilogue
// of shape-generic ops (the head merge transpose and reshape to [B, S, H*Dv],
// casts, a residual add), stored through the same kernel. The op in the
// body is judged with the symbols' ranges of the fused node's graph.
bool generic_attention(const Node& n) {
  if (!n.body()) return attention_shape_generic(n);
  if (!is_fused_kind(n, "attention")) return false;
  const Node* a = generic_epilogue_anchor(n, [](const Node& x) { return x.op() == "attention"; });
  return a && attention_shape_generic(*a, n);
}

bool generic_gemm_anchor(const Node& n) {
  if (n.body() || (n.op() != "matmul" && n.op() != "gemm") || n.num_inputs() < 2) return false;
  const Value *a = n.input(0), *b = n.input(1);
  if (!a || !b) return false;
  if (a->dtype() != DType::F32 && a->dtype() != DType::F16 && a->dtype() != DType::BF16) return false;
  return n.op() == "matmul" || (a->shape().size() == 2 && b->shape().size() == 2);
}

// conv / conv_transpose in a float dtype whose batch and image size may be
// symbolic, channels and weights static (codegen/emitters/gemm_conv/emit_conv.h):
// NCHW on the SIMT or tensor-core core (the batch is the GEMM batch, the
// output positions its N), nhwc on the SIMT core only (the batch and the
// positions are part of M, which only it takes symbolic), depthwise; bare
// or anchoring a conv_epilogue of pointwise ops: an epilogue operand with a
// symbolic dim has the element's own shape (a residual), the others are
// static and broadcast (per-channel scales).
bool generic_conv(const Node& n) {
  auto conv_anchor = [](const Node& a) {
    if ((a.op() != "conv" && a.op() != "conv_transpose") || a.num_inputs() < 2 || !a.input(0) ||
        !is_float(a.input(0)->dtype()))
      return false;
    const bool nhwc = a.attrs().get_string("layout", "nchw") == "nhwc";
    for (int i = 1; i < a.num_inputs(); ++i)
      if (a.input(i) && has_symbolic_dims(a.input(i)->shape())) return false;
    if (!static_channels(a.input(0)->shape(), nhwc) || !static_channels(a.output(0)->shape(), nhwc)) return false;
    return true;
  };
  if (!n.body()) return conv_anchor(n);
  if (!is_fused_kind(n, "conv_epilogue")) return false;
  int anchors = 0;
  for (const auto& bn : n.body()->nodes()) {
    if (conv_anchor(*bn)) {
      ++anchors;
      continue;
    }
    const OpDef* def = op_registry().find(bn->op());
    if (!def || def->category != OpCategory::Pointwise || bn->num_outputs() != 1) return false;
    const Shape& os = bn->output(0)->shape();
    for (const Value* v : bn->inputs())
      if (v && has_symbolic_dims(v->shape()) && v->shape() != os) return false;
  }
  return anchors == 1;
}

// The pools over a symbolic batch and image size (codegen/emitters/pool_select_loss/emit_pool.h):
// max (without the indices result), average and lp windows and the global
// pools, channels static.
bool generic_pool(const Node& n) {
  if (n.body() || n.num_inputs() < 1 || !n.input(0) || n.num_outputs() != 1) return false;
  const std::string& op = n.op();
  if (op != "max_pool" && op != "average_pool" && op != "lp_pool" && op != "global_average_pool" &&
      op != "global_max_pool" && op != "global_lp_pool")
    return false;
  const Value* x = n.input(0);
  if (!is_float(x->dtype())) return false;
  const bool nhwc = n.attrs().get_string("layout", "nchw") == "nhwc";
  return static_channels(x->shape(), nhwc) && static_channels(n.output(0)->shape(), nhwc);
}

// cumsum / cumprod along any axis of an operand with symbolic dims
// (codegen/emitters/pool_select_loss/emit_scan_generic.h), bare: the
// extents around the axis read from `ks`.
bool generic_scan(const Node& n) {
  return !n.body() && (n.op() == "cumsum" || n.op() == "cumprod") && n.num_inputs() == 1 && n.input(0) &&
         n.num_outputs() == 1;
}

bool generic_pool_or_scan(const Node& n) { return generic_pool(n) || generic_scan(n); }

// A fused pool (codegen/emitters/pool_select_loss/emit_fused_pool.h) around
// a shape-generic pool: the pool kernel with the fused body's seams. Over a
// symbolic image the prologue (which the body evaluator computes with
// symbolic strides) and the epilogue may broadcast per-channel operands
// along the symbolic height and width (a shift before a max pool, a scale
// after a global pool).
bool generic_fused_pool(const Node& n) {
  return is_pool_select_fused(n, op_registry()) && generic_fused_body(n, generic_pool, true, true);
}

// A fused pointwise/injective body evaluated on demand
// (codegen/emitters/elementwise/emit_fused.h, emit_fused_on_demand): its
// pointwise ops broadcast through symbolic strides, and its data movement is
// among the injective ops whose index maps take symbolic sizes (rotary's
// slice/neg/concat, a mask's unsqueeze/compare/where, an embedding's gather,
// a range computed from the element's index).
bool generic_fused_on_demand(const Node& n) {
  if (!n.body() || (!is_fused_kind(n, "pointwise") && !is_fused_kind(n, "injective"))) return false;
  for (const auto& bn : n.body()->nodes()) {
    const OpDef* def = op_registry().find(bn->op());
    if (!def || bn->body()) return false;
    const bool pointwise = def->category == OpCategory::Pointwise && def->expr;
    if (!pointwise && bn->op() != "identity" && !injective_shape_generic(bn->op()) && !is_evaluable_range(*bn))
      return false;
  }
  return true;
}

// resize of a float image by nearest, linear or cubic interpolation (also
// exclude_outside): the source coordinates and taps computed in the kernel
// (emit_resize_generic.h). Crops and shrinking antialias have no generic
// kernel; without scales the scale is out/in per run, so antialias at all.
bool generic_resize(const Node& n) {
  if (n.body() || n.op() != "resize" || n.num_inputs() != 1 || !n.input(0) || !is_float(n.input(0)->dtype()))
    return false;
  const std::string mode = n.attrs().get_string("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic") return false;
  if (n.attrs().get_string("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize") return false;
  if (mode != "nearest" && n.attrs().get_int("antialias", 0) != 0) {
    const std::vector<float> scales = n.attrs().get_floats("scales");
    if (scales.empty()) return false;
    for (float s : scales)
      if (s < 1) return false;
  }
  return true;
}

// range with a length of any size expression (emit_misc_ops.h): a static
// start and delta, buffers, or i64 scalars holding symbolic shape values.
bool generic_range(const Node& n) {
  if (n.body() || n.op() != "range" || n.num_inputs() != 3 || n.num_outputs() != 1) return false;
  return n.output(0)->shape().size() == 1 && reads_symbolic_constants(n);
}

bool reads_symbolic_constants(const Node& n) {
  auto symbolic = [](const Value* v) {
    return v && v->is_constant() && v->has_data() && holds_symbolic_values(v->data());
  };
  auto scalar_i64 = [](const Value* v) { return v->dtype() == DType::I64 && v->data().numel() == 1; };
  if (n.op() == "range") {
    for (int i : {0, 2})
      if (symbolic(n.input(i)) && !scalar_i64(n.input(i))) return false;
    return true;  // the limit is never read: the length is the result's
  }
  const OpDef* def = op_registry().find(n.op());
  const bool pointwise = !n.body() && def && def->category == OpCategory::Pointwise && def->expr;
  // Both fused kernels of pointwise/injective bodies compute a scalar one.
  const bool fused_pointwise = n.body() && (is_fused_kind(n, "pointwise") || is_fused_kind(n, "injective"));
  if (!pointwise && !fused_pointwise) {
    for (const Value* v : n.inputs())
      if (symbolic(v)) return false;
    if (n.body())
      for (const auto& bn : n.body()->nodes())
        for (const Value* v : bn->inputs())
          if (symbolic(v)) return false;
    return true;
  }
  for (const Value* v : n.inputs())
    if (symbolic(v) && !scalar_i64(v)) return false;
  if (n.body())
    for (const auto& bn : n.body()->nodes())
      for (const Value* v : bn->inputs())
        if (symbolic(v) && !scalar_i64(v)) return false;
  return true;
}

}  // namespace kiln::codegen::generic
