// `kiln conformance [PATH...]`: the flags of the ONNX backend-test runner
// (conformance/conformance.h runs them).
#include <CLI/CLI.hpp>

#include "tools/kiln/commands.h"
#include "tools/kiln/compile_flags.h"
#include "conformance/conformance.h"

namespace kiln {

CLI::App* register_conformance(CLI::App& app, ConformanceOptions& o) {
  auto* conf = app.add_subcommand("conformance", "Run ONNX backend tests (model.onnx + test_data_set_N)");
  conf->add_option("paths", o.paths, "Test folders or folders of them (default: the --suite's four)");
  conf->add_option("--suite", o.suite, "onnx-1.23 (default; tools/onnx_suite.sh) or debian-1.12 (libonnx-testdata)");
  conf->add_option(
      "--backend", o.backend,
      "Backend: ref, sim (generated kernels on the CPU simulator), gpu (each test's plan on this machine's GPU; needs --target sm_XX)");
  conf->add_option("--json", o.json_path, "Write results as JSON");
  conf->add_option("--filter", o.filter, "Only tests whose name contains this");
  conf->add_option("-j,--jobs", o.jobs, "Tests run at once (default: CPUs)");
  conf->add_option("--timeout", o.timeout_s, "Seconds per test before it counts as a crash");
  conf->add_flag("-v,--verbose", o.verbose, "Print every test that does not pass");
  conf->add_flag("--show-errors", o.show_errors, "Print max abs/rel errors of passing tests too");
  conf->add_option("--require-pass", o.require_pass,
                   "Gate: SUITE[+SUITE...]:PERCENT must pass (exit code then reflects the gates)");
  conf->add_option("--baseline", o.baseline_json,
                   "Fail if a test that passed in this earlier JSON result does not pass now");
  conf->add_option("--tolerance", o.tolerance,
                   "ATOL,RTOL for floating outputs instead of the per-dtype defaults (loosened to --precision's; "
                   "whole models)");
  conf->add_option("--nvrtc-check", o.nvrtc_archs,
                   "Also compile every test's kernels with NVRTC for these archs (sm_80,sm_90) and report "
                   "kernel count, registers, spills")
      ->delimiter(',');
  conf->add_option("--write-plans", o.plans_dir,
                   "Also write each test's plan (needs --target sm_XX) as DIR/<suite>__<test>.plan");
  add_compile_flags(conf, o.compile);
  return conf;
}

}  // namespace kiln
