// Reading one ONNX backend-test case: its model's input names, its numbered
// input_N.pb / output_N.pb data sets, and the model imported with that data
// (conformance.h's read_conformance_set and import_conformance_case).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>
#include <set>

#include "conformance/conformance.h"
#include "frontend/onnx_import.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

// input_0.pb, input_1.pb, ..., input_10.pb in numeric order.
std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) == 0 && f.size() > 3 && f.substr(f.size() - 3) == ".pb") {
      try {
        found.push_back({std::stoi(f.substr(prefix.size())), e.path()});
      } catch (...) {
      }
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> r;
  for (auto& [i, p] : found) r.push_back(p);
  return r;
}

// The model's runtime input names, in order. Test data for a sequence or an
// optional is a SequenceProto or OptionalProto (read_value_pb); a map is
// unsupported, found here before any .pb is misread.
std::vector<std::string> model_input_names(const std::string& model_path) {
  std::ifstream in(model_path, std::ios::binary);
  onnx::ModelProto m;
  if (!m.ParseFromIstream(&in)) fail("{}: not a valid ONNX model", model_path);
  std::set<std::string> inits;
  for (const auto& i : m.graph().initializer()) inits.insert(i.name());
  std::vector<std::string> names;
  auto check_tensor = [&](const onnx::ValueInfoProto& vi, const char* what) {
    if (vi.has_type() && !vi.type().has_tensor_type() && !vi.type().has_sequence_type() &&
        !vi.type().has_optional_type())
      unsupported("{}: {} \"{}\" is not a tensor, sequence or optional (map values are not supported)", model_path,
                  what, vi.name());
  };
  for (const auto& i : m.graph().input()) {
    if (inits.count(i.name())) continue;
    check_tensor(i, "input");
    names.push_back(i.name());
  }
  for (const auto& o : m.graph().output()) check_tensor(o, "output");
  return names;
}

// Old ONNX test data stores bfloat16 tensors as their uint16 bits; read such
// a tensor as the bf16 the model declares for it.
void retag_bf16(Tensor& t, const onnx::TypeProto& declared) {
  if (t.dtype() != DType::U16 || !declared.has_tensor_type() ||
      declared.tensor_type().elem_type() != onnx::TensorProto::BFLOAT16)
    return;
  Tensor r(DType::BF16, t.shape());
  std::memcpy(r.raw(), t.raw(), t.nbytes());
  t = std::move(r);
}

const onnx::TypeProto* declared_type(const onnx::ModelProto& m, const std::string& name, bool output) {
  for (const auto& vi : output ? m.graph().output() : m.graph().input())
    if (vi.name() == name) return &vi.type();
  return nullptr;
}

// A test-data value: a tensor, or (for a model input or output declared a
// sequence or an optional) a SequenceProto or OptionalProto of tensors.
struct DataValue {
  CompositeInput shape;          // present / sequence / element types
  std::vector<Tensor> elements;  // the tensors, in order (none when empty)
  std::string name;
};

void read_sequence(const onnx::SequenceProto& s, const std::string& path, DataValue& r) {
  if (s.elem_type() != onnx::SequenceProto::TENSOR && !(s.elem_type() == 0 && s.tensor_values_size() == 0))
    unsupported("{}: a sequence of non-tensors (elem_type {}) is not supported", path, s.elem_type());
  r.shape.sequence = true;
  std::string dir = fs::path(path).parent_path().string();
  for (const auto& t : s.tensor_values()) {
    r.elements.push_back(tensor_from_proto(t, dir, path));
    r.shape.elements.push_back(r.elements.back().type());
  }
}

