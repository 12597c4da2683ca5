#!/usr/bin/env bash
# Generates the ONNX backend test suites (node, simple, pytorch-converted,
# pytorch-operator) of onnx 1.23 once, into kiln's cache, for
# `kiln conformance --suite onnx-1.23` (its default). A second run costs a
# second: the folder records the onnx version it was made with.
#
#   tools/onnx_suite.sh            # -> ${XDG_CACHE_HOME:-~/.cache}/kiln/onnx-1.23-tests
#   KILN_ONNX_TESTS=DIR tools/onnx_suite.sh
# (Not under $KILN_CACHE_DIR: that is the kernel cache, which tests move to
# temporary folders.)
set -euo pipefail
cd "$(dirname "$0")/.."

ONNX_SERIES=1.23
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kiln
out=${KILN_ONNX_TESTS:-$cache/onnx-$ONNX_SERIES-tests}

# The project venv with onnx 1.23.x (tests/models and the robustness corpus use it too).
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
have=$(.venv/bin/python -c "import onnx; print(onnx.__version__)" 2>/dev/null || true)
case "$have" in
  "$ONNX_SERIES".*) ;;
  *) .venv/bin/pip install -q --disable-pip-version-check "onnx~=$ONNX_SERIES.0" numpy
     have=$(.venv/bin/python -c "import onnx; print(onnx.__version__)") ;;
esac

if [ "$(cat "$out/ONNX_VERSION" 2>/dev/null)" = "$have" ]; then exit 0; fi
mkdir -p "$(dirname "$out")"
echo "kiln: generating onnx $have backend tests into $out (a few minutes, once)"
.venv/bin/python -W ignore tools/onnx_suite.py "$out"
