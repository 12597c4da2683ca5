#!/usr/bin/env bash
# Compile time against graph size (issue 18, item 3): synthetic chains and
# residual ladders through `kiln compile` (import + default pipeline), time
# per pass and the fitted exponent; JSON under bench/results/.
#   bench/compile_scaling.sh [--quick] [--sizes 10000,50000,100000] [--shapes chain,ladder] [--out FILE]
# The graphs are written with onnx + numpy: the project's .venv
# (tools/prepare_models.sh makes it) or $KILN_BENCH_PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${KILN_BENCH_PYTHON:-}
if [ -z "$py" ]; then
  if [ -x .venv/bin/python ] && .venv/bin/python -c "import numpy, onnx" 2>/dev/null; then py=.venv/bin/python
  else py=python3; fi
fi
exec env PYTHONUNBUFFERED=1 "$py" bench/compile_scaling.py "$@"
