#!/bin/sh
# Issue 16 item 10: import and passes report progress ("nodes imported N/M",
# "passes run N/M") on stderr with --progress even when it is a pipe, and
# only then (a terminal shows them once a step takes over a second); the
# summary line gives NVRTC's time (kernels) apart from the passes' time.
# Usage: progress_test.sh KILN MODEL [NODES]
# NODES (a small model's node count) is checked when given, and run, bench
# and dump-ir are then checked too (too slow on BERT-base's reference runs).
set -u
kiln=$1
model=$2
nodes=${3:-}
. "$(dirname "$0")/lib.sh"

"$kiln" compile "$model" --target cpu --progress >"$out" 2>&1 || fail "compile --progress exit $?"
grep -Eq "^nodes imported ${nodes:-[0-9]+}/${nodes:-[0-9]+} \([0-9.]+ s\)$" "$out" || fail "no import progress"
grep -Eq '^passes run ([0-9]+)/\1 \([0-9.]+ s\)$' "$out" || fail "no pass progress"
grep -Eq ': [0-9]+ nodes in, [0-9]+ out, [0-9]+ kernels; import [0-9.]+ ms, passes [0-9.]+ ms, kernels not built \(target cpu' "$out" \
  || fail "summary line"
[ -n "$nodes" ] && for cmd in run bench "dump-ir -O"; do
  "$kiln" $cmd "$model" --progress >"$out" 2>&1 || fail "$cmd --progress exit $?"
  grep -Eq '^passes run ([0-9]+)/\1 ' "$out" || fail "$cmd: no pass progress"
done
"$kiln" compile "$model" --target cpu >"$out" 2>&1 || fail "compile exit $?"
if grep -Eq '^(nodes imported|passes run) ' "$out"; then fail "progress on a pipe without --progress"; fi
echo PASS
