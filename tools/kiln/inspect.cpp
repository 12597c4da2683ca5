#include "tools/kiln/inspect.h"

#include <CLI/CLI.hpp>
#include <onnx/onnx_pb.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "frontend/tensor_proto.h"
#include "compiler/import_checked.h"
#include "compiler/plan_writer.h"
#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/string_values.h"
#include "tools/kiln/cli_checks.h"
#include "tools/kiln/inspect_plan.h"
#include "tools/kiln/model_stdin.h"
#include "tools/kiln/output_paths.h"
#include "compiler/plan_sniff.h"

namespace kiln {

namespace {

onnx::ModelProto read_model_proto(const ModelSource& src) {
  onnx::ModelProto m;
  if (src.path.empty()) {  // standard input (tools/kiln/model_stdin.h)
    if (src.bytes.empty()) fail("{}: the file is empty, not an ONNX model", src.display_name);
    if (!m.ParseFromString(src.bytes)) fail("{}: not a valid ONNX model (protobuf parse failed)", src.display_name);
    return m;
  }
  const std::string& path = src.path;
  reject_directory(path, "an ONNX model or kiln plan file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open file", path);
  // An empty file parses as an empty model: say what it is, as compile does.
  if (in.peek() == std::ifstream::traits_type::eof()) fail("{}: the file is empty, not an ONNX model", path);
  if (!m.ParseFromIstream(&in)) fail("{}: not a valid ONNX model (protobuf parse failed)", path);
  return m;
}

std::string elem_type_name(int t) {
  try {
    return std::string(dtype_name(dtype_from_onnx(t, "")));
  } catch (const Error&) {
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(t));
  }
}

struct IoInfo {
  std::string name, dtype;
  std::vector<std::string> dims;  // numbers, dim_params, or "?"
  bool fixed = true;
};

IoInfo io_info(const onnx::ValueInfoProto& vi) {
  IoInfo r{vi.name(), "?", {}, true};
  if (!vi.type().has_tensor_type()) {
    r.dtype = "non-tensor";
    r.fixed = false;
    return r;
  }
  const auto& tt = vi.type().tensor_type();
  r.dtype = elem_type_name(tt.elem_type());
  if (!tt.has_shape()) {
    r.fixed = false;
    return r;
  }
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0) r.dims.push_back(std::to_string(d.dim_value()));
    else {
      r.dims.push_back(d.has_dim_param() && !d.dim_param().empty() ? d.dim_param() : "?");
      r.fixed = false;
    }
  }
  return r;
}

std::string shape_str(const IoInfo& io) {
  if (io.dims.empty() && !io.fixed) return "[unknown rank]";
  return fmt::format("[{}]", fmt::join(io.dims, "x"));
}

// Bytes of an initializer from its dims and type (external data included),
// without decoding it.
int64_t initializer_bytes(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  try {
    return n * static_cast<int64_t>(dtype_size(dtype_from_onnx(t.data_type(), "")));
  } catch (const Error&) {
    return 0;  // strings and other types kiln does not read
  }
}

struct Checked {
  ImportResult result;
  std::vector<ImportProblem> problems;
  std::vector<std::string> free_dims_note;  // inputs whose free dims were taken as 1
  std::string model_error;                  // a problem with the model as a whole
  bool model_error_unsupported = false;
};

// The collecting import. Inputs with free dims that --shapes does not fix are
// checked with those dims set to 1 when `fill_free_dims` (inspect).
Checked check_model(const ModelSource& src, const onnx::ModelProto* proto, ImportOptions io, bool fill_free_dims) {
  Checked c;
  if (fill_free_dims && proto) {
    std::set<std::string> inits;
    for (const auto& t : proto->graph().initializer()) inits.insert(t.name());
    for (const auto& vi : proto->graph().input()) {
      if (inits.count(vi.name()) || io.input_shapes.count(vi.name())) continue;
      IoInfo info = io_info(vi);
      if (info.fixed || info.dims.empty()) continue;
      Shape s;
      for (const auto& d : info.dims) s.push_back(std::isdigit(static_cast<unsigned char>(d[0])) ? std::stoll(d) : 1);
      io.input_shapes[vi.name()] = s;
      c.free_dims_note.push_back(vi.name());
    }
  }
  CollectedImport ci = import_collecting(src, io);
  c.result = std::move(ci.result);
  c.problems = std::move(ci.problems);
  c.model_error = std::move(ci.model_error);
  c.model_error_unsupported = ci.model_error_unsupported;
  return c;
}

}  // namespace

