#include "compiler/compile.h"

#include <CLI/CLI.hpp>
#include <sstream>

#include "ir/error.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace kiln {

void add_compile_flags(CLI::App* cmd, CompileOptions& o) {
  CLI::Option* precision = cmd->add_option("--precision", o.pass.precision, "Build: fp32 | tf32 | fp16 | bf16")
                               ->check(CLI::IsMember({"fp32", "tf32", "fp16", "bf16"}))
                               ->group("Build");
  // trtexec's spellings. One precision per build: two of them is an error,
  // not "the last one wins".
  std::vector<CLI::Option*> aliases{precision};
  for (const char* p : {"fp16", "bf16", "tf32"}) {
    CLI::Option* a = cmd->add_flag_callback(
        fmt::format("--{}", p), [&o, p] { o.pass.precision = p; }, fmt::format("Build: as --precision {} (trtexec)", p));
    a->group("Build");
    for (CLI::Option* other : aliases) a->excludes(other);
    aliases.push_back(a);
  }
  // INT8 needs calibration or Q/DQ nodes kiln does not lower: refuse rather
  // than build an fp32 plan the user believes is int8.
  cmd->add_flag_callback(
         "--int8",
         [] {
           throw CLI::ValidationError("--int8", "INT8 is not supported yet; kiln builds fp32, tf32, fp16 and bf16 "
                                                "(--precision, or --fp16 / --bf16 / --tf32)");
         },
         "Build: not supported yet (refused with a message)")
      ->group("Build");
  cmd->add_option("--target", o.pass.target, "Build: cpu | sm_80 | sm_86 | sm_89 | sm_90")
      ->check(CLI::IsMember({"cpu", "sm_80", "sm_86", "sm_89", "sm_90"}))
      ->group("Build");
  cmd->add_option("--passes", o.passes, "Build: run these passes instead of the default pipeline")
      ->delimiter(',')
      ->group("Build");
  cmd->add_flag("--no-opt{false}", o.optimize, "Build: run no passes (the imported graph)")->group("Build");
  cmd->add_option("--print-ir-before", o.pipeline.print_before, "Reporting: print IR before pass P")
      ->delimiter(',')
      ->group("Reporting");
  cmd->add_option("--print-ir-after", o.pipeline.print_after, "Reporting: print IR after pass P")
      ->delimiter(',')
      ->group("Reporting");
  cmd->add_flag("--print-ir-after-all", o.pipeline.print_after_all, "Reporting: print IR after every pass")
      ->group("Reporting");
  cmd->add_flag("--print-ir-after-change", o.pipeline.print_after_change,
                "Reporting: print IR after each pass that changed it")
      ->group("Reporting");
  cmd->add_option("--stop-after", o.pipeline.stop_after, "Reporting: stop after pass P (bisecting)")
      ->group("Reporting");
  cmd->add_option("--dump-dir", o.pipeline.dump_dir, "Reporting: write NNN.after.<pass>.kir per pass here (compile: also kernels/*.cu, "
                  "final.svg and index.html)")
      ->group("Reporting");
  cmd->add_flag("--no-verify-each{false}", o.pipeline.verify_each, "Reporting: skip the verifier between passes")
      ->group("Reporting");
  cmd->add_option("--cache-dir", o.cache_dir,
                  "Build: kernel cache directory (default $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln, ~/.cache/kiln)")
      ->group("Build");
  cmd->add_flag("--no-kernel-cache{false}", o.kernel_cache, "Build: compile every kernel with NVRTC, no cache")
      ->group("Build");
  cmd->add_flag("--stats", o.stats, "Reporting: per-pass statistics (changed, time, node counts)")
      ->group("Reporting");
}

CompileReport compile_graph(Graph& g, const CompileOptions& o) {
  CompileReport r;
  r.nodes_in = g.num_nodes();
  if (o.optimize) {
    PassManager pm;
    std::vector<std::string> names = o.passes.empty() ? default_pipeline(o.pass) : o.passes;
    for (const std::string& n : names) pm.add(n);
    if (!o.pipeline.stop_after.empty() &&
        std::find(names.begin(), names.end(), o.pipeline.stop_after) == names.end())
      fail("--stop-after: pass '{}' is not in the pipeline ({})", o.pipeline.stop_after, fmt::join(names, ","));
    r.passes = pm.run(g, o.pass, o.pipeline);
  } else if (o.pipeline.verify_each) {
    verify_graph(g, op_registry());
  }
  r.nodes_out = g.num_nodes();
  return r;
}

int count_kernels(const Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes())
    if (node->op() != "reshape" && node->op() != "identity") ++n;
  return n;
}

int64_t weight_bytes(const Graph& g) {
  int64_t b = 0;
  for (const Value* c : g.constants()) b += static_cast<int64_t>(c->type().nbytes());
  return b;
}

nlohmann::json compile_report_json(const Graph& g, const CompileReport& r) {
  nlohmann::json passes = nlohmann::json::array();
  nlohmann::json j = {{"nodes_in", r.nodes_in},
                      {"nodes_out", r.nodes_out},
                      {"kernels", count_kernels(g)},
                      {"weight_bytes", weight_bytes(g)}};
  for (const PassRecord& p : r.passes) {
    nlohmann::json pj = {{"name", p.name}, {"changed", p.changed}, {"ms", p.ms}, {"verify_ms", p.verify_ms},
                        {"cpu_ms", p.cpu_ms}, {"verify_cpu_ms", p.verify_cpu_ms}};
    for (const auto& [k, v] : p.stats.counters) {
      pj["stats"][k] = v;
      // The memory planner reports the arena figures the JSON promises.
      if (k == "activation_bytes_naive" || k == "activation_bytes_planned") j[k] = v;
    }
    passes.push_back(pj);
  }
  j["passes"] = passes;
  return j;
}

std::string format_stats(const CompileReport& r) {
  std::ostringstream s;
  s << fmt::format("{:<22} {:>7} {:>9} {:>7} {:>7}  {}\n", "pass", "changed", "ms", "nodes", "after", "statistics");
  double total = 0;
  for (const PassRecord& p : r.passes) {
    std::string st;
    for (const auto& [k, v] : p.stats.counters) st += fmt::format("{}{}={}", st.empty() ? "" : " ", k, v);
    s << fmt::format("{:<22} {:>7} {:>9.2f} {:>7} {:>7}  {}\n", p.name, p.changed ? "yes" : "no", p.ms,
                     p.nodes_before, p.nodes_after, st);
    for (const std::string& note : p.stats.notes) s << "    " << note << "\n";
    total += p.ms;
  }
  double verify = 0;
  for (const PassRecord& p : r.passes) verify += p.verify_ms;
  if (verify > 0) s << fmt::format("{:<22} {:>7} {:>9.2f}\n", "(verifier, all runs)", "", verify);
  s << fmt::format("{:<22} {:>7} {:>9.2f} {:>7} {:>7}\n", "total", "", total + verify, r.nodes_in, r.nodes_out);
  return s.str();
}

}  // namespace kiln
