// recognize-patterns: turns the decomposed forms exporters emit back into
// kiln's compound ops, so later passes and codegen see one op with one
// meaning instead of a chain of pointwise ops and matmuls:
//   - gelu:   x * 0.5 * (1 + erf(x / sqrt 2)) and GPT-2's tanh form
//             -> gelu {approximate="none"|"tanh"}        (recognize_gelu.cpp)
//   - layer norm: ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div (/Mul/Add) and
//             the ONNX function expansion -> layer_normalization (recognize_layernorm.cpp)
//   - attention: softmax(q k^T * scale + mask) v with BERT/GPT-2/ViT's
//             scalings, masks and key transposes -> attention (recognize_attention.cpp)
// One pass name runs all three (they never overlap: each anchors on a
// different op). Leaves alone anything whose intermediates are used outside
// the pattern, whose constants differ from the formula beyond the dtype's
// rounding, or whose axes/shapes are not what the compound op means; the
// counters say what was rewritten (gelu, layer-norm, attention).
#include "passes/pass_list.h"
#include "passes/recognize_patterns.h"

namespace kiln {
namespace {

class RecognizePatterns : public Pass {
 public:
  std::string_view name() const override { return "recognize-patterns"; }
  bool run(Graph& g, const PassOptions&, PassStats& stats) override {
    int n = patterns::recognize_gelu(g, stats);
    n += patterns::recognize_layer_norm(g, stats);
    n += patterns::recognize_attention(g, stats);
    if (n > 0) g.remove_unused_constants();  // the formulas' constants
    return n > 0;
  }
};

}  // namespace

std::unique_ptr<Pass> create_recognize_patterns_pass() { return std::make_unique<RecognizePatterns>(); }

}  // namespace kiln
