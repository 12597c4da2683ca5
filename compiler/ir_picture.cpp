#include "compiler/ir_picture.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

#include "ir/dot_printer.h"
#include "ir/error.h"
#include "ir/printer.h"

namespace kiln {

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string dot_to_svg(const std::string& dot_text) {
  // Files rather than pipes: no deadlock on large graphs, and dot's stderr
  // kept for the error message.
  char tmpl[] = "/tmp/kiln-dot-XXXXXX";
  if (!mkdtemp(tmpl)) fail("cannot create a temporary folder for Graphviz");
  std::filesystem::path dir(tmpl);
  std::ofstream(dir / "g.dot") << dot_text;
  std::string cmd = fmt::format("dot -Tsvg '{}' -o '{}' 2> '{}'", (dir / "g.dot").string(), (dir / "g.svg").string(),
                                (dir / "err.txt").string());
  int status = std::system(cmd.c_str());
  std::string svg = slurp(dir / "g.svg"), err = slurp(dir / "err.txt");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
      fail("--format svg needs Graphviz's `dot` on PATH (tools/install_deps.sh installs graphviz)");
    fail("Graphviz dot failed (status {}): {}", status, err);
  }
  return svg;
}

std::string render_graph(const Graph& g, const std::string& format, const DotOptions& dot) {
  if (format == "text") return print_graph(g);
  if (format == "dot") return print_dot(g, dot);
  if (format == "svg") return dot_to_svg(print_dot(g, dot));
  fail("--format: '{}' is not one of text, dot, svg", format);
}

}  // namespace kiln
