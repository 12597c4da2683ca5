#!/bin/sh
# A graph output listed twice (the same value twice in graph.output, which
# onnx.checker accepts): ONNX Runtime returns it twice, and so do kiln run's
# CPU backends on the .onnx (ref and sim), two outputs with the same values,
# written apart. A plan refuses it by name (its outputs are bound by name; the
# refusals are the robustness cases graph_output_twice_*), and kiln inspect
# says so.
# Usage: duplicate_outputs_test.sh KILN TESTS_CLI_DIR VENV_PYTHON
set -u
kiln=$1
t=$2
py=$3
. "$(dirname "$0")/lib.sh"

"$py" - "$dir" <<'PY' || fail "writing the model"
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper
vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3])
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [vi("x")], [vi("y"), vi("y")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, sys.argv[1] + "/twice.onnx")
np.save(sys.argv[1] + "/x.npy", np.array([[-1, 2, -3], [4, -5, 6]], np.float32))
PY

for be in ref sim; do
  run_plan "$dir/twice.onnx" $be "run --backend $be" x="$dir/x.npy"
  grep -q '^output 0 "y": f32\[2,3\]' "$out" || fail "$be: no output 0"
  grep -q '^output 1 "y": f32\[2,3\]' "$out" || fail "$be: no output 1"
  [ "$(ls "$dir/o")" = "$(printf 'y.0.npy\ny.1.npy')" ] || fail "$be: expected y.0.npy and y.1.npy in $dir/o"
  cmp -s "$dir/o/y.0.npy" "$dir/o/y.1.npy" || fail "$be: the two outputs differ"
done
# ONNX Runtime's two outputs, compared one by one.
KILN_PYTHON=$py "$kiln" run "$dir/twice.onnx" --backend ref --inputs "x:$dir/x.npy" --compare ort >"$out" 2>&1 ||
  fail "--compare ort exit $?"
[ "$(grep -c '^  PASS y: max abs 0,' "$out")" -eq 2 ] || fail "--compare ort did not compare two outputs named y"
# A plan: refused before anything is compiled, and no plan file is left.
expect_error 'twice.onnx: graph output "y" is listed twice (outputs 0 and 1)' compile "$dir/twice.onnx" \
  --target cpu -o "$dir/twice.plan"
[ -e "$dir/twice.plan" ] && fail "a plan was written"
# kiln inspect ("will kiln compile this model?") says the same, exit 1.
expect_error 'coverage: no plan target takes this model (kiln run --backend ref or sim runs it): ' inspect "$dir/twice.onnx"
grep -qF 'graph output "y" is listed twice (outputs 0 and 1)' "$out" || fail "inspect does not name the output"
echo PASS
