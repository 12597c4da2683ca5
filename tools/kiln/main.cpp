// kiln: the command-line driver. Subcommands:
//   dump-ir MODEL.onnx        print the imported IR
//   opt FILE.kir              parse IR text, verify, print (passes come with the passes issue)
//   run MODEL.onnx            import and run on a backend with random or given inputs
//   conformance [PATH...]     run ONNX backend tests
// Exit codes: 0 ok, 1 user error (bad model, flag, unsupported op), 2 internal error.
#include <CLI/CLI.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "tools/kiln/backends.h"
#include "tools/kiln/conformance.h"
#include "tools/kiln/docs_gen.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) kiln::fail("{}: cannot open file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Deterministic pseudo-random inputs so `kiln run` needs no data files.
kiln::Tensor random_tensor(const kiln::TensorType& t, uint64_t seed) {
  kiln::Tensor r(t.dtype, t.shape);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < r.numel(); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    double u = double(s >> 11) / double(1ull << 53);
    if (kiln::is_float(t.dtype)) r.set_double(i, u * 2 - 1);
    else if (t.dtype == kiln::DType::Bool) r.set_int(i, u < 0.5);
    else r.set_int(i, int64_t(u * 10));
  }
  return r;
}

uint64_t checksum(const kiln::Tensor& t) {
  // FNV-1a over the bytes: a quick fingerprint to compare runs.
  uint64_t h = 1469598103934665603ull;
  auto b = t.bytes();
  for (uint8_t c : b) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: an ONNX graph compiler and runtime"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");

  std::string model, shapes_flag;
  auto* dump = app.add_subcommand("dump-ir", "Print the IR of an imported ONNX model");
  dump->add_option("model", model, "Model file (.onnx)")->required();
  dump->add_option("--shapes", shapes_flag, "Fix input shapes: name:1x3x224x224,...");

  std::string kir;
  auto* opt = app.add_subcommand("opt", "Read IR text, verify it and print it back");
  opt->add_option("file", kir, "IR text file (.kir), - for stdin")->required();
  bool split = false;
  opt->add_flag("--split-input-file", split, "Treat '// -----' lines as separators between graphs");

  std::string backend = "ref";
  int iterations = 1;
  auto* run = app.add_subcommand("run", "Import a model and run it on a backend with random inputs");
  run->add_option("model", model, "Model file (.onnx)")->required();
  run->add_option("--shapes", shapes_flag, "Fix input shapes: name:1x3x224x224,...");
  run->add_option("--backend", backend, "Backend: ref");
  run->add_option("--iterations", iterations, "Runs to time");

  kiln::ConformanceOptions copts;
  auto* conf = app.add_subcommand("conformance", "Run ONNX backend tests (model.onnx + test_data_set_N)");
  conf->add_option("paths", copts.paths, "Test folders or folders of them (default: Debian's libonnx-testdata)");
  conf->add_option("--backend", copts.backend, "Backend: ref");
  conf->add_option("--json", copts.json_path, "Write results as JSON");
  conf->add_option("--filter", copts.filter, "Only tests whose name contains this");
  conf->add_option("-j,--jobs", copts.jobs, "Tests run at once (default: CPUs)");
  conf->add_option("--timeout", copts.timeout_s, "Seconds per test before it counts as a crash");
  conf->add_flag("-v,--verbose", copts.verbose, "Print every test that does not pass");
  conf->add_option("--require-pass", copts.require_pass,
                   "Gate: SUITE[+SUITE...]:PERCENT must pass (exit code then reflects the gates)");

  std::string docs_out, docs_json;
  auto* docs = app.add_subcommand("gen-op-docs", "Write docs/ops.md from the op registry and a conformance run");
  docs->add_option("out", docs_out, "Output Markdown file")->required();
  docs->add_option("--conformance", docs_json, "JSON from `kiln conformance --json` for the status columns");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }

  try {
    if (*dump) {
      kiln::ImportOptions io;
      io.input_shapes = kiln::parse_shapes_flag(shapes_flag);
      auto r = kiln::import_onnx_file(model, io);
      std::cout << kiln::print_graph(*r.graph);
    } else if (*opt) {
      std::string text = kir == "-" ? std::string(std::istreambuf_iterator<char>(std::cin), {}) : read_file(kir);
      // With --split-input-file each piece is parsed, verified and printed on
      // its own; an error in one is reported and the others still run (as
      // mlir-opt does), so one FileCheck file can hold many error cases.
      std::vector<kiln::InputChunk> chunks;
      if (split) chunks = kiln::split_input_file(text);
      else chunks.push_back({text, 1});
      bool failed = false;
      for (size_t i = 0; i < chunks.size(); ++i) {
        if (i) std::cout << "// -----\n";
        try {
          auto g = kiln::parse_graph(chunks[i].text, kir, chunks[i].first_line);
          try {
            kiln::verify_graph(*g, kiln::op_registry());
          } catch (const kiln::Error& e) {
            kiln::fail("{}: graph @{}: {}", kir, g->name(), e.what());
          }
          std::cout << kiln::print_graph(*g);
        } catch (const kiln::Error& e) {
          if (!split) throw;
          std::cout.flush();
          std::cerr << "error: " << e.what() << "\n";
          failed = true;
        }
      }
      if (failed) return 1;
    } else if (*run) {
      kiln::ImportOptions io;
      io.input_shapes = kiln::parse_shapes_flag(shapes_flag);
      auto t0 = std::chrono::steady_clock::now();
      auto r = kiln::import_onnx_file(model, io);
      auto t1 = std::chrono::steady_clock::now();
      std::map<std::string, kiln::Tensor> feed;
      uint64_t seed = 1;
      for (kiln::Value* in : r.graph->inputs()) feed[in->name()] = random_tensor(in->type(), seed++);
      std::vector<kiln::Tensor> outs;
      double best = 1e30;
      for (int i = 0; i < std::max(1, iterations); ++i) {
        auto a = std::chrono::steady_clock::now();
        outs = kiln::run_on_backend(backend, *r.graph, feed);
        best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
      }
      std::cout << fmt::format("backend: {} (CPU reference)\n", backend);
      std::cout << fmt::format("import: {:.1f} ms, {} nodes\n",
                               std::chrono::duration<double, std::milli>(t1 - t0).count(), r.graph->num_nodes());
      for (size_t i = 0; i < outs.size(); ++i)
        std::cout << fmt::format("output {} \"{}\": {} checksum {:016x}\n", i, r.graph->outputs()[i]->name(),
                                 outs[i].type().str(), checksum(outs[i]));
      std::cout << fmt::format("run: {:.2f} ms (best of {})\n", best, std::max(1, iterations));
    } else if (*conf) {
      return kiln::run_conformance(copts);
    } else if (*docs) {
      kiln::write_op_docs(docs_out, docs_json);
    }
  } catch (const kiln::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
