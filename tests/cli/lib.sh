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
#   expect_error MESSAGE ARGS...
#                  runs `$kiln ARGS...` with its output in $out and fails
#                  unless it exits 1 (a user error) with MESSAGE (a fixed
#                  string) in its output
#   run_plan PLAN BACKEND WHAT NAME=FILE...
#                  runs `$kiln run PLAN --backend BACKEND` on the inputs
#                  NAME=FILE, its outputs in $dir/o (made anew), its report in
#                  $out (for the caller's own checks), and fails with
#                  "WHAT: exit N" unless it exits 0 (BACKEND gpu: and says
#                  it ran on the GPU)
#   matches_ort [--fp16] MODEL WHAT NAME=FILE...
#                  fails with "WHAT: not ONNX Runtime's outputs" unless the
#                  outputs in $dir/o equal ONNX Runtime's for MODEL on the
#                  same inputs (compare_outputs_ort.py; --fp16: within the
#                  fp16 tolerance)
#   runs_like_ort [--fp16] [--check FN] PLAN MODEL WHAT BACKENDS SHAPES NAME=FILE...
#                  for each backend of BACKENDS and each shape of SHAPES
#                  (words): run_plan PLAN there on the inputs NAME=FILE with
#                  each {} replaced by the shape; on sim, fails unless the
#                  plan's own kernels ran; calls `FN BACKEND SHAPE` (the
#                  caller's checks of the run's report in $out); then
#                  matches_ort MODEL. A run is named "WHAT on BACKEND at SHAPE"
#   decoder_profile MAX
#                  sets $min and $max, the --min-shapes and --max-shapes of
#                  the zoo's llama_kv_prefill decoder: input_ids from 1x1 to
#                  1xMAX, each of its caches ($decoder_caches) from 0 to MAX
#                  positions
#   decoder_inputs SEQ_PAST...
#                  writes the decoder's inputs for each SEQ_PAST (such as
#                  1_8: one new token after 8 cached positions) into $dir,
#                  random with seed 19
#   decoder_pairs SEQ_PAST
#                  sets $pairs to those inputs as NAME=FILE words (for
#                  run_plan and matches_ort, unquoted)
# expect_error, run_plan, matches_ort and runs_like_ort use the script's $kiln, $py (the venv's python)
# and $t (this folder). A script that needs more in its failure report
# defines its own fail after sourcing this file. expect_exit is for scripts
# without `set -e` (which would end the script at the command's failure).
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
# $kiln, $py and $t are the sourcing script's.
# shellcheck disable=SC2154
expect_error() {
  _want=$1
  shift
  "$kiln" "$@" >"$out" 2>&1
  _got=$?
  [ "$_got" -eq 1 ] || fail "kiln $*: exit $_got, expected 1"
  grep -qF -- "$_want" "$out" || fail "kiln $*: no '$_want'"
  return 0
}
# shellcheck disable=SC2154
run_plan() {
  _plan=$1
  _be=$2
  _what=$3
  shift 3
  _ins=
  for _pair in "$@"; do
    _ins="${_ins:+$_ins,}${_pair%%=*}:${_pair#*=}"
  done
  rm -rf "$dir/o"
  "$kiln" run "$_plan" --backend "$_be" --inputs "$_ins" --outputs "$dir/o" >"$out" 2>&1 || fail "$_what: exit $?"
  # On a GPU, the plan's kernels by the runtime's GPU engine, never a CPU fallback.
  [ "$_be" != gpu ] || grep -q "^backend: gpu" "$out" || fail "$_what: did not run on the GPU"
}
# shellcheck disable=SC2154
matches_ort() {
  _tol=
  if [ "$1" = --fp16 ]; then
    _tol=--fp16
    shift
  fi
  _model=$1
  _what=$2
  shift 2
  # shellcheck disable=SC2086
  "$py" "$t/compare_outputs_ort.py" $_tol "$_model" "$dir/o" "$@" >"$out" 2>&1 ||
    fail "$_what: not ONNX Runtime's outputs"
}
runs_like_ort() {
  _rl_tol=
  _rl_check=
  while :; do
    case $1 in
      --fp16)
        _rl_tol=--fp16
        shift
        ;;
      --check)
        _rl_check=$2
        shift 2
        ;;
      *) break ;;
    esac
  done
  _rl_plan=$1
  _rl_model=$2
  _rl_what=$3
  _rl_backends=$4
  _rl_shapes=$5
  shift 5
  for _rl_be in $_rl_backends; do
    for _rl_s in $_rl_shapes; do
      _rl_ins=
      for _rl_w in "$@"; do
        case $_rl_w in
          *"{}"*) _rl_w="${_rl_w%%"{}"*}$_rl_s${_rl_w#*"{}"}" ;;
        esac
        _rl_ins="$_rl_ins $_rl_w"
      done
      _rl_run="$_rl_what on $_rl_be at $_rl_s"
      # shellcheck disable=SC2086
      run_plan "$_rl_plan" "$_rl_be" "$_rl_run" $_rl_ins
      if [ "$_rl_be" = sim ]; then
        grep -q "^backend: sim (the plan's kernels and launch list on the CPU simulator)" "$out" ||
          fail "$_rl_run did not run the plan's own kernels"
      fi
      [ -z "$_rl_check" ] || "$_rl_check" "$_rl_be" "$_rl_s"
      # shellcheck disable=SC2086
      matches_ort $_rl_tol "$_rl_model" "$_rl_run" $_rl_ins
    done
  done
}
decoder_caches="past_key_0 past_value_0 past_key_1 past_value_1"
decoder_profile() {
  min=input_ids:1x1
  max=input_ids:1x$1
  for _c in $decoder_caches; do
    min="$min,$_c:1x2x0x16"
    max="$max,$_c:1x2x$1x16"
  done
}
decoder_inputs() {
  "$py" - "$dir" "$@" <<'EOF' || fail "decoder_inputs $*"
import sys
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(19)
for sp in sys.argv[2:]:
    seq, past = map(int, sp.split("_"))
    np.save(f"{d}/ids_{seq}_{past}.npy", rng.integers(0, 256, (1, seq)).astype(np.int64))
    for c in ("past_key_0", "past_value_0", "past_key_1", "past_value_1"):
        np.save(f"{d}/{c}_{seq}_{past}.npy", rng.standard_normal((1, 2, past, 16)).astype(np.float32))
EOF
}
decoder_pairs() {
  pairs="input_ids=$dir/ids_$1.npy"
  for _c in $decoder_caches; do
    pairs="$pairs $_c=$dir/${_c}_$1.npy"
  done
}
