// What an ONNX op adapter sees while importing one node, and the table of
// adapters. An adapter turns one ONNX node into kiln nodes: renaming,
// normalising attributes across opsets, hoisting compile-time operands
// (shapes, axes, pads) into attributes, or decomposing into several ops.
// Every ONNX op kiln imports has an adapter, even a 1:1 one: an ONNX op name
// is never looked up in kiln's op table (ONNX Attention and kiln's attention
// differ), and an op without an adapter is unsupported.
#pragma once
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op_registry.h"

namespace kiln {

// An operand that must be known at compile time is not (ImportContext::
// require_value). Its own type so that the Loop adapter can tell a body that
// needs the iteration number at compile time (and unroll it) from a broken one.
class NotKnownAtCompileTime : public Error {
 public:
  using Error::Error;
};

// A subgraph imported as a region reads or returns a sequence or optional
// value, which only an inlined subgraph can carry (ImportedValue). Its own
// type so that the If adapter can inline the branch its condition picks when
// the caller supplies the condition at compile time.
class SequenceInRegion : public Unsupported {
 public:
  using Unsupported::Unsupported;
};

// An ONNX value as the importer holds it. kiln has no sequence or optional
// type: a sequence is unrolled into its elements (a list of kiln values whose
// length and element types are known at compile time), and whether an
// optional holds a value is known at compile time too (an empty one is
// Empty, which is also what an absent operand reads as).
struct ImportedValue {
  enum class Kind { Tensor, Sequence, Empty };
  Kind kind = Kind::Empty;
  Value* tensor = nullptr;       // Kind::Tensor
  std::vector<Value*> elements;  // Kind::Sequence
  static ImportedValue of(Value* v) {
    ImportedValue r;
    if (v) r.kind = Kind::Tensor;
    r.tensor = v;
    return r;
  }
  static ImportedValue sequence(std::vector<Value*> e) {
    ImportedValue r;
    r.kind = Kind::Sequence;
    r.elements = std::move(e);
    return r;
  }
  bool is_tensor() const { return kind == Kind::Tensor; }
  bool is_sequence() const { return kind == Kind::Sequence; }
  bool is_empty() const { return kind == Kind::Empty; }
};

class ImportContext {
 public:
  virtual ~ImportContext() = default;

  virtual const std::string& op_type() const = 0;  // ONNX op type, e.g. "Reshape"
  virtual int64_t opset() const = 0;               // default-domain opset of the model
  virtual const AttrMap& attrs() const = 0;        // ONNX attributes, converted
  virtual int num_inputs() const = 0;
  virtual bool has_input(int i) const = 0;    // false for "" and past the end
  virtual Value* input(int i) const = 0;      // error if absent
  virtual int num_outputs() const = 0;        // as the ONNX node lists them
  virtual bool output_used(int i) const = 0;  // non-empty ONNX output name

  // Compile-time value of a value (constant, frozen input, or computed from
  // constants with the reference kernels), or nullptr.
  virtual const Tensor* value_of(Value* v) = 0;
  const Tensor* value(int i) { return has_input(i) ? value_of(input(i)) : nullptr; }
  // Compile-time value from the model alone (constants and what they
  // compute): unlike value_of, never turns an input the caller supplied in
  // known_inputs into a constant. For decisions that only an opportunity
  // hangs on (folding an If), not shapes.
  virtual const Tensor* fixed_value(Value* v) = 0;
  // Like value(i) but a missing value is an error naming `what`. A value
  // holding symbolic dims (docs/dynamic_shapes.md) is refused (Unsupported):
  // adapters read these values as numbers.
  virtual const Tensor& require_value(int i, const std::string& what) = 0;
  // The same, but the value may hold symbolic dims: for adapters that
  // handle them (Reshape's target).
  virtual const Tensor& require_shape_value(int i, const std::string& what) = 0;

  // Declares, on the main graph, a symbol for a result size only the data
  // decides (ir/data_dependent.h): range [0, the most `bound` can be with
  // every symbol at its max, and at most `cap` when that is >= 0]. Returns
  // its name, `hint` plus a number (unique in the graph); "" while a region is
  // imported (regions declare no symbols), where the caller keeps the
  // compile-time form.
  virtual std::string declare_size_symbol(const std::string& hint, int64_t bound, int64_t cap = -1) = 0;
  // The main graph's symbols and their ranges (the profile's, and size
  // symbols declared so far): what decides whether a symbolic slice end
  // stays within a static dim.
  virtual const std::vector<SymbolDecl>& symbol_ranges() const = 0;

