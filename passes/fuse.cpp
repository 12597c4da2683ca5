// fuse: groups nodes into `fused` nodes, each one future GPU kernel (kind
// pointwise, injective, reduction, gemm_epilogue, conv_epilogue, attention).
//
// One walk in topological order decides, node by node (rules and their
// reasons in passes/fusion_rules.{h,cpp}):
//  - a pointwise op, a view (reshape, identity), or a transpose, split, slice
//    or one-index gather joins the epilogue of a producer's conv / gemm /
//    matmul / attention / reduction group when it maps that result's elements
//    one to one (bias, activation, residual add, cast, head split/merge of
//    the stored result), taking the producer computed last when several
//    qualify;
//  - otherwise a pointwise or injective op merges with its producers' anchorless
//    groups as long as everything the merged group writes has one shape;
//  - a reduction (softmax, layer_normalization, reduce_*, pooling...) takes
//    the anchorless group computing its data operand as a prologue; values of
//    that prologue used elsewhere become extra results of the same shape;
//  - a matmul reading softmax(matmul(..) + pointwise) + pointwise over the last
//    axis closes an attention kernel (softmax(QK^T)V).
// Left alone: ops outside those categories (topk, nonzero, scatter, rnn...),
// prologues of conv/gemm (their operands are read as tiles), two anchors in
// one kernel (conv -> max_pool), and any merge that would create a cycle
// (a path leaving the group and coming back) or make a value computed twice
// for two outside users: a value used outside always becomes a result.
// --stats lists, for each producer -> consumer pair left in different
// kernels, why.
//
// Codegen has the last word (passes/fusion_capabilities.h): with
// PassOptions::why_no_kernel set, a prologue joins a reduction and an
// attention kernel closes only when codegen can emit the union (e.g. a
// max_pool reads overlapping windows and cannot also write its prologue's
// values; an attention group with no recognised attention op in it is left
// as softmax and matmul kernels). Every group left at the end is asked too.
// An anchored group refused is cut: its longest epilogue prefix codegen
// takes stays with the anchor, the op after it is barred from that anchor's
// epilogue (it and what reads it fuse as they would after any kernel), and
// the walk runs again. When even the anchor with no epilogue is refused, the
// anchor is sealed, left alone; an anchorless group refused has each member
// sealed. Each round bars or seals at least one more node, so this ends;
// usually no round is needed.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "passes/fuse_outline.h"
#include "passes/fusion_rules.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

using namespace fusion;

class Fuse : public Pass {
 public:
  std::string_view name() const override { return "fuse"; }

  bool run(Graph& g, const PassOptions& opts, PassStats& stats) override {
    why_no_kernel_ = opts.why_no_kernel;
    why_not_generic_ = opts.why_not_shape_generic;
    ends_ = range_ends(g);
    sealed_.clear();
    barred_.clear();
    split_notes_.clear();
    for (;;) {
      FusionState s(g);
      reasons_.clear();
      for (Node* c : g.node_list()) {
        if (sealed_.count(c)) continue;
        switch (op_role(*c)) {
          case Role::Opaque:
            break;
          case Role::Compute:
            attention(s, *c);
            break;
          case Role::Reduction:
            prologue(s, *c);
            break;
          default:
            epilogue_or_plain(s, *c);
            break;
        }
      }
      std::unordered_map<int, FusedParts> asked;
      if (split_back(s, stats, asked)) continue;
      write_notes(g, s, stats);
      for (const std::string& n : split_notes_) stats.notes.push_back(n);
      return outline_groups(g, s, stats, std::move(asked)) > 0;
    }
  }

 private:
  // Why the pair (producer, consumer) was not fused; the first reason stays.
  std::map<std::pair<const Node*, const Node*>, std::string> reasons_;
  WhyNoKernel why_no_kernel_;
  WhyNoKernel why_not_generic_;  // PassOptions::why_not_shape_generic
  // Symbol values a group with symbolic dims is asked about at (range_ends).
  std::vector<SymbolBindings> ends_;
  // Nodes left alone after codegen refused the group they were in, and why.
  std::map<const Node*, std::string> sealed_;
  // (anchor, op) pairs: the op may not join that anchor's epilogue, since
  // codegen refused the epilogue with it (longest_feasible_epilogue); why.
  std::map<std::pair<const Node*, const Node*>, std::string> barred_;
  std::vector<std::string> split_notes_;

