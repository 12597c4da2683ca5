// `kiln conformance --backend gpu`: one data set's imported graph (the set's
// size-deciding inputs frozen, as for --write-plans) through the passes and
// built into the static plan `kiln compile --target sm_XX` would write (sizes
// decided by the data computed at their bounds, as compile_model does), loaded by
// the runtime's GPU engine (the C API, kiln/kiln.hpp) and run once on the
// GPU with the set's inputs. No GPU, or a driver error, is the test's error:
// the run never falls back to the CPU.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln {

// Runs the passes on `imported` (compile_graph). The outputs in its output order, trimmed to their run-time shape
// where the plan computed a size at its bound.
std::vector<Tensor> run_graph_on_gpu(Graph& imported, const std::map<std::string, Tensor>& feed,
                                     const CompileOptions& compile, const std::string& model_path);

}  // namespace kiln