  // Adds a kiln node after inferring its result types; returns its results.
  virtual std::vector<Value*> emit(const std::string& op, const std::vector<Value*>& inputs, const AttrMap& attrs = {},
                                   int num_outputs = 1) = 0;
  Value* emit1(const std::string& op, const std::vector<Value*>& inputs, const AttrMap& attrs = {}) {
    return emit(op, inputs, attrs, 1)[0];
  }
  virtual Value* constant(Tensor t, const std::string& name_hint = "") = 0;

  // Binds the ONNX node's outputs, in order (nullptr for unused optional ones).
  virtual void set_outputs(const std::vector<Value*>& outs) = 0;

  // ONNX sequences are unrolled at import: a sequence value is a list of
  // kiln values whose length and element shapes are known at compile time.
  // Operand i as a sequence, or nullptr when it is a tensor or absent.
  virtual const std::vector<Value*>* sequence_input(int i) const = 0;
  // Binds ONNX output i to a sequence (used by sequence ops only).
  virtual void set_sequence_output(int i, std::vector<Value*> elements) = 0;
  // Operand i whatever it holds: a tensor, a sequence, or Empty (an absent
  // operand or an empty optional).
  virtual ImportedValue operand(int i) const = 0;
  // Binds the ONNX node's outputs to tensors, sequences or empty optionals.
  virtual void set_output_values(const std::vector<ImportedValue>& outs) = 0;

  // Subgraph attributes (If's then_branch/else_branch, Loop's and Scan's
  // body), imported by the control-flow adapters (adapters_control_flow.cpp).
  virtual bool has_subgraph(const std::string& attr) const = 0;
  // The names of the node's subgraph (GRAPH) attributes.
  virtual std::vector<std::string> subgraph_names() const = 0;
  struct RegionSpec {
    std::string attr;                // the subgraph attribute
    std::string name;                // the region's graph name ("then", "body")
    std::vector<TensorType> params;  // types of the subgraph's formal inputs, in order
  };
  struct Regions {
    std::vector<std::unique_ptr<Graph>> graphs;  // one per spec
    std::vector<Value*> captures;                // outer values: append as the node's last operands
  };
  // Imports subgraphs as regions sharing one capture list: every outer value
  // any of them reads (also from deeper subgraphs) becomes a parameter after
  // the formal ones, in the same order in each, unless its value is known at
  // compile time, in which case each region gets it as a constant.
  // `size_symbols`: an If's branches at the top level, whose nodes may
  // declare size symbols (declare_size_symbol) as top-level nodes do
  // (ir/data_dependent.h); deeper regions never do.
  virtual Regions import_regions(const std::vector<RegionSpec>& specs, bool size_symbols = false) = 0;
  // Imports a subgraph into the current graph, its formal inputs bound to
  // `inputs` (none for an If branch whose condition is known at compile
  // time; one unrolled Loop iteration), and returns its outputs. Its own
  // names are forgotten afterwards, so it can be inlined again.
  virtual std::vector<Value*> inline_subgraph(const std::string& attr, const std::vector<Value*>& inputs = {}) = 0;
  // The same for subgraphs whose inputs or outputs may be sequences or
  // optionals (an If branch returning a sequence, a Loop carrying one,
  // SequenceMap's body): only an inlined subgraph carries them.
  virtual std::vector<ImportedValue> inline_subgraph_values(const std::string& attr,
                                                            const std::vector<ImportedValue>& inputs) = 0;
  // Marks subgraph attribute `attr` as deliberately not imported (an If
  // branch that a condition known at compile time never takes). Every
  // subgraph attribute of a node must be imported (import_regions,
  // inline_subgraph) or skipped so: after the adapter, the importer refuses a
  // node with one left over, so that no adapter drops a body silently.
  virtual void skip_subgraph(const std::string& attr) = 0;
  // Adds a node that owns regions, with the given result types; checks it
  // (ir/control_flow.h) and returns its results.
  virtual std::vector<Value*> emit_with_regions(const std::string& op, const std::vector<Value*>& inputs,
                                                const AttrMap& attrs, const std::vector<TensorType>& types,
                                                std::vector<std::unique_ptr<Graph>> regions) = 0;

