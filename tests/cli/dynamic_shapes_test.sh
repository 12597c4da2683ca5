#!/bin/sh
# Issue 19: models with dynamic axes (dim_param) run on the reference backend
# at any shape inside the --min-shapes/--max-shapes range, from one symbolic
# import, and match ONNX Runtime (--compare ort) at three shapes each (and on
# the simulator at one shape each): a CNN
# with a dynamic batch and a BERT-style encoder with dynamic batch and
# sequence (make_dynamic_models.py). Shapes outside the range, inputs that
# disagree on a symbol and a missing range are clear errors (exit 1).
# Usage: dynamic_shapes_test.sh KILN TESTS_CLI_DIR VENV_PYTHON sim|nosim
set -u
kiln=$1
t=$2
py=$3
sim=${4:-sim}
. "$(dirname "$0")/lib.sh"
"$py" "$t/make_dynamic_models.py" "$dir" || fail "make_dynamic_models.py"

cnn_range="--min-shapes x:1x3x16x16 --max-shapes x:16x3x16x16"
for b in 1 3 8; do
  KILN_PYTHON=$py "$kiln" run "$dir/cnn.onnx" $cnn_range --opt-shapes "x:${b}x3x16x16" --compare ort >"$out" 2>&1 ||
    fail "cnn at batch $b: exit $?"
  grep -q "^symbols: batch=$b (range \[1, 16\])" "$out" || fail "cnn at batch $b: no symbols line"
  grep -q '^compare: PASS' "$out" || fail "cnn at batch $b: no PASS against ONNX Runtime"
done

enc_range="--min-shapes input_ids:1x1,attention_mask:1x1 --max-shapes input_ids:8x64,attention_mask:8x64"
for bs in 1x5 2x16 4x33; do
  b=${bs%x*}
  s=${bs#*x}
  KILN_PYTHON=$py "$kiln" run "$dir/encoder.onnx" $enc_range \
    --inputs "input_ids:$dir/ids_$bs.npy,attention_mask:$dir/mask_$bs.npy" --compare ort >"$out" 2>&1 ||
    fail "encoder at $bs: exit $?"
  grep -q "^symbols: batch=$b (range \[1, 8\]), seq=$s (range \[1, 64\])" "$out" ||
    fail "encoder at $bs: no symbols line"
  grep -q '^compare: PASS' "$out" || fail "encoder at $bs: no PASS against ONNX Runtime"
done

# The simulator runs the generated kernels of the specialised graph the same way.
if [ "$sim" = sim ]; then
KILN_PYTHON=$py "$kiln" run "$dir/cnn.onnx" $cnn_range --opt-shapes x:3x3x16x16 --backend sim --compare ort \
  >"$out" 2>&1 || fail "cnn on sim: exit $?"
grep -q '^compare: PASS' "$out" || fail "cnn on sim: no PASS against ONNX Runtime"
KILN_PYTHON=$py "$kiln" run "$dir/encoder.onnx" $enc_range --backend sim \
  --inputs "input_ids:$dir/ids_2x16.npy,attention_mask:$dir/mask_2x16.npy" --compare ort >"$out" 2>&1 ||
  fail "encoder on sim: exit $?"
grep -q '^compare: PASS' "$out" || fail "encoder on sim: no PASS against ONNX Runtime"
fi

# Outside the range: names the input, the dim, the symbol and the range.
expect_exit 1 "an opt shape outside the range must exit 1" "$kiln" run "$dir/cnn.onnx" --min-shapes x:1x3x16x16 --max-shapes x:4x3x16x16 --opt-shapes x:8x3x16x16
grep -q 'input "x": dim 0 has --opt-shapes 8 outside \[1, 4\]' "$out" || fail "no opt range message"
"$kiln" run "$dir/encoder.onnx" --min-shapes input_ids:1x1,attention_mask:1x1 \
  --max-shapes input_ids:2x64,attention_mask:2x64 \
  --inputs "input_ids:$dir/ids_4x33.npy,attention_mask:$dir/mask_4x33.npy" >"$out" 2>&1
[ $? -eq 1 ] || fail "an input outside the range must exit 1"
grep -q 'input "input_ids" has shape \[4,33\]: dim 0 (batch) is 4, outside its range \[1, 2\]' "$out" ||
  fail "no out-of-range message"
# Two inputs giving one symbol different values.
"$kiln" run "$dir/encoder.onnx" $enc_range \
  --inputs "input_ids:$dir/ids_2x16.npy,attention_mask:$dir/mask_4x33.npy" >"$out" 2>&1
[ $? -eq 1 ] || fail "inputs disagreeing on a symbol must exit 1"
grep -q 'dim 0 (batch) is 4 but input "input_ids" gives batch = 2' "$out" || fail "no disagreement message"
# No range and no --shapes: the dim and both ways out are named.
expect_exit 1 "a missing range must exit 1" "$kiln" run "$dir/cnn.onnx"
grep -q 'input "x": dimension 0 ("batch") is not fixed; set it with --shapes x:DIMS, or give its range with --min-shapes and --max-shapes' "$out" ||
  fail "no missing-range message"
# A range with a GPU target: a plan of shape-generic kernels (conv, pools,
# gemm, softmax; tests/cli/gpu_profiles_test.sh runs them against ONNX
# Runtime), run at the range's largest shape.
"$kiln" run "$dir/cnn.onnx" $cnn_range --target sm_90 >"$out" 2>&1 || fail "a range with a GPU target: exit $?"
grep -q 'GPU kernels: [1-9][0-9]* for sm_90' "$out" || fail "a range with a GPU target: no GPU kernels"
grep -q '^symbols: batch=16 (range \[1, 16\])' "$out" || fail "a range with a GPU target: no symbols line"
# --shapes keeps its static meaning.
"$kiln" run "$dir/cnn.onnx" --shapes x:2x3x16x16 >"$out" 2>&1 || fail "--shapes on the dynamic model: exit $?"
grep -q '^symbols:' "$out" && fail "--shapes must give a static graph"
echo PASS
