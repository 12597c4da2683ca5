// The command-line side of compiler/: the flags that fill CompileOptions
// (compiler/compile.h) and TuningOptions (compiler/tuning.h). CLI11 stays
// inside tools/; the compiler library takes plain structs.
#pragma once

#include "compiler/compile.h"
#include "compiler/tuning.h"

namespace CLI {
class App;
}

namespace kiln {

// Adds the Build/Reporting flags (--precision, --target, --passes, --no-opt,
// --print-ir-*, --stop-after, --dump-dir, --no-verify-each, --stats) to a
// subcommand, writing into `o`.
void add_compile_flags(CLI::App* cmd, CompileOptions& o);

// Adds --tune, --tuning-cache, --tuning-gpu and --tune-iterations.
void add_tuning_flags(CLI::App* cmd, TuningOptions& o);

}  // namespace kiln
