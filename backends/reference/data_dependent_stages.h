// Running a graph with data-dependent result sizes (ir/data_dependent.h,
// docs/dynamic_shapes.md "Data-dependent sizes"), each static graph through
// a callback: the reference executor (the runtime's CPU path) or a backend
// by name (backends/data_dependent_run.h, ref and sim).
//
// The graph is cut at its data-dependent nodes (nonzero, non_max_suppression,
// topk with a k operand). The nodes between two of them form a stage: a graph
// of their own whose inputs are the values they read from earlier and whose
// outputs are the values read later. Each stage is specialised to the symbol
// values known so far (ir/specialize.h), so it is an ordinary static graph:
// the caller's passes (`prepare`) and the backend's kernels see nothing new.
// Each data-dependent node runs lowered to its bounded form
// (ops/data_dependent_size.h), alone: its result allocated at the upper bound
// its operands' actual shapes give, the count written by its kernel (topk: the
// k operand's value). The result is trimmed to the count, the node's size
// symbol bound to it, and the next stage specialised with it.
//
// A stage is compiled when it runs (kernels are cached by source, so a
// repeated count costs an emit, not a compile). What a GPU plan would need
// (one plan with shape-generic consumers, a device-side count read once per
// node) is not built: plans refuse graphs with data-dependent sizes.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/symbolic_dim.h"

namespace kiln {

struct DataDependentRunHooks {
  // Called on each static stage graph before it runs: the caller's passes
  // (compile_graph). Not called on the lowered data-dependent nodes, which
  // run as they are. May be empty.
  std::function<void(Graph&)> prepare;
  // Called on every static graph before it runs, stages after `prepare` and
  // each lowered data-dependent node (kiln conformance --nvrtc-check). May be
  // empty.
  std::function<void(const Graph&)> inspect;
};

struct DataDependentRunResult {
  std::vector<Tensor> outputs;  // one per graph output, at their run-time sizes
  SymbolBindings symbols;       // every symbol's value: the inputs' and the data's
  int stages = 0;               // static stage graphs run
};

// Runs one static graph (a stage, or a lowered data-dependent node) with
// its inputs by name; returns its outputs in order.
using RunStaticGraph = std::function<std::vector<Tensor>(Graph& g, const std::map<std::string, Tensor>& feed)>;

// Runs `g` with `inputs` by name, each static graph through `run_static`.
// The inputs give the values of the input symbols (bind_symbols); each
// data-dependent node, its own. Throws kiln::Error naming the node when a
// count falls outside its symbol's range or a topk k outside [0, axis size].
DataDependentRunResult run_data_dependent_stages(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                                 const RunStaticGraph& run_static,
                                                 const DataDependentRunHooks& hooks = {});

// The nodes [lo, hi) of `g` (in its node order) as a graph of their own:
// inputs are the values they read from before lo (graph inputs keep their
// names; results of earlier nodes become inputs of the same name), outputs
// the values of the range that nodes from hi on, or g's outputs, read.
std::unique_ptr<Graph> extract_stage(const Graph& g, size_t lo, size_t hi);

// `t` with dim `axis` cut to its first `count` entries.
Tensor trim_to_count(const Tensor& t, int axis, int64_t count);

}  // namespace kiln
