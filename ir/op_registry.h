// The op registry: one OpDef per kiln op, holding everything kiln knows about
// it: operands, attributes, shape/type inference, fusion category, and its
// meaning (a scalar Expr for pointwise ops, a reference CPU kernel otherwise).
//
// The registry type lives here; the definitions live in ops/, one file per
// family, so ir/ stays free of numerics.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/error.h"
#include "ir/expr.h"
#include "ir/graph.h"

namespace kiln {

// How fusion and codegen treat an op.
enum class OpCategory {
  Pointwise,  // out[i] = f(in0[i'], in1[i'']...) with broadcasting; has an Expr
  Injective,  // each output element reads one input element (transpose, slice, gather, pad...)
  Reduction,  // combines elements along axes (reduce_*, softmax, norms, pooling)
  Compute,    // heavy or irregular: conv, matmul, gemm, attention, topk, nonzero...
  Fused,      // a fused node: its body says what it does
};
std::string_view op_category_name(OpCategory c);

// What inference sees of a node: its operands, attributes and how many
// results the model asked for. Works both for nodes being imported and for
// nodes already in a graph.
class InferContext {
 public:
  // Returns the compile-time value of a value if known (constant, frozen
  // input, or computable from constants); nullptr otherwise.
  using Oracle = std::function<const Tensor*(Value*)>;

  InferContext(std::string_view op, const std::vector<Value*>& inputs, const AttrMap& attrs, int num_outputs,
               std::string label, Oracle oracle = {})
      : op_(op),
        inputs_(inputs),
        attrs_(attrs),
        num_outputs_(num_outputs),
        label_(std::move(label)),
        oracle_(std::move(oracle)) {}

  std::string_view op() const { return op_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i] != nullptr; }
  Value* input(int i) const;
  const TensorType& type(int i) const { return input(i)->type(); }
  DType dtype(int i) const { return input(i)->dtype(); }
  const Shape& shape(int i) const { return input(i)->shape(); }
  int rank(int i) const { return static_cast<int>(shape(i).size()); }
  std::vector<DType> input_dtypes() const;  // F32 for absent operands

  // Compile-time value of an operand, or nullptr.
  const Tensor* value(int i) const;
  // Compile-time value that must exist (shape operands); error otherwise.
  const Tensor& require_value(int i, std::string_view what) const;

  const AttrMap& attrs() const { return attrs_; }
  int num_outputs() const { return num_outputs_; }
  const std::string& label() const { return label_; }

  // Throws kiln::Error prefixed with the node's description.
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) const {
    throw Error(label_ + ": " + fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  [[noreturn]] void unsupported(fmt::format_string<Args...> f, Args&&... args) const {
    throw Unsupported(label_ + ": " + fmt::format(f, std::forward<Args>(args)...));
  }

 private:
  std::string_view op_;
  const std::vector<Value*>& inputs_;
  const AttrMap& attrs_;
  int num_outputs_;
  std::string label_;
  Oracle oracle_;
};

// What a reference kernel gets: operand tensors (nullptr where absent),
// attributes, and result tensors already allocated with their inferred types.
struct KernelContext {
  const AttrMap& attrs;
  std::vector<const Tensor*> inputs;
  std::vector<Tensor>& outputs;
  std::string label;  // node description for error messages

  bool has(int i) const { return i < int(inputs.size()) && inputs[i] != nullptr; }
  const Tensor& in(int i) const;
  Tensor& out(int i = 0) { return outputs[i]; }
};

struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool required = false;
};

using InferFn = std::function<std::vector<TensorType>(InferContext&)>;
using ExprFn = std::function<Expr(ExprBuilder&, const AttrMap&)>;
using KernelFn = std::function<void(KernelContext&)>;

struct OpDef {
  std::string name;  // kiln op name, snake_case: "conv", "reduce_sum"
  OpCategory category = OpCategory::Compute;
  int min_inputs = 1;
  int max_inputs = 1;  // -1: variadic
  int min_outputs = 1;
  int max_outputs = 1;  // -1: variadic
  std::vector<AttrSpec> attrs;
  // Results keep a channels-last ({nhwc}) operand's layout tag: ops whose
  // attributes name dims of the operands as stored (concat, split, slice,
  // pad, resize, reduce_*), so they work on channels-last values unchanged
  // once the layout pass has remapped those attributes. Pointwise ops always
  // do. See infer_types and docs/ir.md "Layouts".
  bool keeps_layout = false;
  // Inference handles symbolic dims (ir/symbolic_dim.h): it keeps them, or
  // fails naming the dim it cannot handle. infer_types refuses symbolic
  // operands of the other ops (kiln::Unsupported naming node and dim), so an
  // op whose shape formula was written for numbers never sees a symbol.
  bool symbolic_dims = false;
  // Operands or results may be string tensors (DType::String). infer_types
  // refuses strings reaching any other op (kiln::Unsupported naming the
  // node), so a numeric kernel never reads a string tensor's storage.
  bool takes_strings = false;
  InferFn infer;
  ExprFn expr;         // Pointwise ops: the scalar expression
  KernelFn reference;  // everything else: the reference CPU kernel
  std::string doc;     // one line for docs/ops.md
};

class OpRegistry {
 public:
  void add(OpDef def);
  const OpDef* find(std::string_view name) const;
  // Throws kiln::Unsupported naming the op when it does not exist.
  const OpDef& get(std::string_view name) const;
  std::vector<const OpDef*> all() const;

 private:
  std::map<std::string, OpDef, std::less<>> ops_;
};

// Runs an op's inference, checking operand/result counts and declared
// attributes first so every op gets the same clear errors.
std::vector<TensorType> infer_types(const OpDef& def, InferContext& ctx);

}  // namespace kiln
