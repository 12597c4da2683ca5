#!/bin/sh
# kiln inspect on a model with unsupported nodes lists each by name and exits
# 1, quickly, without compiling; kiln compile fails with the same list.
# Usage: inspect_test.sh KILN MODEL_DIR
set -u
kiln=$1
model=$2/unsupported.onnx
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

start=$(date +%s%N)
"$kiln" inspect "$model" >"$out" 2>&1
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ $rc -eq 1 ] || fail "inspect exit $rc, expected 1"
[ $ms -lt 1000 ] || fail "inspect took $ms ms"
for line in 'node "mystery" (MysteryOp): op MysteryOp' \
            'node "random" (RandomUniformLike): op RandomUniformLike' 'coverage: 2 of 6 nodes cannot be compiled' \
            'x                        f32   [Nx4]' 'opsets: ai.onnx 13' 'MysteryOp                1'; do
  grep -qF "$line" "$out" || fail "inspect output lacks: $line"
done
# The Relu after the unknown op is a known op: not listed.
grep -q after_mystery "$out" && fail "after_mystery listed"
# No pass ran: compile's pipeline would print nothing here either, but the
# coverage check must come before any pass; --stats would show passes.
"$kiln" compile "$model" --shapes x:2x4 --stats >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "compile exit $rc, expected 1"
grep -qF '2 node(s) cannot be compiled' "$out" || fail "compile does not list the nodes"
grep -qF 'node "random" (RandomUniformLike)' "$out" || fail "compile does not name node random"
# String tensors import (the Cast to string above is not an import problem),
# but no plan target takes them: inspect says so and exits 1, as compile does.
"$kiln" inspect "$2/strings.onnx" >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "inspect of a string model: exit $rc, expected 1"
grep -qF 'holds string tensors, which kiln runs on the CPU backends only' "$out" || fail "inspect does not name the string node"
grep -qF 'no plan target takes this model' "$out" || fail "inspect does not say no plan target takes it"
grep -q 'every node is supported' "$out" && fail "inspect calls a string model supported"
echo "PASS ($ms ms)"
