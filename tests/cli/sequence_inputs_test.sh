#!/bin/sh
# Sequence and optional inputs through kiln compile (make_sequence_model.py):
# --sequence-shapes fixes a sequence input's elements (inputs s[0], s[1]),
# --empty-optionals gives an optional input no value; the CPU plan runs
# through the runtime (ref) with the sequence output as
# y[0], y[1], y[2] (an sm_90 plan of it on the simulator). Without the flags, or with them naming the wrong input,
# the compile is refused naming the input and the flag (exit 1).
# Usage: sequence_inputs_test.sh KILN TESTS_CLI_DIR VENV_PYTHON sim|nosim
set -u
kiln=$1
t=$2
py=$3
sim=${4:-sim}
. "$(dirname "$0")/lib.sh"
"$py" "$t/make_sequence_model.py" "$dir" || fail "make_sequence_model.py"

"$kiln" compile "$dir/seq.onnx" --target cpu -o "$dir/seq.plan" --sequence-shapes s:2+3 --empty-optionals o \
  >"$out" 2>&1 || fail "compile: exit $?"
"$kiln" inspect "$dir/seq.plan" >"$out" 2>&1 || fail "inspect: exit $?"
for name in 's\[0\]' 's\[1\]' 'y\[0\]' 'y\[2\]'; do
  grep -q "$name" "$out" || fail "inspect: no $name"
done
runs=ref:seq.plan
if [ "$sim" = sim ]; then
  # An sm_90 plan of the same graph (its kernels NVRTC-compiled), on the simulator.
  "$kiln" compile "$dir/seq.onnx" --target sm_90 -o "$dir/seq90.plan" --sequence-shapes s:2+3 --empty-optionals o \
    >"$out" 2>&1 || fail "compile sm_90: exit $?"
  runs="$runs sim:seq90.plan"
fi
for r in $runs; do
  b=${r%%:*}
  "$kiln" run "$dir/${r#*:}" --backend $b --inputs "s[0]:$dir/s0.npy,s[1]:$dir/s1.npy,x:$dir/x.npy" >"$out" 2>&1 ||
    fail "run on $b: exit $?"
  # Each output's line, then its values' line.
  grep -A1 '^output 0 "y\[0\]": f32\[2\]' "$out" | grep -q 'first: \[1, 2\]' || fail "run on $b: y[0] is not s[0]"
  grep -A1 '^output 1 "y\[1\]": f32\[3\]' "$out" | grep -q 'first: \[3, 4, 5\]' || fail "run on $b: y[1] is not s[1]"
  grep -A1 '^output 2 "y\[2\]": f32\[2\]' "$out" | grep -q 'first: \[7, 8\]' || fail "run on $b: y[2] is not x"
  # (n and has are constants at import; their outputs keep the constants'
  # names, a naming defect of constant outputs not specific to sequences.)
  grep -A1 '^output 3 ".*": i64\[\]' "$out" | grep -q 'first: \[2\]' || fail "run on $b: n is not 2"
  grep -A1 '^output 4 ".*": bool\[\]' "$out" | grep -q 'first: \[0\]' || fail "run on $b: has is not false"
done

expect_exit 1 "no --sequence-shapes must exit 1" "$kiln" compile "$dir/seq.onnx" --target cpu --empty-optionals o
grep -q 'input "s": is a sequence; .* --sequence-shapes s:2x3+4x3' "$out" || fail "no message naming --sequence-shapes"
expect_exit 1 "a tensor in --sequence-shapes must exit 1" "$kiln" compile "$dir/seq.onnx" --target cpu \
  --sequence-shapes s:2,x:2 --empty-optionals o
grep -q -- '--sequence-shapes names input "x", which is a tensor' "$out" || fail "no message for x"
expect_exit 1 "a bad --sequence-shapes must exit 1" "$kiln" compile "$dir/seq.onnx" --target cpu --sequence-shapes s
grep -q -- "--sequence-shapes 's': expected name:SHAPE+SHAPE" "$out" || fail "no message for a bad flag"
echo PASS
