// Where the conformance suites live and the ONNX runner's tolerance
// (conformance.h): moved out of conformance.cpp as they were.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "conformance/conformance.h"
#include "ir/error.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

// The suite's folder does not follow KILN_CACHE_DIR: that is the kernel
// cache, which tests point at fresh temporary folders.
fs::path kiln_cache_dir() {
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "kiln";
  if (const char* d = std::getenv("HOME"); d && *d) return fs::path(d) / ".cache" / "kiln";
  return fs::temp_directory_path() / "kiln-cache";
}

}  // namespace

std::vector<std::string> conformance_suite_paths(const std::string& suite) {
  fs::path root;
  if (suite == "debian-1.12") {
    root = kDebianTestData;
    if (!fs::exists(root / "node"))
      fail(
          "conformance: suite debian-1.12 needs {} (tools/install_deps.sh installs "
          "libonnx-testdata)",
          root.string());
  } else if (suite == "onnx-1.23") {
    const char* env = std::getenv("KILN_ONNX_TESTS");
    root = env && *env ? fs::path(env) : kiln_cache_dir() / "onnx-1.23-tests";
    if (!fs::exists(root / "node"))
      fail(
          "conformance: suite onnx-1.23 is not generated in {}: run tools/onnx_suite.sh (or name another folder "
          "with KILN_ONNX_TESTS)",
          root.string());
  } else {
    fail("conformance: unknown --suite '{}' (onnx-1.23 or debian-1.12)", suite);
  }
  std::vector<std::string> r;
  for (const char* s : {"node", "pytorch-converted", "pytorch-operator", "simple"})
    if (fs::exists(root / s)) r.push_back((root / s).string());
  return r;
}

bool in_generated_onnx_suite(const fs::path& test_dir) {
  // tools/onnx_suite.py records the onnx version in the suites' root:
  // ROOT/ONNX_VERSION beside ROOT/node/<test>.
  std::ifstream f(test_dir.parent_path().parent_path() / "ONNX_VERSION");
  std::string version;
  return f >> version && version.rfind("1.23.", 0) == 0;
}

Tolerance onnx_runner_tolerance(DType output, std::string_view precision) {
  if (!is_float(output)) return default_tolerance(output);
  Tolerance t{1e-7, output == DType::BF16 ? 0.015625 : 1e-3};
  if (precision == "fp32") return t;
  Tolerance p = run_tolerance(output, precision);
  return {std::max(t.atol, p.atol), std::max(t.rtol, p.rtol)};
}

}  // namespace kiln
