#include "passes/fusion_rules.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/registry.h"

namespace kiln::fusion {

Role op_role(const Node& n) {
  const std::string& op = n.op();
  if (n.body() || op == "fused" || n.num_outputs() == 0) return Role::Opaque;
  if (op == "reshape" || op == "identity") return Role::View;
  if (op == "conv" || op == "conv_transpose" || op == "gemm" || op == "matmul" || op == "attention")
    return Role::Compute;
  const OpDef* d = op_registry().find(op);
  if (!d) return Role::Opaque;
  switch (d->category) {
    case OpCategory::Pointwise: return Role::Pointwise;
    case OpCategory::Injective: return Role::Injective;
    case OpCategory::Reduction: return Role::Reduction;
    default: return Role::Opaque;
  }
}

std::string group_kind_name(const Group& g) {
  switch (g.kind) {
    case GroupKind::Plain:
      for (const Node* n : g.nodes)
        if (op_role(*n) == Role::Pointwise) return "pointwise";
      return "injective";
    case GroupKind::Reduction: return "reduction";
    case GroupKind::Attention: return "attention";
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

FusionState::FusionState(const Graph& g) : g_(g) {
  for (const auto& np : g.nodes()) {
    Node* n = np.get();
    int id = static_cast<int>(groups_.size());
    pos_[n] = id;
    group_[n] = id;
    Group grp;
    grp.nodes = {n};
    Role r = op_role(*n);
    if (r == Role::Compute || r == Role::Reduction) {
      grp.anchor = n;
      grp.kind = r == Role::Compute ? GroupKind::Compute : GroupKind::Reduction;
      map_[n->output(0)] = new_map_id();
    }
    groups_.push_back(std::move(grp));
  }
}

int FusionState::group_of_value(const Value* v) const {
  if (!v || !v->producer()) return -1;
  auto it = group_.find(v->producer());
  return it == group_.end() ? -1 : it->second;
}

int FusionState::map_id(const Value* v) const {
  auto it = map_.find(v);
  return it == map_.end() ? -1 : it->second;
}

std::vector<Value*> FusionState::escaping(int a, int b) const {
  std::vector<Value*> out;
  for (int gi : {a, b}) {
    if (gi < 0) continue;
    for (const Node* n : groups_[gi].nodes)
      for (Value* v : n->outputs()) {
        bool esc = g_.is_output(v);
        for (const Use& u : v->uses()) {
          int x = group_of(u.user);
          esc |= x != a && x != b;
        }
        if (esc) out.push_back(v);
      }
  }
  return out;
}

bool FusionState::would_cycle(const std::vector<int>& parts) const {
  // The union is convex unless some path leaves it and comes back. Each part
  // is convex already, so that path runs through a group outside the union.
  auto inside = [&](int x) { return std::find(parts.begin(), parts.end(), x) != parts.end(); };
  std::vector<char> seen(groups_.size(), 0);
  std::vector<int> stack;
  auto expand = [&](int gi, bool from_inside) {
    for (const Node* n : groups_[gi].nodes)
      for (const Value* v : n->outputs())
        for (const Use& u : v->uses()) {
          int x = group_of(u.user);
          if (inside(x)) {
            if (!from_inside) return true;
            continue;
          }
          if (!seen[x]) {
            seen[x] = 1;
            stack.push_back(x);
          }
        }
    return false;
  };
  for (int p : parts) expand(p, true);
  while (!stack.empty()) {
    int x = stack.back();
    stack.pop_back();
    if (expand(x, false)) return true;
  }
  return false;
}

void FusionState::merge(int a, int b) {
  if (a == b) return;
  for (Node* n : groups_[b].nodes) {
    group_[n] = a;
    groups_[a].nodes.push_back(n);
  }
  groups_[b].nodes.clear();
  groups_[b].alive = false;
}

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
  bool views_only = true;
  for (int gi : {a, b})
    for (const Node* n : s.group(gi).nodes) views_only &= op_role(*n) == Role::View;
  if (views_only) return "only views (reshape/identity), nothing to launch";
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
  if (s.would_cycle({gs, gp, s.group_of(&m2)}))
    return "would create a cycle (another operand depends on the group)";
  scores = gs;
  probs = gp;
  return "";
}

}  // namespace kiln::fusion
