// Where `kiln run` and `kiln bench` take a plan from: a plan file, or the
// bytes of a plan just compiled in memory from an .onnx model (run/bench with
// a GPU --target or --save-engine, tools/kiln/onnx_to_plan.h). Both are read
// and loaded by the runtime the same way, so a saved plan runs as the
// in-memory one did.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/error.h"
#include "kiln/kiln.hpp"
#include "runtime/plan_format.h"

namespace kiln {

struct PlanSource {
  std::string name;                             // the plan file, or the model the plan was compiled from
  const std::vector<uint8_t>* bytes = nullptr;  // a plan compiled in memory; null: read the file `name`

  plan::Plan read() const {
    return bytes ? plan::deserialize(bytes->data(), bytes->size(), name) : plan::read_plan_file(name);
  }
  // The runtime's engine (the C API through kiln/kiln.hpp). Its errors are the
  // user's (a damaged plan, no usable GPU): kiln::Error naming the source.
  Engine load(kiln_backend backend) const {
    try {
      return bytes ? Engine::from_memory(bytes->data(), bytes->size(), backend) : Engine::from_file(name, backend);
    } catch (const runtime_error& e) {
      if (bytes) fail("{}: {}", name, e.what());
      fail("{}", e.what());
    }
  }
};

}  // namespace kiln
