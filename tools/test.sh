#!/usr/bin/env bash
# Builds if needed and runs the whole test suite through ctest: unit tests
# (GoogleTest), IR tests (lit + FileCheck), IR round trips over every
# conformance model, the ONNX conformance gates on the reference backend, and
# the real models (ResNet-50, MobileNetV2, ViT-B/16, BERT-base, GPT-2) checked
# against ONNX Runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
tools/build.sh
tools/prepare_models.sh "${KILN_BUILD_DIR:-build}/models"
cd "${KILN_BUILD_DIR:-build}"
ctest --output-on-failure -j "${KILN_JOBS:-$(nproc)}" "$@"
