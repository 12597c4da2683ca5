// --batch N, as trtexec's users know it: the model's batch dim set at import.
// Shared by `kiln compile`, `run` and `bench` (and any caller of
// ImportOptions::batch) so the three agree on which inputs have a batch dim.
#pragma once
#include <map>
#include <string>

#include "ir/tensor.h"

namespace onnx {
class GraphProto;
}

namespace kiln {

// The input shapes --batch N gives: every graph input that is not an
// initializer and not named in `given` (--shapes wins for the inputs it names),
// whose first dim is a batch dim (a symbolic or unknown dim, or 1: models are
// often exported at batch 1), becomes [N, rest...]. Throws kiln::Error naming
// `file` when a later dim of such an input is not fixed, or when no input has
// a batch dim first.
std::map<std::string, Shape> batch_input_shapes(const onnx::GraphProto& g, int64_t batch,
                                                const std::map<std::string, Shape>& given, const std::string& file);

}  // namespace kiln
