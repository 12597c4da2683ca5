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
caches="past_key_0 past_value_0 past_key_1 past_value_1"
min=input_ids:1x1 max=input_ids:1x32
for c in $caches; do
  min="$min,$c:1x2x0x16"
  max="$max,$c:1x2x32x16"
done
"$kiln" compile "$model" --target cpu --min-shapes "$min" --max-shapes "$max" -o "$dir/decoder.plan" >"$dir/log" 2>&1 ||
  { cat "$dir/log"; echo "FAIL: the decoder does not compile with a profile" >&2; exit 1; }
"$kiln" inspect "$dir/decoder.plan" >"$dir/inspect" 2>&1
want="in place (one buffer as input and output, the new positions appended): past_key_0 -> present_key_0 (dim 2), past_value_0 -> present_value_0 (dim 2), past_key_1 -> present_key_1 (dim 2), past_value_1 -> present_value_1 (dim 2)"
grep -qxF "$want" "$dir/inspect" || { cat "$dir/inspect"; echo "FAIL: kiln inspect does not list the caches" >&2; exit 1; }

"$py" - "$dir" <<'EOF'
import sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(19)
for seq, past in ((8, 0), (1, 8), (3, 21)):
    np.save(f"{d}/ids_{seq}_{past}.npy", rng.integers(0, 256, (1, seq)).astype(np.int64))
    for c in ("past_key_0", "past_value_0", "past_key_1", "past_value_1"):
        np.save(f"{d}/{c}_{seq}_{past}.npy", rng.standard_normal((1, 2, past, 16)).astype(np.float32))
EOF
for be in $backends; do
  for sp in 8_0 1_8 3_21; do
    ins="input_ids:$dir/ids_$sp.npy" pairs="input_ids=$dir/ids_$sp.npy"
    for c in $caches; do
      ins="$ins,$c:$dir/${c}_$sp.npy"
      pairs="$pairs $c=$dir/${c}_$sp.npy"
    done
    rm -rf "$dir/o"
    "$kiln" run "$dir/decoder.plan" --backend $be --inputs "$ins" --outputs "$dir/o" >"$dir/log" 2>&1 ||
      { cat "$dir/log"; echo "FAIL: $be at seq_past $sp" >&2; exit 1; }
    # shellcheck disable=SC2086
    "$py" "$t/compare_outputs_ort.py" "$model" "$dir/o" $pairs >"$dir/log" 2>&1 ||
      { cat "$dir/log"; echo "FAIL: $be at seq_past $sp differs from ONNX Runtime" >&2; exit 1; }
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
  "$kiln" compile "$layer" --target sm_90 --min-shapes "$lmin" --max-shapes "$lmax" -o "$dir/layer.plan" >"$dir/log" 2>&1 ||
    { cat "$dir/log"; echo "FAIL: the decoder layer does not compile for sm_90 with a profile" >&2; exit 1; }
  "$kiln" inspect "$dir/layer.plan" >"$dir/inspect" 2>&1
  grep -q "in place on the GPU: past_key -> present_key .*past_value -> present_value" "$dir/inspect" ||
    { cat "$dir/inspect"; echo "FAIL: inspect does not list the caches bindable in place on the GPU" >&2; exit 1; }
  for sp in 5_0 1_5 3_17; do
    seq=${sp%_*} past=${sp#*_}
    "$py" -c "import numpy as np, sys; r = np.random.default_rng($past)
np.save(sys.argv[1], r.standard_normal((1, $seq, 64)).astype(np.float32))
for n in sys.argv[2:]: np.save(n, r.standard_normal((1, 2, $past, 16)).astype(np.float32))" \
      "$dir/lx.npy" "$dir/lpk.npy" "$dir/lpv.npy"
    rm -rf "$dir/lo"
    "$kiln" run "$dir/layer.plan" --backend sim --inputs "x:$dir/lx.npy,past_key:$dir/lpk.npy,past_value:$dir/lpv.npy" \
      --outputs "$dir/lo" >"$dir/log" 2>&1 || { cat "$dir/log"; echo "FAIL: the layer's GPU plan on sim at seq_past $sp" >&2; exit 1; }
    "$py" "$t/compare_outputs_ort.py" "$layer" "$dir/lo" x="$dir/lx.npy" past_key="$dir/lpk.npy" past_value="$dir/lpv.npy" \
      >"$dir/log" 2>&1 || { cat "$dir/log"; echo "FAIL: the layer's GPU plan at seq_past $sp differs from ONNX Runtime" >&2; exit 1; }
    echo "ok: the layer's sm_90 plan on sim, seq_past $sp, equal to ONNX Runtime"
  done
fi
echo "PASS: the decoder's prefill and decode steps from one plan on $backends"
