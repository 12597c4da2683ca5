# The shared preamble of the tests/cli/*_test.sh scripts (POSIX sh), sourced
# after the script has read its arguments:
#
#   . "$(dirname "$0")/lib.sh"
#
# It gives:
#   $dir           a fresh temporary folder, removed when the script exits
#   $out, $err     files in it for a command's output (stdout and stderr
#                  together in $out unless a script splits them)
#   fail MSG       prints "FAIL: MSG" and what $out and $err hold, exits 1
#   expect_exit CODE MSG CMD [ARGS...]
#                  runs CMD with its output in $out and fails with MSG
#                  unless it exits with CODE (a user error must be exit 1,
#                  never a crash or exit 2)
# A script that needs more in its failure report defines its own fail after
# sourcing this file. expect_exit is for scripts without `set -e` (which
# would end the script at the command's failure).
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$dir/out
err=$dir/err
fail() {
  echo "FAIL: $*"
  cat "$out" "$err" 2>/dev/null
  exit 1
}
expect_exit() {
  _want=$1
  _msg=$2
  shift 2
  "$@" >"$out" 2>&1
  _got=$?
  [ "$_got" -eq "$_want" ] || fail "$_msg (exit $_got, expected $_want)"
}
