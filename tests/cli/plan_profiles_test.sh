#!/bin/sh
# Issue 19: plans with shape profiles. The CNN (dynamic batch) and the
# BERT-style encoder (dynamic batch and sequence) of make_dynamic_models.py are
# each compiled ONCE with --min/--opt/--max-shapes into a CPU plan, which
# `kiln inspect` shows with its profile, and run at three shapes each through
# the runtime (`kiln run PLAN --inputs`, the shapes set at run time) and on the
# simulator, matching ONNX Runtime. Shapes outside the profile are clear
# errors (exit 1); for a GPU target the CNN's plan holds shape-generic kernels.
# Usage: plan_profiles_test.sh KILN TESTS_CLI_DIR VENV_PYTHON sim|nosim
set -u
kiln=$1
t=$2
py=$3
sim=${4:-sim}
. "$(dirname "$0")/lib.sh"
"$py" "$t/make_dynamic_models.py" "$dir" || fail "make_dynamic_models.py"

"$kiln" compile "$dir/cnn.onnx" --target cpu --min-shapes x:1x3x16x16 --opt-shapes x:8x3x16x16 \
  --max-shapes x:16x3x16x16 -o "$dir/cnn.plan" >"$out" 2>&1 || fail "compile cnn: exit $?"
"$kiln" inspect "$dir/cnn.plan" >"$out" 2>&1 || fail "inspect cnn: exit $?"
grep -q '^shape profiles: 1 (symbols: batch in \[1, 16\]); memory planned for the largest shapes' "$out" ||
  fail "inspect shows no profile"
grep -q '^    x  *min 1x3x16x16, opt 8x3x16x16, max 16x3x16x16$' "$out" || fail "inspect shows no range for x"
grep -q '^  x  *f32  *\[batchx3x16x16\]' "$out" || fail "inspect shows no symbolic input"
"$kiln" compile "$dir/encoder.onnx" --target cpu --min-shapes input_ids:1x1,attention_mask:1x1 \
  --max-shapes input_ids:8x64,attention_mask:8x64 -o "$dir/encoder.plan" >"$out" 2>&1 ||
  fail "compile encoder: exit $?"
"$kiln" inspect "$dir/encoder.plan" >"$out" 2>&1 || fail "inspect encoder: exit $?"
grep -q '^shape profiles: 1 (symbols: batch in \[1, 8\], seq in \[1, 64\])' "$out" || fail "inspect encoder: no profile"
grep -q '^    input_ids  *min 1x1, opt 8x64, max 8x64$' "$out" || fail "inspect encoder: no range (opt defaults to max)"

backends="ref"
[ "$sim" = sim ] && backends="ref sim"
for be in $backends; do
  for b in 1 3 8; do
    run_plan "$dir/cnn.plan" "$be" "cnn.plan on $be at batch $b" "x=$dir/x_$b.npy"
    grep -q "^symbols: batch=$b (range \[1, 16\])" "$out" || fail "cnn.plan on $be at batch $b: no symbols line"
    matches_ort "$dir/cnn.onnx" "cnn.plan on $be at batch $b" "x=$dir/x_$b.npy"
  done
  for bs in 1x5 2x16 4x33; do
    ids="input_ids=$dir/ids_$bs.npy" mask="attention_mask=$dir/mask_$bs.npy"
    run_plan "$dir/encoder.plan" "$be" "encoder.plan on $be at $bs" "$ids" "$mask"
    grep -q "^symbols: batch=${bs%x*} (range \[1, 8\]), seq=${bs#*x} (range \[1, 64\])" "$out" ||
      fail "encoder.plan on $be at $bs: no symbols line"
    matches_ort "$dir/encoder.onnx" "encoder.plan on $be at $bs" "$ids" "$mask"
  done
done

# Generated inputs take the profile's opt shape.
"$kiln" run "$dir/cnn.plan" --backend ref >"$out" 2>&1 || fail "cnn.plan with generated input: exit $?"
grep -q '^symbols: batch=8 ' "$out" || fail "a generated input must take the opt shape"

