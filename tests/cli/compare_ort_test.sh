#!/bin/sh
# Issue 16, item 6: kiln run MODEL.onnx --compare ort runs ONNX Runtime on the
# same inputs (the .npy/.pb given, or the random ones) and prints each
# output's max abs/rel error and PASS/FAIL; exit 1 on a mismatch (proved with
# a Python whose ONNX Runtime outputs are perturbed), a clear error before any
# compile when ONNX Runtime is missing, and on a plan.
# Usage: compare_ort_test.sh KILN TESTS_CLI_DIR VENV_PYTHON
set -u
kiln=$1
t=$2
py=$3
. "$(dirname "$0")/lib.sh"

# Agreement, with the venv's ONNX Runtime (KILN_PYTHON), on random and on given inputs.
KILN_PYTHON=$py "$kiln" run "$t/small.onnx" --compare ort >"$out" 2>&1 || fail "compare exit $?"
grep -q '^compare with ONNX Runtime' "$out" || fail "no compare header"
grep -q '^  PASS [^ ]*: max abs [0-9.e+-]*, max rel [0-9.e+-]* (atol 0.0001, rtol 0.001)$' "$out" ||
  fail "no per-output PASS line with errors and tolerance"
grep -q '^compare: PASS' "$out" || fail "no overall PASS"
KILN_PYTHON=$py "$kiln" run "$t/small.onnx" --inputs "x:$t/small_x.pb" --fp16 --compare ort >"$out" 2>&1 ||
  fail "fp16 compare on .pb inputs exit $?"
grep -q 'precision fp16' "$out" || fail "the precision is not named"
grep -q '(atol 0.0025, rtol 0.001)$' "$out" || fail "fp16 is not held to FP16's tolerance"

# A scalar result (ReduceSum over every axis, keepdims=0) is 0-d on both
# sides: the ONNX Runtime side once saved it as [1] and reported a mismatch.
"$py" - "$dir/scalar.onnx" <<'EOS' || fail "cannot write the scalar model"
import sys
import onnx
from onnx import TensorProto, helper
g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)], "scalar",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, sys.argv[1])
EOS
KILN_PYTHON=$py "$kiln" run "$dir/scalar.onnx" --compare ort >"$out" 2>&1 || fail "a scalar output: compare exit $?"
grep -q '^  PASS y: ' "$out" || fail "a scalar output does not PASS against ONNX Runtime"

# A mismatch: ONNX Runtime's first output moved by 0.5 after it ran.
cat >"$dir/perturbing_python" <<EOS
#!/bin/sh
"$py" "\$@" || exit \$?
# argv: -c SCRIPT MODEL DIR NAMES... (the probe has no DIR)
if [ \$# -ge 4 ] && [ -f "\$4/out_0.npy" ]; then
  "$py" -c 'import sys, numpy as np; a = np.load(sys.argv[1]); np.save(sys.argv[1], a + 0.5)' "\$4/out_0.npy"
fi
EOS
chmod +x "$dir/perturbing_python"
KILN_PYTHON=$dir/perturbing_python "$kiln" run "$t/small.onnx" --compare ort >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "a mismatch exits $rc, expected 1"
grep -q '^  FAIL [^ ]*: max abs 0.5' "$out" || fail "no FAIL line with the 0.5 error"
grep -q '^compare: FAIL' "$out" || fail "no overall FAIL"

# No ONNX Runtime in that Python (-S: no site-packages): an error before the compile.
cat >"$dir/bare_python" <<EOS
#!/bin/sh
exec python3 -S "\$@"
EOS
chmod +x "$dir/bare_python"
KILN_PYTHON=$dir/bare_python "$kiln" run "$t/small.onnx" --compare ort >"$out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "missing onnxruntime exits $rc, expected 1"
grep -qF "error: --compare ort: ONNX Runtime is not available in Python '$dir/bare_python' (ModuleNotFoundError: No module named" "$out" ||
  fail "missing onnxruntime: no clear error"
grep -q 'compile:' "$out" && fail "compiled before finding ONNX Runtime missing"
KILN_PYTHON=$dir/no_such_python "$kiln" run "$t/small.onnx" --compare ort >"$out" 2>&1
[ $? -eq 1 ] || fail "a missing Python: exit not 1"
grep -qF "cannot start Python '$dir/no_such_python'" "$out" || fail "a missing Python: no clear error"

# Only ort; not on a plan.
"$kiln" run "$t/small.onnx" --compare tensorrt >"$out" 2>&1
[ $? -ne 0 ] || fail "--compare tensorrt accepted"
"$kiln" compile "$t/small.onnx" --target cpu -o "$dir/s.plan" >"$out" 2>&1 || fail "compile"
expect_exit 1 "--compare on a plan: exit not 1" "$kiln" run "$dir/s.plan" --compare ort
grep -qF -- "--compare ort needs the ONNX model" "$out" || fail "--compare on a plan: no reason"
echo "compare ort: OK"
