#!/bin/sh
# Issue 16 item 3: --batch N on compile and run (as on bench) sets the leading
# dim of every input with a batch dim (symbolic or 1), and so of every output.
# gather_ids.onnx: input_ids, token_type_ids i64[1,8] -> embeddings f32[1,8,4].
# Usage: batch_test.sh KILN TESTS_CLI_DIR
set -u
kiln=$1
model=$2/gather_ids.onnx
. "$(dirname "$0")/lib.sh"

"$kiln" compile "$model" --batch 4 -o "$dir/b.plan" >"$out" 2>&1 || fail "compile --batch exit $?"
"$kiln" inspect "$dir/b.plan" --json "$dir/b.json" >"$out" 2>&1 || fail "inspect exit $?"
python3 - "$dir/b.json" <<'PY' || fail "compile --batch 4: plan shapes"
import json, sys
d = json.load(open(sys.argv[1]))
io = {v["name"]: v["shape"] for k in ("inputs", "outputs") for v in d[k]}
assert io == {"input_ids": [4, 8], "token_type_ids": [4, 8], "embeddings": [4, 8, 4]}, io
PY

"$kiln" run "$model" --batch 4 >"$out" 2>&1 || fail "run --batch exit $?"
for line in 'input "input_ids": i64[4,8]' 'input "token_type_ids": i64[4,8]' 'output 0 "embeddings": f32[4,8,4] checksum'; do
  grep -qF "$line" "$out" || fail "run --batch 4: no '$line'"
done
# --shapes wins for the input it names; it must then agree with the batch.
"$kiln" run "$model" --batch 4 --shapes input_ids:4x8 >"$out" 2>&1 || fail "run --batch --shapes exit $?"
grep -qF 'output 0 "embeddings": f32[4,8,4]' "$out" || fail "--batch with --shapes"

expect_exit 1 "--batch on a model without a batch dim: expected exit 1" "$kiln" compile "$2/small.onnx" --batch 4
grep -qF "small.onnx: --batch: no input has a batch dim first (a symbolic dim or 1)" "$out" || fail "no-batch-dim message"
echo PASS
