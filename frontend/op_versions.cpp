#include "frontend/op_versions.h"

#include <map>
#include <vector>

#include "ir/error.h"
#include "ir/short_name.h"

namespace kiln {

namespace {

struct Version {
  int since;
  // Empty: the adapter implements this version. Otherwise why it does not.
  const char* missing;
};

// Every default-domain op version onnx 1.23 introduced after opset 21, read
// from onnx.defs (get_all_schemas_with_history). Most only widen the types
// (bfloat16 at 22; float4e2m1 at 23; float8e8m0 at 24; int2/uint2 at 25;
// float6 at 28): the adapter is unchanged and a tensor of a type kiln lacks
// is reported where it is read. Versions that change meaning are handled in
// the op's adapter (named in the comment) or listed with what is missing.
const std::map<std::string, std::vector<Version>>& versions() {
  static const std::map<std::string, std::vector<Version>> table = {
      // Types only.
      {"Acos", {{22, ""}}},
      {"Acosh", {{22, ""}}},
      {"Asin", {{22, ""}}},
      {"Asinh", {{22, ""}}},
      {"Atan", {{22, ""}}},
      {"Atanh", {{22, ""}}},
      {"AveragePool", {{22, ""}}},
      {"Bernoulli", {{22, ""}}},
      {"Celu", {{28, ""}}},
      {"Compress", {{28, ""}}},
      {"Constant", {{23, ""}, {24, ""}, {25, ""}}},
      {"ConstantOfShape", {{23, ""}, {24, ""}, {25, ""}}},
      {"Conv", {{22, ""}}},
      {"ConvTranspose", {{22, ""}}},
      {"Cos", {{22, ""}}},
      {"Cosh", {{22, ""}}},
      {"DeformConv", {{22, ""}}},
      {"Det", {{22, ""}}},
      {"Dropout", {{22, ""}}},
      {"Einsum", {{28, ""}}},
      {"Elu", {{22, ""}}},
      {"EyeLike", {{22, ""}}},
      {"Flatten", {{23, ""}, {24, ""}, {25, ""}}},
      {"GRU", {{22, ""}}},
      {"GlobalAveragePool", {{22, ""}}},
      {"GlobalLpPool", {{22, ""}}},
      {"GlobalMaxPool", {{22, ""}}},
      {"GridSample", {{22, ""}}},
      {"HardSigmoid", {{22, ""}}},
      {"HardSwish", {{22, ""}}},
      {"Identity", {{23, ""}, {24, ""}, {25, ""}}},
      {"If", {{23, ""}, {24, ""}, {25, ""}}},
      {"InstanceNormalization", {{22, ""}}},
      {"LSTM", {{22, ""}}},
      {"Loop", {{23, ""}, {24, ""}, {25, ""}}},
      {"LpNormalization", {{22, ""}}},
      {"LpPool", {{22, ""}}},
      {"MaxPool", {{22, ""}}},
      {"MaxRoiPool", {{22, ""}}},
      {"MaxUnpool", {{22, ""}}},
      {"Mish", {{22, ""}}},
      {"Multinomial", {{22, ""}}},
      {"NegativeLogLikelihoodLoss", {{22, ""}}},
      {"OneHot", {{28, ""}}},
      {"Optional", {{28, ""}}},
      {"OptionalGetElement", {{28, ""}}},
      {"OptionalHasElement", {{28, ""}}},
      {"Pad", {{23, ""}, {24, ""}, {25, ""}}},
      {"RNN", {{22, ""}}},
      {"RandomNormal", {{22, ""}}},
      {"RandomNormalLike", {{22, ""}}},
      {"RandomUniform", {{22, ""}}},
      {"RandomUniformLike", {{22, ""}}},
      {"ReduceLogSum", {{28, ""}}},
      {"ReduceLogSumExp", {{28, ""}}},
      {"Reshape", {{23, ""}, {24, ""}, {25, ""}}},
      {"ReverseSequence", {{28, ""}}},
      {"RoiAlign", {{22, ""}}},
      {"Round", {{22, ""}}},
      {"Scan", {{23, ""}, {24, ""}, {25, ""}}},
      {"Selu", {{22, ""}}},
      {"Shape", {{23, ""}, {24, ""}, {25, ""}}},
      {"Sin", {{22, ""}}},
      {"Sinh", {{22, ""}}},
      {"Size", {{23, ""}, {24, ""}, {25, ""}}},
      {"Softplus", {{22, ""}}},
      {"Softsign", {{22, ""}}},
      {"SplitToSequence", {{24, ""}}},
      {"Squeeze", {{23, ""}, {24, ""}, {25, ""}}},
      {"Tan", {{22, ""}}},
      {"ThresholdedRelu", {{22, ""}}},
      {"TopK", {{24, ""}}},
      {"Transpose", {{23, ""}, {24, ""}, {25, ""}}},
      {"Unique", {{28, ""}}},
      {"Unsqueeze", {{23, ""}, {24, ""}, {25, ""}}},
      // Meaning changes, handled in the adapters.
      {"DepthToSpace", {{28, ""}}},                                    // wording only
      {"BitShift", {{28, ""}}},                                        // signed types: adapters_elementwise bit_shift
      {"Mod", {{28, ""}}},                                             // fmod=0 on floats: adapters_elementwise mod
      {"Cast", {{23, ""}, {24, ""}, {25, ""}, {28, ""}}},              // round_mode (float8e8m0 only): cast
      {"CastLike", {{23, ""}, {24, ""}, {25, ""}}},                    // round_mode: cast_like
      {"DequantizeLinear", {{23, ""}, {24, ""}, {25, ""}, {28, ""}}},  // output_dtype: dequantize
      {"QuantizeLinear", {{23, ""}, {24, ""}, {25, ""}, {28, ""}}},    // precision: quantize
      {"Range", {{27, ""}}},                                           // stash_type: range_adapter
      {"SpaceToDepth", {{28, ""}}},                                    // mode (CRD): space_to_depth_adapter
      // New ops: their first version is their adapter's. Attention-24's
      // nonpad_kv_seqlen operand and Attention-25's window sizes: attention.
      {"Attention", {{23, ""}, {24, ""}, {25, ""}}},
      {"CumProd", {{26, ""}}},
      {"CausalConvWithState", {{27, ""}}},
      {"LinearAttention", {{27, ""}}},
  };
  return table;
}

}  // namespace

int onnx_op_version(const std::string& op, int64_t opset) {
  auto it = versions().find(op);
  if (it == versions().end()) return 0;
  int v = 0;
  for (const Version& ver : it->second)
    if (ver.since <= opset) v = ver.since;
  return v;
}

void check_op_version(const std::string& op, int64_t opset, const std::string& ctx) {
  auto it = versions().find(op);
  if (it == versions().end()) return;
  const Version* in_effect = nullptr;
  for (const Version& ver : it->second)
    if (ver.since <= opset) in_effect = &ver;
  if (!in_effect || !*in_effect->missing) return;
  int newest = 0;
  for (const Version& ver : it->second)
    if (!*ver.missing && ver.since < in_effect->since) newest = ver.since;
  unsupported("{}: op {} version {} (opset {}) is not supported: kiln lacks {}{}", ctx, short_name(op),
              in_effect->since, opset, in_effect->missing,
              newest ? fmt::format(" (it implements version {})", newest) : std::string());
}

}  // namespace kiln
