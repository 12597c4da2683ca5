// sm90_kernel_coverage: every graph of the ONNX conformance suites (and of
// any folder given: the onnx package's own suite, the model zoo) is compiled
// for sm_90 through the default pipeline, and every node of the result must
// get a kernel from codegen (issue 15: fusion and codegen agree). Prints
// graphs compiled, nodes, kernels; fails naming each graph with a node
// without a kernel, or whose kernels codegen refused to emit.
//
// Kernel text is emitted, not compiled with NVRTC (--nvrtc compiles too,
// through the kernel cache): the question here is whether an emitter takes
// every node, which emission answers in full; whether NVRTC accepts the
// emitters' text is what conformance_sim's --nvrtc-check and the model
// tests prove, and NVRTC on every suite graph would cost tens of minutes on
// two cores with a cold cache.
//
// Plain .onnx files with static shapes count too (a file, or a folder of
// them such as the onnx package's "light" models: GoogLeNet, Inception v2,
// DenseNet, ...).
//
// Graphs kiln says plainly it does not handle (kiln::Unsupported from the
// frontend or the passes: training ops, strings, sequences, control flow)
// are counted and listed with -v, not failed: they run nowhere, and the
// conformance tests gate them. Any other error of the sm_90 pipeline fails. Folders: arguments, else Debian's suites;
// `--suite onnx-1.23` (or debian-1.12) adds a suite's four folders, found as
// `kiln conformance --suite` finds them (run time, not configure time, so a
// suite generated after cmake ran counts, and a missing one is an error);
// $KILN_COVERAGE_DIRS (':'-separated) adds more.
//
// `--expect-failures FILE` names graphs known to fail, one `graph | text` a
// line (graph: the test folder or .onnx file with its parent folder, e.g.
// `node/test_x`; text: part of the failure message). The run is held to it
// strictly both ways, as the zoo's list is (tests/models/zoo/run_zoo.py): an
// unlisted failure fails, and so does a listed graph that passes, fails with
// another message or is not in the run, so the list stays exact as defects
// are fixed. Listed failures are printed every run, never hidden.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/kernel_build.h"
#include "compiler/compile.h"
#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/string_values.h"
#include "conformance/conformance.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

struct Counts {
  int graphs = 0, rejected = 0;
  long nodes = 0, kernels = 0;
  // Failure messages by graph (label()), in the order met.
  std::vector<std::pair<std::string, std::string>> failures;
};

// A graph's name in messages and in the expected-failures list: its test
// folder (or .onnx file) with the parent folder, e.g. `node/test_abs`.
std::string label(const std::string& item) {
  fs::path p(item);
  return (p.parent_path().filename() / p.filename()).string();
}

// `graph | text` lines (`#` starts a comment); a malformed line is an error.
std::map<std::string, std::string> read_expected(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot read the expected-failures list", path));
  std::map<std::string, std::string> rows;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    auto trim = [](std::string x) {
      x.erase(0, x.find_first_not_of(" \t\r"));
      x.erase(x.find_last_not_of(" \t\r") + 1);
      return x;
    };
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    size_t bar = line.find('|');
    std::string graph = bar == std::string::npos ? "" : trim(line.substr(0, bar));
    std::string text = bar == std::string::npos ? "" : trim(line.substr(bar + 1));
    if (graph.empty() || text.empty() || graph.find(' ') != std::string::npos)
      throw Error(fmt::format("{}:{}: expected `graph | part of its failure message`: {}", path, n, line));
    if (!rows.emplace(graph, text).second) throw Error(fmt::format("{}:{}: {} is listed twice", path, n, graph));
  }
  return rows;
}

std::string first_data_set(const std::string& dir) {
  std::vector<std::string> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path().filename().string());
  std::sort(sets.begin(), sets.end());
  return sets.empty() ? "" : sets.front();
}

// `item` is a test folder (model.onnx + test_data_set_N, whose inputs fix
// the shapes) or a plain .onnx file with static shapes (the onnx package's
// "light" models).
void cover(const std::string& item, const codegen::KernelBuildOptions& ko, bool nvrtc, bool verbose, Counts& c) {
  const bool file = fs::is_regular_file(item);
  const std::string model = file ? item : item + "/model.onnx";
  auto fail = [&](std::string kind, const std::string& what) { c.failures.emplace_back(label(item), kind + what); };
  std::unique_ptr<Graph> g;
  try {
    ImportResult imp = file ? import_onnx_file(item) : import_conformance_case(item, first_data_set(item));
    CompileOptions co;
    co.pass.target = "sm_90";
    co.pipeline.source = model;
    compile_graph(*imp.graph, co);
    refuse_string_tensors(*imp.graph, model, "in an sm_90 plan");  // reference backend only, as compile_model says
    g = std::move(imp.graph);
  } catch (const Unsupported& e) {
    ++c.rejected;
    if (verbose) fmt::print("rejected before codegen: {}: {}\n", model, e.what());
    return;
  } catch (const Error& e) {
    // Not "kiln does not do this" but a failure of the sm_90 pipeline itself.
    ++c.graphs;
    // kiln's errors name the model already; name it here only when not.
    std::string what = e.what();
    fail("PIPELINE FAILED: ", (what.rfind(model, 0) == 0 ? "" : model + ": ") + what);
    return;
  } catch (const std::exception& e) {
    // A broken check inside kiln (an internal error): counted, not fatal, so
    // the run still reports every other graph.
    ++c.graphs;
    fail("INTERNAL ERROR: ", model + ": " + e.what());
    return;
  }
  try {
    codegen::GraphKernels gk = codegen::build_graph_kernels(*g, ko, nvrtc);
    ++c.graphs;
    c.nodes += static_cast<long>(g->num_nodes());
    for (const codegen::NodeLaunches& nl : gk.launches) c.kernels += static_cast<long>(nl.kernels.size());
    std::string missing;
    for (const std::string& m : gk.missing) missing += (missing.empty() ? "" : "; ") + m;
    if (!missing.empty()) fail("NO KERNEL: ", model + ": " + missing);
  } catch (const Error& e) {
    ++c.graphs;
    fail("CODEGEN REFUSED: ", e.what());
  } catch (const std::exception& e) {
    ++c.graphs;
    fail("INTERNAL ERROR in codegen: ", model + ": " + e.what());
  }
}

