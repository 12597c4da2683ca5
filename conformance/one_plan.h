// One plan for every data set of a conformance test folder: when the model
// leaves input dims open (a dim_param or no value) and the test_data_set_N
// folders feed inputs of different shapes, `kiln conformance` compiles the
// model ONCE into a CPU plan whose shape profile spans the sets' shapes
// (smallest and largest of each dim, as TensorRT's min/max), then runs every
// set from that plan: through the runtime's C API with the shapes set per set
// on `ref`, and, on `sim`, the plan's graph specialised to each set's shapes
// through the kernels codegen emits for them (what `kiln run PLAN --backend
// sim` runs; the plan holds no shape-generic kernels yet).
// Folders whose sets share one shape, and models with no open dim, are left
// to the per-set static path (run_one_plan_sets returns nothing).
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "conformance/conformance.h"
#include "ir/tensor.h"

namespace kiln {

struct OnePlanOutcome {
  std::string status;   // pass, fail
  std::string message;  // the first difference, or the passing outputs' errors
  std::string profile;  // "3 sets from one plan, profile batch in [1, 5]"
};

// Compares one set's outputs with the expected ones (conformance.cpp's
// comparison): the first difference, "" when all match; appends the float
// outputs' error figures to `errors`.
using CompareSet = std::function<std::string(const std::vector<Tensor>& got, const ConformanceSet& set,
                                             const std::vector<std::string>& output_names, std::string& errors)>;

// Runs the sets of the test folder `dir` from one plan when its model has
// open input dims and the sets' input shapes differ; std::nullopt otherwise
// (the caller runs each set as before). Errors of the compile or the runtime
// propagate as kiln::Error / kiln::Unsupported.
std::optional<OnePlanOutcome> run_one_plan_sets(const std::string& dir, const std::vector<ConformanceSet>& sets,
                                                const ConformanceOptions& opts, const CompareSet& compare);

// The model's runtime inputs whose declared shape leaves a dim open.
std::vector<std::string> inputs_with_open_dims(const std::string& model_path);

}  // namespace kiln