DataValue read_value_pb(const std::string& path, const onnx::TypeProto* declared) {
  DataValue r;
  auto parse = [&](google::protobuf::Message& m, const char* what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("{}: cannot open", path);
    if (!m.ParseFromIstream(&in)) fail("{}: not a valid {}", path, what);
  };
  if (declared && declared->has_sequence_type()) {
    onnx::SequenceProto s;
    parse(s, "SequenceProto");
    r.name = s.name();
    read_sequence(s, path, r);
    return r;
  }
  if (declared && declared->has_optional_type()) {
    onnx::OptionalProto o;
    parse(o, "OptionalProto");
    r.name = o.name();
    std::string dir = fs::path(path).parent_path().string();
    if (o.has_tensor_value()) {
      r.elements.push_back(tensor_from_proto(o.tensor_value(), dir, path));
      r.shape.elements.push_back(r.elements.back().type());
    } else if (o.has_sequence_value()) {
      read_sequence(o.sequence_value(), path, r);
    } else if (o.elem_type() != onnx::OptionalProto::UNDEFINED && o.elem_type() != onnx::OptionalProto::TENSOR &&
               o.elem_type() != onnx::OptionalProto::SEQUENCE) {
      unsupported("{}: an optional of elem_type {} is not supported", path, o.elem_type());
    } else {
      r.shape.present = false;
    }
    return r;
  }
  r.elements.push_back(read_tensor_pb(path, &r.name));
  r.shape.elements.push_back(r.elements.back().type());
  return r;
}

}  // namespace

ConformanceSet read_conformance_set(const std::string& dir, const std::string& data_set, bool with_expected) {
  std::string model = (fs::path(dir) / "model.onnx").string();
  std::vector<std::string> in_names = model_input_names(model);
  onnx::ModelProto proto;
  {
    std::ifstream in(model, std::ios::binary);
    if (!proto.ParseFromIstream(&in)) fail("{}: not a valid ONNX model", model);
  }
  ConformanceSet r;
  r.dir = fs::path(dir) / data_set;
  std::vector<fs::path> ins = numbered(r.dir, "input_");
  for (size_t k = 0; k < ins.size(); ++k) {
    // The file's type is the declared type of the input it is for: the
    // input of its name, else the k-th.
    if (k >= in_names.size()) fail("{}: more input files than model inputs", r.dir.string());
    const onnx::TypeProto* by_position = declared_type(proto, in_names[k], false);
    DataValue v = read_value_pb(ins[k].string(), by_position);
    std::string name = v.name;
    if (name.empty() || std::find(in_names.begin(), in_names.end(), name) == in_names.end()) name = in_names[k];
    const onnx::TypeProto* t = declared_type(proto, name, false);
    if (t != by_position) v = read_value_pb(ins[k].string(), t);
    if (t && (t->has_sequence_type() || t->has_optional_type())) {
      // Structure at compile time (CompositeInput), elements fed as tensors.
      for (size_t e = 0; e < v.elements.size(); ++e)
        r.inputs[v.shape.sequence ? sequence_element_name(name, e) : name] = std::move(v.elements[e]);
      r.composites[name] = std::move(v.shape);
      continue;
    }
    if (t) retag_bf16(v.elements[0], *t);
    r.inputs[name] = std::move(v.elements[0]);
  }
  // A sequence or optional output is compared as its elements' tensors, as
  // the import lays it out (ImportOptions::composite_inputs).
  if (with_expected) {
    std::vector<fs::path> outs = numbered(r.dir, "output_");
    for (size_t k = 0; k < outs.size(); ++k) {
      const onnx::TypeProto* t = static_cast<int>(k) < proto.graph().output_size()
                                     ? &proto.graph().output(static_cast<int>(k)).type()
                                     : nullptr;
      DataValue v = read_value_pb(outs[k].string(), t);
      for (Tensor& e : v.elements) {
        if (t && t->has_tensor_type()) retag_bf16(e, *t);
        r.expected.push_back(std::move(e));
      }
    }
  }
  return r;
}

ImportResult import_conformance_case(const std::string& dir, const std::string& data_set,
                                     std::map<std::string, Tensor>* feed, std::vector<Tensor>* expected,
                                     bool data_dependent_sizes) {
  ConformanceSet set = read_conformance_set(dir, data_set, expected != nullptr);
  ImportOptions opts;
  opts.data_dependent_sizes = data_dependent_sizes;
  opts.known_inputs = set.inputs;
  opts.composite_inputs = set.composites;
  if (expected) *expected = std::move(set.expected);
  ImportResult imp = import_onnx_file((fs::path(dir) / "model.onnx").string(), opts);
  if (feed) {
    for (Value* in : imp.graph->inputs()) {
      auto it = opts.known_inputs.find(in->name());
      if (it == opts.known_inputs.end()) fail("{}: no data for input \"{}\"", set.dir.string(), in->name());
      (*feed)[in->name()] = it->second;
    }
  }
  return imp;
}

}  // namespace kiln
