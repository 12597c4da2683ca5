#!/bin/bash
# examples/generate end to end (ctest generate_example): greedy generation of
# 12 tokens with the zoo's KV-cache decoder (build/zoo/llama_kv_prefill, made
# by tools/prepare_models.sh), compiled ONCE through the builder API with a
# shape profile and run by the runtime for the prefill and every decode step,
# the cache bound in place, must equal ONNX Runtime's greedy loop on the same
# file token for token (examples/generate/ort_greedy.py). With `sim` (ctest
# generate_example_sim) the one plan is compiled for sm_90 and every step
# runs its kernels on the CPU simulator with the caches bound in place (the
# plan's append kernel writes the new positions, attention reads through the
# capacity: runtime/plan_in_place.h), which the run must say.
# Usage: generate_test.sh GENERATE_EXE ZOO_DIR [runtime|sim]
set -euo pipefail
exe=$1
model=$2/llama_kv_prefill/model.onnx
backend=${3:-runtime}
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f "$model" ]; then
  echo "FAIL: $model is missing: prepare the zoo first (tools/prepare_models.sh build/models)" >&2
  exit 1
fi
python=${KILN_PYTHON:-$here/../../.venv/bin/python}
[ -x "$python" ] || python=python3
prompt=3,141,59,26,5,35,89,79
out=$("$exe" "$model" --prompt $prompt --tokens 12 --backend "$backend")
echo "$out"
if [ "$backend" = sim ]; then
  grep -q "^engine: the sm_90 plan's kernels on kiln's CPU simulator" <<<"$out" ||
    { echo "FAIL: --backend sim did not run the sm_90 plan on the simulator" >&2; exit 1; }
  grep -q "^KV cache: bound in place, one buffer per cache of the full capacity (the plan's append kernel" <<<"$out" ||
    { echo "FAIL: --backend sim does not bind the caches in place" >&2; exit 1; }
else
  grep -q '^KV cache: bound in place' <<<"$out" || { echo "FAIL: the runtime run does not say the cache is bound in place" >&2; exit 1; }
fi
got=$(grep '^tokens:' <<<"$out")
# One compile for all 12 steps, and no step timed with a compile in it.
compiles=$(grep -c '^compiled once' <<<"$out" || true)
steps=$(grep -c '^step .*\[[0-9.]* ms run\]$' <<<"$out" || true)
if [ "$compiles" != 1 ] || [ "$steps" != 12 ]; then
  echo "FAIL: expected one compile and 12 steps each timed as a run from that plan, got $compiles and $steps" >&2
  exit 1
fi
want=$("$python" "$here/ort_greedy.py" "$model" --prompt $prompt --tokens 12)
echo "kiln: $got"
echo "ort:  $want"
if [ "$got" != "$want" ]; then
  echo "FAIL: kiln's greedy tokens differ from ONNX Runtime's" >&2
  exit 1
fi
echo "PASS: 12 tokens equal ONNX Runtime's ($backend)"