  // A group holding a sealed node holds only it (nothing merges with it).
  bool is_sealed(const FusionState& s, int gi) const {
    const Group& grp = s.group(gi);
    return grp.nodes.size() == 1 && sealed_.count(grp.nodes[0]);
  }
  const std::string& sealed_why(const FusionState& s, int gi) const { return sealed_.at(s.group(gi).nodes[0]); }

  // Why codegen cannot emit the fused node of `grp`, or "" (also when no
  // codegen was handed over, or the group writes nothing).
  std::string why_no_kernel(const FusionState& s, const Group& grp) const {
    if (!why_no_kernel_) return "";
    FusedParts parts = fused_parts(s.graph(), s, grp);
    return ask_codegen(why_no_kernel_, parts, grp, ends_, why_not_generic_);
  }

  // The union of groups `parts` as it would be, anchored by `anchor`.
  static Group union_of(const FusionState& s, const std::vector<int>& parts, Node* anchor, GroupKind kind) {
    Group u;
    u.anchor = anchor;
    u.kind = kind;
    for (int p : parts) {
      const Group& grp = s.group(p);
      u.nodes.insert(u.nodes.end(), grp.nodes.begin(), grp.nodes.end());
      u.non_views += grp.non_views;
    }
    return u;
  }

  // Asks codegen about every group that would become a fused node; cuts the
  // epilogue of an anchored one it refuses, or seals. Returns true when the
  // walk must run again; else the parts asked about, by group id, are in
  // `asked` for outlining (a 100k-node chain's body is built once, not once
  // to ask and once to outline).
  bool split_back(const FusionState& s, PassStats& stats, std::unordered_map<int, FusedParts>& asked) {
    if (!why_no_kernel_) return false;
    bool again = false;
    for (int gi = 0; gi < s.num_groups(); ++gi) {
      const Group& grp = s.group(gi);
      if (!becomes_fused_node(grp)) continue;
      FusedParts parts = fused_parts(s.graph(), s, grp);
      std::string why = ask_codegen(why_no_kernel_, parts, grp, ends_, why_not_generic_);
      if (why.empty()) {
        if (!again) asked.emplace(gi, std::move(parts));
        continue;
      }
      asked.clear();  // the walk runs again: these groups change
      std::string sealed_why = "codegen refused the group it was in: " + why;
      stats.count("groups-split-back");
      again = true;
      if (grp.anchor) {
        EpilogueCut cut = longest_feasible_epilogue(s, grp, why);
        // A pair barred already cannot be in the group again; sealing then
        // still guarantees each round makes progress.
        if (cut.refused && barred_.emplace(std::make_pair(grp.anchor, cut.refused), cut.why).second) {
          split_notes_.push_back(
              fmt::format("split back: a {} group of {} nodes: its epilogue ends before {} ({}), keeping {}: {}",
                          group_kind_name(grp), grp.nodes.size(), value_label(cut.refused->output(0)),
                          cut.refused->op(), cut.kept, cut.why));
          continue;
        }
        sealed_.emplace(grp.anchor, sealed_why);
      } else {
        for (const Node* n : grp.nodes) sealed_.emplace(n, sealed_why);
      }
      split_notes_.push_back(
          fmt::format("split back: a {} group of {} nodes: {}", group_kind_name(grp), grp.nodes.size(), why));
    }
    return again;
  }

  struct EpilogueCut {
    const Node* refused = nullptr;  // the epilogue op that ends the kept prefix; null: none kept
    std::string why;                // codegen's answer with that op in
    size_t kept = 0;                // nodes of the group kept with the anchor
  };

