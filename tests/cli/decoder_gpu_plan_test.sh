#!/bin/bash
# The KV-cache decoder as ONE GPU plan (ctest cli_decoder_gpu_plan;
# docs/dynamic_shapes.md "KV-cache decoding"): the zoo's llama_kv_prefill
# (seq and past dynamic: range, rotary cos/sin at offset past, RMSNorm, the
# causal mask, GQA attention, the caches appended) compiled once for sm_90
# with seq in [1, 64] and past in [0, 64], at fp32 and at fp16, every launch
# shape-generic; each plan runs a prefill (seq 8, past 0) and decode steps
# (seq 1 after 8, 9 and 17 positions) on the simulator (the plan's kernels
# and launch list) and through the runtime's CPU path, each equal to ONNX
# Runtime (fp16 within the fp16 tolerance).
# Usage: decoder_gpu_plan_test.sh KILN ZOO_DIR
set -euo pipefail
kiln=$1
model=$2/llama_kv_prefill/model.onnx
t=$(cd "$(dirname "$0")" && pwd)
py=${KILN_PYTHON:-$t/../../.venv/bin/python}
[ -x "$py" ] || py=python3
if [ ! -f "$model" ]; then
  echo "FAIL: $model is missing: prepare the zoo first (tools/prepare_models.sh build/models)" >&2
  exit 1
fi
. "$(dirname "$0")/lib.sh"
decoder_profile 64
decoder_inputs 8_0 1_8 1_9 1_17

for prec in fp32 fp16; do
  plan=$dir/decoder_$prec.plan
  "$kiln" compile "$model" --target sm_90 --precision $prec --min-shapes "$min" --max-shapes "$max" -o "$plan" \
    >"$out" 2>&1 || fail "the decoder does not compile for sm_90 ($prec) with a profile"
  "$kiln" inspect "$plan" >"$out" 2>&1 || fail "inspect ($prec): exit $?"
  # Every launch is shape-generic, the two ranges among them.
  n=$(sed -n 's/^GPU kernels: [0-9]* distinct, [0-9]* launch steps (\([0-9]*\) kernel launches.*/\1/p' "$out")
  [ -n "$n" ] || fail "inspect ($prec) shows no GPU kernels"
  grep -q "^shape-generic launches: $n (" "$out" || fail "decoder ($prec): not all $n launches are shape-generic"
  [ "$(grep -c '^ *#[0-9]* /Range[_0-9]* (range) ' "$out")" = 2 ] || fail "decoder ($prec): the two ranges are not in the plan"
  tol=
  if [ $prec = fp16 ]; then
    grep -q ' kiln_matmul_mma_.* sm_90 ' "$out" || fail "decoder (fp16): no tensor-core matmul"
    tol=--fp16
  fi
  for be in sim ref; do
    for sp in 8_0 1_8 1_9 1_17; do
      decoder_pairs $sp
      # shellcheck disable=SC2086
      run_plan "$plan" $be "$prec plan on $be at seq_past $sp" $pairs
      [ $be = ref ] || grep -q "^backend: sim (the plan's kernels and launch list" "$out" ||
        fail "$prec plan on sim at seq_past $sp did not run the plan's kernels"
      # shellcheck disable=SC2086
      matches_ort $tol "$model" "$prec plan on $be at seq_past $sp" $pairs
      echo "ok: $prec, $be, seq_past $sp, one sm_90 plan, equal to ONNX Runtime"
    done
  done
done
echo "PASS: the decoder's prefill and decode steps from one sm_90 plan at fp32 and fp16 on sim and ref"
