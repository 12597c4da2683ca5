#!/bin/sh
# String tensors run on the reference backend only: `kiln run --backend ref`
# computes a StringConcat -> RegexFullMatch model from TensorProto inputs;
# a GPU (or any) plan, the simulator and random string inputs are refused
# with exit 1 and a message naming the node or input, never a crash.
# Models from make_strings_model.py. Usage: strings_test.sh KILN TESTS_CLI_DIR
set -u
kiln=$1
t=$2
. "$(dirname "$0")/lib.sh"
inputs="a:$t/strings_a.pb,b:$t/strings_b.pb"

expect_exit 0 "run on ref" "$kiln" run "$t/strings.onnx" --backend ref --inputs "$inputs"
grep -qF 'output 0 "c": string[2]' "$out" || fail "no string output c"
grep -qF 'first: ["ann@x.com", "b\xc3\xa9!"]' "$out" || fail "wrong strings in c"
grep -qF 'output 1 "m": bool[2]' "$out" || fail "no output m"
grep -qF 'first: [1, 0]' "$out" || fail "wrong regex matches"

refused="holds string tensors, which kiln runs on the CPU backends only (the reference backend)"
for target in sm_90 sm_80 cpu; do
  expect_exit 1 "compile --target $target" "$kiln" compile "$t/strings.onnx" --target "$target" -o "$dir/s.plan"
  grep -qF "node \"join\" (string_concat) $refused, not in a plan for target $target" "$out" ||
    fail "compile --target $target: no refusal naming the node"
  [ -e "$dir/s.plan" ] && fail "compile --target $target wrote a plan"
done
expect_exit 1 "run on sim" "$kiln" run "$t/strings.onnx" --backend sim --inputs "$inputs"
grep -qF "node \"join\" (string_concat) $refused, not on the kernel simulator" "$out" || fail "sim: no refusal"
expect_exit 1 "random strings" "$kiln" run "$t/strings.onnx" --backend ref
grep -qF 'input "a" is a string tensor (string[2]): kiln draws no random strings' "$out" || fail "no random refusal"
grep -q "internal error" "$out" && fail "internal error"
echo "ok: strings on ref; GPU/CPU plans, sim and random strings refused"
