// The forms `kiln dump-ir --format` and `kiln compile --dump-dir` write a
// graph in: IR text, Graphviz dot, and SVG rendered by Graphviz's `dot`.
#pragma once
#include <string>

#include "ir/dot_printer.h"
#include "ir/graph.h"

namespace kiln {

// "text" | "dot" | "svg"; anything else is a kiln::Error. svg needs Graphviz's
// `dot` on PATH (tools/install_deps.sh installs it); its failure is a kiln::Error
// carrying dot's messages. `dot` shapes the picture (dot and svg).
std::string render_graph(const Graph& g, const std::string& format, const DotOptions& dot = {});

// Runs `dot -Tsvg` over Graphviz text.
std::string dot_to_svg(const std::string& dot_text);

}  // namespace kiln
