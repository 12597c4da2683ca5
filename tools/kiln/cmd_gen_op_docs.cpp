// `kiln gen-op-docs FILE`: docs/ops.md from the op registry and a
// conformance run (tools/kiln/docs_gen.h writes it).
#include <CLI/CLI.hpp>

#include "tools/kiln/commands.h"
#include "tools/kiln/docs_gen.h"

namespace kiln {

CLI::App* register_gen_op_docs(CLI::App& app, GenOpDocsCommand& c) {
  auto* docs = app.add_subcommand("gen-op-docs", "Write docs/ops.md from the op registry and a conformance run");
  docs->add_option("out", c.out, "Output Markdown file")->required();
  docs->add_option("--conformance", c.conformance_json, "JSON from `kiln conformance --json` for the status columns");
  return docs;
}

int run_gen_op_docs(const GenOpDocsCommand& c) {
  write_op_docs(c.out, c.conformance_json);
  return 0;
}

}  // namespace kiln
