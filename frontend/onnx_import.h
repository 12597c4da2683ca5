// The ONNX frontend: reads a .onnx file (or bytes) and builds kiln's Graph.
//
// kiln compiles static shapes: every input dim must be known (from the model
// or from --shapes), and operands that decide shapes (Reshape's shape, Slice's
// starts, TopK's k...) must be known at compile time: constants, values
// computable from constants, or inputs the caller supplies in known_inputs.
#pragma once
#include <functional>
#include <map>
#include <string_view>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// One node kiln cannot import, found in collecting mode (ImportOptions::problems).
struct ImportProblem {
  std::string node;     // the ONNX node name ("->output" when unnamed)
  std::string op;       // the ONNX op type
  bool unsupported;     // true: valid ONNX kiln does not do; false: the model is invalid here
  std::string message;  // the full "file: node "x" (Op): problem" message
};

// What the caller calls the shape options, for messages: kiln compile's
// flags unless a builder API names its own parameters (cli(), c_api(),
// cpp_api(), python()), so each front door's errors say what its user wrote.
struct ShapeOptionNames {
  std::string shapes = "--shapes";  // fixes an input's shape
  std::string min = "--min-shapes", opt = "--opt-shapes", max = "--max-shapes";
  std::string fix = "--shapes {}:DIMS";                            // how to fix input {}'s shape
  std::string range = "--min-shapes and --max-shapes";             // how to give an input a range
  std::string profile = "--min-shapes/--opt-shapes/--max-shapes";  // a range, any of its parts
  static ShapeOptionNames cli() { return {}; }
  static ShapeOptionNames c_api();
  static ShapeOptionNames cpp_api();
  static ShapeOptionNames python();
  std::string fix_for(const std::string& input) const;
};

// A sequence- or optional-typed graph input, fixed at compile time. kiln
// has no sequence or optional type: sequences are unrolled at import
// (frontend/adapters_sequence.cpp), so a sequence's length and element types
// are part of the compiled graph, as a static shape is, and so is whether an
// optional holds a value. Each element becomes a tensor input named
// sequence_element_name(input, k); an optional tensor keeps the input's name;
// an empty optional has no graph input.
struct CompositeInput {
  bool present = true;               // false: an empty optional
  bool sequence = false;             // holds a sequence (else one tensor)
  std::vector<TensorType> elements;  // the sequence's elements, or the one tensor
};

// "seq[2]": the graph input or output holding element 2 of sequence "seq".
std::string sequence_element_name(const std::string& sequence, size_t k);

struct ImportOptions {
  // The shape options' names in messages (kiln compile's flags by default).
  ShapeOptionNames names;
  // Fixes input dims: name -> full shape (trtexec's --shapes).
  std::map<std::string, Shape> input_shapes;
  // Input values available at compile time. An input listed here is turned
  // into a constant only if some op needs its value to know shapes; the
  // others stay runtime inputs (their shapes are taken from these tensors).
  std::map<std::string, Tensor> known_inputs;
  // Sequence- and optional-typed inputs by name (see CompositeInput). A
  // sequence or optional graph output becomes its elements' tensors, named
  // sequence_element_name(output, k) (an empty optional: none).
  std::map<std::string, CompositeInput> composite_inputs;
  // The same from element shapes alone (kiln compile's --sequence-shapes
  // and --empty-optionals), the dtypes the model declares: a sequence input,
  // or an optional holding one, with these elements (none: an empty
  // sequence); optional inputs given no value. An optional tensor input is
  // present when input_shapes fixes its shape.
  std::map<std::string, std::vector<Shape>> sequence_shapes;
  std::vector<std::string> empty_optionals;
  // nonzero, non_max_suppression and topk (k) whose deciding operand the
  // model alone does not fix get a result size decided at run time: a size
  // symbol in [0, upper bound] (ir/data_dependent.h). false: the operand must
  // be known at compile time (a known input is frozen), as a static plan needs.
  bool data_dependent_sizes = true;
  // Collecting mode (kiln inspect, compile's coverage check): when set, a node
  // that cannot be imported is recorded here instead of ending the import, and
  // its results are marked unknown; nodes reading them are checked only for
  // whether kiln knows their op. The returned graph is then incomplete (its
  // outputs are only those that were produced) and must not be compiled.
  std::vector<ImportProblem>* problems = nullptr;
  // Dynamic shapes (frontend/symbolic_inputs.h, docs/dynamic_shapes.md):
  // trtexec's --min-shapes / --opt-shapes / --max-shapes. An input that
  // input_shapes does not fix gets symbolic dims with these ranges where the
  // model leaves its dims open; the graph declares the symbols.
  std::map<std::string, Shape> min_shapes, opt_shapes, max_shapes;
  // input_shapes may change dims the model fixes (kiln bench --batch on a
  // model exported at batch 1); the declared output dims are then not checked.
  bool override_fixed_dims = false;
  // --batch N (> 0): every input with a batch dim first gets N there
  // (frontend/batch_dim.h); implies override_fixed_dims. 0: the model's own.
  int64_t batch = 0;
  // Called with (0, nodes in the graph) when the nodes' import starts (the
  // file is read and parsed by then) and after each node, so importing a
  // large model is not silent. May be empty.
  std::function<void(int done, int total)> progress;
};

struct ImportResult {
  std::unique_ptr<Graph> graph;
  int64_t ir_version = 0;
  int64_t opset = 0;                       // default-domain opset
  std::vector<std::string> frozen_inputs;  // inputs that became constants
};

// Throws kiln::Error (or kiln::Unsupported) with "file: node "x" (Op): problem".
ImportResult import_onnx_file(const std::string& path, const ImportOptions& opts = {});
ImportResult import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const std::string& display_name,
                               const ImportOptions& opts = {});

// Parses "s:2x3+4x3,t:" (each sequence's element shapes joined by '+',
// nothing after ':' for an empty sequence) into sequence_shapes.
std::map<std::string, std::vector<Shape>> parse_sequence_shapes_flag(const std::string& spec,
                                                                     std::string_view flag = "--sequence-shapes");

// Parses "x:1x3x224x224,y:2x4" into input_shapes; errors name `flag`.
std::map<std::string, Shape> parse_shapes_flag(const std::string& spec, std::string_view flag = "--shapes");

}  // namespace kiln
