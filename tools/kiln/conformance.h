// The ONNX backend-test runner behind `kiln conformance`: runs test folders
// (model.onnx + test_data_set_N/{input,output}_K.pb), each in its own forked
// process so a crash ends only that test, and reports pass / fail /
// unsupported / crash per suite, with optional JSON.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "frontend/onnx_import.h"
#include "tools/kiln/compare.h"
#include "compiler/compile.h"

namespace kiln {

struct ConformanceOptions {
  std::string backend = "ref";
  CompileOptions compile;          // the pipeline each test goes through (--no-opt: none)
  std::vector<std::string> paths;  // test dirs or folders of them; empty: Debian's suites
  std::string json_path;
  std::string filter;              // substring a test name must contain
  int jobs = 0;                    // 0: number of CPUs
  int timeout_s = 300;             // per test
  bool verbose = false;            // print every non-passing test
  bool show_errors = false;        // print every float output's max abs/rel error, passing or not
  // Gates for CI, e.g. "node:70" or "pytorch-converted+pytorch-operator+simple:90":
  // the suites' combined pass rate must reach the percentage. When any gate
  // is given, the exit code says whether all gates held and nothing crashed,
  // instead of whether every test passed.
  std::vector<std::string> require_pass;
  // A JSON file from an earlier run (e.g. --no-opt): every test that passed
  // there must pass here, or the run fails naming the regressions.
  std::string baseline_json;
  // Overrides the per-dtype tolerance for floating outputs: "atol,rtol".
  // Without it, float outputs are compared with run_tolerance(output dtype,
  // --precision): an fp16/bf16 run with FP16/BF16 tolerances (docs/precision.md).
  // Whole-model suites use a documented looser bound (docs/testing.md).
  std::string tolerance;
  // --nvrtc-check sm_80,sm_90: every test's kernels are also emitted and
  // compiled with NVRTC for these archs (a failure fails the test), and the
  // run ends with the kernel count, the largest register count and any spills.
  std::vector<std::string> nvrtc_archs;
};

// Returns the process exit code: 0 when no test failed or crashed (or, with
// require_pass, when every gate held and nothing crashed).
int run_conformance(const ConformanceOptions& opts);

// Imports the model of one test folder with the inputs of one data set
// (test_data_set_N) as known inputs; fills `feed` with the runtime inputs and
// `expected` with the expected outputs when given.
ImportResult import_conformance_case(const std::string& dir, const std::string& data_set,
                                     std::map<std::string, Tensor>* feed = nullptr,
                                     std::vector<Tensor>* expected = nullptr);
// Every test folder under the given paths (a test folder or a folder of them).
std::vector<std::string> conformance_test_dirs(const std::vector<std::string>& paths);

// Where Debian's libonnx-testdata puts the suites.
inline constexpr const char* kDebianTestData = "/usr/share/libonnx-testdata/data";

}  // namespace kiln