# kiln run MODEL.onnx with a range through a plan (--save-engine): the plan
# carries the profile, and the run at the opt shape matches ONNX Runtime.
KILN_PYTHON=$py "$kiln" run "$dir/cnn.onnx" --target cpu --min-shapes x:1x3x16x16 --max-shapes x:16x3x16x16 \
  --opt-shapes x:3x3x16x16 --save-engine "$dir/saved.plan" --compare ort >"$out" 2>&1 || fail "run --save-engine: exit $?"
grep -q '^symbols: batch=3 (range \[1, 16\])' "$out" || fail "run --save-engine: no symbols line"
grep -q '^compare: PASS' "$out" || fail "run --save-engine: no PASS against ONNX Runtime"
"$kiln" inspect "$dir/saved.plan" >"$out" 2>&1 || fail "inspect saved: exit $?"
grep -q '^    x  *min 1x3x16x16, opt 3x3x16x16, max 16x3x16x16$' "$out" || fail "the saved plan has no profile"

# Outside the profile: the input, the dim and the profile's range.
"$py" -c "import numpy as np; np.save('$dir/x_20.npy', np.zeros((20, 3, 16, 16), np.float32))"
expect_exit 1 "a shape outside the profile must exit 1" "$kiln" run "$dir/cnn.plan" --backend ref --inputs "x:$dir/x_20.npy"
grep -q 'input "x" has shape \[20,3,16,16\], outside every shape profile of the plan: input "x": dim 0 is 20, outside profile 0'"'"'s range \[1, 16\]' "$out" ||
  fail "no out-of-profile message"
# The encoder's two inputs disagreeing on batch.
"$kiln" run "$dir/encoder.plan" --backend ref \
  --inputs "input_ids:$dir/ids_2x16.npy,attention_mask:$dir/mask_4x33.npy" >"$out" 2>&1
[ $? -eq 1 ] || fail "inputs disagreeing on a symbol must exit 1"
grep -q 'dim 0 (batch) is 4 but input "input_ids" gives batch = 2' "$out" || fail "no disagreement message"

# Two profiles (the flags repeated, as trtexec takes them): a run at either
# range works, a batch between them is outside both and names each range.
"$kiln" compile "$dir/cnn.onnx" --target cpu --min-shapes x:1x3x16x16 --max-shapes x:4x3x16x16 \
  --min-shapes x:8x3x16x16 --max-shapes x:16x3x16x16 -o "$dir/two.plan" >"$out" 2>&1 || fail "two profiles: exit $?"
"$kiln" inspect "$dir/two.plan" >"$out" 2>&1 || fail "inspect two profiles: exit $?"
grep -q '^shape profiles: 2 (symbols: batch in \[1, 16\])' "$out" || fail "inspect: not two profiles"
grep -q '^    x  *min 8x3x16x16, opt 16x3x16x16, max 16x3x16x16$' "$out" || fail "inspect: no second profile"
for b in 3 8; do
  run_plan "$dir/two.plan" ref "two.plan at batch $b" "x=$dir/x_$b.npy"
  matches_ort "$dir/cnn.onnx" "two.plan at batch $b" "x=$dir/x_$b.npy"
done
expect_exit 1 "a batch between the profiles must exit 1" "$kiln" run "$dir/two.plan" --backend ref --inputs "x:$dir/x_6.npy"
grep -q 'input "x": dim 0 is 6, outside profile 0'"'"'s range \[1, 4\]; input "x": dim 0 is 6, outside profile 1'"'"'s range \[8, 16\]' "$out" ||
  fail "no message naming both profiles"
"$kiln" compile "$dir/cnn.onnx" --target cpu --min-shapes x:1x3x16x16 --max-shapes x:4x3x16x16 \
  --min-shapes x:8x3x16x16 -o "$dir/bad.plan" >"$out" 2>&1
[ $? -eq 1 ] || fail "a profile without --max-shapes must exit 1"
grep -q 'each shape profile takes one --min-shapes and one --max-shapes' "$out" || fail "no flag-count message"

