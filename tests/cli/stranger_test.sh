#!/bin/sh
# kiln used as a stranger would (branch cli9): trtexec's spellings of the
# model and shape flags, flags repeated as polygraphy users repeat them, and
# a write that fails half-way (a file size limit standing in for a full disk)
# leaving the old plan and no torn file. The error cases are in the
# robustness corpus (tests/robustness/stranger_cases.py).
# Usage: stranger_test.sh KILN TESTS_CLI_DIR
set -u
kiln=$1
t=$2
. "$(dirname "$0")/lib.sh"

# trtexec's --onnx=FILE and --loadEngine=FILE name the model.
expect_exit 0 "compile --onnx=" "$kiln" compile --onnx="$t/small.onnx" --target cpu -o "$dir/m.plan"
expect_exit 0 "inspect --onnx=" "$kiln" inspect --onnx="$t/small.onnx"
expect_exit 0 "run --loadEngine=" "$kiln" run --loadEngine="$dir/m.plan"
grep -q 'output 0' "$out" || fail "run --loadEngine= printed no output"
expect_error "the model is given 2 times" compile "$t/small.onnx" --onnx="$t/small.onnx"

# --minShapes/--optShapes/--maxShapes reach the same check as kiln's spelling.
expect_error 'gives dim 0 the range [1, 4] but the model fixes it at 2' compile "$t/small.onnx" --minShapes x:1x3x8 --maxShapes x:4x3x8
expect_error 'gives dim 0 the range [1, 4] but the model fixes it at 2' compile "$t/small.onnx" --min-shapes x:1x3x8 --max-shapes x:4x3x8

# Repeated --inputs and --shapes join (one input per use, as polygraphy's
# --load-inputs); the same input twice is still an error.
# The second use is read (a name no input has is reported from it):
expect_error 'the model has no input named "nope"' run "$t/small.onnx" --backend ref --inputs "x:$t/small_x.npy" \
  --inputs "nope:$t/small_x.npy"
expect_exit 0 "repeated --shapes" "$kiln" compile "$t/gather_ids.onnx" --target cpu \
  --shapes input_ids:1x8 --shapes token_type_ids:1x8
expect_error 'input "x" is given twice' run "$t/small.onnx" --backend ref --inputs "x:$t/small_x.npy" \
  --inputs "x:$t/small_x.pb"
expect_error '--shapes: input "x" is given twice' compile "$t/small.onnx" --shapes x:2x3x8 --shapes x:2x3x8

# A write that fails (EFBIG under `ulimit -f 64`, 32 KiB in dash; SIGXFSZ ignored so
# the write returns the error) keeps the old plan, leaves no temporary file,
# and names the reason.
"$kiln" compile "$t/small.onnx" --target cpu -o "$dir/keep.plan" >"$out" 2>&1 || fail "compile keep.plan"
cp "$dir/keep.plan" "$dir/keep.orig"
(
  trap '' XFSZ
  ulimit -f 64
  exec "$kiln" compile "$t/perf_small.onnx" --target cpu -o "$dir/keep.plan"
) >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "compile over the file size limit: exit $rc, expected 1"
grep -qF "$dir/keep.plan: cannot write: File too large" "$out" || fail "no reason for the failed write"
cmp -s "$dir/keep.plan" "$dir/keep.orig" || fail "the old plan was damaged by the failed write"
ls "$dir" | grep -q kiln-tmp && fail "a temporary file was left: $(ls "$dir")"
exit 0
