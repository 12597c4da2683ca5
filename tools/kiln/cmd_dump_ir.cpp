// `kiln dump-ir MODEL.onnx`: the imported IR (-O or --passes: after passes),
// as text, Graphviz dot or SVG; for a plan, the plan's optimized graph.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>

#include "compiler/compile.h"
#include "compiler/gpu_bounded_sizes.h"
#include "compiler/import_checked.h"
#include "compiler/ir_picture.h"
#include "compiler/plan_sniff.h"
#include "compiler/targets.h"
#include "frontend/onnx_import.h"
#include "ir/data_dependent.h"
#include "runtime/plan_format.h"
#include "runtime/plan_graph.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/compile_flags.h"
#include "tools/kiln/compile_messages.h"
#include "tools/kiln/model_stdin.h"

namespace kiln {

CLI::App* register_dump_ir(CLI::App& app, DumpIrCommand& c) {
  auto* dump = app.add_subcommand("dump-ir", "Print the IR of an ONNX model (after passes with -O or --passes)");
  dump->add_option("model", c.model, "Model file (.onnx), or a plan (prints the plan's graph)")
      ->required()
      ->group("Model");
  dump->add_option("--shapes", c.shapes, "Fix input shapes: name:1x3x224x224,...; repeatable")
      ->join(',')
      ->group("Model");
  dump->add_flag("-O,--optimize", c.optimize, "Run the default pipeline first")->group("Build");
  dump->add_option("--format", c.format, "text (kiln IR), dot (Graphviz), svg (rendered by Graphviz dot)")
      ->check(CLI::IsMember({"text", "dot", "svg"}))
      ->group("Reporting");
  dump->add_flag("--fused-bodies", c.fused_bodies,
                 "dot/svg: draw each fused kernel as a cluster of its body's nodes (default: one box naming its ops)")
      ->group("Reporting");
  dump->add_flag("--no-wrap", c.no_wrap,
                 "dot/svg: one column of boxes however deep the graph (default: a deep graph in parts side by side)")
      ->group("Reporting");
  add_compile_flags(dump, c.copts);
  return dump;
}

int run_dump_ir(DumpIrCommand& c) {
  DotOptions dot;
  dot.fused_bodies = c.fused_bodies;
  dot.wrap = !c.no_wrap;
  if (!is_stdin_arg(c.model) && is_plan_file(c.model)) {
    // The plan's optimized graph, as the runtime reads it back.
    plan::Plan p = plan::read_plan_file(c.model);
    std::cout << render_graph(*plan::load_graph(p, c.model), c.format, dot);
    return 0;
  }
  const ModelSource source = model_source_of(c.model);  // "-": standard input (tools/kiln/model_stdin.h)
  c.model = source.display_name;
  c.copts.pipeline.source = c.model;  // passes' errors name the model, as the importer's do
  ImportOptions io;
  io.input_shapes = parse_shapes_flag(c.shapes);
  StderrCompileMessages messages(c.copts.show_progress);
  messages.attach(io, c.copts);
  ImportResult r = source.path.empty() ? import_onnx_bytes(source.bytes, source.base_dir, source.display_name, io)
                                       : import_onnx_file(source.path, io);
  std::vector<std::string> names;
  for (const Value* v : r.graph->inputs()) names.push_back(v->name());
  check_shapes_names(io.input_shapes, names, c.model);
  c.copts.optimize = c.optimize || !c.copts.passes.empty();
  if (has_data_dependent_sizes(*r.graph)) {
    // An inspection tool shows what it can: the imported graph marks each
    // size decided at run time as a size symbol with its range [0, bound];
    // with passes on a GPU target, the graph a GPU plan compiles (at the
    // bounds, the counts as extra outputs); with passes for a CPU target the
    // refusal below, since a CPU plan keeps the graph without passes.
    std::vector<std::string> nodes;
    for (const auto& [sym, n] : data_dependent_symbols(*r.graph))
      nodes.push_back(fmt::format("{} ({} in [0, {}])", n->describe(), sym, r.graph->find_symbol(sym)->max));
    const std::string target = resolve_target(c.copts.pass.target).target;
    if (!c.copts.optimize) {
      std::cerr << fmt::format(
          "{}: result sizes decided at run time ({}): the IR shows each as a size symbol with its range [0, upper "
          "bound]\n",
          c.model, fmt::join(nodes, ", "));
    } else if (is_gpu_target(target)) {
      plan::BoundedSizes sizes;
      r.graph = graph_at_bounds(*r.graph, c.model, sizes);
      std::cerr << fmt::format(
          "{}: result sizes decided at run time ({}): the IR after passes is the GPU plan's graph at the upper "
          "bounds, the counts its last {} outputs\n",
          c.model, fmt::join(nodes, ", "), sizes.counts.size());
    }
  }
  CompileReport rep = compile_graph(*r.graph, c.copts);
  if (c.copts.stats) std::cerr << format_stats(rep);
  std::cout << render_graph(*r.graph, c.format, dot);
  return 0;
}

}  // namespace kiln