  // The group's anchored part (the anchor and what precedes it: prologue,
  // attention scores and softmax) and its epilogue, in walk order. A prefix
  // of the epilogue in that order holds the in-group producers of each of
  // its ops, so it is a group the walk could have formed; the longest one
  // codegen takes is found by bisection (the whole group is refused:
  // `why_all`), so a long epilogue costs a few questions, not one per op.
  // `refused` is null when the anchored part alone is refused too.
  EpilogueCut longest_feasible_epilogue(const FusionState& s, const Group& grp, const std::string& why_all) const {
    std::vector<Node*> members = grp.nodes;
    std::sort(members.begin(), members.end(),
              [&](const Node* a, const Node* b) { return s.position(a) < s.position(b); });
    const int anchor_at = s.position(grp.anchor);
    size_t core = 0;
    while (core < members.size() && s.position(members[core]) <= anchor_at) ++core;
    auto prefix = [&](size_t n) {
      Group p;
      p.anchor = grp.anchor;
      p.kind = grp.kind;
      p.nodes.assign(members.begin(), members.begin() + static_cast<std::ptrdiff_t>(n));
      for (const Node* m : p.nodes) p.non_views += op_role(*m) != Role::View;
      return p;
    };
    // The anchor alone is asked too, as a fused node with an empty epilogue:
    // a refusal of the anchor itself (a grid too large at a range's high
    // end) cannot be cured by cutting the epilogue.
    auto refusal = [&](size_t n) {
      Group p = prefix(n);
      FusedParts parts = fused_parts(s.graph(), s, p);
      return ask_codegen(why_no_kernel_, parts, p, ends_, why_not_generic_);
    };
    EpilogueCut cut;
    if (core == members.size() || !refusal(core).empty()) return cut;
    // Invariant: the prefix of `lo` members is taken, that of `hi` refused.
    size_t lo = core, hi = members.size();
    cut.why = why_all;
    while (hi - lo > 1) {
      size_t mid = lo + (hi - lo) / 2;
      std::string why = refusal(mid);
      if (why.empty()) {
        lo = mid;
      } else {
        hi = mid;
        cut.why = why;
      }
    }
    cut.refused = members[hi - 1];
    cut.kept = lo;
    return cut;
  }

  void refuse(const FusionState& s, int producer_group, const Node& c, const std::string& why) {
    for (const Value* v : c.inputs())
      if (s.group_of_value(v) == producer_group) reasons_.emplace(std::make_pair(v->producer(), &c), why);
  }

  void attention(FusionState& s, Node& m2) {
    if (m2.op() != "matmul") return;
    int scores = -1, probs = -1;
    std::string why = check_attention(s, m2, scores, probs);
    if (why.empty() && is_sealed(s, scores)) why = sealed_why(s, scores);
    if (why.empty() && is_sealed(s, probs)) why = sealed_why(s, probs);
    if (why.empty()) why = why_no_kernel(s, union_of(s, {s.group_of(&m2), scores, probs}, &m2, GroupKind::Attention));
    if (!why.empty()) {
      int p = s.group_of_value(m2.input(0));
      if (p >= 0 && s.group(p).kind == GroupKind::Reduction && s.group(p).anchor->op() == "softmax")
        refuse(s, p, m2, "no attention kernel: " + why);
      return;
    }
    int gm = s.group_of(&m2);
    // One merge of all three: only their union is convex (the scores reach
    // m2 through the softmax group).
    s.merge(gm, {scores, probs});
    s.group(gm).kind = GroupKind::Attention;
  }

  void prologue(FusionState& s, Node& r) {
    const Value* in = r.input(0);
    int p = s.group_of_value(in);
    if (p < 0 || op_role(*in->producer()) == Role::Opaque) return;
    const Group& pg = s.group(p);
    std::string why;
    if (pg.kind == GroupKind::Compute && !is_sealed(s, p)) return row_norm(s, p, r);
    if (pg.kind != GroupKind::Plain)
      why = fmt::format("{} and {} would be two anchors in one kernel", pg.anchor->op(), r.op());
    else if (is_sealed(s, p)) why = sealed_why(s, p);
    else why = check_prologue(s, p, r);
    if (why.empty()) why = why_no_kernel(s, union_of(s, {s.group_of(&r), p}, &r, GroupKind::Reduction));
    if (!why.empty()) return refuse(s, p, r, why);
    s.merge(s.group_of(&r), p);
  }

  // Why layer norm `r` cannot join the epilogue of GEMM group `a` in the
  // union of `parts` (a's, r's and any op joining with it), its data operand
  // holding map id `x_map` of a: the structural rules (check_row_norm), then
  // codegen, which alone says whether the split-K GEMM whose reduction kernel
  // normalizes pays. "" when it can.
  std::string row_norm_refusal(const FusionState& s, int a, const Node& r, int x_map,
                               const std::vector<int>& parts) const {
    Node* anchor = s.group(a).anchor;
    // A pipeline without codegen (the sanitizer build) keeps the norm a kernel of its own.
    if (!why_no_kernel_)
      return fmt::format(
          "{} and {} would be two anchors in one kernel (no codegen to weigh a split-K GEMM normalizing its rows)",
          anchor->op(), r.op());
    if (auto it = barred_.find({anchor, &r}); it != barred_.end())
      return "codegen refused the epilogue with it: " + it->second;
    if (std::string why = check_row_norm(s, a, r, x_map); !why.empty()) return why;
    if (s.would_cycle(parts)) return "would create a cycle (another operand depends on the group)";
    Group u = union_of(s, parts, anchor, GroupKind::Compute);
    u.row_norm = &r;
    return why_no_kernel(s, u);
  }

