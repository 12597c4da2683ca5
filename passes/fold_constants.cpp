// fold-constants: evaluates nodes whose operands are all constants with the
// reference kernels and replaces them by constants, so whole constant
// subgraphs (shape arithmetic, weight transposes, ConstantOfShape chains)
// disappear. Leaves alone: results larger than PassOptions::fold_max_bytes
// unless no bigger than the operands (folding must not bloat the model),
// and nodes with bodies. Shape values holding symbolic dims (a decoder's
// Shape(past_key)[2], `past + seq`) fold where their elements are moved or
// computed as polynomials (ops/symbolic_values.h), so shape arithmetic
// becomes size expressions rather than kernels reading handles.
#include <algorithm>
#include <optional>

#include "ir/symbolic_dim.h"
#include "ops/registry.h"
#include "ops/symbolic_values.h"
#include "passes/pass.h"
#include "passes/pass_list.h"

namespace kiln {
namespace {

class FoldConstants : public Pass {
 public:
  std::string_view name() const override { return "fold-constants"; }
  bool run(Graph& g, const PassOptions& opts, PassStats& stats) override {
    bool changed = false;
    for (Node* n : g.node_list()) {
      if (n->body()) continue;
      std::vector<const Tensor*> ins;
      size_t in_bytes = 0;
      bool all_const = true;
      for (Value* v : n->inputs()) {
        if (!v) {
          ins.push_back(nullptr);
          continue;
        }
        if (!v->is_constant() || !v->has_data()) {
          all_const = false;
          break;
        }
        ins.push_back(&v->data());
        in_bytes += v->data().nbytes();
      }
      if (!all_const) continue;
      // A result of symbolic shape (range(past, past + seq)) has no value
      // before the symbols are bound: it is computed at run time.
      const std::vector<Value*> results = n->outputs();
      if (std::any_of(results.begin(), results.end(),
                      [](const Value* o) { return o && has_symbolic_dims(o->shape()); })) {
        stats.count("symbolic-shape");
        continue;
      }
      // Computed from symbolic shape values (past + 1, whose bytes are
      // handles): folded where the result is exact for every value of the
      // symbols, else computed at run time.
      auto symbolic_values = [](const Tensor* t) {
        if (!t || t->dtype() != DType::I64) return false;
        const int64_t* p = t->data<int64_t>();
        return std::any_of(p, p + t->numel(), [](int64_t v) { return is_symbolic_dim(v); });
      };
      if (std::any_of(ins.begin(), ins.end(), symbolic_values)) {
        std::vector<TensorType> types;
        for (Value* o : n->outputs()) types.push_back(o->type());
        // Shape values are short; a gather at a symbolic index has no
        // element to move before the symbols are bound.
        const bool short_results = std::all_of(types.begin(), types.end(), [](const TensorType& t) {
          return (t.dtype == DType::I64 || t.dtype == DType::Bool) && t.numel() <= 1024;
        });
        const bool symbolic_index = n->op() == "gather" && symbolic_values(ins.size() > 1 ? ins[1] : nullptr);
        std::optional<std::vector<Tensor>> outs;
        if (short_results && !symbolic_index) outs = evaluate_on_symbolic_values(*n, ins, types, n->describe());
        if (!outs) {
          stats.count("symbolic-shape");
          continue;
        }
        for (int i = 0; i < n->num_outputs(); ++i) {
          Value* c = g.add_constant(n->output(i)->name(), std::move((*outs)[i]));
          g.replace_all_uses(n->output(i), c);
        }
        g.erase_node(n);
        stats.count("symbolic-values-folded");
        changed = true;
        continue;
      }
      size_t out_bytes = 0;
      std::vector<TensorType> types;
      for (Value* o : n->outputs()) {
        types.push_back(o->type());
        out_bytes += o->type().nbytes();
      }
      if (out_bytes > size_t(opts.fold_max_bytes) && out_bytes > in_bytes) {
        stats.count("too-large");
        continue;
      }
      const OpDef* def = op_registry().find(n->op());
      if (!def) continue;
      std::vector<Tensor> outs = evaluate_op(*def, n->attrs(), ins, types, n->describe());
      for (int i = 0; i < n->num_outputs(); ++i) {
        Value* c = g.add_constant(n->output(i)->name(), std::move(outs[i]));
        g.replace_all_uses(n->output(i), c);
      }
      g.erase_node(n);
      stats.count("nodes-folded");
      changed = true;
    }
    if (changed) g.remove_unused_constants();
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> create_fold_constants_pass() { return std::make_unique<FoldConstants>(); }

}  // namespace kiln
