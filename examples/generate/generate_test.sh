#!/bin/bash
# examples/generate end to end (ctest generate_example): greedy generation of
# 12 tokens with the zoo's KV-cache decoder (build/zoo/llama_kv_prefill, made
# by tools/prepare_models.sh), compiled per step through the builder API and
# run by the runtime, must equal ONNX Runtime's greedy loop on the same file
# token for token (examples/generate/ort_greedy.py).
# Usage: generate_test.sh GENERATE_EXE ZOO_DIR
set -euo pipefail
exe=$1
model=$2/llama_kv_prefill/model.onnx
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f "$model" ]; then
  echo "FAIL: $model is missing: prepare the zoo first (tools/prepare_models.sh build/models)" >&2
  exit 1
fi
python=${KILN_PYTHON:-$here/../../.venv/bin/python}
[ -x "$python" ] || python=python3
prompt=3,141,59,26,5,35,89,79
got=$("$exe" "$model" --prompt $prompt --tokens 12 | tee /dev/stderr | grep '^tokens:')
want=$("$python" "$here/ort_greedy.py" "$model" --prompt $prompt --tokens 12)
echo "kiln: $got"
echo "ort:  $want"
if [ "$got" != "$want" ]; then
  echo "FAIL: kiln's greedy tokens differ from ONNX Runtime's" >&2
  exit 1
fi
echo "PASS: 12 tokens equal ONNX Runtime's"
