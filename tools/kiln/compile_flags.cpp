#include "tools/kiln/compile_flags.h"

#include <CLI/CLI.hpp>

#include <limits>
#include <fmt/format.h>

#include "compiler/targets.h"
#include "ir/error.h"

namespace kiln {

void add_compile_flags(CLI::App* cmd, CompileOptions& o) {
  CLI::Option* precision = cmd->add_option("--precision", o.pass.precision, "Build: fp32 | tf32 | fp16 | bf16")
                               ->check(CLI::IsMember(supported_precisions()))
                               ->group("Build");
  // trtexec's spellings. One precision per build: two of them is an error,
  // not "the last one wins".
  std::vector<CLI::Option*> aliases{precision};
  for (const char* p : {"fp16", "bf16", "tf32"}) {
    CLI::Option* a = cmd->add_flag_callback(
        fmt::format("--{}", p), [&o, p] { o.pass.precision = p; },
        fmt::format("Build: as --precision {} (trtexec)", p));
    a->group("Build");
    for (CLI::Option* other : aliases) a->excludes(other);
    aliases.push_back(a);
  }
  // INT8 needs calibration or Q/DQ nodes kiln does not lower: refuse rather
  // than build an fp32 plan the user believes is int8.
  cmd->add_flag_callback(
         "--int8",
         [] {
           throw CLI::ValidationError("--int8",
                                      "INT8 is not supported yet; kiln builds fp32, tf32, fp16 and bf16 "
                                      "(--precision, or --fp16 / --bf16 / --tf32)");
         },
         "Build: not supported yet (refused with a message)")
      ->group("Build");
  // The default is the caller's (`kiln compile`: auto, compiler/targets.h).
  cmd->add_option(
         "--target", o.pass.target,
         fmt::format(
             "Build: auto (this machine's GPU, else portable) | portable (CUBINs for {} + PTX for "
             "newer GPUs) | cpu (no GPU kernels) | sm_80 | sm_86 | sm_89 | sm_90 | sm_90a (Hopper only; opts in "
             "to the wgmma GEMM kernels)",
             fmt::join(portable_archs(), ", ")))
      ->check(CLI::IsMember(supported_targets()))
      ->capture_default_str()
      ->group("Build");
  // Plans have no per-node CPU fallback: refuse the flag users of other
  // engines reach for, rather than ignore it.
  cmd->add_flag_callback(
         "--allow-cpu-fallback",
         [] {
           throw CLI::ValidationError("--allow-cpu-fallback",
                                      "not supported: kiln plans run every node on the GPU or the whole model on "
                                      "the CPU (--target cpu); there is no per-node CPU fallback");
         },
         "Build: not supported (refused with a message): plans have no per-node CPU fallback")
      ->group("Build");
  cmd->add_option("--passes", o.passes, "Build: run these passes instead of the default pipeline")
      ->delimiter(',')
      ->group("Build");
  cmd->add_flag("--no-opt{false}", o.optimize, "Build: run no passes (the imported graph)")->group("Build");
  cmd->add_option("--print-ir-before", o.pipeline.print_before, "Reporting: print IR before pass P")
      ->delimiter(',')
      ->group("Reporting");
  cmd->add_option("--print-ir-after", o.pipeline.print_after, "Reporting: print IR after pass P")
      ->delimiter(',')
      ->group("Reporting");
  cmd->add_flag("--print-ir-after-all", o.pipeline.print_after_all, "Reporting: print IR after every pass")
      ->group("Reporting");
  cmd->add_flag("--print-ir-after-change", o.pipeline.print_after_change,
                "Reporting: print IR after each pass that changed it")
      ->group("Reporting");
  cmd->add_option("--stop-after", o.pipeline.stop_after, "Reporting: stop after pass P (bisecting)")
      ->group("Reporting");
  cmd->add_option("--dump-dir", o.pipeline.dump_dir,
                  "Reporting: write NNN.after.<pass>.kir per pass here (compile: also kernels/*.cu, "
                  "final.svg and index.html)")
      ->group("Reporting");
  cmd->add_flag("--no-verify-each{false}", o.pipeline.verify_each, "Reporting: skip the verifier between passes")
      ->group("Reporting");
  cmd->add_option("--cache-dir", o.cache_dir,
                  "Build: kernel cache directory (default $KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln, ~/.cache/kiln)")
      ->group("Build");
  cmd->add_flag("--no-kernel-cache{false}", o.kernel_cache, "Build: compile every kernel with NVRTC, no cache")
      ->group("Build");
  cmd->add_flag("--stats", o.stats, "Reporting: per-pass statistics (changed, time, node counts)")->group("Reporting");
  cmd->add_flag("--progress", o.show_progress,
                "Reporting: progress of import, passes and kernel compilation on stderr from the start, also when "
                "it is not a terminal (on a terminal it shows once a step takes over a second)")
      ->group("Reporting");
}

void add_batch_flag(CLI::App* cmd, int& batch) {
  cmd->add_option("--batch", batch,
                  "Batch size: sets the first dim of every input whose first dim is a batch dim (symbolic or 1); "
                  "--shapes wins for the inputs it names")
      // Not CLI::PositiveNumber: its message prints the range up to DBL_MAX in full.
      ->check(CLI::Range(1, std::numeric_limits<int>::max()))
      ->group("Model");
}

void add_shape_profile_flags(CLI::App* cmd, std::vector<std::string>& min, std::vector<std::string>& opt,
                             std::vector<std::string>& max) {
  // One value per use of the flag (a positional after it stays the model).
  // trtexec's spellings (--minShapes...) are accepted as they are for --saveEngine.
  cmd->add_option("--min-shapes,--minShapes", min,
                  "Dynamic shapes: the smallest shape of each dynamic input, name:1x8,...; repeat the three flags for "
                  "more shape profiles (docs/dynamic_shapes.md)")
      ->allow_extra_args(false)
      ->group("Model");
  cmd->add_option("--opt-shapes,--optShapes", opt,
                  "Dynamic shapes: the preferred shapes, name:4x64,... (default: --max-shapes)")
      ->allow_extra_args(false)
      ->group("Model");
  cmd->add_option("--max-shapes,--maxShapes", max, "Dynamic shapes: the largest shapes, name:32x512,...")
      ->allow_extra_args(false)
      ->group("Model");
}

std::vector<ShapeRanges> parse_shape_profiles(const std::string& model, const std::vector<std::string>& min,
                                              const std::vector<std::string>& opt,
                                              const std::vector<std::string>& max) {
  if (min.size() != max.size() || (!opt.empty() && opt.size() != min.size()))
    fail(
        "{}: {} --min-shapes, {} --opt-shapes and {} --max-shapes: each shape profile takes one --min-shapes and one "
        "--max-shapes (and --opt-shapes for all or none)",
        model, min.size(), opt.size(), max.size());
  std::vector<ShapeRanges> r;
  for (size_t k = 0; k < min.size(); ++k)
    r.push_back({parse_shapes_flag(min[k], "--min-shapes"),
                 opt.empty() ? std::map<std::string, Shape>{} : parse_shapes_flag(opt[k], "--opt-shapes"),
                 parse_shapes_flag(max[k], "--max-shapes")});
  return r;
}

void set_shape_profiles(CompileModelOptions& o, const std::vector<ShapeRanges>& profiles) {
  for (size_t k = 0; k < profiles.size(); ++k) {
    if (k == 0) {
      o.min_shapes = profiles[0].min;
      o.opt_shapes = profiles[0].opt;
      o.max_shapes = profiles[0].max;
    } else {
      o.more_profiles.push_back(profiles[k]);
    }
  }
}

void add_tuning_flags(CLI::App* cmd, TuningOptions& o) {
  cmd->add_flag("--tune", o.tune,
                "Build: time GEMM tile candidates on the GPU for the problems the tuning cache lacks, store the "
                "winners there and use them (needs a GPU of the --target arch)")
      ->group("Build");
  cmd->add_option("--tuning-cache", o.cache_file,
                  "Build: tuning cache (JSON) whose winners this build uses (with --tune: also updated; default "
                  "<kernel cache dir>/tuning.json)")
      ->group("Build");
  cmd->add_option("--tuning-gpu", o.gpu,
                  "Build: whose winners apply when the tuning cache holds several GPUs of the target's arch")
      ->group("Build");
  cmd->add_option("--tune-iterations", o.iterations, "Build: timed launches per candidate with --tune (median)")
      ->check(CLI::Range(1, 100000))
      ->group("Build");
}

}  // namespace kiln
