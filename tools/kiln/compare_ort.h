// `kiln run MODEL.onnx --compare ort`: the same inputs through ONNX Runtime
// (in a Python that has onnxruntime), each output's max abs / rel error
// against kiln's and pass/fail at the run's tolerance. See docs/cli.md.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor.h"

namespace CLI {
class App;
}

namespace kiln {

// --compare ort on `run` (only "ort" is accepted).
void add_compare_flag(CLI::App* run, std::string& compare);

// The Python that runs ONNX Runtime: $KILN_PYTHON, else the project's venv
// (.venv/bin/python in the source tree kiln was built from, where the tests
// find it), else python3 on the PATH. Checked up front (before any compile):
// kiln::Error naming the Python and how to fix it when onnxruntime does not
// import.
std::string ort_python();

// Runs `model` in ONNX Runtime (CPU, all graph optimisations off) on `feed`
// and prints one line per output: max abs and rel error of kiln's `outputs`
// and PASS/FAIL at the looser of the whole-model bound (atol 1e-4, rtol 1e-3,
// docs/testing.md) and the output's tolerance at `precision`
// (docs/precision.md); integers and bools exactly. Returns false on any
// mismatch (the command exits 1).
bool compare_with_ort(const std::string& python, const std::string& model, const std::map<std::string, Tensor>& feed,
                      const std::vector<std::pair<std::string, Tensor>>& outputs, const std::string& precision);

}  // namespace kiln
