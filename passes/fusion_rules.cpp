#include "passes/fusion_rules.h"

#include <fmt/format.h>

#include "ir/symbolic_dim.h"

namespace kiln::fusion {

std::string group_kind_name(const Group& g) {
  switch (g.kind) {
    case GroupKind::Plain:
      for (const Node* n : g.nodes)
        if (op_role(*n) == Role::Pointwise) return "pointwise";
      return "injective";
    case GroupKind::Reduction:
      return "reduction";
    case GroupKind::Attention:
      return "attention";
    case GroupKind::Compute: {
      const std::string& op = g.anchor->op();
      if (op == "conv" || op == "conv_transpose") return "conv_epilogue";
      if (op == "attention") return "attention";
      return "gemm_epilogue";
    }
  }
  return "pointwise";
}

std::string value_label(const Value* v) { return v->name().empty() ? "(unnamed)" : "%" + v->name(); }

namespace {
std::string type_label(const Value* v) { return v->type().str(); }
}  // namespace

namespace {
// Injective ops an epilogue can store through: each of their result elements
// is one element of the operand, found from its index alone (a permutation, a
// partition or a window), so the epilogue computes every element once.
bool stores_through(const Node& c) {
  const std::string& op = c.op();
  if (op == "transpose" || op == "split" || op == "slice") return true;
  // gather of one constant index along an axis: a window (ViT's q/k/v select).
  const Value* idx = c.input(1);
  return op == "gather" && idx && idx->is_constant() && idx->type().numel() == 1;
}
}  // namespace

std::string check_epilogue(const FusionState& s, int gi, const Node& c) {
  const Group& g = s.group(gi);
  Role r = op_role(c);
  bool layout = r == Role::Injective && stores_through(c);
  if (r != Role::Pointwise && r != Role::View && !layout)
    return fmt::format("{} moves or repeats elements; an epilogue stores each result element once", c.op());
  // Reduction kernels store in the anchor's element order and apply only
  // pointwise ops and reshapes there (codegen/emit_fused_reduction: moving an
  // element needs the inverse index map); a transpose/slice/gather after a
  // layer norm is its own kernel.
  if (layout && g.row_norm)
    return fmt::format(
        "{} moves elements; after the layer norm {} the epilogue applies only pointwise ops and "
        "reshapes",
        c.op(), value_label(g.row_norm->output(0)));
  if (layout && g.kind == GroupKind::Reduction)
    return fmt::format("{} moves elements; a reduction epilogue applies only pointwise ops and reshapes", c.op());
  bool float_path = g.kind == GroupKind::Compute || g.kind == GroupKind::Attention;
  int id = -1;
  for (const Value* v : c.inputs()) {
    if (s.group_of_value(v) != gi) continue;
    int m = s.map_id(v);
    if (m < 0)
      return fmt::format("{} is not an element of the {} result (prologue or extra result)", value_label(v),
                         g.anchor->op());
    if (id >= 0 && m != id)
      return fmt::format("combines values holding different elements of the {} result", g.anchor->op());
    id = m;
    if (r == Role::Pointwise && v->shape() != c.output(0)->shape())
      return fmt::format("broadcasts {} from {} to {}; an epilogue maps elements one to one", value_label(v),
                         type_label(v), type_label(c.output(0)));
    if (float_path && !is_float(v->dtype()))
      return fmt::format("{} is {}: conv/gemm epilogues compute on the float accumulator", value_label(v),
                         dtype_name(v->dtype()));
  }
  if (id < 0) return "reads no value of the group";
  if (s.would_cycle({gi, s.group_of(&c)})) return "would create a cycle (another operand depends on the group)";
  return "";
}

std::string check_plain(const FusionState& s, int a, int b) {
  if (s.group(a).non_views + s.group(b).non_views == 0) return "only views (reshape/identity), nothing to launch";
  std::vector<Value*> esc = s.escaping(a, b);
  for (const Value* v : esc) {
    const Value* f = esc.front();
    if (v->shape() != f->shape() || v->type().layout != f->type().layout)
      return fmt::format("{} ({}) and {} ({}) would both be results; a pointwise kernel writes one shape",
                         value_label(f), type_label(f), value_label(v), type_label(v));
  }
  if (s.would_cycle({a, b})) return "would create a cycle (another operand depends on the group)";
  return "";
}

std::string check_prologue(const FusionState& s, int p, const Node& r) {
  for (int i = 1; i < r.num_inputs(); ++i)
    if (s.group_of_value(r.input(i)) == p)
      return fmt::format("the group also feeds operand {} of {}, not only its data", i, r.op());
  const Value* in = r.input(0);
  for (const Value* v : s.escaping(p, s.group_of(&r))) {
    if (v->producer() == &r) continue;
    if (v->shape() != in->shape() || v->type().layout != in->type().layout)
      return fmt::format("{} ({}) would be a result but the {} reads {}", value_label(v), type_label(v), r.op(),
                         type_label(in));
  }
  if (s.would_cycle({p, s.group_of(&r)})) return "would create a cycle (another operand depends on the group)";
  return "";
}

std::string check_row_norm(const FusionState& s, int gi, const Node& r, int x_map) {
  const Group& g = s.group(gi);
  if (g.kind != GroupKind::Compute || (g.anchor->op() != "matmul" && g.anchor->op() != "gemm"))
    return fmt::format("{} and {} would be two anchors in one kernel", g.anchor->op(), r.op());
  if (r.op() != "layer_normalization")
    return fmt::format(
        "{} and {} would be two anchors in one kernel (only a layer norm rides a GEMM's split-K "
        "reduction)",
        g.anchor->op(), r.op());
  if (g.row_norm)
    return fmt::format("the {}'s epilogue has a layer norm already ({})", g.anchor->op(),
                       value_label(g.row_norm->output(0)));
  const Value* x = r.input(0);
  const Value* mm = g.anchor->output(0);
  if (has_symbolic_dims(x->shape()) || has_symbolic_dims(mm->shape()))
    return "a shape-generic GEMM is not split in K, which a layer norm in its epilogue needs";
  // The map id says the elements are in the GEMM's order (reshapes keep it);
  // the last dim, that a row of x is a row of the GEMM's result.
  if (x_map != s.map_id(mm) || x->type().numel() != mm->type().numel() || x->shape().empty() ||
      x->shape().back() != mm->shape().back())
    return fmt::format("{} {} does not hold the {}'s rows in their order", value_label(x), x->type().str(),
                       g.anchor->op());
  int64_t axis = r.attrs().get_int("axis", -1);
  if (axis < 0) axis += x->type().rank();
  if (axis != x->type().rank() - 1)
    return fmt::format("the layer norm normalizes from axis {}, not the GEMM's rows (the last axis)", axis);
  for (int i = 1; i < r.num_inputs(); ++i)
    if (r.input(i) && s.group_of_value(r.input(i)) == gi)
      return fmt::format("the group also feeds operand {} of {}, not only its data", i, r.op());
  for (int o = 1; o < r.num_outputs(); ++o)
    if (r.output(o)->has_uses() || s.graph().is_output(r.output(o)))
      return "the layer norm's mean or inverse deviation is used";
  return "";
}

namespace {
// The only value group `gi` writes is `v`, read only by `user` as operand 0.
bool only_feeds(const FusionState& s, int gi, const Value* v, const Node* user) {
  std::vector<Value*> esc = s.escaping(gi);
  if (esc.size() != 1 || esc[0] != v || s.graph().is_output(v)) return false;
  for (const Use& u : v->uses())
    if (u.user != user || u.operand != 0) return false;
  return true;
}
}  // namespace

std::string check_attention(const FusionState& s, const Node& m2, int& scores, int& probs) {
  const Value* p = m2.input(0);
  int gp = s.group_of_value(p);
  if (gp < 0) return "operand 0 is not computed";
  const Group& pg = s.group(gp);
  if (pg.kind != GroupKind::Reduction || pg.anchor->op() != "softmax") return "operand 0 is not a softmax result";
  const Node& sm = *pg.anchor;
  int rank = sm.output(0)->type().rank();
  int64_t axis = sm.attrs().get_int("axis", -1);
  if (axis < 0) axis += rank;
  if (axis != rank - 1) return "the softmax is not over the last axis";
  for (const Node* n : pg.nodes)
    if (n != &sm && s.map_id(n->output(0)) < 0) return "the softmax has a prologue";
  if (!only_feeds(s, gp, p, &m2)) return "the softmax result is used elsewhere too";
  const Value* x = sm.input(0);
  int gs = s.group_of_value(x);
  if (gs < 0) return "the softmax input is not computed";
  const Group& sg = s.group(gs);
  if (sg.kind != GroupKind::Compute || sg.anchor->op() != "matmul")
    return "the softmax input does not come from a matmul";
  for (const Node* n : sg.nodes)
    if (n != sg.anchor && op_role(*n) != Role::Pointwise) return "the scores pass through a layout change";
  if (!only_feeds(s, gs, x, &sm)) return "the attention scores are used elsewhere too";
  for (int i = 1; i < m2.num_inputs(); ++i) {
    int gv = s.group_of_value(m2.input(i));
    if (gv == gs || gv == gp) return "the second matmul reads the scores twice";
  }
  if (s.would_cycle({gs, gp, s.group_of(&m2)})) return "would create a cycle (another operand depends on the group)";
  scores = gs;
  probs = gp;
  return "";
}

}  // namespace kiln::fusion
