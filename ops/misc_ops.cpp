// Misc family: non_max_suppression here; the recurrent ops (rnn_ops.cpp),
// signal ops (signal_ops.cpp) and attention (attention_ops.cpp) register
// through register_misc_ops.
#include <algorithm>
#include <climits>
#include <cmath>

#include "ops/data_dependent_size.h"
#include "ops/families.h"
#include "ops/misc_internal.h"
#include "ops/op_helpers.h"

namespace kiln::ops {

namespace {

// ---- non_max_suppression ------------------------------------------------------
//
// non_max_suppression(boxes [B, n, 4], scores [B, C, n])
//   {center_point_box, max_output_boxes_per_class, iou_threshold, score_threshold?}
// -> selected [k, 3] i64 of (batch, class, box). Per batch and class, boxes
// scoring above score_threshold are taken by descending score (lower index
// first on ties) unless their IoU with an already taken box exceeds
// iou_threshold, up to max_output_boxes_per_class. The result count depends
// on the data: a number when boxes and scores are known at compile time, else
// the size symbol the node names, or bounded (ops/data_dependent_size.h):
// [B * C * min(max_output_boxes_per_class, n), 3] plus the count as i64[].
// The bounded form takes an optional third operand, the number of valid
// boxes (i64, one element): a GPU plan computed at the bounds
// (compiler/gpu_bounded_lowering.h) runs NMS over boxes whose count is itself
// decided at run time, and the boxes past that count are padding that must
// never be candidates.

struct NmsParams {
  bool center = false;
  int64_t max_per_class = 0;
  float iou = 0;
  bool has_score = false;
  float score = 0;
};

NmsParams nms_params(const AttrMap& a) {
  NmsParams p;
  p.center = a.get_int("center_point_box", 0) != 0;
  p.max_per_class = a.get_int("max_output_boxes_per_class", 0);
  p.iou = a.get_float("iou_threshold", 0);
  p.has_score = a.has("score_threshold");
  p.score = a.get_float("score_threshold", 0);
  return p;
}

struct Box {
  float y1, x1, y2, x2;
  float area() const { return (y2 - y1) * (x2 - x1); }
};

Box make_box(const float* b, bool center) {
  if (center) {
    float xc = b[0], yc = b[1], w = b[2], h = b[3];
    return {yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// IoU > threshold, the ONNX Runtime way (degenerate boxes never suppress).
bool suppresses(const Box& a, const Box& b, float threshold) {
  float aa = a.area(), ab = b.area();
  if (aa <= 0 || ab <= 0) return false;
  float iy1 = std::max(a.y1, b.y1), ix1 = std::max(a.x1, b.x1), iy2 = std::min(a.y2, b.y2), ix2 = std::min(a.x2, b.x2);
  float inter = std::max(0.0f, iy2 - iy1) * std::max(0.0f, ix2 - ix1);
  if (inter <= 0) return false;
  float iou = inter / (aa + ab - inter);
  return iou > threshold;
}

std::vector<int64_t> run_nms(const Tensor& boxes, const Tensor& scores, const NmsParams& p, int64_t valid = INT64_MAX) {
  std::vector<float> bv = load_all<float>(boxes), sv = load_all<float>(scores);
  int64_t B = scores.shape()[0], C = scores.shape()[1], n = scores.shape()[2];
  std::vector<int64_t> sel;
  std::vector<Box> bx(n), kept;
  std::vector<int64_t> order;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < n; ++i) bx[i] = make_box(bv.data() + (b * n + i) * 4, p.center);
    for (int64_t c = 0; c < C; ++c) {
      const float* s = sv.data() + (b * C + c) * n;
      order.clear();
      for (int64_t i = 0; i < std::min(n, valid); ++i)
        if (!p.has_score || s[i] > p.score) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      kept.clear();
      int64_t count = 0;
      for (int64_t i : order) {
        if (count >= p.max_per_class) break;
        bool keep = true;
        for (const Box& k : kept)
          if (suppresses(k, bx[i], p.iou)) {
            keep = false;
            break;
          }
        if (!keep) continue;
        kept.push_back(bx[i]);
        sel.insert(sel.end(), {b, c, i});
        ++count;
      }
    }
  }
  return sel;
}

// The most boxes the selection can hold: every class of every batch keeps at
// most min(max_output_boxes_per_class, n) boxes.
int64_t nms_bound(const Shape& boxes, const Shape& scores, const AttrMap& a) {
  return scores[0] * scores[1] * std::min(a.get_int("max_output_boxes_per_class", 0), boxes[1]);
}

OpDef nms_op() {
  OpDef d;
  d.name = "non_max_suppression";
  d.min_inputs = 2;
  d.max_inputs = 3;  // the bounded form's valid box count
  d.max_outputs = 2;
  d.symbolic_dims = true;  // the symbol form reads no dims; the others refuse symbolic ones below
  d.attrs = {{"center_point_box", AttrKind::Int}, {"max_output_boxes_per_class", AttrKind::Int},
             {"iou_threshold", AttrKind::Float},  {"score_threshold", AttrKind::Float},
             {kSizeSymbolAttr, AttrKind::String}, {"bounded", AttrKind::Int}};
  d.infer = [](InferContext& c) {
    require_float(c, 0);
    require_float(c, 1);
    const Shape &b = c.shape(0), &s = c.shape(1);
    if (b.size() != 3 || b[2] != 4) c.fail("boxes must be [batch, boxes, 4], got [{}]", dims_str(b));
    if (s.size() != 3 || s[0] != b[0] || s[2] != b[1])
      c.fail("scores must be [{}, classes, {}], got [{}]", dim_str(b[0]), dim_str(b[1]), dims_str(s));
    int64_t cpb = c.attrs().get_int("center_point_box", 0);
    if (cpb != 0 && cpb != 1) c.fail("center_point_box must be 0 or 1, got {}", cpb);
    float iou = c.attrs().get_float("iou_threshold", 0);
    if (!(iou >= 0 && iou <= 1)) c.fail("iou_threshold must be in [0, 1], got {}", iou);
    if (c.attrs().get_int("max_output_boxes_per_class", 0) < 0) c.fail("max_output_boxes_per_class must be >= 0");
    const SizeForm form = size_form(c);
    if (c.has_input(2) && (form != SizeForm::Bounded || c.dtype(2) != DType::I64 || c.type(2).numel() != 1))
      c.fail(
          "a third operand (the number of valid boxes) is taken by the bounded form only, as i64 of one element, "
          "got {}",
          c.type(2).str());
    if (c.num_outputs() != (form == SizeForm::Bounded ? 2 : 1))
      c.fail("{} results, but this form of non_max_suppression has {}", c.num_outputs(),
             form == SizeForm::Bounded ? 2 : 1);
    if (form == SizeForm::Symbol) return std::vector<TensorType>{TensorType(DType::I64, {size_symbol_dim(c), 3})};
    if (has_symbolic_dims(b) || has_symbolic_dims(s))
      c.fail("boxes {} and scores {} need static shapes here", c.type(0).str(), c.type(1).str());
    if (form == SizeForm::Bounded)
      return std::vector<TensorType>{TensorType(DType::I64, {nms_bound(b, s, c.attrs()), 3}),
                                     TensorType(DType::I64, {})};
    // The number of selected boxes depends on the data.
    const Tensor& bt = c.require_value(0, "boxes (the result count depends on them)");
    const Tensor& st = c.require_value(1, "scores (the result count depends on them)");
    int64_t k = static_cast<int64_t>(run_nms(bt, st, nms_params(c.attrs())).size()) / 3;
    return std::vector<TensorType>{TensorType(DType::I64, {k, 3})};
  };
  d.reference = [](KernelContext& ctx) {
    if (ctx.attrs.has(kSizeSymbolAttr)) refuse_unlowered(ctx);
    const int64_t valid = ctx.has(2) ? ctx.in(2).get_int(0) : INT64_MAX;
    std::vector<int64_t> sel = run_nms(ctx.in(0), ctx.in(1), nms_params(ctx.attrs), valid);
    Tensor& out = ctx.out();
    if (ctx.attrs.get_int("bounded", 0)) {
      // The selected rows first, zeros after them, and the count.
      if (static_cast<int64_t>(sel.size()) > out.numel())
        fail("{}: selected {} boxes, more than the bound {}", ctx.label, sel.size() / 3, out.numel() / 3);
      std::fill(out.data<int64_t>(), out.data<int64_t>() + out.numel(), int64_t(0));
      std::copy(sel.begin(), sel.end(), out.data<int64_t>());
      ctx.out(1).data<int64_t>()[0] = static_cast<int64_t>(sel.size()) / 3;
      return;
    }
    if (static_cast<int64_t>(sel.size()) != out.numel())
      fail("{}: selected {} boxes but inference found {}", ctx.label, sel.size() / 3, out.numel() / 3);
    std::copy(sel.begin(), sel.end(), out.data<int64_t>());
  };
  d.doc =
      "greedy non-maximum suppression per batch and class; result [k, 3] of (batch, class, box); k known at compile "
      "time, a size symbol bound at run time, or bounded (the bound plus the count)";
  return d;
}

}  // namespace

void register_misc_ops(OpRegistry& r) {
  r.add(nms_op());
  register_rnn_ops(r);
  register_signal_ops(r);
  register_attention_ops(r);
  register_linear_attention_ops(r);
  register_tfidf_vectorizer_op(r);
  register_tree_ensemble_op(r);
}

}  // namespace kiln::ops