# kiln run MODEL.onnx takes the same repeated flags: on ref and sim (the
# graph specialised per run) and through a plan (--save-engine), a batch in
# either profile runs and matches ONNX Runtime, one between them names both.
two="--min-shapes x:1x3x16x16 --max-shapes x:4x3x16x16 --min-shapes x:8x3x16x16 --max-shapes x:16x3x16x16"
for be in $backends; do
  for b in 3 8; do
    # shellcheck disable=SC2086
    KILN_PYTHON=$py "$kiln" run "$dir/cnn.onnx" --backend "$be" $two --inputs "x:$dir/x_$b.npy" --compare ort \
      >"$out" 2>&1 || fail "run cnn.onnx with two profiles on $be at batch $b: exit $?"
    grep -q '^compare: PASS' "$out" || fail "run cnn.onnx with two profiles on $be at batch $b: no PASS"
  done
  grep -q '^shape profile: 1 of 2 (x in \[8x3x16x16 .. 16x3x16x16\])$' "$out" || fail "run on $be: no profile line"
  # shellcheck disable=SC2086
  "$kiln" run "$dir/cnn.onnx" --backend "$be" $two --inputs "x:$dir/x_6.npy" >"$out" 2>&1
  [ $? -eq 1 ] || fail "run cnn.onnx on $be at a batch between the profiles must exit 1"
  grep -q 'cnn.onnx: the inputs (x 6x3x16x16) lie outside every shape profile: input "x": dim 0 is 6, outside profile 0'"'"'s range \[1, 4\]; input "x": dim 0 is 6, outside profile 1'"'"'s range \[8, 16\]' "$out" ||
    fail "run cnn.onnx on $be: no message naming both profiles"
done
# shellcheck disable=SC2086
"$kiln" run "$dir/cnn.onnx" --target cpu $two --save-engine "$dir/run_two.plan" --inputs "x:$dir/x_8.npy" >"$out" 2>&1 ||
  fail "run cnn.onnx with two profiles --save-engine: exit $?"
"$kiln" inspect "$dir/run_two.plan" >"$out" 2>&1 || fail "inspect run_two.plan: exit $?"
grep -q '^shape profiles: 2 (symbols: batch in \[1, 16\])' "$out" || fail "the saved plan has not two profiles"
# shellcheck disable=SC2086
expect_exit 1 "run through the plan at a batch between the profiles must exit 1" "$kiln" run "$dir/cnn.onnx" --target cpu $two --save-engine "$dir/run_two.plan" --inputs "x:$dir/x_6.npy"
grep -q 'outside profile 0'"'"'s range \[1, 4\]; input "x": dim 0 is 6, outside profile 1'"'"'s range \[8, 16\]' "$out" ||
  fail "run through the plan: no message naming both profiles"

# A GPU target: the CNN's kernels are shape-generic (conv, pools, gemm,
# softmax; run against ONNX Runtime by tests/cli/gpu_profiles_test.sh, which
# also checks a family without such kernels is refused), never compiled at one shape.
"$kiln" compile "$dir/cnn.onnx" --target sm_90 --min-shapes x:1x3x16x16 --max-shapes x:16x3x16x16 \
  -o "$dir/gpu.plan" >"$out" 2>&1 || fail "a profile with a GPU target: exit $?"
"$kiln" inspect "$dir/gpu.plan" >"$out" 2>&1 || fail "inspect the GPU plan: exit $?"
grep -q '^shape profiles: 1 (symbols: batch in \[1, 16\])' "$out" || fail "the GPU plan shows no profile"
grep -q '^shape-generic launches: [1-9]' "$out" || fail "the GPU plan has no shape-generic launches"

# A static plan of the same model shows no profile.
"$kiln" compile "$dir/cnn.onnx" --target cpu --shapes x:2x3x16x16 -o "$dir/static.plan" >"$out" 2>&1 ||
  fail "static compile: exit $?"
"$kiln" inspect "$dir/static.plan" >"$out" 2>&1 || fail "inspect static: exit $?"
grep -q 'shape profiles' "$out" && fail "a static plan has no profiles"

# A node the verifier accepts for symbolic n but not at the profile's largest
# shape (Split's constant parts sum to 4, the profile goes to 5): the error
# names the model, the shapes and the node, exit 1.
expect_error "$dir/split.onnx: at the largest shapes of the shape profiles (n=5; inputs x [5,4]): verifier: node \"halves\" (split): split [2,2] sums to 4 but dim 0 of f32[5,4] is 5" \
  compile "$dir/split.onnx" --target cpu --min-shapes x:4x4 --max-shapes x:5x4 -o "$dir/split.plan"
echo PASS
