#!/bin/sh
# "-" reads from standard input (branch defects10; tools/kiln/model_stdin.h):
# the ONNX model for kiln compile/run/inspect/bench/dump-ir (the plan compiled
# from it is the file's, byte for byte; the run's outputs and the IR are the
# file's) and an input for kiln run --inputs NAME:-. Refused with exit 1 and
# a message naming <stdin>: a model with external data (no folder to find it
# in), a plan piped in, empty input, the model and an input both from it,
# --compare ort, and a terminal (where kiln would wait for input nobody
# types).
# Usage: stdin_test.sh KILN TESTS_CLI_DIR VENV_PYTHON
set -u
kiln=$1
t=$2
py=$3
. "$(dirname "$0")/lib.sh"
# Runs `$kiln ARGS...` with the file STDIN as its standard input, expecting
# exit 1 and MESSAGE.
expect_error_from() {
  _in=$1
  _want=$2
  shift 2
  "$kiln" "$@" <"$_in" >"$out" 2>&1
  _got=$?
  [ "$_got" -eq 1 ] || fail "kiln $* < $_in: exit $_got, expected 1"
  grep -qF -- "$_want" "$out" || fail "kiln $* < $_in: no '$_want'"
}

for target in cpu sm_90; do
  "$kiln" compile "$t/small.onnx" --target $target -o "$dir/file.plan" >"$out" 2>&1 || fail "compile the file: exit $?"
  "$kiln" compile - --target $target -o "$dir/stdin.plan" <"$t/small.onnx" >"$out" 2>&1 || fail "compile -: exit $?"
  grep -q '^<stdin>: 5 nodes in' "$out" || fail "compile -: the report does not name <stdin>"
  cmp -s "$dir/file.plan" "$dir/stdin.plan" || fail "compile - --target $target: not the file's plan"
done

"$kiln" run "$t/small.onnx" --backend ref --inputs "x:$t/small_x.npy" --outputs "$dir/file" >"$out" 2>&1 ||
  fail "run the file: exit $?"
"$kiln" run - --backend ref --inputs "x:$t/small_x.npy" --outputs "$dir/stdin" <"$t/small.onnx" >"$out" 2>&1 ||
  fail "run -: exit $?"
for f in y m t; do cmp -s "$dir/file/$f.npy" "$dir/stdin/$f.npy" || fail "run -: output $f is not the file's"; done
"$kiln" run "$t/small.onnx" --backend ref --inputs x:- --outputs "$dir/in" <"$t/small_x.npy" >"$out" 2>&1 ||
  fail "run --inputs x:-: exit $?"
grep -q 'input "x": f32\[2,3,8\] from <stdin>' "$out" || fail "--inputs x:-: not said to come from <stdin>"
for f in y m t; do cmp -s "$dir/file/$f.npy" "$dir/in/$f.npy" || fail "--inputs x:-: output $f is not the file's"; done
"$kiln" inspect - <"$t/small.onnx" >"$out" 2>&1 || fail "inspect -: exit $?"
grep -q '^model: <stdin> (ONNX IR version 8' "$out" || fail "inspect -: no model line naming <stdin>"
"$kiln" dump-ir "$t/small.onnx" -O >"$dir/file.kir" 2>&1 || fail "dump-ir the file: exit $?"
"$kiln" dump-ir - -O <"$t/small.onnx" >"$dir/stdin.kir" 2>&1 || fail "dump-ir -: exit $?"
cmp -s "$dir/file.kir" "$dir/stdin.kir" || fail "dump-ir -: not the file's IR"
"$kiln" bench - --backend ref --iterations 2 --warmup-ms 0 <"$t/small.onnx" >"$out" 2>&1 || fail "bench -: exit $?"
grep -q '^Model: <stdin> (5 nodes' "$out" || fail "bench -: no model line naming <stdin>"

"$py" - "$dir" <<'PY' || fail "writing the external-data model"
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3])
w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g", [vi("x")], [vi("y")],
                      initializer=[w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, sys.argv[1] + "/ext.onnx", save_as_external_data=True, location="ext.bin", size_threshold=0)
PY
for cmd in compile run; do
  expect_error_from "$dir/ext.onnx" '<stdin>: initializer "w": its data is in the external file "ext.bin", and this model has no folder' \
    $cmd - --target cpu
done
expect_error_from "$dir/file.plan" "<stdin>: standard input holds a kiln plan; kiln reads plans from files" run - --backend ref
expect_error_from /dev/null "<stdin>: standard input is empty (the model is read from it)" compile - --target cpu
expect_error_from "$t/small.onnx" "<stdin>: the model and --inputs x:- both read standard input; give one of them as a file" \
  run - --backend ref --inputs x:-
expect_error_from "$t/small.onnx" "<stdin>: --compare ort runs ONNX Runtime on the model's file" run - --compare ort
if command -v script >/dev/null 2>&1; then
  script -qec "$kiln run - --backend ref" /dev/null >"$out" 2>&1 </dev/null
  grep -qF "<stdin>: the model is read from standard input, which is a terminal" "$out" ||
    fail "run - on a terminal: no message (or it waited)"
fi
echo PASS
