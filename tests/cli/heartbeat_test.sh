#!/bin/sh
# Issue 16: a single long pass is not silent. KILN_TEST_SLOW_PASS=fuse:S (a
# test-only hook in the pass manager) makes a small model's fuse pass take S
# seconds longer; the "passes run" progress line then names the running pass
# and its time so far, after 3 s: with --progress when stderr is a pipe, and
# on a terminal without it (script(1) gives the terminal). Without --progress
# on a pipe, and without the hook, nothing of the kind is printed.
# Usage: heartbeat_test.sh KILN MODEL
set -u
kiln=$1
model=$2
. "$(dirname "$0")/lib.sh"
beat='passes run [0-9]+/[0-9]+ \([0-9.]+ s\): fuse running for [0-9]+\.[0-9] s'

KILN_TEST_SLOW_PASS=fuse:4.5 "$kiln" compile "$model" --target cpu --progress >"$out" 2>&1 \
  || fail "compile --progress with a slow fuse pass: exit $?"
grep -Eq "^$beat\$" "$out" || fail "no heartbeat naming the slow pass on a pipe with --progress"
# the first beat comes after 3 s of the pass, not before
first=$(grep -Eo 'fuse running for [0-9.]+' "$out" | head -1 | grep -Eo '[0-9.]+$')
awk -v s="$first" 'BEGIN { exit !(s >= 2.9 && s < 4.5) }' || fail "first beat at $first s (expected 3 s into the pass)"
# the summary's pass time counts the slow pass
grep -Eq 'passes [0-9]{4,}(\.[0-9]+)? ms' "$out" || fail "the passes' time does not include the slow pass"

KILN_TEST_SLOW_PASS=fuse:4 "$kiln" compile "$model" --target cpu >"$out" 2>&1 || fail "compile exit $?"
if grep -q 'running for' "$out"; then fail "a heartbeat on a pipe without --progress"; fi
"$kiln" compile "$model" --target cpu --progress >"$out" 2>&1 || fail "compile --progress exit $?"
if grep -q 'running for' "$out"; then fail "a heartbeat without a slow pass"; fi

# On a terminal: shown without --progress, in the updating line.
if command -v script >/dev/null 2>&1; then
  KILN_TEST_SLOW_PASS=fuse:4.5 script -qec "'$kiln' compile '$model' --target cpu" "$dir/typescript" >"$out" 2>&1 \
    || fail "compile on a terminal: exit $?"
  tr '\r' '\n' <"$dir/typescript" >"$out"
  grep -Eq "^$beat *\$" "$out" || fail "no heartbeat on a terminal"
else
  echo "note: script(1) not found, the terminal case is not checked"
fi
echo PASS
