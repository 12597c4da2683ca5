#!/usr/bin/env bash
# Builds the real-model test folders (build/models/<name>/) from the committed
# skeletons: a project-local venv (.venv) with numpy, onnx and onnxruntime
# from PyPI (and pytest, which python/tests runs under), then
# tests/models/prepare_models.py; the model zoo (tests/models/zoo) likewise
# into ZOO_OUT (default build/zoo), and its dynamic tier (tests/models/zoo/dynamic)
# into ZOO_DYNAMIC_OUT (default build/zoo_dynamic). Up-to-date folders are kept.
#   tools/prepare_models.sh [OUT [ZOO_OUT [ZOO_DYNAMIC_OUT]]]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${KILN_BUILD_DIR:-build}/models}
ZOO_OUT=${2:-${KILN_BUILD_DIR:-build}/zoo}
ZOO_DYNAMIC_OUT=${3:-${KILN_BUILD_DIR:-build}/zoo_dynamic}
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import numpy, onnx, onnxruntime, pytest" 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check numpy onnx onnxruntime pytest
fi
.venv/bin/python tests/models/prepare_models.py "$OUT"
.venv/bin/python tests/models/prepare_models.py --zoo "$ZOO_OUT"
.venv/bin/python tests/models/prepare_models.py --zoo-dynamic "$ZOO_DYNAMIC_OUT"
