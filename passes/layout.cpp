// layout: layout selection for GPU targets (sm_80/86/89/90; on target cpu it
// does nothing). Tensor cores want convolutions channels-last, so regions of
// convs and the ops around them (pools, norms, resize, pointwise ops,
// concat/split/slice/pad, reductions) switch to NHWC; everything else stays
// channels-first (NCHW), as the model has it.
//
// Representation (docs/ir.md "Layouts"): a channels-last value has its dims in
// PHYSICAL order, [N, S..., C], and its type is tagged {nhwc}
// (f16[1,56,56,64]{nhwc} for a channels-first [1,64,56,56]). Pointwise ops
// work on it unchanged; per-channel constants are permuted to match ([C,1,1]
// becomes [1,1,1,C]{nhwc}). Layout-sensitive ops get layout="nhwc" (conv:
// weight [O, kH, kW, I/g] too; max/average/lp pool, global pools,
// batch/instance/group norm); ops with dim attributes get them remapped
// (concat/split axis, slice starts/ends/steps, pad pads, resize
// sizes/scales/roi, reduce_* axes). Inference tags every result accordingly.
//
// Steps: (1) each node that can work channels-last gets a rule
// (layout_util.h); (2) nodes joined by channels-last-capable values form
// regions (union-find); a region goes NHWC only if it holds a conv (pools or
// norms alone gain nothing from it); (3) region nodes are rewritten in
// order: operands from outside come through one shared transpose
// {layout="nhwc"} per value, constant operands (weights, biases) are permuted
// at compile time; (4) results used outside a region, or returned, go back
// through one transpose per value, right after their producer; when C == 1
// or the spatial dims are all 1 the element order is the same in both
// layouts, so a reshape stands in for that transpose and reshape users (a
// Flatten before the classifier) read the value directly; (5) transpose
// pairs are cancelled (composed; identities removed) and transposes of
// constants folded, in the whole graph.
//
// Left alone: conv_transpose, deform_conv, max_pool with an indices result,
// lrn, softmax and other axis ops not listed above, ops of rank < 3, and
// pointwise ops mixing an image with a lower-rank non-constant operand: they
// end a region.
#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/shape_utils.h"
#include "ops/registry.h"
#include "passes/layout_util.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

using layout::Perm;
using layout::Rule;

class LayoutPass : public Pass {
 public:
  std::string_view name() const override { return "layout"; }

  bool run(Graph& g, const PassOptions& opts, PassStats& stats) override {
    if (opts.target == "cpu") return false;
    g_ = &g;
    stats_ = &stats;
    names_.clear();
    const_cache_.clear();
    nhwc_cache_.clear();
    for (Value* v : g.inputs()) names_.insert(v->name());
    for (Value* v : g.constants()) names_.insert(v->name());
    for (Node* n : g.node_list())
      for (Value* o : n->outputs()) names_.insert(o->name());

    std::vector<std::string> output_names;
    for (Value* v : g.outputs()) output_names.push_back(v->name());

    select_regions();
    for (Node* n : region_order_) rewrite(n);
    for (Node* n : region_order_) restore_exits(n);
    bool changed = !region_order_.empty();
    changed |= cancel_transposes();
    keep_output_names(output_names);
    if (changed) g.remove_unused_constants();
    return changed;
  }

 private:
  // ---- region selection

  Node* find(Node* n) {
    Node*& p = parent_[n];
    if (p == n) return n;
    return p = find(p);
  }

  void select_regions() {
    rules_.clear();
    parent_.clear();
    region_order_.clear();
    std::vector<Node*> order = g_->node_list();
    for (Node* n : order)
      if (auto r = layout::rule_for(*n)) {
        rules_.emplace(n, *r);
        parent_[n] = n;
      }
    for (auto& [n, r] : rules_)
      for (int i : r.images) {
        Value* v = n->input(i);
        Node* p = v->producer();
        auto it = p ? rules_.find(p) : rules_.end();
        if (it == rules_.end() || !it->second.out_images[v->producer_output()] || it->second.rank != r.rank) continue;
        parent_[find(n)] = find(p);
      }
    std::unordered_set<Node*> anchored;
    for (auto& [n, r] : rules_)
      if (r.anchor) anchored.insert(find(n));
    std::unordered_set<Node*> regions;
    for (Node* n : order)
      if (rules_.count(n) && anchored.count(find(n))) {
        region_order_.push_back(n);
        regions.insert(find(n));
      }
    in_region_ = std::unordered_set<Node*>(region_order_.begin(), region_order_.end());
    if (!regions.empty()) {
      stats_->count("regions-nhwc", int64_t(regions.size()));
      stats_->count("nodes-nhwc", int64_t(region_order_.size()));
    }
  }

  // Whether v is a channels-last result of a region node.
  bool is_region_image(const Value* v) const {
    Node* p = v->producer();
    return p && in_region_.count(p) && rules_.at(p).out_images[v->producer_output()];
  }

