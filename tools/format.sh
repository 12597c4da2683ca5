#!/usr/bin/env bash
# Formats kiln's tracked C and C++ sources with the root .clang-format.
#   tools/format.sh            rewrite the files in place
#   tools/format.sh --check    list the files that would change; exit 1 if any
# The .cuh kernel templates are not formatted: their text is embedded in every
# plan, so reformatting them would change plan bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [ -z "$CLANG_FORMAT" ]; then
  echo "format.sh: clang-format not found (apt-get install clang-format)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.hpp' '*.cc' '*.c')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$CLANG_FORMAT" --dry-run -Werror "$f" >/dev/null 2>&1; then echo "$f"; bad=1; fi
  done
  exit $bad
fi
"$CLANG_FORMAT" -i "${files[@]}"
