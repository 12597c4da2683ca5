#!/usr/bin/env bash
# Builds if needed and runs the whole test suite through ctest: unit tests
# (GoogleTest), IR tests (lit + FileCheck), IR round trips over every
# conformance model, the robustness corpus, the ONNX conformance gates on the
# reference backend, and the real models (ResNet-50, MobileNetV2, ViT-B/16,
# BERT-base, GPT-2) and the model zoo checked against ONNX Runtime.
#
#   tools/test.sh [CTEST ARGS...]
#       everything but the tests labelled `full` (what CI runs: .ci/run)
#   tools/test.sh --full [CTEST ARGS...]
#       also the `full` tier (docs/testing.md): the zoo at fp16/bf16 on the
#       simulator, the launch-limit check over every sm_90 plan, the device
#       bundle's dry run in a bare Debian chroot, and
#       `pip install .`; tens of minutes more with a cold kernel cache.
#   tools/test.sh --sanitize [CTEST ARGS...]
#       clang with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/):
#       unit tests, IR tests, the robustness corpus, a 60 s run of each fuzz
#       target, the runtime's thread, leak (LeakSanitizer) and binding tests
#       and the four conformance suites (not the real models).
#   tools/test.sh --tsan [CTEST ARGS...]
#       clang with ThreadSanitizer (build-tsan/, only the runtime stress test
#       and what it links): the 8-thread shared-engine test on the reference
#       path (KILN_THREAD_TEST_SECONDS, default 30); a data race fails it.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every test runs the verifier after every pass, and holds each pass that
# reports no change to an unchanged graph (passes/pass_manager.h: a user's
# compile skips the verifier after such passes).
export KILN_VERIFY_EACH=${KILN_VERIFY_EACH:-all}
tools/install_deps.sh
if [ "${1:-}" = "--tsan" ]; then
  shift
  tools/build_tsan.sh
  cd "${KILN_TSAN_BUILD_DIR:-build-tsan}"
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
  ctest --output-on-failure -R '^runtime_threads$' "$@"
  exit
fi
if [ "${1:-}" = "--sanitize" ]; then
  shift
  # The robustness corpus is written with numpy + onnx from the project's venv.
  if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import numpy, onnx" 2>/dev/null; then
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check numpy onnx onnxruntime
  fi
  # KILN_ASAN_TARGETS limits what is built (CI builds kiln and the fuzz targets only).
  # shellcheck disable=SC2086
  tools/build_asan.sh ${KILN_ASAN_TARGETS:-}
  cd "${KILN_ASAN_BUILD_DIR:-build-asan}"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:abort_on_error=1}
  ctest --output-on-failure -j "${KILN_JOBS:-$(nproc)}" -LE models "$@"
  exit
fi
tiers=(-LE full)
if [ "${1:-}" = "--full" ]; then
  shift
  tiers=()
fi
tools/build.sh
tools/prepare_models.sh "${KILN_BUILD_DIR:-build}/models"
cd "${KILN_BUILD_DIR:-build}"
ctest --output-on-failure -j "${KILN_JOBS:-$(nproc)}" "${tiers[@]}" "$@"
