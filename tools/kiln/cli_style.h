// The look of `kiln --help` / `kiln CMD --help` and the global -v levels.
// Options are shown in trtexec's groups, always in this order: Model, Build,
// Runtime, Reporting (positionals under Model); an option a subcommand left in
// CLI11's default group gets its group from a table of option names.
#pragma once
#include <initializer_list>

namespace CLI {
class App;
}

namespace kiln {

struct CompileOptions;

// Adds `-v,--verbose` (repeatable) to `app` and lets subcommands accept it
// (fallthrough). Call before registering subcommands.
void add_verbosity_flag(CLI::App& app);
// Groups, help formatter and description clean-up for `app` and every
// subcommand. Call after all subcommands are registered.
void apply_cli_style(CLI::App& app);

// How many -v were given: 0 quiet (default), 1 per-pass statistics (--stats),
// per-iteration timings in bench, every non-passing test in conformance;
// 2 also the IR after every pass that changed it (--print-ir-after-change).
int verbosity();
// Applies verbosity() to the compile options of the subcommands.
void apply_verbosity(std::initializer_list<CompileOptions*> opts);

}  // namespace kiln
