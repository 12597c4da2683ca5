// RE2 (Debian libre2-dev) as RegexFullMatch's engine (ops/regex_engine.h).
// Linked by the frontend, not by kiln_ops, so libkiln_runtime needs no libre2.
#pragma once

namespace kiln::frontend {

// Installs RE2 as the regex engine; idempotent and thread-safe.
void install_re2_regex_engine();

}  // namespace kiln::frontend
