#!/bin/sh
# An sm_90 plan of a model with control flow left in it (a loop whose body
# holds an if, both on input data): kiln compile writes GPU kernels for the
# regions, and kiln inspect says the control flow runs host-driven with the
# launches between control-flow steps replayed as CUDA Graphs and lists each
# region's launches (text and --json).
# Usage: control_flow_plan_test.sh KILN CASES_DIR
set -u
kiln=$1
model=$2/loop_nested_if/model.onnx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out"; exit 1; }

"$kiln" compile "$model" --target sm_90 -o "$tmp/cf.plan" >"$tmp/out" 2>&1 || fail "compile exit $?"
"$kiln" inspect "$tmp/cf.plan" --json "$tmp/cf.json" >"$tmp/out" 2>&1 || fail "inspect exit $?"
grep -q '^control flow: 2 if/loop/scan node(s) run host-driven: each run reads each condition or trip count on the host and runs the chosen region.s steps, the launches between control-flow steps replayed as CUDA Graphs' \
  "$tmp/out" || fail "inspect does not say the control flow runs host-driven"
grep -q '^  in control 0 region 0:' "$tmp/out" || fail "inspect lists no launch of the loop body"
grep -q 'control flow (loop): control 0, 1 region(s), host-driven' "$tmp/out" || fail "no loop step"
grep -q '"kind": "control"' "$tmp/cf.json" || fail "the JSON has no control step"
grep -q '"region": "control 0 region 0, control 1 region' "$tmp/cf.json" || fail "the JSON has no launch of the if's branches"
echo PASS
