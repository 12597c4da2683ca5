// `kiln opt FILE.kir`: parse IR text, run --passes, verify, print (what the
// FileCheck tests drive). With --split-input-file each piece is parsed, run,
// verified and printed on its own; an error in one is reported and the others
// still run (as mlir-opt does), so one FileCheck file can hold many error cases.
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <sstream>

#include "compiler/compile.h"
#include "ir/error.h"
#include "ir/file_io.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/compile_flags.h"

namespace kiln {

namespace {

std::string read_file(const std::string& path) {
  reject_directory(path, "an IR text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

CLI::App* register_opt(CLI::App& app, OptCommand& c) {
  auto* opt = app.add_subcommand("opt", "Read IR text, run passes (--passes), verify and print it");
  opt->add_option("file", c.kir, "IR text file (.kir), - for stdin")->required();
  opt->add_flag("--split-input-file", c.split, "Treat '// -----' lines as separators between graphs");
  add_compile_flags(opt, c.copts);
  return opt;
}

int run_opt(OptCommand& c) {
  std::string text = c.kir == "-" ? std::string(std::istreambuf_iterator<char>(std::cin), {}) : read_file(c.kir);
  std::vector<InputChunk> chunks;
  if (c.split) chunks = split_input_file(text);
  else chunks.push_back({text, 1});
  CompileOptions copts = c.copts;
  copts.optimize = !copts.passes.empty();
  // The passes named run on the graph as written, symbolic dims included (as
  // for a plan with shape profiles; plan-memory is then left out).
  copts.symbolic = true;
  bool failed = false;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (i) std::cout << "// -----\n";
    try {
      auto g = parse_graph(chunks[i].text, c.kir, chunks[i].first_line);
      try {
        verify_graph(*g, op_registry());
      } catch (const Error& e) {
        fail("{}: graph @{}: {}", c.kir, g->name(), e.what());
      }
      copts.pipeline.print_to = &std::cout;
      CompileReport rep = compile_graph(*g, copts);
      if (copts.stats) std::cerr << format_stats(rep);
      std::cout << print_graph(*g);
    } catch (const Error& e) {
      if (!c.split) throw;
      std::cout.flush();
      std::cerr << "error: " << e.what() << "\n";
      failed = true;
    }
  }
  return failed ? 1 : 0;
}

}  // namespace kiln
