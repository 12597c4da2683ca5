#include "tools/kiln/cli_style.h"

#include <CLI/CLI.hpp>

#include <cctype>
#include <map>
#include <regex>
#include <sstream>

#include "compiler/compile.h"

namespace kiln {

namespace {

int g_verbosity = 0;

const std::vector<std::string> kGroupOrder = {"Model", "Build", "Runtime", "Reporting"};

// Groups of options registered without one, by long (or only) name.
const std::map<std::string, std::string>& default_groups() {
  static const std::map<std::string, std::string> m = {
      {"shapes", "Model"},           {"batch", "Model"},           {"output", "Model"},
      {"split-input-file", "Model"}, {"backend", "Runtime"},       {"iterations", "Runtime"},
      {"warmup-ms", "Runtime"},      {"jobs", "Runtime"},          {"timeout", "Runtime"},
      {"filter", "Runtime"},         {"tolerance", "Runtime"},     {"nvrtc-check", "Runtime"},
      {"inputs", "Runtime"},         {"outputs", "Reporting"},     {"json", "Reporting"},
      {"verbose", "Reporting"},      {"show-errors", "Reporting"}, {"require-pass", "Reporting"},
      {"baseline", "Reporting"},     {"conformance", "Reporting"}, {"export-json", "Reporting"},
      {"profile", "Reporting"},
  };
  return m;
}

std::string long_name(const CLI::Option* o) {
  if (!o->get_lnames().empty()) return o->get_lnames().front();
  if (!o->get_snames().empty()) return o->get_snames().front();
  return o->get_name();
}

class GroupedFormatter : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    std::stringstream out;
    out << make_description(app) << make_usage(app, name);
    std::vector<std::string> groups = kGroupOrder;
    for (const std::string& g : app->get_groups())
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
    for (const std::string& g : groups) {
      // Positionals (the model, test folders) lead the Model group.
      std::vector<const CLI::Option*> opts =
          app->get_options([&](const CLI::Option* o) { return o->get_group() == g && !o->nonpositional(); });
      for (const CLI::Option* o : app->get_options([&](const CLI::Option* o) {
             return o->get_group() == g && o->nonpositional() && o != app->get_help_ptr();
           }))
        opts.push_back(o);
      if (!g.empty() && g != "Help" && !opts.empty()) out << make_group(g, false, opts);
    }
    std::vector<const CLI::Option*> help;
    if (app->get_help_ptr()) help.push_back(app->get_help_ptr());
    for (const CLI::Option* o : app->get_options([](const CLI::Option* o) { return o->get_group() == "Help"; }))
      help.push_back(o);
    out << make_group("Help", false, help);
    out << make_subcommands(app, mode) << '\n' << make_footer(app);
    return out.str();
  }

  // "--no-opt{false}" is how CLI11 spells a flag that sets false; show "--no-opt".
  std::string make_option_name(const CLI::Option* o, bool positional) const override {
    return std::regex_replace(CLI::Formatter::make_option_name(o, positional), std::regex("\\{[^}]*\\}"), "");
  }
};

void style(CLI::App& app, const std::shared_ptr<GroupedFormatter>& f) {
  app.formatter(f);
  for (CLI::Option* o : app.get_options()) {
    if (o == app.get_help_ptr()) continue;
    if (long_name(o) == "version") o->group("Help");
    if (!o->nonpositional()) {
      o->group("Model");
    } else if (o->get_group() == "Options" || o->get_group() == "OPTIONS") {
      auto it = default_groups().find(long_name(o));
      if (it != default_groups().end()) o->group(it->second);
    }
    // Descriptions written as "Build: ..." before groups were shown.
    std::string d = o->get_description();
    for (const std::string& g : kGroupOrder)
      if (d.rfind(g + ": ", 0) == 0) {
        d = d.substr(g.size() + 2);
        // Lists of values ("fp32 | tf32") keep their case.
        if (!d.empty() && d.find(" | ") == std::string::npos)
          d[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(d[0])));
        o->description(d);
      }
  }
  for (CLI::App* sub : app.get_subcommands({})) style(*sub, f);
}

}  // namespace

void add_verbosity_flag(CLI::App& app) {
  app.add_flag_function(
         "-v,--verbose", [](int64_t n) { g_verbosity = static_cast<int>(n); },
         "More output: -v per-pass statistics, bench iterations, failing tests; -vv also IR after each changing pass")
      ->group("Reporting");
  app.fallthrough();
}

void apply_cli_style(CLI::App& app) { style(app, std::make_shared<GroupedFormatter>()); }

int verbosity() { return g_verbosity; }

void apply_verbosity(std::initializer_list<CompileOptions*> opts) {
  for (CompileOptions* o : opts) {
    if (g_verbosity >= 1) o->stats = true;
    if (g_verbosity >= 2) o->pipeline.print_after_change = true;
  }
}

}  // namespace kiln
