#include "frontend/onnx_import.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <unordered_map>

#include "frontend/batch_dim.h"
#include "frontend/import_context.h"
#include "frontend/op_versions.h"
#include "frontend/symbolic_inputs.h"
#include "ops/symbolic_values.h"
#include "frontend/tensor_proto.h"
#include "ir/control_flow.h"
#include "ir/data_dependent.h"
#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/limits.h"
#include "ir/short_name.h"
#include "ir/symbolic_dim.h"
#include "ops/registry.h"
#include "frontend/importer.h"

namespace kiln {

namespace onnx_import_detail {

const Tensor* Importer::known_value(Value* v, bool freeze) {
  if (!v) return nullptr;
  if (v->is_constant()) return v->has_data() ? &v->data() : nullptr;
  if (auto it = known_.find(v); it != known_.end()) return &it->second;
  if (v->is_input()) {
    // A region's parameters are never known; only the main graph's inputs
    // may be given at compile time.
    const auto& main_inputs = graph_->inputs();
    if (!freeze || std::find(main_inputs.begin(), main_inputs.end(), v) == main_inputs.end()) return nullptr;
    auto it = opts_.known_inputs.find(v->name());
    if (it == opts_.known_inputs.end()) return nullptr;
    if (it->second.type().dtype != v->dtype() || it->second.shape() != v->shape())
      fail("{}: value given for input \"{}\" is {} but the model declares {}", file_, v->name(),
           it->second.type().str(), v->type().str());
    graph_->freeze_input(v, it->second);
    frozen_.push_back(v->name());
    return &v->data();
  }
  // A result: computable if all operands are. (Control-flow results are
  // left to run time; an If with a known condition was inlined already.)
  Node* n = v->producer();
  if (n->num_regions()) return nullptr;
  std::vector<const Tensor*> ins;
  for (Value* in : n->inputs()) {
    if (!in) {
      ins.push_back(nullptr);
      continue;
    }
    const Tensor* t = known_value(in, freeze);
    if (!t) return nullptr;
    ins.push_back(t);
  }
  const OpDef& def = op_registry().get(n->op());
  std::vector<TensorType> types;
  for (Value* o : n->outputs()) types.push_back(o->type());
  // A result of symbolic shape has no value before the shapes are known.
  for (const TensorType& t : types)
    if (has_symbolic_dims(t.shape)) return nullptr;
  std::vector<Tensor> outs;
  if (std::any_of(ins.begin(), ins.end(), [](const Tensor* t) { return t && holds_symbolic_values(*t); })) {
    // Shape values with symbolic dims: moved or computed as polynomials, or
    // not known at compile time (ops/symbolic_values.h).
    auto r = evaluate_on_symbolic_values(*n, ins, types, file_ + ": " + n->describe());
    if (!r) return nullptr;
    outs = std::move(*r);
  } else {
    outs = evaluate_op(def, n->attrs(), ins, types, file_ + ": " + n->describe());
  }
  for (int i = 0; i < n->num_outputs(); ++i) {
    known_[n->output(i)] = std::move(outs[i]);
    known_order_.push_back(n->output(i));
  }
  return &known_.at(v);
}

TensorType Importer::input_type(const onnx::ValueInfoProto& vi) {
  std::string ctx = fmt::format("{}: input \"{}\"", file_, short_name(vi.name()));
  if (!vi.type().has_tensor_type()) unsupported("{}: only tensor inputs are supported", ctx);
  const auto& tt = vi.type().tensor_type();
  DType dt = dtype_from_onnx(tt.elem_type(), ctx);
  if (auto it = opts_.input_shapes.find(vi.name()); it != opts_.input_shapes.end()) {
    if (opts_.min_shapes.count(vi.name()) || opts_.opt_shapes.count(vi.name()) || opts_.max_shapes.count(vi.name()))
      fail("{}: {} fixes its shape and {} gives it a range: give one", ctx, opts_.names.shapes, opts_.names.profile);
    if (tt.has_shape() && tt.shape().dim_size() != static_cast<int>(it->second.size()))
      fail("{}: {} gives rank {} but the model declares rank {}", ctx, opts_.names.shapes, it->second.size(),
           tt.shape().dim_size());
    if (tt.has_shape())
      for (int i = 0; i < tt.shape().dim_size(); ++i) {
        const auto& d = tt.shape().dim(i);
        if (d.has_dim_value() && d.dim_value() != it->second[i] && !opts_.override_fixed_dims)
          fail("{}: {} sets dim {} to {} but the model fixes it at {}", ctx, opts_.names.shapes, i, it->second[i],
               d.dim_value());
      }
    check_tensor_bytes(TensorType(dt, it->second), ctx);
    return TensorType(dt, it->second);
  }
  if (auto it = opts_.known_inputs.find(vi.name()); it != opts_.known_inputs.end())
    return TensorType(dt, it->second.shape());
  if (!tt.has_shape()) fail("{}: the model gives no shape; set one with {}", ctx, opts_.names.fix_for(vi.name()));
  Shape s = symbolic_input_dims(tt.shape(), vi.name(), opts_, ctx, symbols_);
  // An input over the per-tensor limit can never be bound: reject it now
  // (a symbolic one at its largest).
  check_tensor_bytes(TensorType(dt, has_symbolic_dims(s) ? opts_.max_shapes.at(vi.name()) : s), ctx);
  return TensorType(dt, s);
}

void Importer::import_initializers() {
  for (auto& init : *model_.mutable_graph()->mutable_initializer()) {
    std::string ctx = fmt::format("{}: initializer \"{}\"", file_, short_name(init.name()));
    if (init.name().empty()) fail("{}: initializer without a name", file_);
    account_bytes(init, ctx);
    Tensor t = tensor_from_proto(init, base_dir_, ctx);
    if (env_.count(init.name())) fail("{}: defined twice", ctx);
    names_.insert(init.name());
    env_[init.name()] = graph_->add_constant(init.name(), std::move(t));
    // The tensor owns the values now: the protobuf's copy goes (GPT-2's
    // 500 MB of weights were held twice until the import ended). Only the
    // name, type and dims of an initializer are read after this.
    std::string().swap(*init.mutable_raw_data());
    init.clear_float_data();
    init.clear_int32_data();
    init.clear_int64_data();
    init.clear_double_data();
    init.clear_uint64_data();
  }
  if (model_.graph().sparse_initializer_size()) unsupported("{}: sparse initializers are not supported", file_);
}

void Importer::import_inputs() {
  // The sequence and optional flags must name inputs of those types.
  auto declared = [&](const std::string& name) -> const onnx::ValueInfoProto* {
    for (const auto& vi : model_.graph().input())
      if (vi.name() == name) return &vi;
    return nullptr;
  };
  auto check_composite_name = [&](const std::string& name, const char* flag) {
    const onnx::ValueInfoProto* vi = declared(name);
    if (!vi || env_.count(name))
      fail("{}: {} names \"{}\", which is not an input of the model", file_, flag, short_name(name));
    if (!vi->type().has_sequence_type() && !vi->type().has_optional_type())
      fail("{}: {} names input \"{}\", which is a tensor, not a sequence or optional", file_, flag, short_name(name));
  };
  for (const auto& [name, shapes] : opts_.sequence_shapes) check_composite_name(name, "--sequence-shapes");
  for (const std::string& name : opts_.empty_optionals) check_composite_name(name, "--empty-optionals");
  for (const auto& vi : model_.graph().input()) {
    if (auto it = env_.find(vi.name()); it != env_.end()) {
      // An initializer with a declared input (old models): a constant.
      check_shadowed_input(vi, it->second);
      continue;
    }
    if (vi.name().empty()) fail("{}: graph input without a name", file_);
    if (vi.type().has_sequence_type() || vi.type().has_optional_type()) {
      import_composite_input(vi);
      continue;
    }
    names_.insert(vi.name());
    env_[vi.name()] = graph_->add_input(vi.name(), input_type(vi));
  }
  graph_->set_symbols(symbols_.decls());
}

// An initializer that shadows a graph input is the input's default value, so
// it must have the input's declared type (ONNX Runtime rejects the model
// otherwise); silently taking the initializer would change what the model
// means. Symbolic or absent dims match any size.
void Importer::check_shadowed_input(const onnx::ValueInfoProto& vi, const Value* init) {
  if (!vi.type().has_tensor_type()) return;
  const auto& tt = vi.type().tensor_type();
  std::string ctx = fmt::format("{}: input \"{}\"", file_, short_name(vi.name()));
  bool same = true;
  if (tt.elem_type() != 0) same = dtype_from_onnx(tt.elem_type(), ctx) == init->dtype();
  if (tt.has_shape()) {
    same = same && tt.shape().dim_size() == init->type().rank();
    for (int i = 0; same && i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      same = !d.has_dim_value() || d.dim_value() == init->shape()[i];
    }
  }
  if (!same) {
    std::string declared = tt.elem_type() != 0 ? std::string(dtype_name(dtype_from_onnx(tt.elem_type(), ctx))) : "?";
    std::vector<std::string> dims;
    for (const auto& d : tt.shape().dim())
      dims.push_back(d.has_dim_value()       ? std::to_string(d.dim_value())
                     : d.dim_param().empty() ? std::string("?")
                                             : short_name(d.dim_param()));
    std::string shape = tt.has_shape() ? fmt::format("[{}]", fmt::join(dims, ",")) : "";
    fail("{}: declared as {}{} but the initializer of the same name is {}", ctx, declared, shape, init->type().str());
  }
}

AttrMap Importer::convert_attrs(const onnx::NodeProto& node, const std::string& ctx,
                                std::map<std::string, const onnx::GraphProto*>& subgraphs) {
  using AP = onnx::AttributeProto;
  AttrMap m;
  std::set<std::string> seen;
  for (const auto& a : node.attribute()) {
    if (a.name().empty()) fail("{}: attribute without a name", ctx);
    if (!seen.insert(a.name()).second) fail("{}: attribute '{}' is given twice", ctx, a.name());
    if (!a.ref_attr_name().empty()) unsupported("{}: attribute '{}' refers to a function attribute", ctx, a.name());
    switch (a.type()) {
      case AP::INT:
        m.set(a.name(), int64_t(a.i()));
        break;
      case AP::FLOAT:
        m.set(a.name(), a.f());
        break;
      case AP::STRING:
        m.set(a.name(), a.s());
        break;
      case AP::INTS:
        m.set(a.name(), std::vector<int64_t>(a.ints().begin(), a.ints().end()));
        break;
      case AP::FLOATS:
        m.set(a.name(), std::vector<float>(a.floats().begin(), a.floats().end()));
        break;
      case AP::STRINGS:
        m.set(a.name(), std::vector<std::string>(a.strings().begin(), a.strings().end()));
        break;
      case AP::TENSOR: {
        std::string actx = ctx + " attribute '" + a.name() + "'";
        account_bytes(a.t(), actx);
        m.set(a.name(), tensor_from_proto(a.t(), base_dir_, actx));
        break;
      }
      case AP::GRAPH:  // the control-flow adapters import these as regions
        subgraphs[a.name()] = &a.g();
        break;
      case AP::GRAPHS:
        unsupported("{}: attribute '{}' holds a list of graphs, which no ONNX op kiln imports takes", ctx, a.name());
      case AP::SPARSE_TENSOR:
      case AP::SPARSE_TENSORS:
        unsupported("{}: sparse tensor attribute '{}' is not supported", ctx, a.name());
      case AP::TYPE_PROTO:
        // An empty Optional's element type: kiln resolves optionals at
        // import and needs no type for a value that is not there.
        if (node.op_type() == "Optional" && a.name() == "type") break;
        [[fallthrough]];
      case AP::TYPE_PROTOS:
        unsupported("{}: type attribute '{}' is not supported", ctx, a.name());
      default:
        fail("{}: attribute '{}' has no valid type ({})", ctx, a.name(), int(a.type()));
    }
  }
  return m;
}

void Importer::import_node(const onnx::NodeProto& node) {
  std::string ctx = fmt::format("{}: {}", file_, node_label(node));
  const bool preview = imported_domain(node.domain());  // a non-default domain kiln imports
  if (!node.domain().empty() && node.domain() != "ai.onnx" && !preview)
    unsupported("{}: domain '{}' is not supported", ctx, short_name(node.domain()));
  if (preview)
    for (const auto& op : model_.opset_import())
      if (op.domain() == node.domain() && (op.version() < 1 || op.version() > max_domain_version(node.domain())))
        unsupported("{}: domain '{}' version {} is not supported (kiln reads versions 1 to {})", ctx, node.domain(),
                    op.version(), max_domain_version(node.domain()));
  // A model of the training domain alone imports no default opset; its
  // optimizer nodes do not need one.
  if (opset_ <= 0 && !preview) fail("{}: the model imports no opset for the default domain", ctx);
  std::vector<Value*> inputs;
  std::vector<const std::vector<Value*>*> seq_inputs;
  for (const std::string& in : node.input()) {
    seq_inputs.push_back(nullptr);
    if (in.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    if (empty_.count(in)) {  // an empty optional reads as an absent operand
      inputs.push_back(nullptr);
      continue;
    }
    if (auto s = seq_env_.find(in); s != seq_env_.end()) {
      seq_inputs.back() = &s->second;
      inputs.push_back(nullptr);
      continue;
    }
    auto it = env_.find(in);
    if (it == env_.end())
      fail("{}: input \"{}\" is not defined by any earlier node, initializer or graph input", ctx, short_name(in));
    inputs.push_back(it->second);
  }
  while (!inputs.empty() && !inputs.back() && !seq_inputs[inputs.size() - 1]) inputs.pop_back();
  seq_inputs.resize(inputs.size());
  bool takes_sequence = std::any_of(seq_inputs.begin(), seq_inputs.end(), [](auto* p) { return p != nullptr; });
  std::map<std::string, const onnx::GraphProto*> subgraphs;
  AttrMap attrs = convert_attrs(node, ctx, subgraphs);
  NodeContext nc(*this, node, std::move(attrs), std::move(inputs), std::move(seq_inputs), std::move(subgraphs));
  // The ops whose adapters read sequence operands (ImportContext::operand).
  static const std::set<std::string> kTakeSequences = {
      "SplitToSequence",    "ConcatFromSequence", "Identity", "Optional",
      "OptionalGetElement", "OptionalHasElement", "Loop"};
  bool sequence_op = node.op_type().rfind("Sequence", 0) == 0 || kTakeSequences.count(node.op_type());
  if (takes_sequence && !sequence_op)
    unsupported("{}: an operand is a sequence; only sequence ops take sequences", ctx);
  // Every ONNX op goes through its adapter: kiln's own op names are never
  // looked up with an ONNX name (ONNX Attention is not kiln's attention).
  const Adapter* adapter = adapter_table().find(adapter_key(node));
  if (!adapter && preview)
    unsupported("{}: op {} of domain '{}' is not supported", ctx, short_name(node.op_type()), node.domain());
  if (!adapter) unsupported("{}: op {} (opset {}) is not supported", ctx, short_name(node.op_type()), opset_);
  if (!preview) check_op_version(node.op_type(), opset_, ctx);
  try {
    (*adapter)(nc);
  } catch (const Error& e) {
    // Errors raised below the adapter (attribute getters, tensor helpers)
    // do not know the node: name it here.
    std::string what = e.what();
    if (what.rfind(file_, 0) == 0) throw;
    if (dynamic_cast<const Unsupported*>(&e)) unsupported("{}: {}", ctx, what);
    fail("{}: {}", ctx, what);
  }
  if (!nc.outputs_set()) fail("{}: import produced no outputs (adapter bug)", ctx);
  // A body the adapter neither imported nor deliberately skipped would be
  // dropped silently: refused by name instead, whatever the adapter checked.
  for (const std::string& name : nc.unconsumed_subgraphs())
    unsupported("{}: subgraph attribute '{}' is not supported (kiln's import of {} does not read it)", ctx, name,
                short_name(node.op_type()));
}

void Importer::account_bytes(const onnx::TensorProto& p, const std::string& ctx) {
  DType dt;
  try {
    dt = dtype_from_onnx(p.data_type(), ctx);
  } catch (const Error&) {
    return;  // tensor_from_proto names the problem
  }
  for (int64_t d : p.dims())
    if (d < 0) return;  // tensor_from_proto names the problem
  // The per-tensor limit (and overflow) first: its message is the more precise one.
  int64_t bytes = check_tensor_bytes(TensorType(dt, Shape(p.dims().begin(), p.dims().end())), ctx);
  int64_t limit = limits().max_total_bytes;
  if (bytes > limit - total_bytes_)
    fail(
        "{}: the model's weights exceed the limit of {} bytes in total ({} bytes read so far, this tensor needs "
        "{}); raise it with --max-total-bytes or KILN_MAX_TOTAL_BYTES",
        ctx, limit, total_bytes_, bytes);
  total_bytes_ += bytes;
}

// Whether kiln has any import for the node's op (its attributes and dtypes
// aside): what can still be said about a node whose operands are unknown.
bool Importer::op_known(const onnx::NodeProto& node) const {
  if (!node.domain().empty() && node.domain() != "ai.onnx" && !imported_domain(node.domain())) return false;
  return adapter_table().find(adapter_key(node)) != nullptr;
}

void Importer::import_node_collecting(const onnx::NodeProto& node) {
  std::string name = short_name(node.name().empty() ? (node.output_size() ? "->" + node.output(0) : "?") : node.name());
  auto mark_unknown = [&] {
    for (const auto& o : node.output()) {
      env_.erase(o);
      seq_env_.erase(o);
      if (!o.empty()) unknown_.insert(o);
    }
  };
  bool reads_unknown = std::any_of(node.input().begin(), node.input().end(),
                                   [&](const std::string& in) { return unknown_.count(in) > 0; });
  if (reads_unknown) {
    if (!op_known(node))
      opts_.problems->push_back({name, short_name(node.op_type()), true,
                                 fmt::format("{}: {}: op {} (domain '{}') is not supported", file_, node_label(node),
                                             short_name(node.op_type()), short_name(node.domain()))});
    mark_unknown();
    return;
  }
  try {
    import_node(node);
  } catch (const Unsupported& e) {
    opts_.problems->push_back({name, short_name(node.op_type()), true, e.what()});
    mark_unknown();
  } catch (const Error& e) {
    opts_.problems->push_back({name, short_name(node.op_type()), false, e.what()});
    mark_unknown();
  }
}

ImportResult Importer::run() {
  if (model_.ir_version() < kMinIrVersion || model_.ir_version() > kMaxIrVersion)
    unsupported("{}: ONNX IR version {} is not supported (kiln reads {} to {})", file_, model_.ir_version(),
                kMinIrVersion, kMaxIrVersion);
  for (const auto& op : model_.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
  }
  // A model may import only other domains (training, ML); its nodes are
  // then reported as unsupported one by one.
  if (opset_ == 0 && model_.opset_import_size() == 0) opset_ = 1;
  if (opset_ > kMaxOpset) unsupported("{}: opset {} is newer than kiln supports (up to {})", file_, opset_, kMaxOpset);
  if (!model_.has_graph()) fail("{}: the model has no graph", file_);
  // A graph computes nothing anyone can read without outputs (the ONNX
  // checker rejects it too).
  if (model_.graph().output_size() == 0) fail("{}: the graph has no outputs", file_);

  check_structure();
  graph_ = std::make_unique<Graph>(model_.graph().name().empty() ? "main" : "main");
  cur_ = graph_.get();
  import_initializers();
  import_inputs();
  collect_output_names(model_.graph(), onnx_outputs_);
  const int total_nodes = model_.graph().node_size();
  int done = 0;
  if (opts_.progress) opts_.progress(0, total_nodes);  // the step starts
  for (const auto& node : model_.graph().node()) {
    if (opts_.problems) import_node_collecting(node);
    else import_node(node);
    if (opts_.progress) opts_.progress(++done, total_nodes);
  }
  check_declared_types();

  std::vector<Value*> outs;
  for (const auto& vi : model_.graph().output()) {
    if (unknown_.count(vi.name())) continue;  // collecting mode: its producer is already reported
    if (auto s = seq_env_.find(vi.name()); s != seq_env_.end()) {
      add_sequence_output(vi.name(), s->second, outs);
      continue;
    }
    if (empty_.count(vi.name())) {
      if (!vi.type().has_optional_type() && vi.type().has_sequence_type())
        fail("{}: graph output \"{}\" is declared a sequence but is an empty optional", file_, short_name(vi.name()));
      continue;  // an empty optional output: no tensor
    }
    auto it = env_.find(vi.name());
    if (it == env_.end()) fail("{}: graph output \"{}\" is never produced", file_, short_name(vi.name()));
    Value* v = it->second;
    std::string ctx = fmt::format("{}: output \"{}\"", file_, short_name(vi.name()));
    if (vi.type().has_tensor_type()) {
      const auto& tt = vi.type().tensor_type();
      if (tt.elem_type() != 0 && dtype_from_onnx(tt.elem_type(), ctx) != v->dtype())
        fail("{}: the model declares {} but kiln infers {}", ctx, dtype_name(dtype_from_onnx(tt.elem_type(), ctx)),
             v->type().str());
      if (tt.has_shape() && tt.shape().dim_size() != v->type().rank())
        fail("{}: the model declares rank {} but kiln infers {}", ctx, tt.shape().dim_size(), v->type().str());
      if (tt.has_shape()) {
        for (int i = 0; i < tt.shape().dim_size(); ++i) {
          const auto& d = tt.shape().dim(i);
          // A size the data decides (ir/data_dependent.h) is what the run
          // gives; the exporter's number is only the size it saw.
          if (d.has_dim_value() && d.dim_value() != v->shape()[i] && !opts_.override_fixed_dims &&
              !decided_by_data(v->shape()[i]))
            fail("{}: the model declares dim {} = {} but kiln infers {}", ctx, i, d.dim_value(), v->type().str());
        }
      }
    }
    outs.push_back(v);
  }
  graph_->set_outputs(outs);
  // Inputs frozen for shapes are constants now; inputs nobody reads stay
  // (callers still bind them by name).
  ImportResult r;
  r.graph = std::move(graph_);
  r.ir_version = model_.ir_version();
  r.opset = opset_;
  r.frozen_inputs = frozen_;
  return r;
}

}  // namespace onnx_import_detail

using onnx_import_detail::Importer;

namespace {

onnx::ModelProto parse_model(const std::string& bytes, const std::string& display_name) {
  if (bytes.empty()) fail("{}: the file is empty, not an ONNX model", display_name);
  if (static_cast<int64_t>(bytes.size()) > limits().max_model_file_bytes)
    unsupported("{}: model files over {} bytes must keep weights as external data", display_name,
                limits().max_model_file_bytes);
  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT32_MAX);
  // Room for subgraphs a little past kiln's depth cap (3 messages per level:
  // node, attribute, graph; plus value_info types), so a model nested too
  // deep reaches check_structure()'s clear message instead of a parse error.
  coded.SetRecursionLimit(3 * limits().max_subgraph_depth + 64);
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    fail("{}: not a valid ONNX model (protobuf parse failed: truncated, damaged or not protobuf at all)", display_name);
  return model;
}

ImportResult import_parsed(onnx::ModelProto& model, const std::string& base_dir, const std::string& display_name,
                           const ImportOptions& opts) {
  if (opts.batch > 0) {
    // The batch dims are read from the model just parsed, not from a second
    // parse of the file (BERT-base's is 440 MB).
    ImportOptions batched = opts;
    for (auto& [name, shape] : batch_input_shapes(model.graph(), opts.batch, opts.input_shapes, display_name))
      batched.input_shapes[name] = shape;
    batched.override_fixed_dims = true;
    Importer imp(model, base_dir, display_name, batched);
    return imp.run();
  }
  Importer imp(model, base_dir, display_name, opts);
  return imp.run();
}

}  // namespace

ImportResult import_onnx_bytes(const std::string& bytes, const std::string& base_dir, const std::string& display_name,
                               const ImportOptions& opts) {
  onnx::ModelProto model = parse_model(bytes, display_name);
  return import_parsed(model, base_dir, display_name, opts);
}

ImportResult import_onnx_file(const std::string& path, const ImportOptions& opts) {
  reject_directory(path, "an ONNX model file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open file", path);
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) fail("{}: cannot read file", path);
  if (size > limits().max_model_file_bytes)
    unsupported("{}: model files over {} bytes must keep weights as external data", path,
                limits().max_model_file_bytes);
  in.seekg(0);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), size);
  std::string dir = std::filesystem::path(path).parent_path().string();
  onnx::ModelProto model = parse_model(bytes, path);
  std::string().swap(bytes);  // the file's bytes are parsed: not held beside the tensors
  return import_parsed(model, dir.empty() ? "." : dir, path, opts);
}

