// Command lines that parse but mean nothing: an unknown subcommand, compile
// flags given with an already compiled plan, an unknown backend.
// (A --shapes name that is no input: compiler/import_checked.h.)
// Each is a user mistake that kiln used to accept silently (or answer with a
// misleading message), so each is an error (exit 1) naming what exists.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace CLI {
class App;
}

namespace kiln {

// `kiln frobnicate`: CLI11 says only "A subcommand is required". Returns the
// error text naming the word and the subcommands when the first non-option
// argument is not one of app's subcommands; empty otherwise.
std::string unknown_subcommand_error(const CLI::App& app, int argc, const char* const* argv);

// `--target cpu --target sm_90`: CLI11 says "--target: At Most 1 required
// but received 2". Returns a message naming the flag and saying to give it
// once (which value would win is not obvious, so kiln does not pick one);
// empty when `what` (a CLI::ParseError's text) is another error.
std::string repeated_flag_error(const std::string& what);

// Throws kiln::Error when `cmd` was given a flag that only compiling uses
// (--shapes, --batch, --precision and its aliases, --target, --passes, -O,
// --print-ir-*, --dump-dir, --stats, ...): a plan is already compiled and
// would ignore them.
void reject_compile_flags_for_plan(const CLI::App& cmd, const std::string& plan_path);

// `kiln run --backend REF`: an unknown --backend used to be found only once
// the run began, after the no-GPU warning and the import. For CLI11's check()
// while the command line is parsed: "" for auto, gpu, ref or sim, else the
// error naming the word and the backends (and the lower-case spelling when
// only the case is wrong).
std::string check_backend_name(const std::string& name);

}  // namespace kiln
