// The command-line side of compiler/: the flags that fill CompileOptions
// (compiler/compile.h) and TuningOptions (compiler/tuning.h). CLI11 stays
// inside tools/; the compiler library takes plain structs.
#pragma once

#include "compiler/compile.h"
#include "compiler/compile_model.h"
#include "compiler/tuning.h"

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace kiln {

// Adds the Build/Reporting flags (--precision, --target, --passes, --no-opt,
// --print-ir-*, --stop-after, --dump-dir, --no-verify-each, --stats) to a
// subcommand, writing into `o`.
void add_compile_flags(CLI::App* cmd, CompileOptions& o);

// Adds --batch N (Model group): the first dim of every input whose first dim
// is a batch dim (symbolic or 1) becomes N (frontend/batch_dim.h); 0 leaves
// the model's. The same flag on compile, run and bench.
void add_batch_flag(CLI::App* cmd, int& batch);

// Adds --min-shapes, --opt-shapes and --max-shapes (Model group; trtexec's
// meaning, docs/dynamic_shapes.md), repeatable: the k-th use of each flag is
// shape profile k, as trtexec takes several optimization profiles. The same
// flags on compile and run.
void add_shape_profile_flags(CLI::App* cmd, std::vector<std::string>& min, std::vector<std::string>& opt,
                             std::vector<std::string>& max);
// The profiles those flags give: one --min-shapes and one --max-shapes per
// profile, --opt-shapes for all or none (else opt is each profile's max); an
// error naming `model` and the counts otherwise. Empty when none is given.
std::vector<ShapeRanges> parse_shape_profiles(const std::string& model, const std::vector<std::string>& min,
                                              const std::vector<std::string>& opt, const std::vector<std::string>& max);
// Profile 0 into o.min/opt/max_shapes, the others into o.more_profiles.
void set_shape_profiles(CompileModelOptions& o, const std::vector<ShapeRanges>& profiles);

// Adds --tune, --tuning-cache, --tuning-gpu and --tune-iterations.
void add_tuning_flags(CLI::App* cmd, TuningOptions& o);

}  // namespace kiln
