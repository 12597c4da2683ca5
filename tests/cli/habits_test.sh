#!/bin/sh
# Issue 16, item 6: what trtexec and polygraphy users type works in kiln:
# --fp16/--bf16/--tf32 (and --int8 refused with a reason), random integer ids
# in the range of the Gather tables they index, --input-range, per-output
# min/max/mean/first values, a warning for NaN/Inf outputs, and ONNX
# TensorProto .pb files for --inputs.
# Usage: habits_test.sh KILN TESTS_CLI_DIR
set -u
kiln=$1
t=$2
. "$(dirname "$0")/lib.sh"

# --fp16 is --precision fp16; two precisions are an error; --int8 is refused.
"$kiln" compile "$t/small.onnx" --target cpu --fp16 --json "$dir/c.json" >"$out" 2>&1 || fail "--fp16 exit $?"
grep -q '"precision": "fp16"' "$dir/c.json" || fail "--fp16 did not select fp16"
"$kiln" compile "$t/small.onnx" --target cpu --bf16 --json "$dir/c.json" >"$out" 2>&1 || fail "--bf16 exit $?"
grep -q '"precision": "bf16"' "$dir/c.json" || fail "--bf16 did not select bf16"
expect_error "excludes" compile "$t/small.onnx" --fp16 --precision bf16
expect_error "INT8 is not supported yet" compile "$t/small.onnx" --int8

# BERT-like ids: token_type_ids index a 2-row table, input_ids a 50-row one.
"$kiln" run "$t/gather_ids.onnx" --backend ref >"$out" 2>&1 || fail "random ids out of range: exit $?"
grep -qF 'input "token_type_ids": i64[1,8] random in [0, 1] (indexes a table of 2 rows)' "$out" || fail "token_type_ids range"
grep -qF 'input "input_ids": i64[1,8] random in [0, 49] (indexes a table of 50 rows)' "$out" || fail "input_ids range"
"$kiln" bench "$t/gather_ids.onnx" --iterations 1 --warmup-ms 0 >"$out" 2>&1 || fail "bench on random ids: exit $?"
"$kiln" compile "$t/gather_ids.onnx" --target cpu -o "$dir/g.plan" >"$out" 2>&1 || fail "compile gather_ids"
"$kiln" run "$dir/g.plan" >"$out" 2>&1 || fail "random ids for a plan: exit $?"
grep -qF 'random in [0, 1] (indexes a table of 2 rows)' "$out" || fail "plan: token_type_ids range"

# --input-range (polygraphy's --val-range): every type 1 -> the embeddings
# are 1000 + word row; a constant word id 7 -> first values 1028..1031.
"$kiln" run "$t/gather_ids.onnx" --input-range 'token_type_ids:[1,1]' --val-range 'input_ids:7,7' >"$out" 2>&1 \
  || fail "--input-range exit $?"
grep -qF 'output 0 "embeddings": f32[1,8,4]' "$out" || fail "output line"
grep -qF '  min 1028 max 1031 mean 1029.5 | first: [1028, 1029, 1030, 1031, 1028, 1029, 1030, 1031, ...]' "$out" \
  || fail "min/max/mean/first values"
expect_error "the range [0.5, 1] must have integer bounds" run "$t/gather_ids.onnx" --input-range 'input_ids:[0.5,1]'
expect_error '--input-range: the model has no input named "ids"' run "$t/gather_ids.onnx" --input-range 'ids:[0,1]'
expect_error "LO 3 is above HI 1" run "$t/gather_ids.onnx" --input-range '[3,1]'

# Overflow: max(x @ W) is 120000, finite in fp32 and Inf in fp16, with a warning.
"$kiln" run "$t/overflow.onnx" --input-range 'x:[1,1]' --backend ref >"$out" 2>"$err" || fail "fp32 exit $?"
grep -q warning "$err" && fail "a warning in fp32"
grep -qF '  min 120000 max 120000 mean 120000 | first: [120000]' "$out" || fail "fp32 value"
"$kiln" run "$t/overflow.onnx" --input-range 'x:[1,1]' --fp16 --backend ref >"$out" 2>"$err" || fail "fp16 exit $?"
grep -qF 'warning: output "y" has 0 NaN and 1 Inf of 1 values (fp16 overflows' "$err" || fail "no NaN/Inf warning"

# --inputs: an ONNX TensorProto .pb gives the same values as the .npy.
"$kiln" run "$t/small.onnx" --inputs "x:$t/small_x.npy" >"$dir/npy.txt" 2>&1 || { cp "$dir/npy.txt" "$out"; fail ".npy"; }
"$kiln" run "$t/small.onnx" --inputs "x:$t/small_x.pb" >"$out" 2>&1 || fail ".pb exit $?"
grep -qF "input \"x\": f32[2,3,8] from $t/small_x.pb" "$out" || fail ".pb not read"
[ "$(grep checksum "$out")" = "$(grep checksum "$dir/npy.txt")" ] || fail ".pb and .npy give different outputs"
grep -c checksum "$out" | grep -qx 3 || fail "expected 3 outputs"
printf 'garbage' >"$dir/bad.pb"
expect_error "$dir/bad.pb: neither a NumPy .npy file" run "$t/small.onnx" --inputs "x:$dir/bad.pb"
echo PASS
