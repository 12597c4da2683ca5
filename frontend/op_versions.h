// Which versions of each ONNX op kiln's adapters implement. kiln reads
// opsets up to kMaxOpset; an op whose version at the model's opset is newer
// than its adapter handles is reported for that node alone (Unsupported,
// naming op, version and opset), never a refusal of the whole file.
#pragma once
#include <cstdint>
#include <string>

namespace kiln {

// The newest default-domain opset kiln reads (onnx 1.23 defines 1..28).
inline constexpr int64_t kMaxOnnxOpset = 28;

// The op's version in effect at `opset` among the versions kiln tracks (those
// newer than opset 21, where kiln's adapters were last complete), or 0 when
// none of them applies (the adapter then handles every older version itself).
int onnx_op_version(const std::string& op, int64_t opset);

// Throws Unsupported ("op X version V (opset N) is not supported: why") when
// the op's version at `opset` is one kiln does not implement. `ctx` names
// the file and node.
void check_op_version(const std::string& op, int64_t opset, const std::string& ctx);

}  // namespace kiln