  // ---- rewriting

  void rewrite(Node* n) {
    const Rule& r = rules_.at(n);
    for (int i : r.images) {
      Value* v = n->input(i);
      if (is_region_image(v)) continue;
      if (layout::has_data(v) && v->type().rank() < r.rank) {
        n->set_input(i, permuted_constant(v, r.rank));
        continue;
      }
      n->set_input(i, to_nhwc(v, n));
    }
    layout::set_nhwc_attrs(*n, r);
    reinfer(n);
    for (int k = 0; k < n->num_outputs(); ++k)
      KILN_CHECK(!r.out_images[k] || n->output(k)->type().layout == Layout::NHWC,
                 "layout: {} result {} is {}, not channels-last", n->describe(), k, n->output(k)->type().str());
  }

  // Result types (with their layout tags) from inference, after a rewrite.
  static void reinfer(Node* n) {
    InferContext ctx(n->op(), n->inputs(), n->attrs(), n->num_outputs(), n->describe());
    std::vector<TensorType> types = infer_types(op_registry().get(n->op()), ctx);
    for (int k = 0; k < n->num_outputs(); ++k) n->output(k)->set_type(types[k]);
  }

  static std::string suffixed(const std::string& name, const char* suffix) {
    return name.empty() ? name : name + suffix;
  }

  // A lower-rank constant broadcast against images: unsqueezed, permuted.
  Value* permuted_constant(Value* c, int rank) {
    Value*& slot = const_cache_[c];
    if (!slot) {
      slot = g_->add_constant(fresh_name(c->name() + "_nhwc"), layout::to_channels_last(c->data(), rank));
      stats_->count("constants-permuted");
    }
    return slot;
  }

  // v (channels-first, rank r) as channels-last, shared by all its users;
  // inserted before `user`, the first of them in order.
  Value* to_nhwc(Value* v, Node* user) {
    Value*& slot = nhwc_cache_[v];
    if (!slot)
      slot = transpose(v, channels_last_perm(v->type().rank()), true, user, suffixed(user->name(), ":to_nhwc"));
    return slot;
  }

  // Transposes v by perm (result tagged {nhwc} when to_nhwc); folds
  // constants and composes with a transpose producing v.
  Value* transpose(Value* v, const Perm& perm, bool to_nhwc, Node* before, const std::string& node_name) {
    Layout l = to_nhwc ? Layout::NHWC : Layout::Default;
    if (layout::has_data(v)) {
      stats_->count("constants-permuted");
      return g_->add_constant(fresh_name(v->name() + (to_nhwc ? "_nhwc" : "_nchw")),
                              layout::transpose_tensor(v->data(), perm, l));
    }
    Node* p = v->producer();
    if (p && p->op() == "transpose") {
      Perm total = layout::compose(p->attrs().get_ints("perm"), perm);
      // A channels-last request must come back tagged {nhwc}: compose only
      // when the composed transpose is itself the channels-last one. (An
      // identity would hand back the untagged value under the transpose,
      // e.g. wav2vec2's conv -> transpose -> layer_norm -> transpose -> gelu.)
      if (!to_nhwc || total == channels_last_perm(v->type().rank())) {
        stats_->count("transpose-pairs-cancelled");
        if (layout::is_identity(total)) return p->input(0);
        return transpose(p->input(0), total, to_nhwc, before, node_name);
      }
    }
    AttrMap a;
    a.set("perm", perm);
    if (to_nhwc) a.set("layout", std::string("nhwc"));
    stats_->count("transposes-inserted");
    TensorType t(v->dtype(), permute_dims(v->shape(), perm), l);
    return g_->add_node("transpose", {v}, {t}, std::move(a), node_name, before)->output();
  }

  // Gives the results of a region node channels-first to every user
  // outside the region, and to the graph's outputs.
  void restore_exits(Node* n) {
    const Rule& r = rules_.at(n);
    for (int k = 0; k < n->num_outputs(); ++k) {
      if (!r.out_images[k]) continue;
      Value* o = n->output(k);
      const bool same_order = layout::same_order_both_layouts(o->shape());
      std::vector<Use> outside;
      for (const Use& u : o->uses()) {
        auto it = rules_.find(u.user);
        bool image_use = in_region_.count(u.user) && std::find(it->second.images.begin(), it->second.images.end(),
                                                               u.operand) != it->second.images.end();
        if (image_use) continue;
        if (same_order && u.user->op() == "reshape") {
          stats_->count("exits-read-directly");  // the same bytes in both layouts
          continue;
        }
        outside.push_back(u);
      }
      bool returned = g_->is_output(o);
      if (outside.empty() && !returned) continue;
      Node* before = next_node(n);
      std::string name = suffixed(n->name(), ":to_nchw");
      Value* back;
      if (same_order) {
        Shape shape = permute_dims(o->shape(), channels_first_perm(o->type().rank()));
        AttrMap a;
        a.set("shape", shape);
        stats_->count("exits-as-reshape");
        back = g_->add_node("reshape", {o}, {TensorType(o->dtype(), shape)}, std::move(a), name, before)->output();
      } else {
        back = transpose(o, channels_first_perm(o->type().rank()), false, before, name);
      }
      for (const Use& u : outside) u.user->set_input(u.operand, back);
      for (size_t i = 0; i < g_->outputs().size(); ++i)
        if (g_->outputs()[i] == o) g_->set_output(int(i), back);
    }
  }

