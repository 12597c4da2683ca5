#include "conformance/conformance.h"

#include "compiler/kernels_report.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>
#include <set>
#include <sstream>
#include <thread>

#include "frontend/onnx_import.h"
#include "ops/cpu_only.h"
#include "frontend/tensor_proto.h"
#include "ir/error.h"
#include "ir/string_values.h"
#include "ops/registry.h"
#include "backends/data_dependent_run.h"
#include "backends/run_on_backend.h"
#include "ir/data_dependent.h"
#include "backends/compare.h"
#include "ir/file_io.h"
#include "compiler/plan_writer.h"
#include "compiler/progress.h"
#include "compiler/targets.h"
#include "conformance/gpu_run.h"
#include "conformance/one_plan.h"

namespace kiln {

// A refusal of string tensors is one of a CPU-only computation (--baseline).
static_assert(std::string_view(kStringsCpuOnly).find(ops::kCpuOnlyRefusal) != std::string_view::npos);

namespace fs = std::filesystem;

namespace {

struct TestCase {
  std::string suite, name, dir;
};

// What --nvrtc-check found in one test (all archs).
struct KernelCheck {
  int kernels = 0;  // distinct kernels, summed over archs
  int max_registers = -1;
  std::string max_kernel;
  std::vector<std::string> spills;  // "name (arch): N bytes"
};

struct Outcome {
  Outcome() = default;
  Outcome(std::string s, std::string m, KernelCheck k = {})
      : status(std::move(s)), message(std::move(m)), kc(std::move(k)) {}
  std::string status;  // pass, fail, unsupported, crash
  std::string message;
  KernelCheck kc;
  std::string one_plan;  // "3 sets from one plan, profile batch in [1, 5]" (conformance/one_plan.h)
};

// Compiles the test graph's kernels for every --nvrtc-check arch. An NVRTC
// error propagates (the test fails); nodes without an emitter are not this
// check's business (the sim backend reports them).
KernelCheck check_kernels(const Graph& g, const ConformanceOptions& opts) {
  KernelCheck kc;
  for (const std::string& arch : opts.nvrtc_archs) {
    CompileOptions co = opts.compile;
    co.pass.target = arch;
    nlohmann::json j = kernels_json(build_kernels(g, co));
    if (!j.value("built", false)) fail("--nvrtc-check: {}", j.value("why_not", std::string("no codegen")));
    for (const auto& d : j["kernels_detail"]) {
      ++kc.kernels;
      const int regs = d["registers"].get<int>();
      if (regs > kc.max_registers)
        kc.max_registers = regs, kc.max_kernel = d["name"].get<std::string>() + " (" + arch + ")";
      if (d["spill_bytes"].get<int>() > 0)
        kc.spills.push_back(
            fmt::format("{} ({}): {} bytes", d["name"].get<std::string>(), arch, d["spill_bytes"].get<int>()));
    }
  }
  return kc;
}

// --write-plans: the test's plan for --target, as `kiln compile -o` writes it.
void write_test_plan(const TestCase& t, const Graph& g, const ConformanceOptions& opts) {
  const CompileOptions& c = opts.compile;
  // A GPU plan needs a kernel for every node (no per-node CPU fallback), as
  // kiln compile refuses: a CPU-only op is unsupported here, not a plan
  // without GPU kernels.
  if (std::vector<std::string> none = nodes_without_kernel_emitter(g); !none.empty())
    throw Unsupported(
        fmt::format("{}: no GPU kernel for {}", (fs::path(t.dir) / "model.onnx").string(), fmt::join(none, ", ")));
  plan::Plan p = build_plan(
      g, {c.pass.target, c.pass.precision, c.cache_dir, c.kernel_cache, {}, (fs::path(t.dir) / "model.onnx").string()});
  plan::write_plan_file((fs::path(opts.plans_dir) / (t.suite + "__" + t.name + ".plan")).string(), p);
}

bool is_test_dir(const fs::path& p) { return fs::exists(p / "model.onnx"); }

std::vector<TestCase> discover(const std::vector<std::string>& paths) {
  std::vector<TestCase> tests;
  for (const std::string& p : paths) {
    fs::path root(p);
    if (!fs::exists(root)) fail("conformance: '{}' does not exist", p);
    if (is_test_dir(root)) {
      tests.push_back({root.parent_path().filename().string(), root.filename().string(), root.string()});
      continue;
    }
    if (!fs::is_directory(root))
      fail(
          "conformance: '{}' is not a folder of ONNX backend tests (a folder with model.onnx and test_data_set_N, "
          "or a folder of such folders)",
          p);
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory() && is_test_dir(e.path())) dirs.push_back(e.path());
    // A folder without tests would "pass" with 0 of 0: a run that cannot fail.
    if (dirs.empty()) fail("conformance: '{}' holds no test (no model.onnx in it or in its subfolders)", p);
    std::sort(dirs.begin(), dirs.end());
    for (const auto& d : dirs) tests.push_back({root.filename().string(), d.filename().string(), d.string()});
  }
  return tests;
}

// Compares the outputs of one data set with the expected ones: returns the
// first difference ("" when all match) and appends every float output's
// error figures to `errors`.
std::string compare_outputs(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                            const std::vector<std::string>& output_names, const fs::path& set,
                            const ConformanceOptions& opts, std::string& errors) {
  if (got.size() != want.size())
    return fmt::format("{}: {} outputs but {} expected", set.filename().string(), got.size(), want.size());
  std::string first_diff;
  for (size_t k = 0; k < got.size(); ++k) {
    // The run's precision loosens float tolerances (run_tolerance); a
    // --tolerance bound replaces them (whole models).
    const std::string& precision = opts.compile.pass.precision;
    Tolerance tol = !opts.tolerance.empty() && is_float(want[k].dtype()) ? parse_tolerance(opts.tolerance)
                    : (opts.paths.empty() && opts.suite == "onnx-1.23") || in_generated_onnx_suite(set.parent_path())
                        ? onnx_runner_tolerance(want[k].dtype(), precision)
                        : run_tolerance(want[k].dtype(), precision);
    std::string where = fmt::format("{}: output {} (\"{}\")", set.filename().string(), k, output_names[k]);
    std::string diff = compare_tensors(got[k], want[k], tol);
    if (is_float(want[k].dtype()) && got[k].shape() == want[k].shape()) {
      ErrorStats e = error_stats(got[k], want[k], tol);
      errors += fmt::format(
          "{}{}: max abs err {:.3g}, max rel err {:.3g} (of max |expected|), {:.3g} of "
          "tolerance atol {:g} rtol {:g}",
          errors.empty() ? "" : "; ", where, e.max_abs, e.max_rel, e.tol_ratio, tol.atol, tol.rtol);
    }
    if (!diff.empty() && first_diff.empty()) first_diff = where + ": " + diff;
  }
  return first_diff;
}

std::vector<std::string> output_names(const Graph& g) {
  std::vector<std::string> r;
  for (const Value* v : g.outputs()) r.push_back(v->name());
  return r;
}

// --nvrtc-check figures of one more graph (a stage of a data-dependent run).
void add_kernel_check(KernelCheck& into, const KernelCheck& more) {
  into.kernels += more.kernels;
  if (more.max_registers > into.max_registers) {
    into.max_registers = more.max_registers;
    into.max_kernel = more.max_kernel;
  }
  into.spills.insert(into.spills.end(), more.spills.begin(), more.spills.end());
}

Outcome run_test(const TestCase& t, const ConformanceOptions& opts) {
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(t.dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {"fail", "no test_data_set_* folder"};
  // Sets of different shapes for a model with open dims: one plan for all
  // (conformance/one_plan.h). --nvrtc-check and --write-plans check the
  // kernels of static graphs, so they keep the per-set path.
  // (On the GPU each set gets its own static plan: GPU profile plans are
  // `kiln compile --min-shapes`'s business, not the suites'.)
  if (opts.nvrtc_archs.empty() && opts.plans_dir.empty() && opts.backend != "gpu" && sets.size() > 1 &&
      !inputs_with_open_dims((fs::path(t.dir) / "model.onnx").string()).empty()) {
    std::vector<ConformanceSet> all;
    for (const fs::path& set : sets) all.push_back(read_conformance_set(t.dir, set.filename().string()));
    auto compare = [&](const std::vector<Tensor>& got, const ConformanceSet& set, const std::vector<std::string>& names,
                       std::string& errors) {
      return compare_outputs(got, set.expected, names, set.dir, opts, errors);
    };
    if (std::optional<OnePlanOutcome> o = run_one_plan_sets(t.dir, all, opts, compare)) {
      Outcome r(o->status, o->message);
      r.one_plan = o->profile;
      return r;
    }
  }
  std::string errors;  // per float output: how far from the expected values
  KernelCheck kc;
  for (const fs::path& set : sets) {
    std::map<std::string, Tensor> feed;
    std::vector<Tensor> want;
    // A written plan is static (plans with data-dependent sizes are not
    // built), so --write-plans imports as a static plan needs.
    // --backend gpu runs a static plan too (conformance/gpu_run.h).
    ImportResult imp = import_conformance_case(t.dir, set.filename().string(), &feed, &want,
                                               opts.plans_dir.empty() && opts.backend != "gpu");
    if (opts.backend == "gpu") {
      refuse_string_tensors(*imp.graph, "", "in GPU plans");
      const std::vector<std::string> names = output_names(*imp.graph);
      std::vector<Tensor> got =
          run_graph_on_gpu(*imp.graph, feed, opts.compile, (fs::path(t.dir) / "model.onnx").string());
      std::string first_diff = compare_outputs(got, want, names, set, opts, errors);
      if (!first_diff.empty()) return {"fail", first_diff + (errors.empty() ? "" : " [" + errors + "]"), kc};
      continue;
    }
    if (has_data_dependent_sizes(*imp.graph)) {
      // Stage by stage, each stage through the passes; --nvrtc-check checks
      // every stage's kernels and every lowered data-dependent node's.
      DataDependentRunHooks hooks;
      hooks.prepare = [&](Graph& stage) { compile_graph(stage, opts.compile); };
      const bool check = !opts.nvrtc_archs.empty() && set == sets.front();
      std::string check_error;
      hooks.inspect = [&](const Graph& stage) {
        if (!check || !check_error.empty()) return;
        try {
          add_kernel_check(kc, check_kernels(stage, opts));
        } catch (const Unsupported&) {
          throw;
        } catch (const Error& e) {
          check_error = e.what();
        }
      };
      std::vector<Tensor> got =
          run_with_data_dependent_sizes(opts.backend, *imp.graph, feed, hooks, opts.compile.cache_dir).outputs;
      if (!check_error.empty()) return {"fail", fmt::format("--nvrtc-check: {}", check_error), kc};
      std::string first_diff = compare_outputs(got, want, output_names(*imp.graph), set, opts, errors);
      if (!first_diff.empty()) return {"fail", first_diff + (errors.empty() ? "" : " [" + errors + "]"), kc};
      continue;
    }
    compile_graph(*imp.graph, opts.compile);
    // Strings have no kernels and no plan form: refused before any is built.
    if (opts.backend != "ref") refuse_string_tensors(*imp.graph, "", "on the kernel simulator");
    if (!opts.nvrtc_archs.empty() || !opts.plans_dir.empty())
      refuse_string_tensors(*imp.graph, "", "in GPU plans (--nvrtc-check, --write-plans)");
    if (!opts.nvrtc_archs.empty() && set == sets.front()) {
      try {
        kc = check_kernels(*imp.graph, opts);
      } catch (const Unsupported&) {
        throw;
      } catch (const Error& e) {
        return {"fail", fmt::format("--nvrtc-check: {}", e.what()), kc};
      }
    }
    if (!opts.plans_dir.empty() && set == sets.front()) {
      try {
        write_test_plan(t, *imp.graph, opts);
      } catch (const Unsupported&) {
        throw;
      } catch (const Error& e) {
        return {"fail", fmt::format("--write-plans: {}", e.what()), kc};
      }
    }
    std::vector<Tensor> got = run_on_backend(opts.backend, *imp.graph, feed, opts.compile.cache_dir);
    std::string first_diff = compare_outputs(got, want, output_names(*imp.graph), set, opts, errors);
    // Every output's errors are measured before a failure is reported.
    if (!first_diff.empty()) return {"fail", first_diff + (errors.empty() ? "" : " [" + errors + "]"), kc};
  }
  return {"pass", errors, kc};
}

Outcome run_test_guarded(const TestCase& t, const ConformanceOptions& opts) {
  try {
    return run_test(t, opts);
  } catch (const Unsupported& e) {
    return {"unsupported", e.what()};
  } catch (const Error& e) {
    return {"fail", e.what()};
  } catch (const std::exception& e) {
    return {"fail", std::string("internal error: ") + e.what()};
  }
}

struct Running {
  pid_t pid;
  int fd;
  size_t index;
  std::chrono::steady_clock::time_point start;
  std::string buf;
};

// Runs every test in a child process, `jobs` at a time.
std::vector<Outcome> run_isolated(const std::vector<TestCase>& tests, const ConformanceOptions& opts) {
  std::vector<Outcome> out(tests.size());
  int jobs = opts.jobs > 0 ? opts.jobs : std::max(1u, std::thread::hardware_concurrency());
  op_registry();  // build before forking so children share it
  std::vector<Running> running;
  size_t next = 0;
  // A full run takes minutes: progress on stderr once it takes a while.
  Progress shown("conformance tests finished", 2.0);
  int finished = 0;
  while (next < tests.size() || !running.empty()) {
    while (next < tests.size() && static_cast<int>(running.size()) < jobs) {
      int p[2];
      if (pipe(p) != 0) fail("conformance: pipe failed");
      std::cout.flush();
      pid_t pid = fork();
      if (pid < 0) fail("conformance: fork failed");
      if (pid == 0) {
        close(p[0]);
        Outcome o = run_test_guarded(tests[next], opts);
        // status line, kernel-check line, message.
        nlohmann::json kj = {{"k", o.kc.kernels},
                             {"r", o.kc.max_registers},
                             {"n", o.kc.max_kernel},
                             {"s", o.kc.spills},
                             {"p", o.one_plan}};
        std::string msg = o.status + "\n" + kj.dump() + "\n" + o.message.substr(0, 3000);
        ssize_t ignored = write(p[1], msg.data(), msg.size());
        (void)ignored;
        close(p[1]);
        _exit(0);
      }
      close(p[1]);
      fcntl(p[0], F_SETFL, O_NONBLOCK);
      running.push_back({pid, p[0], next, std::chrono::steady_clock::now(), ""});
      ++next;
    }
    std::vector<pollfd> fds;
    for (auto& r : running) fds.push_back({r.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    for (auto it = running.begin(); it != running.end();) {
      char buf[4096];
      ssize_t n;
      while ((n = read(it->fd, buf, sizeof buf)) > 0) it->buf.append(buf, n);
      int status = 0;
      pid_t w = waitpid(it->pid, &status, WNOHANG);
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - it->start).count();
      if (w == 0 && secs > opts.timeout_s) {
        kill(it->pid, SIGKILL);
        waitpid(it->pid, &status, 0);
        out[it->index] = {"crash", fmt::format("timed out after {} s", opts.timeout_s)};
      } else if (w == it->pid) {
        while ((n = read(it->fd, buf, sizeof buf)) > 0) it->buf.append(buf, n);
        if (WIFSIGNALED(status)) {
          out[it->index] = {"crash",
                            fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)))};
        } else if (it->buf.empty()) {
          out[it->index] = {"crash", fmt::format("exited with code {} and no result", WEXITSTATUS(status))};
        } else {
          auto nl = it->buf.find('\n');
          auto nl2 = nl == std::string::npos ? nl : it->buf.find('\n', nl + 1);
          Outcome& o = out[it->index];
          o.status = it->buf.substr(0, nl);
          if (nl2 != std::string::npos) {
            auto kj = nlohmann::json::parse(it->buf.substr(nl + 1, nl2 - nl - 1), nullptr, false);
            if (kj.is_object()) {
              o.kc.kernels = kj["k"].get<int>();
              o.kc.max_registers = kj["r"].get<int>();
              o.kc.max_kernel = kj["n"].get<std::string>();
              o.kc.spills = kj["s"].get<std::vector<std::string>>();
              o.one_plan = kj["p"].get<std::string>();
            }
            o.message = it->buf.substr(nl2 + 1);
          }
        }
      } else {
        ++it;
        continue;
      }
      close(it->fd);
      it = running.erase(it);
      shown.update(++finished, static_cast<int>(tests.size()));
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> conformance_test_dirs(const std::vector<std::string>& paths) {
  std::vector<std::string> r;
  for (const TestCase& t : discover(paths)) r.push_back(t.dir);
  return r;
}

int run_conformance(const ConformanceOptions& opts) {
  if (!opts.tolerance.empty()) parse_tolerance(opts.tolerance);  // a bad flag is an error before any test runs
  std::vector<std::string> paths = opts.paths.empty() ? conformance_suite_paths(opts.suite) : opts.paths;
  std::vector<TestCase> tests = discover(paths);
  if (opts.backend == "gpu" && !is_gpu_target(opts.compile.pass.target))
    fail(
        "conformance --backend gpu runs each test's GPU plan: --target {} builds no GPU kernels (use sm_80, sm_86, "
        "sm_89, sm_90 or sm_90a; kiln doctor names this machine's)",
        opts.compile.pass.target);
  if (!opts.plans_dir.empty()) {
    if (opts.compile.pass.target.rfind("sm_", 0) != 0)
      fail("--write-plans needs a GPU --target (sm_80, sm_86, sm_89, sm_90), not '{}'", opts.compile.pass.target);
    fs::create_directories(opts.plans_dir);
  }
  if (!opts.filter.empty()) {
    size_t all = tests.size();
    std::erase_if(tests, [&](const TestCase& t) { return t.name.find(opts.filter) == std::string::npos; });
    // A typo in the filter would "pass" with 0 of 0.
    if (tests.empty()) fail("conformance: --filter '{}' matches none of the {} tests", opts.filter, all);
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Outcome> results = run_isolated(tests, opts);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  struct Count {
    int pass = 0, fail = 0, unsupported = 0, crash = 0;
  };
  std::map<std::string, Count> suites;
  std::vector<std::string> suite_order;
  Count total;
  nlohmann::json jtests = nlohmann::json::array();
  for (size_t i = 0; i < tests.size(); ++i) {
    const Outcome& o = results[i];
    if (!suites.count(tests[i].suite)) suite_order.push_back(tests[i].suite);
    Count& c = suites[tests[i].suite];
    for (Count* k : {&c, &total}) {
      if (o.status == "pass") ++k->pass;
      else if (o.status == "unsupported") ++k->unsupported;
      else if (o.status == "crash") ++k->crash;
      else ++k->fail;
    }
    if ((opts.verbose && o.status != "pass") || (opts.show_errors && o.status == "pass" && !o.message.empty()))
      std::cout << o.status << " " << tests[i].suite << "/" << tests[i].name << ": " << o.message << "\n";
    jtests.push_back(
        {{"suite", tests[i].suite}, {"name", tests[i].name}, {"status", o.status}, {"message", o.message}});
    if (!o.one_plan.empty()) jtests.back()["one_plan"] = o.one_plan;
  }
  for (const std::string& s : suite_order) {
    const Count& c = suites[s];
    int n = c.pass + c.fail + c.unsupported + c.crash;
    std::cout << fmt::format("{} [{}]: {} passed, {} failed, {} unsupported, {} crashed of {} ({:.1f}% pass)\n", s,
                             opts.backend, c.pass, c.fail, c.unsupported, c.crash, n, n ? 100.0 * c.pass / n : 0.0);
  }
  // Folders whose sets of different shapes ran from one plan say so.
  for (size_t i = 0; i < tests.size(); ++i)
    if (!results[i].one_plan.empty())
      std::cout << fmt::format("{}/{} [{}]: {}\n", tests[i].suite, tests[i].name, opts.backend, results[i].one_plan);
  std::string tol = opts.tolerance.empty() ? "" : ", float tolerance " + opts.tolerance;
  if (opts.paths.empty() && opts.tolerance.empty())
    tol = opts.suite == "onnx-1.23" ? ", ONNX runner tolerance" : ", kiln tolerance per dtype";
  std::cout << fmt::format(
      "conformance [{}{}, {}{}] took {:.1f} s\n", opts.paths.empty() ? opts.suite + ", " : "", opts.backend,
      opts.compile.optimize ? "default pipeline " + opts.compile.pass.precision : "no passes", tol, secs);
  std::cout << fmt::format("{} passed, {} failed, {} skipped\n", total.pass, total.fail + total.crash,
                           total.unsupported);
  int nvrtc_failed = 0;  // tests whose kernels NVRTC rejected: always fail the run
  if (!opts.nvrtc_archs.empty()) {
    int kernels = 0, tests_checked = 0, max_regs = -1;
    std::string max_where;
    std::vector<std::string> spills;
    for (size_t i = 0; i < tests.size(); ++i) {
      const KernelCheck& kc = results[i].kc;
      if (results[i].message.rfind("--nvrtc-check", 0) == 0) ++nvrtc_failed;
      if (kc.kernels == 0) continue;
      ++tests_checked;
      kernels += kc.kernels;
      if (kc.max_registers > max_regs) max_regs = kc.max_registers, max_where = kc.max_kernel + " in " + tests[i].name;
      for (const std::string& sp : kc.spills) spills.push_back(tests[i].name + ": " + sp);
    }
    std::cout << fmt::format(
        "nvrtc check [{}]: {} kernels compiled over {} tests, {} NVRTC failures; max {} registers "
        "({}); {}\n",
        fmt::join(opts.nvrtc_archs, ","), kernels, tests_checked, nvrtc_failed, max_regs, max_where,
        spills.empty() ? "no spills" : fmt::format("{} kernels spill", spills.size()));
    for (const std::string& sp : spills) std::cout << "  spill: " << sp << "\n";
  }
  if (!opts.json_path.empty()) {
    nlohmann::json j = {
        {"suite", opts.paths.empty() ? opts.suite : "paths"},
        {"backend", opts.backend},
        {"optimized", opts.compile.optimize},
        {"precision", opts.compile.pass.precision},
        {"tolerance", !opts.tolerance.empty() ? opts.tolerance
                      : opts.paths.empty() && opts.suite == "onnx-1.23"
                          ? "ONNX runner: atol 1e-7, rtol 1e-3 (bf16 2^-6), per precision"
                          : "per output dtype and precision (ONNX runner's for tests of a generated onnx 1.23 suite)"},
        {"summary",
         {{"passed", total.pass},
          {"failed", total.fail},
          {"unsupported", total.unsupported},
          {"crashed", total.crash}}},
        {"tests", jtests}};
    write_text_file(opts.json_path, j.dump(1) + "\n");
  }
  int regressions = 0, cpu_only = 0;
  if (!opts.baseline_json.empty()) {
    std::ifstream bf(opts.baseline_json);
    if (!bf) fail("cannot read baseline {}", opts.baseline_json);
    nlohmann::json base = nlohmann::json::parse(bf);
    std::map<std::string, std::string> now;
    // Tests a GPU-kernel backend refuses because an op runs on the CPU
    // backends only (ops/cpu_only.h) are no regression of that backend.
    std::set<std::string> cpu_only_now;
    for (const auto& t : jtests) {
      const std::string key = t["suite"].get<std::string>() + "/" + t["name"].get<std::string>();
      now[key] = t["status"];
      if (t["status"] == "unsupported" &&
          t["message"].get<std::string>().find(ops::kCpuOnlyRefusal) != std::string::npos)
        cpu_only_now.insert(key);
    }
    int base_pass = 0;
    for (const auto& t : base["tests"]) {
      if (t["status"] != "pass") continue;
      ++base_pass;
      std::string key = t["suite"].get<std::string>() + "/" + t["name"].get<std::string>();
      auto it = now.find(key);
      if (cpu_only_now.count(key)) {
        ++cpu_only;
        continue;
      }
      if (it != now.end() && it->second != "pass") {
        ++regressions;
        std::cout << fmt::format("regression: {} passed in the baseline, now {}\n", key, it->second);
      }
    }
    std::cout << fmt::format(
        "baseline {}: {} passed there, {} passed here, {} regressions{}\n", opts.baseline_json, base_pass, total.pass,
        regressions,
        cpu_only ? fmt::format(" ({} of them refused here: an op {})", cpu_only, ops::kCpuOnlyRefusal) : "");
  }
  if (opts.require_pass.empty() && opts.baseline_json.empty()) return (total.fail + total.crash) ? 1 : 0;
  bool ok = total.crash == 0 && regressions == 0 && nvrtc_failed == 0;
  if (nvrtc_failed) std::cout << fmt::format("gate: NVRTC rejected the kernels of {} tests\n", nvrtc_failed);
  if (total.crash) std::cout << fmt::format("gate: {} tests crashed\n", total.crash);
  for (const std::string& gate : opts.require_pass) {
    auto colon = gate.rfind(':');
    if (colon == std::string::npos) fail("--require-pass '{}' should look like node:70", gate);
    double want = std::stod(gate.substr(colon + 1));
    int pass = 0, n = 0;
    std::stringstream ss(gate.substr(0, colon));
    std::string suite;
    while (std::getline(ss, suite, '+')) {
      if (!suites.count(suite)) fail("--require-pass: no tests ran from suite '{}'", suite);
      const Count& c = suites[suite];
      pass += c.pass;
      n += c.pass + c.fail + c.unsupported + c.crash;
    }
    double got = n ? 100.0 * pass / n : 0;
    bool held = got >= want;
    ok &= held;
    std::cout << fmt::format("gate {}: {:.1f}% >= {}%: {}\n", gate.substr(0, colon), got, want, held ? "ok" : "FAILED");
  }
  return ok ? 0 : 1;
}

}  // namespace kiln
