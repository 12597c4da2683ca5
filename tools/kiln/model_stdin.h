// `-` as a file name for what kiln reads: `kiln compile - -o m.plan`,
// `kiln run -`, `kiln inspect -`, `kiln bench -`, `kiln dump-ir -` read the
// ONNX model from standard input
// (`cat m.onnx | kiln run -`, `curl ... | kiln compile - -o m.plan`), as
// `kiln opt -` reads IR text, and `kiln run M --inputs x:-` reads input x
// (a .npy or TensorProto) from it. Messages name it "<stdin>". A model read
// so has no folder, so external data cannot be resolved: the frontend
// refuses it naming the tensor and the file it points to
// (frontend/tensor_proto.cpp). Refused with a message: a plan piped in (kiln
// reads plans from files), standard input that is empty, or a terminal
// (where the command would wait for input nobody types), and two readers of
// it (the model and an input, or two inputs). "./-" names a file called "-".
#pragma once
#include <string>

#include "compiler/model_source.h"
#include "ir/tensor.h"

namespace kiln {

inline constexpr const char* kStdinName = "<stdin>";

inline bool is_stdin_arg(const std::string& arg) { return arg == "-"; }

// `arg`'s model: a file, or standard input's bytes for "-". Throws
// kiln::Error when standard input is a terminal, empty, a plan, or was read
// already.
ModelSource model_source_of(const std::string& arg);

// Input `name` (--inputs NAME:-) from standard input, .npy or TensorProto as
// from a file; errors as model_source_of's, naming "<stdin>".
Tensor read_input_from_stdin(const std::string& name);

}  // namespace kiln
