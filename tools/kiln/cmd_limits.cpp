// Resource limits (ir/limits.h, docs/security.md) on every subcommand that
// reads models.
#include <CLI/CLI.hpp>

#include "ir/limits.h"
#include "tools/kiln/commands.h"

namespace kiln {

void add_limit_flags(const std::vector<CLI::App*>& cmds, LimitFlags& f) {
  for (CLI::App* cmd : cmds) {
    cmd->add_option("--max-tensor-bytes", f.max_tensor_bytes,
                    "Largest tensor a model may make kiln allocate (bytes; k/M/G/T suffixes; env "
                    "KILN_MAX_TENSOR_BYTES)")
        ->group("Limits");
    cmd->add_option("--max-total-bytes", f.max_total_bytes,
                    "Largest total size of a model's weights (bytes; k/M/G/T suffixes; env KILN_MAX_TOTAL_BYTES)")
        ->group("Limits");
  }
}

void apply_limit_flags(const LimitFlags& f) {
  if (!f.max_tensor_bytes.empty())
    limits().max_tensor_bytes = parse_byte_size(f.max_tensor_bytes, "--max-tensor-bytes");
  if (!f.max_total_bytes.empty()) limits().max_total_bytes = parse_byte_size(f.max_total_bytes, "--max-total-bytes");
}

}  // namespace kiln