  // A layer norm joining a GEMM's epilogue where row_norm_refusal has no
  // objection; its result keeps the GEMM's map id, so the ops after it (the
  // cast to f16) join as epilogue ops.
  void row_norm(FusionState& s, int a, Node& r) {
    const int id = s.map_id(r.input(0));
    if (std::string why = row_norm_refusal(s, a, r, id, {a, s.group_of(&r)}); !why.empty()) return refuse(s, a, r, why);
    s.merge(a, s.group_of(&r));
    s.group(a).row_norm = &r;
    for (Value* o : r.outputs()) s.set_map_id(o, id);
  }

  void epilogue_or_plain(FusionState& s, Node& c) {
    std::vector<int> anchored, plain;
    for (const Value* v : c.inputs()) {
      int p = s.group_of_value(v);
      if (p < 0 || op_role(*v->producer()) == Role::Opaque) continue;
      if (is_sealed(s, p)) {
        refuse(s, p, c, sealed_why(s, p));
        continue;
      }
      auto& list = s.group(p).kind == GroupKind::Plain ? plain : anchored;
      if (std::find(list.begin(), list.end(), p) == list.end()) list.push_back(p);
    }
    // The anchor computed last first: its result is the freshest.
    std::sort(anchored.begin(), anchored.end(),
              [&](int a, int b) { return s.position(s.group(a).anchor) > s.position(s.group(b).anchor); });
    for (size_t i = 0; i < anchored.size(); ++i) {
      int a = anchored[i];
      std::string why;
      if (auto it = barred_.find({s.group(a).anchor, &c}); it != barred_.end())
        why = "codegen refused the epilogue with it: " + it->second;
      if (why.empty()) why = prologue_instead(s, a, c);
      if (why.empty()) why = computed_with_symbols(s, plain, c);
      if (why.empty()) why = check_epilogue(s, a, c);
      if (!why.empty()) {
        refuse(s, a, c, why);
        continue;
      }
      set_map_ids(s, a, c);
      s.merge(a, s.group_of(&c));
      std::string joined = fmt::format("{} joined the epilogue of {} {}", c.op(), s.group(a).anchor->op(),
                                       value_label(s.group(a).anchor->output(0)));
      for (size_t j = i + 1; j < anchored.size(); ++j) refuse(s, anchored[j], c, joined + ", computed later");
      for (int p : plain) refuse(s, p, c, joined + "; epilogues take no second input group");
      return;
    }
    for (int p : plain) {
      int mine = s.group_of(&c);
      if (p == mine) continue;
      std::string why = check_plain(s, p, mine);
      if (!why.empty()) {
        refuse(s, p, c, why);
        continue;
      }
      s.merge(p, mine);
    }
  }

  // An op whose only reader is a reduction's data operand, on a value group
  // `a` writes anyway, is better read as that reduction's prologue than
  // stored as a second copy by `a` (fp16 models: the cast to f32 before a
  // layer norm of the residual stream). Returns why, or "".
  // Unless that reduction is a layer norm that joins a's epilogue with c (a
  // GEMM whose split-K reduction kernel normalizes, where codegen takes it):
  // then c in the epilogue saves the norm's launch (ViT's residual stream,
  // cast to f32 for its layer norm).
  std::string prologue_instead(const FusionState& s, int a, const Node& c) const {
    if (c.num_outputs() != 1 || s.graph().is_output(c.output(0)) || !c.output(0)->has_uses()) return "";
    const Node* r = c.output(0)->uses()[0].user;
    if (op_role(*r) != Role::Reduction) return "";
    for (const Use& u : c.output(0)->uses())
      if (u.user != r || u.operand != 0) return "";
    for (const Value* v : c.inputs()) {
      if (s.group_of_value(v) != a) continue;
      bool written = s.graph().is_output(v);
      for (const Use& u : v->uses()) written |= u.user != &c && s.group_of(u.user) != a;
      // Only when the reduction can take c as its prologue; else c would be
      // a kernel of its own.
      if (written && check_prologue(s, s.group_of(&c), *r).empty() && !norm_rides_with(s, a, c, *r, s.map_id(v)))
        return fmt::format("left to the {} as its prologue: the {} kernel writes {} anyway", r->op(),
                           s.group(a).anchor->op(), value_label(v));
    }
    return "";
  }

