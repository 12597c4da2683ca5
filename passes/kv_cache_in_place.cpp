// kv-cache-in-place: marks the concats a caller may run in place on one
// buffer, the way a decoder's KV cache is served (ORT GenAI's
// past_present_share_buffer, TensorRT-LLM's KV cache):
//
//   %present_key_0 = concat(%past_key_0, %k) {axis=2}                    (before)
//   %present_key_0 = concat(%past_key_0, %k) {axis=2, in_place_append=1} (after)
//
// when operand 0 is a graph input (the past), the result is a graph output
// (the present), the concat has two operands and the past's length along the
// axis is symbolic (a cache that grows from run to run; a static past has one
// length and nothing to grow). The present then starts with the past's bytes
// at the past's positions: a buffer of the full capacity bound as both (the
// runtime's kiln_context_bind_in_place, docs/dynamic_shapes.md) needs only
// the new positions written, at offset `past` along the axis, each row of the
// outer dims `capacity` positions apart. The meaning is the concat's: the
// attribute only licenses the runtime to skip copying the past.
//
// Leaves alone: a past read by two marked concats (one buffer cannot hold
// two presents), a present returned twice, concats inside fused nodes or
// regions (the runtime binds top-level inputs and outputs only). Runs just
// before the fuser, which leaves a marked concat a node of its own
// (passes/fusion_state.cpp, op_role), so what it marks is in the plan's final
// graph.
//
// Each attention reading a marked concat's present as its keys or values
// also gets k_capacity / v_capacity naming the past's capacity symbol
// (passes/kv_cache_in_place.h): on the GPU its kernel then steps over the
// present's rows by that symbol's value, so the present may be a buffer of
// any capacity (bound in place) without a copy into a dense tensor. Only
// when every reader of the present is such an attention and the concat
// alone reads the past: a dense reader would need a copy anyway, and the
// plan then records no in-place append for the pair (its attention keeps
// dense rows). A symbol name the graph already declares is left alone.
#include <map>
#include <vector>

#include "ir/symbolic_dim.h"
#include "passes/kv_cache_in_place.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

bool is_graph_input(const Graph& g, const Value* v) {
  for (const Value* in : g.inputs())
    if (in == v) return true;
  return false;
}

size_t input_index(const Graph& g, const Value* v) {
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (g.inputs()[i] == v) return i;
  return g.inputs().size();
}

bool declares_symbol(const Graph& g, const std::string& name) {
  for (const SymbolDecl& d : g.symbols())
    if (d.name == name) return true;
  return false;
}

// k_capacity / v_capacity on the attentions reading `present` as keys /
// values; whether any attribute changed.
bool mark_capacity_readers(const Graph& g, Node& concat, PassStats& stats) {
  const std::string sym = kv_capacity_symbol(input_index(g, concat.input(0)));
  if (declares_symbol(g, sym)) {
    stats.count("capacity-symbol-taken");
    return false;
  }
  // Only where the GPU kernels can then run on the buffer: no other node
  // reads the past, and every reader of the present is such an attention
  // (runtime/plan_in_place.h why_not_in_place_on_gpu says the same).
  if (concat.input(0)->uses().size() != 1) return false;
  for (const Use& use : concat.output(0)->uses())
    if (use.user->op() != "attention" || (use.operand != 1 && use.operand != 2)) {
      stats.count("present-read-densely");
      return false;
    }
  bool changed = false;
  for (const Use& use : concat.output(0)->uses()) {
    Node* u = use.user;
    if (u->op() != "attention" || (use.operand != 1 && use.operand != 2)) continue;
    const char* attr = use.operand == 1 ? "k_capacity" : "v_capacity";
    if (u->attrs().get_string(attr, "") == sym) continue;
    u->attrs().set(attr, Attribute(sym));
    stats.count("attention-operands-strided");
    changed = true;
  }
  return changed;
}

int times_returned(const Graph& g, const Value* v) {
  int n = 0;
  for (const Value* o : g.outputs()) n += o == v;
  return n;
}

class KvCacheInPlace : public Pass {
 public:
  std::string_view name() const override { return "kv-cache-in-place"; }
  bool run(Graph& g, const PassOptions&, PassStats& stats) override {
    std::map<const Value*, std::vector<Node*>> appends;  // past -> the concats that qualify
    for (Node* n : g.node_list()) {
      if (n->op() != "concat" || n->num_inputs() != 2 || n->num_outputs() != 1) continue;
      Value* past = n->input(0);
      if (!past || !n->input(1) || !is_graph_input(g, past) || times_returned(g, n->output(0)) != 1) continue;
      int rank = past->type().rank();
      int64_t axis = n->attrs().get_int("axis", 0);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank || !is_symbolic_dim(past->shape()[axis])) {
        stats.count("static-past");
        continue;
      }
      appends[past].push_back(n);
    }
    bool changed = false;
    for (auto& [past, nodes] : appends) {
      if (nodes.size() != 1) {
        stats.count("past-appended-twice");
        continue;
      }
      if (nodes[0]->attrs().get_int("in_place_append", 0) != 1) {
        nodes[0]->attrs().set("in_place_append", int64_t{1});
        stats.count("concats-marked");
        changed = true;
      }
      changed |= mark_capacity_readers(g, *nodes[0], stats);
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> create_kv_cache_in_place_pass() { return std::make_unique<KvCacheInPlace>(); }

}  // namespace kiln
