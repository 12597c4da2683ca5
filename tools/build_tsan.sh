#!/usr/bin/env bash
# Configures (once) and builds the ThreadSanitizer build into build-tsan/
# (KILN_TSAN_BUILD_DIR): clang, -fsanitize=thread, -O1. Builds only what the
# thread test needs (kiln_runtime_stress_tests: the runtime library, the plan
# format, the reference backend, ops and IR; no frontend, passes or codegen),
# or the targets named. tools/test.sh --tsan builds it and runs the test.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_TSAN_BUILD_DIR:-build-tsan}
JOBS=${KILN_JOBS:-$(nproc)}
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DKILN_TSAN=ON >/dev/null
fi
targets=("$@")
((${#targets[@]})) || targets=(kiln_runtime_stress_tests)
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}"
