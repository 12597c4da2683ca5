#include "compiler/dump_index.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "ir/dot_printer.h"
#include "ir/error.h"
#include "compiler/ir_picture.h"
#ifdef KILN_HAVE_CODEGEN
#include "codegen/kernel_build.h"
#endif

namespace kiln {

namespace {

namespace fs = std::filesystem;

std::string html_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    switch (c) {
      case '&':
        r += "&amp;";
        break;
      case '<':
        r += "&lt;";
        break;
      case '>':
        r += "&gt;";
        break;
      case '"':
        r += "&quot;";
        break;
      default:
        r += c;
    }
  }
  return r;
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  if (!f) fail("--dump-dir: cannot write {}", p.string());
  f << text;
}

}  // namespace

int write_dump_index(const Graph& g, const CompileOptions& o, const std::string& model) {
  const fs::path dir = o.pipeline.dump_dir;
  fs::create_directories(dir);
  std::ostringstream kernels_html;
  int written = 0;
#ifdef KILN_HAVE_CODEGEN
  codegen::KernelBuildOptions ko;
  ko.arch = o.pass.target == "cpu" ? "sm_90" : o.pass.target;
  codegen::GraphKernels gk = codegen::build_graph_kernels(g, ko, /*compile=*/false);
  fs::create_directories(dir / "kernels");
  std::set<std::string> seen;
  kernels_html << "<table>\n<tr><th>#</th><th>Node</th><th>Op</th><th>Kernel</th><th>Grid</th><th>Block</th>"
                  "<th>Dyn. shared</th></tr>\n";
  int launch = 0;
  for (const codegen::NodeLaunches& nl : gk.launches) {
    for (const codegen::NodeKernel& k : nl.kernels) {
      std::string file = "kernels/" + k.name + ".cu";
      if (seen.insert(k.name).second) {
        write_file(dir / file, k.source);
        ++written;
      }
      kernels_html << fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td><a href=\"{}\">{}</a></td><td>{}x{}x{}</td><td>{}x{}x{}</td>"
          "<td>{}</td></tr>\n",
          launch++, html_escape(nl.node->name()), html_escape(nl.node->op()), html_escape(file), html_escape(k.name),
          k.grid.x, k.grid.y, k.grid.z, k.block.x, k.block.y, k.block.z, k.shared_bytes);
    }
  }
  kernels_html << "</table>\n";
  if (!gk.missing.empty()) {
    kernels_html << "<p>Nodes without a kernel emitter (no source):</p>\n<ul>\n";
    for (const std::string& m : gk.missing) kernels_html << "<li>" << html_escape(m) << "</li>\n";
    kernels_html << "</ul>\n";
  }
#else
  (void)g;
  kernels_html << "<p>kiln was built without codegen: no kernel sources.</p>\n";
#endif

  std::string picture;
  try {
    write_file(dir / "final.svg", dot_to_svg(print_dot(g)));
    picture =
        "<p><a href=\"final.svg\">final.svg</a> (fused groups are clusters) &middot; "
        "<a href=\"final.dot\">final.dot</a></p>\n<object data=\"final.svg\" type=\"image/svg+xml\" "
        "style=\"max-width:100%\"></object>\n";
  } catch (const Error& e) {
    picture = fmt::format("<p>No picture: {}. <a href=\"final.dot\">final.dot</a></p>\n", html_escape(e.what()));
  }

  std::vector<std::string> ir_files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".kir") ir_files.push_back(e.path().filename().string());
  std::sort(ir_files.begin(), ir_files.end());
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kiln compile: " << html_escape(model)
       << "</title>\n<style>body{font-family:sans-serif} td,th{padding:2px 8px;text-align:left} "
          "tr:nth-child(even){background:#f2f2f2}</style></head><body>\n"
       << "<h1>kiln compile: " << html_escape(model) << "</h1>\n"
       << fmt::format("<p>target {}, precision {}</p>\n", html_escape(o.pass.target), html_escape(o.pass.precision))
       << "<h2>IR after each pass</h2>\n<ol start=\"0\">\n";
  for (const std::string& f : ir_files) html << fmt::format("<li><a href=\"{0}\">{0}</a></li>\n", html_escape(f));
  html << "</ol>\n<h2>Picture</h2>\n"
       << picture << "<h2>Kernels (" << written << " distinct sources)</h2>\n"
       << kernels_html.str() << "</body></html>\n";
  write_file(dir / "index.html", html.str());
  return written;
}

}  // namespace kiln
