#include "tools/kiln/compare_ort.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/error.h"
#include "backends/compare.h"
#include "ir/tensor_io.h"

extern char** environ;

namespace kiln {

namespace fs = std::filesystem;

void add_compare_flag(CLI::App* run, std::string& compare) {
  run->add_option("--compare", compare,
                  "ort: run the ONNX model in ONNX Runtime on the same inputs and compare each output (exit 1 on "
                  "a mismatch; needs a Python with onnxruntime: $KILN_PYTHON, the project's .venv or python3)")
      ->check(CLI::IsMember({"ort"}))
      ->group("Runtime");
}

namespace {

// Runs argv, stdout and stderr into `log`; the exit status (-1: not started).
int spawn(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  int r = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (r != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// A fresh private folder for the exchanged .npy files, removed at scope end.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kiln-ort-XXXXXX").string();
    if (!mkdtemp(tmpl.data()))
      fail("--compare ort: cannot create a temporary folder in {}", fs::temp_directory_path().string());
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// argv: MODEL DIR IN_NAME... ; inputs DIR/in_K.npy, outputs DIR/out_K.npy and
// their names in DIR/outputs.txt (names may hold any byte but a newline).
constexpr const char* kRunOrt = R"(import os, sys
import numpy as np
import onnxruntime as ort
model, d, names = sys.argv[1], sys.argv[2], sys.argv[3:]
opts = ort.SessionOptions()
opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
s = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
feed = {n: np.load(os.path.join(d, "in_%d.npy" % k)) for k, n in enumerate(names)}
outs = s.run(None, feed)
with open(os.path.join(d, "outputs.txt"), "w") as f:
    for k, (o, v) in enumerate(zip(s.get_outputs(), outs)):
        np.save(os.path.join(d, "out_%d.npy" % k), np.asarray(v, order="C"))  # keeps a 0-d result 0-d
        f.write(o.name + "\n")
)";

}  // namespace

std::string ort_python() {
  std::string python;
  if (const char* env = std::getenv("KILN_PYTHON"); env && *env) {
    python = env;
  } else {
#ifdef KILN_SOURCE_VENV_PYTHON
    if (fs::exists(KILN_SOURCE_VENV_PYTHON)) python = KILN_SOURCE_VENV_PYTHON;
#endif
    if (python.empty()) python = "python3";
  }
  TempDir t;
  int r = spawn({python, "-c", "import numpy, onnxruntime"}, t.path / "probe.log");
  if (r == -1)
    fail("--compare ort: cannot start Python '{}' (set KILN_PYTHON to a Python with numpy and onnxruntime)", python);
  if (r != 0) {
    std::string why = slurp(t.path / "probe.log");  // the traceback's last line: "ModuleNotFoundError: ..."
    fail(
        "--compare ort: ONNX Runtime is not available in Python '{}' ({}); install it there (pip install "
        "onnxruntime) or set KILN_PYTHON to a Python that has it",
        python, why.substr(why.rfind('\n') + 1));
  }
  return python;
}

bool compare_with_ort(const std::string& python, const std::string& model, const std::map<std::string, Tensor>& feed,
                      const std::vector<std::pair<std::string, Tensor>>& outputs, const std::string& precision) {
  TempDir t;
  std::vector<std::string> args = {python, "-c", kRunOrt, model, t.path.string()};
  int k = 0;
  for (const auto& [name, tensor] : feed) {
    write_npy((t.path / fmt::format("in_{}.npy", k++)).string(), tensor);
    args.push_back(name);
  }
  int r = spawn(args, t.path / "ort.log");
  if (r != 0)
    fail("{}: --compare ort: ONNX Runtime failed on the model ({}):\n{}", model,
         r == -1 ? "did not finish" : fmt::format("exit {}", r), slurp(t.path / "ort.log"));
  std::vector<std::string> names;
  {
    std::ifstream in(t.path / "outputs.txt");
    for (std::string line; std::getline(in, line);) names.push_back(line);
  }
  std::cout << fmt::format("compare with ONNX Runtime (CPU, no graph optimisations; Python {}), precision {}:\n",
                           python, precision);
  bool all = true;
  for (const auto& [name, got] : outputs) {
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) fail("{}: --compare ort: ONNX Runtime has no output \"{}\"", model, name);
    Tensor want = read_npy((t.path / fmt::format("out_{}.npy", it - names.begin())).string());
    Tolerance tol = run_tolerance(want.dtype(), precision);
    if (is_float(want.dtype())) tol = {std::max(tol.atol, 1e-4), std::max(tol.rtol, 1e-3)};
    std::string diff = got.dtype() == want.dtype() && got.shape() == want.shape()
                           ? compare_tensors(got, want, tol)
                           : fmt::format("kiln gives {}, ONNX Runtime {}", got.type().str(), want.type().str());
    bool ok = diff.empty();
    all &= ok;
    std::string errs = "exact";
    if (is_float(want.dtype()) && got.dtype() == want.dtype() && got.shape() == want.shape()) {
      ErrorStats e = error_stats(got, want, tol);
      errs = fmt::format("max abs {:.3g}, max rel {:.3g} (atol {:g}, rtol {:g})", e.max_abs, e.max_rel, tol.atol,
                         tol.rtol);
    }
    std::cout << fmt::format("  {} {}: {}{}\n", ok ? "PASS" : "FAIL", name, errs, ok ? "" : " -- " + diff);
  }
  std::cout << (all ? "compare: PASS (every output within tolerance of ONNX Runtime)\n"
                    : "compare: FAIL (outputs differ from ONNX Runtime)\n");
  return all;
}

}  // namespace kiln