  // Whether layer norm `r`, reading pointwise op `c`'s result (whose in-group
  // operand holds map id `x_map` of group `a`), would join a's epilogue with c.
  bool norm_rides_with(const FusionState& s, int a, const Node& c, const Node& r, int x_map) const {
    if (r.op() != "layer_normalization" || op_role(c) != Role::Pointwise || barred_.count({s.group(a).anchor, &c}))
      return false;
    return row_norm_refusal(s, a, r, x_map, {a, s.group_of(&c), s.group_of(&r)}).empty();
  }

  // An op reading a value that a plain group of its own computes from the
  // symbols alone (rematerialize-symbolic: a decoder's rotary cos) is better
  // computed with that group than joined to an epilogue, where the group
  // would be a kernel of its own storing the value (epilogues take no second
  // input group). Only where pointwise or injective ops read c's result: they
  // make a kernel anyway and take c with them (a decoder's rotary sum), so the
  // group's launch goes; a result stored as it is would only move the launch.
  // Returns why, or "".
  static std::string computed_with_symbols(const FusionState& s, const std::vector<int>& plain, const Node& c) {
    // Static graphs fold such values (fold-constants); one that is left there
    // (larger than the folding limit) is stored, as before.
    if (s.graph().symbols().empty()) return "";
    if (c.num_outputs() != 1 || s.graph().is_output(c.output(0)) || !c.output(0)->has_uses()) return "";
    for (const Use& u : c.output(0)->uses()) {
      Role r = op_role(*u.user);
      if (r != Role::Pointwise && r != Role::Injective && r != Role::View) return "";
    }
    for (int p : plain) {
      const Group& grp = s.group(p);
      bool own = true;
      for (const Node* n : grp.nodes) {
        for (const Value* v : n->inputs()) own = own && v && (v->is_constant() || s.group_of_value(v) == p);
        for (const Value* o : n->outputs()) {
          own = own && !s.graph().is_output(o);
          for (const Use& u : o->uses()) own = own && (u.user == &c || s.group_of(u.user) == p);
        }
      }
      if (own && check_plain(s, p, s.group_of(&c)).empty())
        return fmt::format("computed with {}, which its kernel computes from the symbols alone",
                           value_label(grp.nodes.back()->output(0)));
    }
    return "";
  }

  // Map ids of c's results: pointwise ops and views keep their operand's
  // element order; transpose, split, slice and gather start new ones.
  static void set_map_ids(FusionState& s, int g, const Node& c) {
    int id = -1;
    for (const Value* v : c.inputs())
      if (s.group_of_value(v) == g) id = s.map_id(v);
    Role r = op_role(c);
    for (Value* o : c.outputs()) s.set_map_id(o, r == Role::Pointwise || r == Role::View ? id : s.new_map_id());
  }

  void write_notes(const Graph& g, const FusionState& s, PassStats& stats) {
    std::set<std::pair<const Node*, const Node*>> seen;
    for (const auto& np : g.nodes()) {
      const Node& c = *np;
      Role rc = op_role(c);
      if (rc == Role::Opaque) continue;
      for (int i = 0; i < c.num_inputs(); ++i) {
        const Value* v = c.input(i);
        if (!v || !v->producer() || op_role(*v->producer()) == Role::Opaque) continue;
        const Node* p = v->producer();
        if (s.group_of(p) == s.group_of(&c) || !seen.insert({p, &c}).second) continue;
        if (op_role(*p) == Role::View && s.group(s.group_of(p)).nodes.size() == 1 && rc == Role::Compute)
          continue;  // a lone reshape feeding a matmul: nothing to fuse
        std::string why;
        auto it = reasons_.find({p, &c});
        if (it != reasons_.end()) why = it->second;
        else if (rc == Role::Compute) why = fmt::format("{} takes no fused prologue", c.op());
        else if (rc == Role::Reduction && i > 0) why = fmt::format("feeds operand {} of {}, not its data", i, c.op());
        else why = "the consumer was fused elsewhere first";
        stats.notes.push_back(fmt::format("not fused: {} ({}) -> {} ({}): {}", value_label(v), p->op(),
                                          value_label(c.output(0)), c.op(), why));
        stats.count("pairs-not-fused");
      }
    }
  }
};

}  // namespace

std::unique_ptr<Pass> create_fuse_pass() { return std::make_unique<Fuse>(); }

}  // namespace kiln