  // The default 1:1 import under kiln op `kiln_op` (attributes as given).
  virtual void import_as(const std::string& kiln_op, const AttrMap& attrs) = 0;
  void import_as(const std::string& kiln_op) { import_as(kiln_op, attrs()); }

  // "model.onnx: node "conv1" (Conv)"
  virtual std::string label() const = 0;
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) const {
    throw Error(label() + ": " + fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  [[noreturn]] void unsupported(fmt::format_string<Args...> f, Args&&... args) const {
    throw Unsupported(label() + ": " + fmt::format(f, std::forward<Args>(args)...));
  }

  // Rejects (as unsupported) any ONNX attribute not in `known`, naming it:
  // for adapters that translate attributes one by one.
  // Refuses any attribute, subgraph attributes included, not in `known`: an
  // attribute the adapter does not read (e.g. FlexAttention's score_mod
  // subgraph) must never be dropped silently.
  void only_attrs(std::initializer_list<const char*> known) const {
    auto is_known = [&](const std::string& name) {
      for (const char* k : known)
        if (name == k) return true;
      return false;
    };
    for (auto& [name, a] : attrs())
      if (!is_known(name)) unsupported("attribute '{}' is not supported", name);
    for (const std::string& name : subgraph_names())
      if (!is_known(name)) unsupported("subgraph attribute '{}' is not supported", name);
  }
};

using Adapter = std::function<void(ImportContext&)>;

class AdapterTable {
 public:
  void add(const std::string& onnx_op, Adapter a);
  const Adapter* find(const std::string& onnx_op) const;

 private:
  std::map<std::string, Adapter> table_;
};

const AdapterTable& adapter_table();

// The adapter of an op ONNX defines from opset `first` on: a model importing
// an older opset names no such op, which is an error saying so.
Adapter since_opset(int64_t first, Adapter a);
// The adapter table's key of an op of a non-default domain kiln imports
// (ai.onnx.preview, ai.onnx.preview.training): "domain:Op".
std::string domain_adapter_key(const std::string& domain, const std::string& op_type);

// "BatchNormalization" -> "batch_normalization", "MatMul" -> "matmul",
// "ReduceSum" -> "reduce_sum" (with a few exceptions kept in one list): the
// name an adapter usually picks, for docs; import never resolves ops by it.
std::string default_kiln_name(const std::string& onnx_op);

// Registration of each family's adapters (frontend/adapters_<family>.cpp).
namespace adapters {
void register_elementwise(AdapterTable& t);
void register_shape(AdapterTable& t);
void register_index(AdapterTable& t);
void register_reduction(AdapterTable& t);
void register_normalization(AdapterTable& t);
void register_nn(AdapterTable& t);
void register_linalg(AdapterTable& t);
void register_misc(AdapterTable& t);
void register_sequence(AdapterTable& t);
void register_transformer(AdapterTable& t);
void register_image(AdapterTable& t);
void register_stateful(AdapterTable& t);  // adapters_stateful.cpp: CausalConvWithState, LinearAttention
void register_optional(AdapterTable& t);  // adapters_optional.cpp: OptionalHasElement, OptionalGetElement
void register_preview(AdapterTable& t);   // adapters_preview.cpp: domain ai.onnx.preview (FlexAttention)
// The adapter table's key of op `op_type` of domain ai.onnx.preview.
std::string preview_adapter_key(const std::string& op_type);
// adapters_training.cpp: domain ai.onnx.preview.training (Adagrad, Momentum, Adam).
void register_training(AdapterTable& t);
// adapters_ml.cpp: domain ai.onnx.ml (Binarizer, ArrayFeatureExtractor).
void register_ml(AdapterTable& t);
// adapters_tree_ensemble.cpp: ai.onnx.ml TreeEnsemble, TreeEnsembleRegressor/Classifier (and ZipMap, refused).
void register_tree_ensembles(AdapterTable& t);
// adapters_image_decoder.cpp: ImageDecoder, decoded at import (frontend/image_decode/).
void register_image_decoder(AdapterTable& t);
void register_control_flow(AdapterTable& t);
void register_low_bit(AdapterTable& t);  // adapters_low_bit.cpp
void register_string(
    AdapterTable& t);  // adapters_string.cpp: StringConcat/Split/Normalizer, RegexFullMatch, LabelEncoder
}  // namespace adapters

}  // namespace kiln
