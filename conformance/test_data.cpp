// Reading one ONNX backend-test case: its model's input names, its numbered
// input_N.pb / output_N.pb data sets, and the model imported with that data
// (conformance.h's read_conformance_set and import_conformance_case).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
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

// The model's runtime input names, in order. Test data for sequence or
// optional values is not a TensorProto: such tests are unsupported (kiln
// handles tensors only), found here before any .pb is misread.
std::vector<std::string> model_input_names(const std::string& model_path) {
  std::ifstream in(model_path, std::ios::binary);
  onnx::ModelProto m;
  if (!m.ParseFromIstream(&in)) fail("{}: not a valid ONNX model", model_path);
  std::set<std::string> inits;
  for (const auto& i : m.graph().initializer()) inits.insert(i.name());
  std::vector<std::string> names;
  auto check_tensor = [&](const onnx::ValueInfoProto& vi, const char* what) {
    if (vi.has_type() && !vi.type().has_tensor_type())
      unsupported("{}: {} \"{}\" is not a tensor (sequence, map or optional values are not supported)", model_path,
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
    std::string name;
    Tensor v = read_tensor_pb(ins[k].string(), &name);
    if (name.empty() || std::find(in_names.begin(), in_names.end(), name) == in_names.end()) {
      if (k >= in_names.size()) fail("{}: more input files than model inputs", r.dir.string());
      name = in_names[k];
    }
    if (const onnx::TypeProto* t = declared_type(proto, name, false)) retag_bf16(v, *t);
    r.inputs[name] = std::move(v);
  }
  if (with_expected)
    for (const fs::path& p : numbered(r.dir, "output_")) {
      r.expected.push_back(read_tensor_pb(p.string()));
      int k = static_cast<int>(r.expected.size()) - 1;
      if (k < proto.graph().output_size()) retag_bf16(r.expected.back(), proto.graph().output(k).type());
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
