// Is this file a kiln plan? Decided by the plan magic (runtime/plan_format.h)
// in the file's first bytes, not by its name: users rename plans
// (model.engine, model.bin, as trtexec's engines are), and a plan given to a
// command that reads ONNX must be recognised as such rather than fail as "not
// a valid ONNX model".
#pragma once
#include <string>

namespace kiln {

// True when the file starts with "KILNPLAN", or when it cannot be read as
// one but its name ends in .plan (so a damaged plan gets the plan loader's
// message, which names what is wrong, instead of the ONNX parser's).
bool is_plan_file(const std::string& path);

}  // namespace kiln
