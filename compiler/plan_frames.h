// Internal to the plan builder (compiler/plan_writer.cpp and
// compiler/plan_control_flow.cpp): the launch list of one graph, the model's
// own or a control-flow region's, over where its values live at run time.
//
// A region is a frame of its own: its memory plan's arena values sit at the
// frame's arena offset, past the model's arena (every region of one node
// starts at the same offset, since one runs at a time; nested regions start
// past their parent's frame), and its parameters and results are read and
// written where the control-flow record says (runtime/plan_format.h
// RegionPlan): the node's own operands and results, or arena slots the
// runtime fills (loop-carried values, scan slices).
#pragma once
#ifdef KILN_HAVE_CODEGEN
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codegen/kernel_build.h"
#include "compiler/plan_writer.h"
#include "passes/memory_plan.h"

namespace kiln::planbuild {

inline uint64_t align_up(uint64_t v) { return (v + plan::kAlignment - 1) / plan::kAlignment * plan::kAlignment; }

// Where each value of one graph lives at run time, from its memory plan.
struct Locator {
  const Graph& g;
  const MemoryPlan& mem;
  // Every constant of the model, regions' included: its weights entry.
  const std::unordered_map<const Value*, uint32_t>& constant_index;
  uint64_t arena_base = 0;  // the frame's arena offset
  // A region's parameters and results (null: the model's inputs and outputs).
  const std::vector<plan::BufferRef>* params = nullptr;
  const std::vector<plan::BufferRef>* returns = nullptr;
  std::unordered_map<const Value*, uint32_t> input_index;

  Locator(const Graph& graph, const MemoryPlan& m, const std::unordered_map<const Value*, uint32_t>& constants,
          uint64_t base = 0, const std::vector<plan::BufferRef>* ps = nullptr,
          const std::vector<plan::BufferRef>* rs = nullptr);
  plan::BufferRef at(const Value* v) const;
  // Where graph output `j` is written (the caller's buffer, or a region result).
  plan::BufferRef output(size_t j) const;
};

// Every non-view node's kernels: the prebuilt ones (PlanBuildOptions::kernels)
// or emitted here (regions' nodes included).
struct NodeKernels {
  std::unordered_map<const Node*, const std::vector<codegen::NodeKernel>*> of;
  // A plan with shape profiles: per node of the graph at its largest shapes
  // (whose launch list is built), the symbolic graph's node its kernels came
  // from (the one a launch that does not fit names, so the thread cap applies).
  std::unordered_map<const Node*, const Node*> origin;
  std::vector<std::unique_ptr<std::vector<codegen::NodeKernel>>> emitted;
};

// What the launch lists of all frames share while they are built.
struct Builder {
  plan::Plan& p;
  const PlanBuildOptions& o;
  const NodeKernels& nks;
  MemoryPlanOptions memory_options;  // for regions' memory plans (kernels' workspace)
  std::unordered_map<const Value*, uint32_t> constant_index{};
  std::vector<codegen::KernelSource> sources{};  // distinct kernels in first-use order
  std::map<std::string, uint32_t> kernel_index{};
  std::vector<std::pair<plan::Step, const Node*>> launched{};  // every kernel step, for the checks after NVRTC
  uint64_t arena_end = 0;                                      // the end of the deepest frame
  // A plan with shape profiles: the top-level graph (at its largest shapes),
  // the symbols' largest values, and the steps of its launch list whose
  // kernels are shape-generic (codegen::NodeKernel::symbols).
  const Graph* top = nullptr;
  SymbolBindings largest{};
  std::vector<plan::GenericLaunch> generic{};
};

// The launches of node `n` (at position `node` of its graph) by `kernels`,
// appended to `steps`; a shape-generic kernel's launch to `generic` (its
// step an index into `steps`; only in the top-level list, `top`). With
// `sized_as` (the same node at another shape, which `kernels` were emitted
// for: a launch variant), the bindings are `n`'s buffers with its sizes.
void append_kernel_steps(const Node& n, uint32_t node, const std::vector<codegen::NodeKernel>& kernels,
                         const Locator& loc, Builder& b, bool top, std::vector<plan::Step>& steps,
                         std::vector<plan::GenericLaunch>& generic, const Node* sized_as = nullptr);
// The steps of graph `g` (its nodes, then copies of outputs not written in
// place); control-flow nodes' frames start at `nested_base`.
std::vector<plan::Step> launch_list(const Graph& g, const Locator& loc, Builder& b, uint64_t nested_base);
// A control step for if/loop/scan node `n` at position `pos` of its graph:
// a plan::ControlFlow record (appended to the plan) with each region's frame.
plan::Step control_step(const Node& n, uint32_t pos, const Locator& outer, Builder& b, uint64_t nested_base);

}  // namespace kiln::planbuild
#endif