CLI::App* register_inspect(CLI::App& app, InspectOptions& o) {
  auto* cmd = app.add_subcommand(
      "inspect",
      "Describe an ONNX model and list every node kiln cannot compile (no compilation; exit 1 if any), or describe "
      "a compiled plan (archs, kernels, launches, memory plan, I/O)");
  cmd->add_option("model,--onnx,--loadEngine", o.model,
                  "Model file (.onnx) or compiled plan (.plan); trtexec's --onnx=FILE / --loadEngine=FILE name it too")
      ->required()
      ->group("Model");
  cmd->add_option("--shapes", o.shapes,
                  "Fix input shapes: name:1x3x224x224,...; repeatable (free dims are checked as 1)")
      ->join(',')
      ->group("Model");
  cmd->add_option("--json", o.json_path, "Also write the report as JSON")->group("Reporting");
  cmd->add_flag("--perf", o.perf,
                "Plans: estimate each launch's time on a GPU (kiln's performance model, docs/performance.md) "
                "instead of listing the plan; --json then also holds a \"perf\" object")
      ->group("Performance model");
  cmd->add_option("--gpu", o.gpu, "The GPU --perf models: h100, h200, a100 or l4 (default: the plan's arch)")
      ->group("Performance model");
  return cmd;
}

int run_inspect(const InspectOptions& o) {
  if (!is_stdin_arg(o.model) && is_plan_file(o.model)) return run_inspect_plan(o);
  const ModelSource src = model_source_of(o.model);  // "-": standard input
  const std::string& model = src.display_name;
  if (o.perf || !o.gpu.empty())
    fail("{}: --perf and --gpu model a compiled plan; compile it first (kiln compile {} --target sm_90 -o M.plan)",
         model, o.model);
  auto t0 = std::chrono::steady_clock::now();
  onnx::ModelProto m = read_model_proto(src);
  const auto& g = m.graph();
  // A --shapes typo is found before anything is printed.
  ImportOptions io;
  io.input_shapes = parse_shapes_flag(o.shapes);
  {
    std::set<std::string> inits;
    for (const auto& t : g.initializer()) inits.insert(t.name());
    std::vector<std::string> inputs;
    for (const auto& vi : g.input())
      if (!inits.count(vi.name())) inputs.push_back(vi.name());
    check_shapes_names(io.input_shapes, inputs, model);
  }
  nlohmann::json j;
  j["model"] = model;
  j["ir_version"] = m.ir_version();
  j["producer"] = m.producer_name() + (m.producer_version().empty() ? "" : " " + m.producer_version());

  std::cout << fmt::format("model: {} (ONNX IR version {}{})\n", model, m.ir_version(),
                           m.producer_name().empty() ? "" : ", from " + j["producer"].get<std::string>());
  std::vector<std::string> opsets;
  for (const auto& op : m.opset_import()) {
    std::string domain = op.domain().empty() ? "ai.onnx" : op.domain();
    opsets.push_back(fmt::format("{} {}", domain, op.version()));
    j["opsets"][domain] = op.version();
  }
  std::cout << fmt::format("opsets: {}\n", fmt::join(opsets, ", "));

  std::set<std::string> inits;
  int64_t wbytes = 0;
  for (const auto& t : g.initializer()) {
    inits.insert(t.name());
    wbytes += initializer_bytes(t);
  }
  auto print_io = [&](const char* title, const auto& list, const char* key) {
    std::cout << title << ":\n";
    j[key] = nlohmann::json::array();
    for (const auto& vi : list) {
      if (inits.count(vi.name())) continue;  // old models declare initializers as inputs
      IoInfo io = io_info(vi);
      std::cout << fmt::format("  {:<24} {:<5} {}\n", io.name, io.dtype, shape_str(io));
      j[key].push_back({{"name", io.name}, {"dtype", io.dtype}, {"shape", io.dims}});
    }
  };
  print_io("inputs", g.input(), "inputs");
  print_io("outputs", g.output(), "outputs");
  std::cout << fmt::format("weights: {} initializers, {} bytes ({:.1f} MiB)\n", g.initializer_size(), wbytes,
                           double(wbytes) / (1 << 20));
  j["weight_bytes"] = wbytes;

  std::map<std::string, int> hist;
  for (const auto& n : g.node())
    hist[(n.domain().empty() || n.domain() == "ai.onnx" ? "" : n.domain() + "::") + n.op_type()]++;
  std::vector<std::pair<std::string, int>> ops(hist.begin(), hist.end());
  std::stable_sort(ops.begin(), ops.end(), [](auto& a, auto& b) { return a.second > b.second; });
  std::cout << fmt::format("nodes: {} ({} op types)\n", g.node_size(), ops.size());
  for (const auto& [op, n] : ops) {
    std::cout << fmt::format("  {:<24} {}\n", op, n);
    j["ops"][op] = n;
  }

  Checked c = check_model(src, &m, io, true);
  if (!c.free_dims_note.empty())
    std::cout << fmt::format("note: free dims of {} checked as 1 (set them with --shapes)\n",
                             fmt::join(c.free_dims_note, ", "));
  j["unsupported"] = nlohmann::json::array();
  for (const ImportProblem& p : c.problems)
    j["unsupported"].push_back({{"node", p.node},
                                {"op", p.op},
                                {"kind", p.unsupported ? "unsupported" : "invalid"},
                                {"detail", problem_detail(p)}});
  if (!c.model_error.empty()) j["model_error"] = c.model_error;
  // String tensors import, but no plan target takes them (ir/string_values.h):
  // a model kiln compile refuses is not "supported" here either.
  std::optional<std::string> strings;
  if (c.result.graph) strings = first_string_value(*c.result.graph);
  if (strings) j["cpu_backends_only"] = fmt::format("{} holds {}", *strings, kStringsCpuOnly);
  // A value listed twice in graph.output: no plan takes it either
  // (compiler/plan_writer.h); ref and sim return it twice.
  std::string twice;
  if (c.result.graph) {
    try {
      refuse_duplicate_output_names(*c.result.graph, model);
    } catch (const Error& e) {
      twice = e.what();
      if (!strings) j["cpu_backends_only"] = twice;
    }
  }
  bool ok = c.problems.empty() && c.model_error.empty() && !strings && twice.empty();
  j["supported"] = ok;
  if (!c.model_error.empty()) std::cout << "model problem: " << c.model_error << "\n";
  if (strings)
    std::cout << fmt::format(
        "coverage: {} holds {}: no plan target takes this model (run it with kiln run --backend ref)\n", *strings,
        kStringsCpuOnly);
  if (!twice.empty())
    std::cout << fmt::format("coverage: no plan target takes this model (kiln run --backend ref or sim runs it): {}\n",
                             twice);
  if (c.problems.empty() && c.model_error.empty()) {
    if (!strings && twice.empty()) std::cout << "coverage: every node is supported\n";
  } else if (!c.problems.empty()) {
    std::cout << fmt::format("coverage: {} of {} nodes cannot be compiled:\n", c.problems.size(), g.node_size());
    for (const ImportProblem& p : c.problems)
      std::cout << fmt::format("  node \"{}\" ({}){}: {}\n", p.node, p.op, p.unsupported ? "" : " [invalid]",
                               problem_detail(p));
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("inspected in {:.1f} ms\n", ms);
  if (!o.json_path.empty()) {
    write_text_file(o.json_path, j.dump(2) + "\n");
  }
  return ok ? 0 : 1;
}

}  // namespace kiln