// Test folders under `paths` (conformance_test_dirs), then .onnx files given
// or lying directly in a given folder that holds no test folders.
std::vector<std::string> items(const std::vector<std::string>& paths) {
  std::vector<std::string> out, folders;
  for (const std::string& p : paths) {
    if (fs::is_regular_file(p)) {
      out.push_back(p);
      continue;
    }
    // conformance_test_dirs refuses a folder without test folders (a run of
    // 0 tests), so ask first: the onnx package's "light" models are loose
    // .onnx files, not test folders.
    bool has_tests = fs::exists(fs::path(p) / "model.onnx");
    for (const auto& e : fs::directory_iterator(p))
      has_tests = has_tests || (e.is_directory() && fs::exists(e.path() / "model.onnx"));
    if (has_tests) {
      std::vector<std::string> dirs = conformance_test_dirs({p});
      folders.insert(folders.end(), dirs.begin(), dirs.end());
      continue;
    }
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(p))
      if (e.is_regular_file() && e.path().extension() == ".onnx") files.push_back(e.path().string());
    if (files.empty()) fail("'{}' holds neither test folders nor .onnx files", p);
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  folders.insert(folders.end(), out.begin(), out.end());
  return folders;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths, suites;
  std::string expect_path;
  bool nvrtc = false, verbose = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--nvrtc") nvrtc = true;
    else if (a == "-v") verbose = true;
    else if (a == "--suite" && i + 1 < argc) suites.push_back(argv[++i]);
    else if (a == "--expect-failures" && i + 1 < argc) expect_path = argv[++i];
    else paths.push_back(a);
  }
  std::map<std::string, std::string> expected;
  try {
    for (const std::string& suite : suites)
      for (const std::string& p : conformance_suite_paths(suite)) paths.push_back(p);
    if (!expect_path.empty()) expected = read_expected(expect_path);
  } catch (const Error& e) {
    fmt::print(stderr, "sm90_kernel_coverage: {}\n", e.what());
    return 1;
  }
  if (paths.empty())  // the four suites `kiln conformance` runs
    for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"})
      paths.push_back((fs::path(kDebianTestData) / suite).string());
  if (const char* extra = std::getenv("KILN_COVERAGE_DIRS")) {
    std::string s = extra;
    for (size_t at = 0; at <= s.size();) {
      size_t end = s.find(':', at);
      if (end == std::string::npos) end = s.size();
      if (end > at) paths.push_back(s.substr(at, end - at));
      at = end + 1;
    }
  }
  for (const std::string& p : paths)
    if (!fs::exists(p)) {
      fmt::print(stderr, "sm90_kernel_coverage: {}: no such folder\n", p);
      return 1;
    }
  codegen::KernelBuildOptions ko;
  ko.arch = "sm_90";
  Counts c;
  std::set<std::string> seen;
  try {
    for (const std::string& item : items(paths)) {
      seen.insert(label(item));
      cover(item, ko, nvrtc, verbose, c);
    }
  } catch (const Error& e) {
    fmt::print(stderr, "sm90_kernel_coverage: {}\n", e.what());
    return 1;
  }
  // Every failure is printed; those the list expects (with their message) do
  // not fail the run, anything else about the list does.
  int unexpected = 0, as_listed = 0;
  std::set<std::string> failed;
  for (const auto& [graph, message] : c.failures) {
    failed.insert(graph);
    auto it = expected.find(graph);
    if (it != expected.end() && message.find(it->second) != std::string::npos) {
      ++as_listed;
      fmt::print("expected failure ({}): {}\n", expect_path, message);
    } else {
      ++unexpected;
      if (it == expected.end()) fmt::print("{}\n", message);
      else fmt::print("{}\n  FAILS DIFFERENTLY: {} expects \"{}\"\n", message, expect_path, it->second);
    }
  }
  for (const auto& [graph, text] : expected) {
    if (failed.count(graph)) continue;
    ++unexpected;
    if (seen.count(graph))
      fmt::print("UNEXPECTED PASS: {} is listed in {} (\"{}\") but did not fail; remove its line\n", graph, expect_path,
                 text);
    else fmt::print("NOT IN THE RUN: {} is listed in {} but no such graph was covered\n", graph, expect_path);
  }
  std::string listed = expect_path.empty() ? "" : fmt::format(", {} of them listed in {}", as_listed, expect_path);
  fmt::print(
      "sm90_kernel_coverage: {} graphs compiled for sm_90 ({} rejected before codegen), {} nodes, {} kernels{}; "
      "{} graphs failed (a node without a kernel, or an error of the sm_90 pipeline){}; {} problems\n",
      c.graphs, c.rejected, c.nodes, c.kernels, nvrtc ? " (NVRTC-compiled)" : " (emitted)", c.failures.size(), listed,
      unexpected);
  return unexpected == 0 && c.graphs > 0 ? 0 : 1;
}