std::map<std::string, Shape> parse_shapes_flag(const std::string& spec, std::string_view flag) {
  std::map<std::string, Shape> r;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0) fail("{}: '{}' should look like name:1x3x224x224", flag, item);
    std::string name = item.substr(0, colon), dims = item.substr(colon + 1);
    // The same input twice would silently keep the last shape.
    if (r.count(name)) fail("{}: input \"{}\" is given twice in '{}'", flag, name, spec);
    Shape s;
    // Split on every 'x' by hand: getline drops a trailing empty piece, so
    // "1x3x224x" (a dimension left out) would read as rank 3.
    std::vector<std::string> pieces;
    for (size_t start = 0; !dims.empty();) {
      size_t x = dims.find('x', start);
      pieces.push_back(dims.substr(start, x == std::string::npos ? std::string::npos : x - start));
      if (x == std::string::npos) break;
      start = x + 1;
    }
    for (const std::string& d : pieces) {
      try {
        size_t used = 0;
        long long v = std::stoll(d, &used);
        if (used != d.size() || v < 0) throw std::invalid_argument("");
        s.push_back(v);
      } catch (...) {
        fail("{}: '{}' in '{}' is not a dimension", flag, d, item);
      }
    }
    r[name] = s;
  }
  return r;
}

}  // namespace kiln
