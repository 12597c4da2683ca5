// Sequence- and optional-typed graph inputs and outputs (frontend/onnx_import.h
// CompositeInput): kiln unrolls sequences at import, so such an input's
// structure is given at compile time (ImportOptions::composite_inputs, or
// kiln compile's --sequence-shapes / --empty-optionals with the model's
// dtypes) and becomes its elements' tensor inputs name[k]; a sequence output
// becomes its elements' outputs name[k].
#include <algorithm>

#include "frontend/importer.h"
#include "frontend/tensor_proto.h"
#include "ir/limits.h"

namespace kiln {

namespace onnx_import_detail {

namespace {

// The declared tensor type inside a sequence or optional type: its elem_type
// (0 when not declared) and its shape (nullptr when not declared).
const onnx::TypeProto::Tensor* declared_element(const onnx::TypeProto& t) {
  if (t.has_tensor_type()) return &t.tensor_type();
  if (t.has_sequence_type() && t.sequence_type().has_elem_type())
    return declared_element(t.sequence_type().elem_type());
  if (t.has_optional_type() && t.optional_type().has_elem_type())
    return declared_element(t.optional_type().elem_type());
  return nullptr;
}

// Whether a declared type holds a sequence (directly or inside an optional).
bool declares_sequence(const onnx::TypeProto& t) {
  if (t.has_sequence_type()) return true;
  return t.has_optional_type() && t.optional_type().has_elem_type() &&
         t.optional_type().elem_type().has_sequence_type();
}

}  // namespace

std::optional<CompositeInput> Importer::composite_from_shapes(const onnx::ValueInfoProto& vi, const std::string& ctx) {
  const bool optional = vi.type().has_optional_type();
  const bool sequence = declares_sequence(vi.type());
  const bool empty =
      std::find(opts_.empty_optionals.begin(), opts_.empty_optionals.end(), vi.name()) != opts_.empty_optionals.end();
  auto seq = opts_.sequence_shapes.find(vi.name());
  auto fixed = opts_.input_shapes.find(vi.name());
  const int given = int(empty) + int(seq != opts_.sequence_shapes.end()) + int(fixed != opts_.input_shapes.end());
  if (given == 0) return std::nullopt;
  if (given > 1) fail("{}: is given more than one of --sequence-shapes, --empty-optionals and --shapes", ctx);
  CompositeInput c;
  if (empty) {
    if (!optional) fail("{}: --empty-optionals names it, but it is a sequence, not an optional", ctx);
    c.present = false;
    return c;
  }
  const onnx::TypeProto::Tensor* decl = declared_element(vi.type());
  if (!decl || decl->elem_type() == 0)
    fail("{}: the model declares no element type; kiln cannot type its elements", ctx);
  DType dt = dtype_from_onnx(decl->elem_type(), ctx);
  if (seq != opts_.sequence_shapes.end()) {
    if (!sequence) fail("{}: --sequence-shapes names it, but it is an optional tensor (use --shapes)", ctx);
    c.sequence = true;
    for (const Shape& s : seq->second) c.elements.push_back(TensorType(dt, s));
    return c;
  }
  if (sequence) fail("{}: --shapes names it, but it holds a sequence (use --sequence-shapes)", ctx);
  c.elements.push_back(TensorType(dt, fixed->second));
  return c;
}

void Importer::import_composite_input(const onnx::ValueInfoProto& vi) {
  std::string ctx = fmt::format("{}: input \"{}\"", file_, short_name(vi.name()));
  const bool optional = vi.type().has_optional_type();
  const bool sequence = declares_sequence(vi.type());
  const char* what = optional ? (sequence ? "an optional sequence" : "an optional tensor") : "a sequence";
  const CompositeInput* found = nullptr;
  if (auto it = opts_.composite_inputs.find(vi.name()); it != opts_.composite_inputs.end()) {
    found = &it->second;
  } else if (std::optional<CompositeInput> from_shapes = composite_from_shapes(vi, ctx)) {
    // From element shapes (--sequence-shapes, --empty-optionals, --shapes
    // for a present optional tensor): the dtypes the model declares.
    found = &(opts_composites_[vi.name()] = *from_shapes);
  }
  if (!found)
    unsupported(
        "{}: is {}; kiln unrolls sequences and resolves optionals at import, so its value's structure (whether it "
        "is present, its length and element shapes) must be given at compile time: kiln compile's "
        "--sequence-shapes {}:2x3+4x3 (its elements' shapes; nothing after ':' for an empty sequence){}",
        ctx, what, short_name(vi.name()),
        optional ? fmt::format(", --empty-optionals {} or, for a tensor, --shapes", short_name(vi.name())) : "");
  const CompositeInput& given = *found;
  if (!given.present) {
    if (!optional) fail("{}: is a sequence, but an empty optional was given for it", ctx);
    empty_.insert(vi.name());
    names_.insert(vi.name());
    return;
  }
  if (given.sequence != sequence)
    fail("{}: is {} but {} was given for it", ctx, what, given.sequence ? "a sequence" : "a tensor");
  if (!given.sequence && given.elements.size() != 1)
    fail("{}: an optional tensor needs one tensor, {} given (kiln bug)", ctx, given.elements.size());
  const onnx::TypeProto::Tensor* decl = declared_element(vi.type());
  std::vector<Value*> elements;
  for (size_t k = 0; k < given.elements.size(); ++k) {
    const TensorType& t = given.elements[k];
    std::string name = given.sequence ? sequence_element_name(vi.name(), k) : vi.name();
    std::string ectx = fmt::format("{}: input \"{}\"", file_, short_name(name));
    if (decl && decl->elem_type() != 0 && dtype_from_onnx(decl->elem_type(), ectx) != t.dtype)
      fail("{}: the model declares {} elements but {} was given", ectx,
           dtype_name(dtype_from_onnx(decl->elem_type(), ectx)), t.str());
    if (decl && decl->has_shape()) {
      if (decl->shape().dim_size() != t.rank())
        fail("{}: the model declares rank {} but {} was given", ectx, decl->shape().dim_size(), t.str());
      for (int d = 0; d < t.rank(); ++d)
        if (decl->shape().dim(d).has_dim_value() && decl->shape().dim(d).dim_value() != t.shape[d])
          fail("{}: the model fixes dim {} at {} but {} was given", ectx, d, decl->shape().dim(d).dim_value(), t.str());
    }
    if (names_.count(name) || env_.count(name) || onnx_outputs_.count(name))
      fail("{}: the name is taken by another value of the model", ectx);
    check_tensor_bytes(t, ectx);
    names_.insert(name);
    elements.push_back(graph_->add_input(name, t));
  }
  if (given.sequence) seq_env_[vi.name()] = std::move(elements);
  else env_[vi.name()] = elements[0];
}

void Importer::add_sequence_output(const std::string& name, const std::vector<Value*>& elements,
                                   std::vector<Value*>& outs) {
  for (size_t k = 0; k < elements.size(); ++k) {
    // Each element through its own identity: an element may be a graph
    // input, a constant or another output's value, and the output needs a
    // name of its own.
    Value* e = elements[k];
    Node* n = graph_->add_node("identity", {e}, {e->type()}, {}, name);
    std::string out_name = sequence_element_name(name, k);
    if (names_.count(out_name) || env_.count(out_name) || onnx_outputs_.count(out_name))
      fail("{}: output \"{}\": the name of element {} (\"{}\") is taken by another value of the model", file_,
           short_name(name), k, short_name(out_name));
    names_.insert(out_name);
    n->output(0)->set_name(out_name);
    outs.push_back(n->output(0));
  }
}

}  // namespace onnx_import_detail

std::map<std::string, std::vector<Shape>> parse_sequence_shapes_flag(const std::string& spec, std::string_view flag) {
  std::map<std::string, std::vector<Shape>> r;
  size_t start = 0;
  while (start < spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(start, end - start);
    size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0)
      fail("{} '{}': expected name:SHAPE+SHAPE+... (e.g. s:2x3+4x3), got '{}'", flag, spec, item);
    std::string name = item.substr(0, colon), elems = item.substr(colon + 1);
    if (r.count(name)) fail("{} '{}': \"{}\" is given twice", flag, spec, name);
    std::vector<Shape>& shapes = r[name];
    size_t e = 0;
    while (e < elems.size()) {
      size_t plus = elems.find('+', e);
      if (plus == std::string::npos) plus = elems.size();
      // One element's shape, read as --shapes reads one.
      shapes.push_back(parse_shapes_flag(name + ":" + elems.substr(e, plus - e), flag).at(name));
      e = plus + 1;
    }
    start = end + 1;
  }
  return r;
}

std::string sequence_element_name(const std::string& sequence, size_t k) { return fmt::format("{}[{}]", sequence, k); }

}  // namespace kiln
