// libFuzzer target: arbitrary text as a .kir file (split at "// -----" as
// `kiln opt --split-input-file` does) through the IR parser and verifier; a
// graph that verifies is printed and must parse again (the text form round
// trips). kiln::Error is the expected way to fail; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "tests/fuzz/fuzz_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool ready = (kiln::fuzz::set_fuzz_limits(), true);
  (void)ready;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const kiln::InputChunk& chunk : kiln::split_input_file(text)) {
    std::string printed;
    try {
      auto g = kiln::parse_graph(chunk.text, "fuzz.kir", chunk.first_line);
      kiln::verify_graph(*g, kiln::op_registry());
      printed = kiln::print_graph(*g);
    } catch (const kiln::Error&) {
      continue;
    }
    try {
      kiln::parse_graph(printed, "printed.kir");
    } catch (const kiln::Error& e) {
      // A verified graph whose printed form does not parse: a printer or
      // parser bug, reported as a crash with the text that failed.
      fprintf(stderr, "round trip failed: %s\n--- printed ---\n%s\n", e.what(), printed.c_str());
      std::abort();
    }
  }
  return 0;
}
