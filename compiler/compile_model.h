// The compiler as a library: compile_model() is the one entry the kiln CLI,
// the Python package and the tests call, so the pipeline is named once, here
// (as TVM's relax/pipeline.py names its own):
//
//   import (fail-fast coverage check: every node kiln cannot compile, listed)
//     -> passes (default pipeline or CompileOptions::passes)
//     -> tuning (GEMM tiles from a tuning cache / --tune, docs/tuning.md)
//     -> codegen (every kernel emitted, deduplicated and NVRTC-compiled once)
//     -> plan (runtime/plan_format.h; from the kernels just compiled)
//
// Errors are kiln::Error / kiln::Unsupported naming the model file and node,
// as the importer and the passes raise them. Nothing here parses a command
// line or writes to stdout/stderr by itself: messages go through the
// callbacks, so an embedding app decides where they end up.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/kernels_report.h"
#include "compiler/model_source.h"
#include "compiler/tuning.h"
#include "frontend/onnx_import.h"
#include "ir/tensor.h"

namespace kiln {

struct CompileModelOptions {
  // "auto" unless set: the local GPU's arch, else a portable GPU plan
  // (compiler/targets.h); "cpu" only when asked for.
  CompileModelOptions() { build.pass.target = "auto"; }
  // Target, precision, passes, --print-ir-*, --dump-dir, kernel cache, --stats.
  CompileOptions build;
  std::map<std::string, Shape> input_shapes;  // --shapes: names must be model inputs
  // --sequence-shapes / --empty-optionals: the structure of sequence and
  // optional inputs (frontend/onnx_import.h ImportOptions).
  std::map<std::string, std::vector<Shape>> sequence_shapes;
  std::vector<std::string> empty_optionals;
  // What messages call the shape options: kiln compile's flags, or the
  // builder API's own parameters (ShapeOptionNames::c_api(), python()...).
  ShapeOptionNames shape_option_names;
  // --min-shapes / --opt-shapes / --max-shapes (trtexec's meaning): the
  // dims a model leaves open become symbols with these ranges and the plan
  // records them as its shape profile (runtime/plan_profiles.h,
  // docs/dynamic_shapes.md). --opt-shapes defaults to --max-shapes.
  std::map<std::string, Shape> min_shapes, opt_shapes, max_shapes;
  // Further profiles (the three flags repeated, as trtexec takes them): the
  // same dynamic inputs with other ranges. The symbols' ranges span every
  // profile; the runtime takes the one a run's shapes lie in.
  struct ShapeRanges {
    std::map<std::string, Shape> min, opt, max;
  };
  std::vector<ShapeRanges> more_profiles;
  // GPU plans with profiles: which nodes get launches specialised for each
  // profile's opt shape (PlanBuildOptions::opt_variants).
  std::string opt_variants = "auto";
  int64_t batch = 0;               // --batch N: the batch dim of every input that has one (0: the model's)
  TuningOptions tuning;            // --tune / --tuning-cache (inactive: emitters' defaults)
  bool print_final_ir = false;     // the optimized graph to ir_out (--print-ir)
  std::ostream* ir_out = nullptr;  // null: std::cout
  bool write_plan = true;          // false: the report only (kiln compile without -o)
  // With write_plan: the plan is written into this file as it is made
  // (kiln compile -o), and CompileResult::plan stays empty; a GPT-2-sized
  // plan is then never held whole in memory beside the graph's weights.
  std::string plan_path;
  // Messages a person reads (the --stats tables, the kernels line, the tuning
  // line, the summary), each one or more whole lines ending in '\n'. May be empty.
  std::function<void(const std::string&)> log;
  // Long steps, with (step, done, total): "nodes imported" (per ONNX node),
  // "passes run" (per pass) and "kernels compiled" (from the compiling
  // threads). May be empty.
  std::function<void(const std::string& step, int done, int total)> progress;
};

struct CompileResult {
  std::vector<uint8_t> plan;  // serialized plan; empty unless write_plan (and no plan_path)
  int plan_gpu_kernels = 0;   // distinct kernels in the plan (0: no GPU kernels)
  std::string plan_target;
  std::string target_reason;  // what "auto" resolved to and why ("" for an explicit target)
  std::string no_gpu_reason;  // why the plan has no GPU kernels ("" when it has them)
  CompileReport passes;       // per-pass records (time, statistics)
  KernelsOutcome kernels;     // what NVRTC built (registers, spills, cache hits)
  nlohmann::json report;      // the `kiln compile --json` object
  // Wall times: import with its coverage check, the passes, codegen (emission
  // and NVRTC, including tuning), and assembling the plan.
  double import_ms = 0, passes_ms = 0, kernels_ms = 0, plan_ms = 0;
};

using ShapeRanges = CompileModelOptions::ShapeRanges;

// The ranges an import declares symbols with for these profiles: the one
// profile's, or with several the smallest min and the largest max of each
// input dim over all of them (each profile is checked against the graph
// afterwards). Profiles that name different inputs are an error naming `model`.
void span_shape_profiles(const std::vector<ShapeRanges>& all, ImportOptions& io, const std::string& model);
// "x in [1x3x16x16 .. 4x3x16x16], y in [...]": one profile's ranges.
std::string shape_profile_str(const ShapeRanges& r);
// The first profile holding every shape in `shapes` (inputs a profile does
// not name are not checked); -1 when none does, with `why` naming, per
// profile, the first input and dim outside it.
int matching_shape_profile(const std::vector<ShapeRanges>& all, const std::map<std::string, Shape>& shapes,
                           std::string* why);

// Throws kiln::Error for a target or precision kiln does not build (as the
// CLI's flags refuse them), for a GPU target with a node no kernel emitter
// handles (naming the model and every such node), then as the pipeline's
// steps do.
CompileResult compile_model(const ModelSource& source, const CompileModelOptions& o);

}  // namespace kiln
