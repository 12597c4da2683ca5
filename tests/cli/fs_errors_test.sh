#!/bin/sh
# Issue 16, item 4: every path kiln writes (-o, --json, --export-json,
# --outputs, --dump-dir) is checked before compiling or running: exit 1 with
# the path, the flag and the system's reason, never "internal error" (exit 2)
# after the whole build.
# Usage: fs_errors_test.sh KILN TESTS_CLI_DIR
set -u
kiln=$1
model=$2/small.onnx
. "$(dirname "$0")/lib.sh"
: >"$dir/plain"  # a regular file: nothing can be created under it, even by root

# expect_clean_error "MESSAGE" ARGS...: lib.sh's expect_error (exit 1, the
# message), and no compile or run ran.
expect_clean_error() {
  expect_error "$@"
  shift
  grep -q "internal error" "$out" && fail "kiln $*: internal error"
  grep -Eq 'nodes in|^output 0|Performance summary|^model:' "$out" && fail "kiln $*: worked before failing"
  return 0
}
expect_clean_error "error: $dir/nodir/m.plan: cannot write (-o): No such file or directory" \
  compile "$model" -o "$dir/nodir/m.plan"
expect_clean_error "error: $dir: cannot write (--json): Is a directory" compile "$model" --json "$dir"
expect_clean_error "error: $dir/plain/d: cannot create folder (--dump-dir): Not a directory" \
  compile "$model" --dump-dir "$dir/plain/d"
expect_clean_error "error: $dir/plain/d: cannot create folder (--dump-dir): Not a directory" \
  dump-ir "$model" -O --dump-dir "$dir/plain/d"
expect_clean_error "error: $dir/plain/o: cannot create folder (--outputs): Not a directory" \
  run "$model" --outputs "$dir/plain/o"
expect_clean_error "error: $dir/plain/b.json: cannot write (--export-json): Not a directory" \
  bench "$model" --iterations 1 --warmup-ms 0 --export-json "$dir/plain/b.json"
expect_clean_error "error: $dir/plain/i.json: cannot write (--json): Not a directory" inspect "$model" --json "$dir/plain/i.json"

# The checks leave nothing behind and do not truncate an existing file.
echo keep >"$dir/old.json"
"$kiln" compile "$model" -o "$dir/nodir/m.plan" --json "$dir/old.json" >/dev/null 2>&1
[ "$(cat "$dir/old.json")" = keep ] || fail "a failed check truncated an existing --json file"
"$kiln" compile "$model" --json "$dir/new.json" -o "$dir/nodir/m.plan" >/dev/null 2>&1
[ -e "$dir/new.json" ] && fail "the check left $dir/new.json behind"
# And writable paths still work.
"$kiln" compile "$model" -o "$dir/m.plan" --json "$dir/c.json" --dump-dir "$dir/d" >"$out" 2>&1 || fail "compile exit $?"
[ -s "$dir/m.plan" ] && [ -s "$dir/c.json" ] && [ -f "$dir/d/000.input.kir" ] || fail "outputs missing"
ls -a "$dir/d" | grep -q kiln-write-test && fail "the folder probe was left behind"
echo PASS