  Node* next_node(Node* n) {
    const auto& nodes = g_->nodes();
    for (auto it = nodes.begin(); it != nodes.end(); ++it)
      if (it->get() == n) return ++it == nodes.end() ? nullptr : it->get();
    return nullptr;
  }

  // Callers bind graph outputs by name (plans, `kiln run --outputs`): the
  // value now in an output's slot (the transpose back to channels-first)
  // takes the output's name, and the channels-last value that had it is
  // renamed.
  void keep_output_names(const std::vector<std::string>& want) {
    for (size_t i = 0; i < want.size(); ++i) {
      Value* v = g_->outputs()[i];
      if (v->name() == want[i] || !v->producer() || want[i].empty()) continue;
      for (Node* n : g_->node_list())
        for (Value* o : n->outputs())
          if (o != v && o->name() == want[i]) o->set_name(fresh_name(want[i] + ".nhwc"));
      v->set_name(want[i]);
    }
  }

  // ---- transpose clean-up over the whole graph

  bool cancel_transposes() {
    bool changed = false;
    for (Node* t : g_->node_list()) {
      if (t->op() != "transpose" || !t->input(0)) continue;
      if (!t->output()->has_uses() && !g_->is_output(t->output())) {  // left dead by the rewrite
        erase_if_dead(t);
        changed = true;
        continue;
      }
      Perm perm = t->attrs().get_ints("perm");
      Value* in = t->input(0);
      Value* out = t->output();
      Value* repl = nullptr;
      if (layout::is_identity(perm)) {
        repl = in;
      } else if (layout::has_data(in)) {
        repl = g_->add_constant(fresh_name(in->name() + "_t"),
                                layout::transpose_tensor(in->data(), perm, out->type().layout));
        stats_->count("constants-permuted");
      } else if (Node* p = in->producer(); p && p->op() == "transpose") {
        Perm total = layout::compose(p->attrs().get_ints("perm"), perm);
        stats_->count("transpose-pairs-cancelled");
        if (layout::is_identity(total)) {
          repl = p->input(0);
        } else {
          t->set_input(0, p->input(0));
          t->attrs().set("perm", total);
          if (total != channels_last_perm(int(total.size()))) t->attrs().erase("layout");
          reinfer(t);
          erase_if_dead(p);
          changed = true;
          continue;
        }
      }
      if (!repl) continue;
      if (g_->is_output(out)) repl = as_output(out, repl, t);
      g_->replace_all_uses(out, repl);
      erase_if_dead(t);
      changed = true;
    }
    return changed;
  }

  // `repl` standing in for the graph output `out`, able to take its name
  // (keep_output_names): a new constant is renamed now; a graph input, an
  // older constant or another output cannot be renamed, so an identity (a
  // view, no kernel) placed before `at` stands in.
  Value* as_output(Value* out, Value* repl, Node* at) {
    if (repl->is_constant() && !repl->has_uses() && !g_->is_output(repl)) {
      repl->set_name(out->name());  // made just now by the fold above; `out` goes with its transpose
      return repl;
    }
    if (repl->producer() && !g_->is_output(repl)) return repl;
    return g_->add_node("identity", {repl}, {repl->type()}, {}, at->name(), at)->output();
  }

  void erase_if_dead(Node* n) {
    for (Value* o : n->outputs())
      if (o->has_uses() || g_->is_output(o)) return;
    Value* in = n->input(0);
    g_->erase_node(n);
    if (in && in->producer() && in->producer()->op() == "transpose") erase_if_dead(in->producer());
  }

  std::string fresh_name(const std::string& base) {
    std::string n = base;
    for (int i = 1; names_.count(n); ++i) n = base + "." + std::to_string(i);
    names_.insert(n);
    return n;
  }

  Graph* g_ = nullptr;
  PassStats* stats_ = nullptr;
  std::unordered_map<Node*, Rule> rules_;
  std::unordered_map<Node*, Node*> parent_;
  std::vector<Node*> region_order_;
  std::unordered_set<Node*> in_region_;
  std::unordered_map<Value*, Value*> const_cache_, nhwc_cache_;
  std::unordered_set<std::string> names_;
};

}  // namespace

std::unique_ptr<Pass> create_layout_pass() { return std::make_unique<LayoutPass>(); }

}  // namespace kiln
