// The import every compile starts with: the ONNX frontend in collecting mode,
// so a model with several nodes kiln cannot compile fails at once with all of
// them listed (file, node, op, problem), before any pass runs. `kiln inspect`
// reports the same collection without failing.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "compiler/model_source.h"
#include "frontend/onnx_import.h"

namespace kiln {

struct CollectedImport {
  ImportResult result;                  // incomplete when problems is not empty
  std::vector<ImportProblem> problems;  // every node kiln cannot import
  std::string model_error;              // a problem with the model as a whole
  bool model_error_unsupported = false;
};

// Imports `source` collecting every node problem instead of stopping at the first.
CollectedImport import_collecting(const ModelSource& source, ImportOptions io);

// Imports `source` checking every node; throws kiln::Unsupported listing all
// the nodes kiln cannot import (one per line) when there are any, kiln::Error
// for a plan given as a model or a --shapes name that is no input.
ImportResult import_checked(const ModelSource& source, const ImportOptions& io);

// The detail of a problem message: the text after "node "x" (Op): ".
std::string problem_detail(const ImportProblem& p);

// Throws kiln::Error when `shapes` names something that is not one of
// `inputs` (the model's inputs), listing those that exist.
void check_shapes_names(const std::map<std::string, Shape>& shapes, const std::vector<std::string>& inputs,
                        const std::string& model, const std::string& flag = "--shapes");

}  // namespace kiln
