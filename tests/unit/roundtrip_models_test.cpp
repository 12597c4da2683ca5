// Every model of Debian's ONNX test suites that kiln imports must print as IR
// text that parses back and prints identically, and must pass the verifier
// as imported (the importer makes every operand whose value inference reads
// into a constant) and after fold-constants. Models the importer
// rejects (kiln::Error / Unsupported) are skipped and counted; the number
// checked grows as ops land.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "passes/pass.h"
#include "conformance/conformance.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct ModelResult {
  std::string name;
  std::string roundtrip_error;   // empty: round-trips
  std::string verify_error;      // empty: verifies after fold-constants
  std::string raw_verify_error;  // empty: verifies as imported (reported, not required)
};

struct Survey {
  std::vector<ModelResult> checked;
  int rejected = 0;                 // import threw kiln::Error / Unsupported
  std::vector<std::string> broken;  // import threw something else (an importer bug)
};

// The first line where two texts differ, for the failure report.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    bool ea = !std::getline(sa, la), eb = !std::getline(sb, lb);
    if (ea && eb) return "texts differ only in line endings";
    if (ea != eb || la != lb)
      return fmt::format("line {}:\n    first:  {}\n    second: {}", line, ea ? "(end)" : la, eb ? "(end)" : lb);
  }
}

std::string verify_message(const Graph& g) {
  try {
    verify_graph(g, op_registry());
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

ModelResult check(const std::string& name, Graph& g) {
  ModelResult r{name, {}, {}, {}};
  r.raw_verify_error = verify_message(g);
  std::string text = print_graph(g);
  try {
    std::string again = print_graph(*parse_graph(text, name + ".kir"));
    if (again != text) r.roundtrip_error = first_difference(text, again);
  } catch (const Error& e) {
    r.roundtrip_error = std::string("parse: ") + e.what();
  }
  PassStats stats;
  try {
    create_pass("fold-constants")->run(g, PassOptions{}, stats);
    r.verify_error = verify_message(g);
  } catch (const Error& e) {
    r.verify_error = std::string("fold-constants: ") + e.what();
  }
  return r;
}

const Survey& survey() {
  static const Survey s = [] {
    Survey s;
    std::vector<std::string> suites;
    for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"})
      suites.push_back((fs::path(kDebianTestData) / suite).string());
    for (const std::string& dir : conformance_test_dirs(suites)) {
      std::string name = fs::path(dir).parent_path().filename().string() + "/" + fs::path(dir).filename().string();
      ImportResult imp;
      try {
        imp = import_conformance_case(dir, "test_data_set_0");
      } catch (const Error&) {
        ++s.rejected;
        continue;
      } catch (const std::exception& e) {
        s.broken.push_back(name + ": " + e.what());
        continue;
      }
      s.checked.push_back(check(name, *imp.graph));
    }
    return s;
  }();
  return s;
}

TEST(RoundTripModels, EveryImportedModelPrintsParsesAndReprintsIdentically) {
  if (!fs::exists(kDebianTestData)) GTEST_SKIP() << "libonnx-testdata is not installed";
  const Survey& s = survey();
  std::string failures;
  int failed = 0;
  for (const ModelResult& r : s.checked)
    if (!r.roundtrip_error.empty()) failures += "  " + r.name + ": " + r.roundtrip_error + "\n", ++failed;
  std::cout << fmt::format("[ round trip ] {} models checked, {} failed; {} not importable; {} importer errors\n",
                           s.checked.size(), failed, s.rejected, s.broken.size());
  for (const std::string& b : s.broken) std::cout << "  importer error (not counted): " << b << "\n";
  EXPECT_EQ(failed, 0) << failures;
  EXPECT_GT(s.checked.size(), 10u) << "too few models imported to mean anything";
}

TEST(RoundTripModels, EveryImportedModelVerifiesAfterFolding) {
  if (!fs::exists(kDebianTestData)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::string failures;
  int failed = 0, raw_failed = 0;
  for (const ModelResult& r : survey().checked) {
    if (!r.verify_error.empty()) failures += "  " + r.name + ": " + r.verify_error + "\n", ++failed;
    if (!r.raw_verify_error.empty())
      failures += "  as imported: " + r.name + ": " + r.raw_verify_error + "\n", ++raw_failed;
  }
  std::cout << fmt::format("[ verifier   ] {} failed after fold-constants; {} failed as imported\n", failed,
                           raw_failed);
  EXPECT_EQ(failed, 0) << failures;
  EXPECT_EQ(raw_failed, 0) << failures;
}

}  // namespace
}  // namespace kiln
