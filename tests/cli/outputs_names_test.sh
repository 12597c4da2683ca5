#!/bin/sh
# Issue 16, item 1: kiln run --outputs writes outputs whose names are not file
# names ("gpu_0/softmax_1", "../up") under sanitized names, keeps two outputs
# that sanitize alike apart, and refuses an unwritable folder before running.
# Usage: outputs_names_test.sh KILN TESTS_CLI_DIR
set -u
kiln=$1
. "$(dirname "$0")/lib.sh"
fail() { echo "FAIL: $*"; cat "$out" 2>/dev/null; ls -la "$dir" "$dir/o" 2>/dev/null; exit 1; }

"$kiln" run "$2/slash_names.onnx" --backend ref --outputs "$dir/o" >"$out" 2>&1 || fail "kiln run exit $?"
# "gpu_0/softmax_1" and "gpu_0_softmax_1" both sanitize to gpu_0_softmax_1:
# each gets its position; "../up" stays inside the folder.
for f in gpu_0_softmax_1.0.npy gpu_0_softmax_1.1.npy _._up.npy; do
  [ -f "$dir/o/$f" ] || fail "no $f"
  head -c 6 "$dir/o/$f" | grep -q NUMPY || fail "$f is not a .npy file"
  grep -q "written to $dir/o/$f" "$out" || fail "the report does not say where $f came from"
done
[ "$(ls "$dir/o" | wc -l)" -eq 3 ] || fail "expected exactly 3 files in $dir/o"
[ -e "$dir/up.npy" ] && fail "../up escaped the --outputs folder"
grep -q 'output 0 "gpu_0/softmax_1": f32\[2,3\]' "$out" || fail "output 0 not reported under its own name"

# An unwritable folder (a path through a regular file) fails before the run.
: >"$dir/plain"
"$kiln" run "$2/slash_names.onnx" --backend ref --outputs "$dir/plain/o" >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "--outputs under a file: exit $rc, expected 1"
grep -q "error: $dir/plain/o: cannot create folder (--outputs): Not a directory" "$out" || fail "message"
grep -q '^output 0' "$out" && fail "ran before checking --outputs"
echo PASS
