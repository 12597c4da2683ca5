// libFuzzer target: arbitrary bytes as an .onnx file through the importer,
// the verifier and the default pass pipeline. kiln::Error (a rejected model)
// is the expected way to fail; anything else escaping (std::logic_error from
// KILN_CHECK, a sanitizer report, a crash) is a kiln bug.
// External data is off (no model folder), so no input makes it read files.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontend/onnx_import.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "tests/fuzz/fuzz_limits.h"
#include "compiler/compile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool ready = (kiln::fuzz::set_fuzz_limits(), true);
  (void)ready;
  try {
    kiln::ImportResult r =
        kiln::import_onnx_bytes(std::string(reinterpret_cast<const char*>(data), size), "", "fuzz.onnx");
    kiln::verify_graph(*r.graph, kiln::op_registry());
    kiln::CompileOptions o;
    kiln::compile_graph(*r.graph, o);
  } catch (const kiln::Error&) {
  }
  return 0;
}
