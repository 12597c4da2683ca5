#!/bin/bash
# One plan for a KV-cache decoder's prefill and decode (ctest cli_kv_cache_plan;
# docs/dynamic_shapes.md "KV-cache decoding"): the zoo's llama_kv_prefill
# (seq and past dynamic) compiled once with a shape profile; `kiln inspect`
# lists its four caches as bindable in place; the plan runs a prefill (seq 8,
# past 0), a decode step (seq 1, past 8) and a longer step (seq 3, past 21),
# on the runtime's CPU path and on the simulator, each equal to ONNX Runtime;
# and a decoder layer's GPU plan with caches bindable in place (below).
# Usage: kv_cache_plan_test.sh KILN ZOO_DIR [sim|nosim]   (nosim: a build without the simulator)
set -euo pipefail
kiln=$1
model=$2/llama_kv_prefill/model.onnx
backends="ref sim"
[ "${3:-sim}" = nosim ] && backends=ref
t=$(cd "$(dirname "$0")" && pwd)
py=${KILN_PYTHON:-$t/../../.venv/bin/python}
[ -x "$py" ] || py=python3
if [ ! -f "$model" ]; then
  echo "FAIL: $model is missing: prepare the zoo first (tools/prepare_models.sh build/models)" >&2
  exit 1
fi
. "$(dirname "$0")/lib.sh"
decoder_profile 32
"$kiln" compile "$model" --target cpu --min-shapes "$min" --max-shapes "$max" -o "$dir/decoder.plan" >"$out" 2>&1 ||
  fail "the decoder does not compile with a profile"
"$kiln" inspect "$dir/decoder.plan" >"$out" 2>&1
want="in place (one buffer as input and output, the new positions appended): past_key_0 -> present_key_0 (dim 2), past_value_0 -> present_value_0 (dim 2), past_key_1 -> present_key_1 (dim 2), past_value_1 -> present_value_1 (dim 2)"
grep -qxF "$want" "$out" || fail "kiln inspect does not list the caches"

decoder_inputs 8_0 1_8 3_21
for be in $backends; do
  for sp in 8_0 1_8 3_21; do
    decoder_pairs $sp
    # shellcheck disable=SC2086
    run_plan "$dir/decoder.plan" $be "$be at seq_past $sp" $pairs
    # shellcheck disable=SC2086
    matches_ort "$model" "$be at seq_past $sp" $pairs
    echo "ok: $be, seq_past $sp, one plan, equal to ONNX Runtime"
  done
done
# A GPU plan (sm_90) of an exported-style decoder layer (tests/runtime/
# kv_decoder, make_kv_decoder.py): `kiln inspect` lists both caches as
# bindable in place on the GPU, and the plan's kernels run on the simulator
# (the caches as ordinary outputs: the attention steps over rows of the
# present's own length) at pasts 0, 5 and 17, each equal to ONNX Runtime.
if [ "${3:-sim}" != nosim ]; then
  layer=$t/../runtime/kv_decoder/model.onnx
  lmin=x:1x1x64,past_key:1x2x0x16,past_value:1x2x0x16
  lmax=x:1x8x64,past_key:1x2x24x16,past_value:1x2x24x16
  "$kiln" compile "$layer" --target sm_90 --min-shapes "$lmin" --max-shapes "$lmax" -o "$dir/layer.plan" >"$out" 2>&1 ||
    fail "the decoder layer does not compile for sm_90 with a profile"
  "$kiln" inspect "$dir/layer.plan" >"$out" 2>&1
  grep -q "in place on the GPU: past_key -> present_key .*past_value -> present_value" "$out" ||
    fail "inspect does not list the caches bindable in place on the GPU"
  for sp in 5_0 1_5 3_17; do
    seq=${sp%_*} past=${sp#*_}
    "$py" -c "import numpy as np, sys; r = np.random.default_rng($past)
np.save(sys.argv[1], r.standard_normal((1, $seq, 64)).astype(np.float32))
for n in sys.argv[2:]: np.save(n, r.standard_normal((1, 2, $past, 16)).astype(np.float32))" \
      "$dir/lx.npy" "$dir/lpk.npy" "$dir/lpv.npy"
    lpairs="x=$dir/lx.npy past_key=$dir/lpk.npy past_value=$dir/lpv.npy"
    # shellcheck disable=SC2086
    run_plan "$dir/layer.plan" sim "the layer's GPU plan on sim at seq_past $sp" $lpairs
    # shellcheck disable=SC2086
    matches_ort "$layer" "the layer's GPU plan at seq_past $sp" $lpairs
    echo "ok: the layer's sm_90 plan on sim, seq_past $sp, equal to ONNX Runtime"
  done
fi
echo "PASS: the decoder's prefill and decode steps from one plan on $backends"
