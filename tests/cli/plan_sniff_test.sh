#!/bin/sh
# Issue 16, item 7: a plan is recognised by its magic, not its name: a
# renamed plan runs, inspects and benches; compile says it is a plan;
# dump-ir prints the plan's graph (and refuses -O: it is compiled already).
# Usage: plan_sniff_test.sh KILN TESTS_CLI_DIR
set -u
kiln=$1
. "$(dirname "$0")/lib.sh"

"$kiln" compile "$2/small.onnx" --target cpu -o "$dir/m.plan" >"$out" 2>&1 || fail "compile exit $?"
cp "$dir/m.plan" "$dir/model.engine"
p=$dir/model.engine
"$kiln" run "$p" >"$out" 2>&1 || fail "run of a renamed plan: exit $?"
grep -q '^backend: ref (CPU reference path' "$out" || fail "run did not load it as a plan"
"$kiln" inspect "$p" >"$out" 2>&1 || fail "inspect exit $?"
grep -q 'memory plan\|launches\|kernels' "$out" || fail "inspect did not describe a plan"
"$kiln" bench "$p" --iterations 2 --warmup-ms 0 >"$out" 2>&1 || fail "bench exit $?"
grep -q "^Plan: $p" "$out" || fail "bench did not load it as a plan"
expect_exit 1 "compile of a plan: exit not 1" "$kiln" compile "$p"
grep -qF "$p: this is a compiled plan" "$out" || fail "compile message"
for f in "$dir/m.plan" "$p"; do
  "$kiln" dump-ir "$f" >"$out" 2>&1 || fail "dump-ir $f: exit $?"
  grep -q '^graph @' "$out" || fail "dump-ir $f printed no graph"
  grep -q 'reduce_max' "$out" || fail "dump-ir $f: not the plan's graph"
done
expect_exit 1 "dump-ir -O of a plan: exit not 1" "$kiln" dump-ir "$p" -O
grep -qF "$p: a plan is already compiled; --optimize only applies" "$out" || fail "dump-ir -O message"
# An ONNX model named .plan is still read by its content... as a damaged plan,
# with the plan loader's message (the name says plan, the bytes do not).
cp "$2/small.onnx" "$dir/x.plan"
expect_exit 1 "an ONNX file named .plan: exit not 1" "$kiln" run "$dir/x.plan"
grep -qF "not a kiln plan: magic is" "$out" || fail "message for an ONNX file named .plan"
echo PASS
