#include "passes/pass_manager.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "ir/error.h"
#include "ir/dot_printer.h"
#include "ir/printer.h"
#include "ir/short_name.h"
#include "ir/verifier.h"
#include "passes/pass_heartbeat.h"
#include "ops/registry.h"

namespace kiln {

namespace {
double cpu_ms_now() { return 1000.0 * static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }
}  // namespace

bool verify_unchanged_default() {
#ifndef NDEBUG
  return true;
#else
  const char* e = std::getenv("KILN_VERIFY_EACH");
  if (!e || !*e) return false;
  // Only "all" means something; "1" or "yes" must not silently verify less
  // than whoever set it believes. A warning, once, not an error: this runs
  // in default member initializers, some outside any try block.
  if (std::strcmp(e, "all") == 0) return true;
  static std::once_flag warned;
  std::call_once(warned, [e] {
    std::cerr << "warning: KILN_VERIFY_EACH='" << e
              << "' is not a setting and is ignored: 'all' verifies after every pass, including those that "
                 "changed nothing\n";
  });
  return false;
#endif
}

std::vector<std::string> default_pipeline(const PassOptions& opts) {
  // share-transposed-weights first: fold-constants would store a tied
  // weight's transpose as a second copy of it.
  std::vector<std::string> p = {
      "share-transposed-weights", "fold-constants",     "fold-control-flow", "simplify", "dce", "cse",
      "fold-batchnorm",           "recognize-patterns", "fold-constants"};
  if (opts.target != "cpu") p.push_back("layout");  // channels-last conv regions for tensor cores
  p.push_back("dce");
  if (opts.precision != "fp32") p.insert(p.end(), {"precision", "fold-constants", "simplify", "cse", "dce"});
  // kv-cache-in-place marks only concats of a symbolic (growing) past: a
  // static graph comes out as before. It runs before the fuser, which leaves
  // a marked concat a node of its own (passes/fusion_state.cpp): on a
  // symbolic graph the fuser would otherwise take the concat into a group
  // and the plan would have no in-place append left.
  // rematerialize-symbolic copies what is computed from the symbols alone (a
  // decoder's positions and rotary cos/sin) into each reader, so the fuser
  // computes it in the readers' kernels; a static graph has nothing to copy.
  p.insert(p.end(), {"merge-sibling-matmuls", "kv-cache-in-place", "rematerialize-symbolic", "fuse", "plan-memory"});
  return p;
}

namespace {

std::vector<std::string> output_names(const Graph& g) {
  std::vector<std::string> names;
  for (const Value* v : g.outputs()) names.push_back(v->name());
  return names;
}

// Callers bind a graph's outputs by name (the runtime's I/O, `kiln run
// --outputs` files), so no pass may rename, add or drop one.
void check_output_names(const Graph& g, const std::vector<std::string>& want) {
  std::vector<std::string> have = output_names(g);
  if (have.size() != want.size()) fail("the graph has {} outputs, it had {} before", have.size(), want.size());
  for (size_t i = 0; i < have.size(); ++i)
    if (have[i] != want[i])
      fail("graph output {} is {}, it was %{}: passes must keep output names", i,
           have[i].empty() ? "an unnamed value" : "named %" + short_name(have[i]), short_name(want[i]));
}

// "model.onnx: <message>", unless the message names the file already.
std::string in_source(const std::string& source, const std::string& what) {
  if (source.empty() || what.rfind(source + ":", 0) == 0) return what;
  return source + ": " + what;
}

}  // namespace

std::vector<PassRecord> PassManager::run(Graph& g, const PassOptions& opts, const PipelineOptions& po) {
  std::ostream& out = po.print_to ? *po.print_to : std::cerr;
  std::vector<PassRecord> records;
  if (!po.dump_dir.empty()) {
    std::filesystem::create_directories(po.dump_dir);
    std::ofstream(std::filesystem::path(po.dump_dir) / "000.input.kir") << print_graph(g);
  }
  const std::vector<std::string> outputs_before = output_names(g);
  int index = 0;
  PassHeartbeat beat(po.heartbeat, po.heartbeat_after_s, po.heartbeat_every_s);
  // With verify_unchanged: the graph as printed before the pass, to hold a
  // pass that reports no change to it.
  std::string text_before;
  if (po.progress) po.progress(0, static_cast<int>(passes_.size()));  // the step starts
  for (auto& p : passes_) {
    ++index;
    std::string name(p->name());
    if (po.print_before.count(name)) out << "// -----// IR before " << name << " //----- //\n" << print_graph(g);
    PassRecord rec;
    rec.name = name;
    rec.nodes_before = g.num_nodes();
    if (po.verify_unchanged) text_before = print_graph(g);
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_ms_now();
    beat.begin(name);
    try {
      rec.changed = p->run(g, opts, rec.stats);
    } catch (const Unsupported& e) {
      throw Unsupported(in_source(po.source, e.what()));
    } catch (const Error& e) {
      throw Error(in_source(po.source, e.what()));
    }
    if (const double slow_s = test_slow_pass_seconds(name); slow_s > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(slow_s));
    beat.end();
    rec.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    rec.cpu_ms = cpu_ms_now() - c0;
    rec.nodes_after = g.num_nodes();
    if (po.verify_each && (index == 1 || rec.changed || po.verify_unchanged)) {
      rec.verified = true;
      // Timed apart from the pass: on big graphs the verifier's share of the
      // compile is worth seeing.
      auto v0 = std::chrono::steady_clock::now();
      double vc0 = cpu_ms_now();
      beat.begin("verifier after " + name);
      try {
        verify_graph(g, op_registry());
      } catch (const Error& e) {
        throw Error(in_source(po.source, fmt::format("after pass '{}': {}", name, e.what())));
      }
      beat.end();
      rec.verify_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - v0).count();
      rec.verify_cpu_ms = cpu_ms_now() - vc0;
    }
    // Cheap, so checked after every pass: a renamed output breaks a caller's binding.
    try {
      check_output_names(g, outputs_before);
    } catch (const Error& e) {
      throw Error(in_source(po.source, fmt::format("after pass '{}': {}", name, e.what())));
    }
    if (po.verify_unchanged && !rec.changed && print_graph(g) != text_before)
      throw Error(in_source(po.source, fmt::format("pass '{}' reported no change but changed the graph (the verifier "
                                                   "is skipped after such passes: a pass must report every change)",
                                                   name)));
    if (po.print_after_all || po.print_after.count(name) || (po.print_after_change && rec.changed))
      out << "// -----// IR after " << name << " //----- //\n" << print_graph(g);
    if (!po.dump_dir.empty())
      std::ofstream(std::filesystem::path(po.dump_dir) / fmt::format("{:03}.after.{}.kir", index, name))
          << print_graph(g);
    records.push_back(std::move(rec));
    if (name == po.stop_after) {
      if (po.progress) po.progress(static_cast<int>(passes_.size()), static_cast<int>(passes_.size()));
      break;
    }
    if (po.progress) po.progress(index, static_cast<int>(passes_.size()));
  }
  if (!po.dump_dir.empty()) std::ofstream(std::filesystem::path(po.dump_dir) / "final.dot") << print_dot(g);
  return records;
}

}  // namespace kiln
