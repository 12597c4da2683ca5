// The inputs of `kiln run` and `kiln bench`: values from files
// (--inputs NAME:FILE, NumPy .npy or ONNX TensorProto .pb, told apart by
// their content), the others seeded random in a range that suits them
// (--input-range, else the index range of the Gather tables they feed, else
// the documented default), as users of polygraphy and trtexec expect.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "ir/tensor_io.h"

namespace CLI {
class App;
}

namespace kiln {

// --inputs and --input-range (alias --val-range, polygraphy's name), the same
// for `run` and `bench`.
void add_input_flags(CLI::App* cmd, std::string& files, std::vector<std::string>& ranges);

// An integer graph input whose value sets a result size (TopK's k from an
// input): a random value outside [lo, hi] would fail the run, so generated
// values stay inside it. `hi` < 0: the bound is not known before the run (a
// symbolic axis), and the input's value must be given.
struct SizeInput {
  int64_t lo = 0, hi = -1;
  std::string what;  // "k of node (topk) producing %top, axis 1 of size 6"
};

// The graph's size inputs, followed through value-preserving ops (cast,
// reshape, squeeze, unsqueeze, flatten, identity): input name -> its range,
// the tightest where it sets several sizes.
std::map<std::string, SizeInput> size_inputs(const Graph& g);

struct RunInputOptions {
  std::string files;                             // --inputs name:file.npy,name2:file2.pb
  std::vector<std::string> ranges;               // --input-range [NAME:][LO,HI] (repeatable)
  std::map<std::string, int64_t> index_bounds;   // input -> rows of the smallest table it indexes
  std::map<std::string, SizeInput> size_inputs;  // inputs that set a result size (size_inputs())
  // The shape a generated input takes when its declared type has symbolic
  // dims (a plan's profile: its opt shape); without one such an input must
  // come from --inputs.
  std::map<std::string, Shape> generate_shapes;
};

// Integer graph inputs used as indices into a Gather / GatherElements table
// (token ids into an embedding, BERT's token-type ids into a 2-row table),
// through value-preserving ops (cast, reshape, squeeze, unsqueeze, flatten,
// identity) and into fused bodies: input name -> the smallest table's
// extent along the gathered axis. Random values for them must stay below it.
std::map<std::string, int64_t> index_bounds(const Graph& g);

// Reads a tensor file: .npy when it starts with NumPy's magic, else an ONNX
// TensorProto (the .pb files of ONNX test data and onnx.numpy_helper).
Tensor read_input_file(const std::string& path);

// Inputs from files (checked against the declared types; each name once,
// each an input), the others seeded random (seed = position + 1) in their
// range. Errors name the flag, the file and the inputs that exist. When
// `described` is given, one line per input says where its values came from.
std::map<std::string, Tensor> make_run_inputs(const std::vector<std::pair<std::string, TensorType>>& decl,
                                              const RunInputOptions& o, std::vector<std::string>* described = nullptr);

}  // namespace kiln
