#!/usr/bin/env bash
# Configures (once) and builds the sanitizer build: clang, AddressSanitizer +
# UndefinedBehaviorSanitizer, libFuzzer targets (KILN_FUZZ), into build-asan/
# (KILN_ASAN_BUILD_DIR). Builds the targets named, or kiln, the unit tests,
# the fuzz targets, the fake CUDA driver and the runtime stress test. Used by
# tools/test.sh --sanitize and tools/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${KILN_ASAN_BUILD_DIR:-build-asan}
JOBS=${KILN_JOBS:-$(nproc)}
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  # -O1: sanitizer builds compile about twice as fast as at -O3 and still run
  # the test suite in reasonable time.
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DKILN_FUZZ=ON >/dev/null
fi
targets=("$@")
((${#targets[@]})) || targets=(kiln kiln_unit_tests fuzz_onnx_import fuzz_ir_parser fuzz_plan_load kiln_fake_cuda
  kiln_runtime_stress_tests)
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}"
