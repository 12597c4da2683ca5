// Builds a plan (runtime/plan_format.h) from a compiled graph: the graph as
// IR text, its weights, the memory plan and, for a GPU target with every node
// covered by a kernel emitter (codegen/emitter_table.h's emitter_for), the
// kernels (CUDA source, CUBIN + PTX through NVRTC) and the launch list.
// Without NVRTC, for target "cpu", or when some node has no emitter yet, the
// plan has no GPU kernels and meta.no_gpu_reason says why (naming the nodes).
// Control flow left in the graph (if/loop/scan) becomes control steps whose
// regions have launch lists of their own (compiler/plan_frames.h), run
// host-driven by the runtime (runtime/plan_control_run.h).
// Deterministic: the same graph and options give the same plan bytes.
#pragma once
#include <filesystem>
#include <functional>
#include <string>

#include "ir/graph.h"
#include "runtime/plan_format.h"

namespace kiln {

namespace codegen {
struct GraphKernels;
}

struct PlanBuildOptions {
  std::string target = "cpu";  // cpu | portable | sm_XX (compiler/targets.h; not "auto")
  std::string precision = "fp32";
  std::filesystem::path kernel_cache_dir;       // empty: codegen's default
  bool use_cache = true;                        // false: every kernel through NVRTC
  std::function<void(int, int)> progress = {};  // after each distinct kernel compiled (done, total)
  std::string source_name = {};                 // the model file, for errors ("": none)
  // The kernels already emitted and compiled for this graph and target
  // (compiler/kernels_report.h's build_kernels, as compile_model runs it):
  // the plan takes them instead of emitting and compiling again. Null: here.
  const codegen::GraphKernels* kernels = nullptr;
  // A graph with symbolic dims: its shape profiles (compile_model's
  // --min/--opt/--max-shapes). The memory plan is laid out at their largest
  // shapes; the plan records them (runtime/plan_profiles.h).
  std::vector<plan::Profile> profiles = {};
  // A GPU plan with profiles: launches specialised for each profile's opt
  // shape (compiler/plan_writer_variants.h) for the nodes where the
  // performance model finds them faster ("auto"), for every node with a
  // shape-generic kernel ("all"), or for none ("none").
  std::string opt_variants = "auto";
};

// For a GPU target every kernel carries __launch_bounds__ and every launch is
// checked against the arch's per-block limits (codegen/launch_fit.h) before
// and after NVRTC. A launch that does not fit -- threads or shared memory
// before NVRTC, ptxas' registers x threads or static shared memory after it
// -- has its node emitted again with at most half its threads per block (the
// one thread cap, codegen::block_threads) and the plan is built again
// (unchanged kernels come from the kernel cache), until every launch fits. A
// launch the GPU would refuse with any variant -- a limit fewer threads
// cannot help (grid, parameter space), an emitter that keeps its block (fixed
// by its tiling), a block that misfits even at one warp -- is a kiln::Error
// naming `source_name`, the node, the kernel and the limit, never a plan.
plan::Plan build_plan(const Graph& g, const PlanBuildOptions& o);

// ONNX lets a model list one value twice in graph.output, and ONNX Runtime
// then returns it twice; a plan could hold both (the second a copy), but the
// runtime binds outputs by name (kiln_context_bind_output), so the second
// could never be bound and every run would fail ("output is not bound").
// Binding one buffer to both would make the GPU's output copy a copy onto
// itself. So a plan refuses it up front: a kiln::Error naming `model` (if not
// empty), the output and its positions, and what to change. The CPU backends
// (kiln run --backend ref/sim on the .onnx) return both, as ONNX Runtime does.
void refuse_duplicate_output_names(const Graph& g, const std::string& model);

// A GPU plan with shape profiles needs a shape-generic kernel for every node
// whose sizes are symbolic (codegen::why_not_shape_generic): throws
// kiln::Unsupported naming `model` (if not empty), the first node without
// one and its op, never a plan compiled at one fixed shape or a CPU
// fallback. Nothing for a graph without symbols.
void refuse_non_generic_nodes(const Graph& g, const std::string& model, const std::string& target);

// Node::describe() of every node that needs a kernel and has no emitter (all
// of them when kiln was built without codegen): a GPU target refuses them.
std::vector<std::string> nodes_without_kernel_emitter(const Graph& g);
// Whether this kiln was built with codegen (the CUDA toolkit's headers).
bool kiln_has_codegen();

}  // namespace kiln
