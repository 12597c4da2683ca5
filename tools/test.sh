#!/usr/bin/env bash
# Builds if needed and runs the whole test suite through ctest: unit tests
# (GoogleTest), IR tests (lit + FileCheck), IR round trips over every
# conformance model, and the ONNX conformance gate on the reference backend.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
tools/build.sh
cd "${KILN_BUILD_DIR:-build}"
ctest --output-on-failure -j "${KILN_JOBS:-$(nproc)}" "$@"
