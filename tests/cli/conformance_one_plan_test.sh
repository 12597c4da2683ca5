#!/bin/sh
# Issue 19: `kiln conformance` on test folders whose data sets have different
# shapes (make_dynamic_conformance.py: a dynamic-batch CNN at batch 1, 3, 5 and
# a dynamic batch+seq encoder at 1x5, 2x16, 4x9, expected outputs from ONNX
# Runtime) compiles each model ONCE with a profile spanning the sets and runs
# every set from that plan, on ref (the runtime's CPU path) and sim, saying so;
# so does a model whose result size the data decides (NonZero, a CPU plan run
# stage by stage).
# A folder whose sets share one shape runs set by set as before; a wrong
# expected output in one set still fails, naming the set.
# Usage: conformance_one_plan_test.sh KILN TESTS_CLI_DIR VENV_PYTHON sim|nosim
set -u
kiln=$1
t=$2
py=$3
sim=${4:-sim}
. "$(dirname "$0")/lib.sh"
"$py" "$t/make_dynamic_conformance.py" "$dir" >"$out" 2>&1 || fail "make_dynamic_conformance.py"

backends="ref"
[ "$sim" = sim ] && backends="ref sim"
for be in $backends; do
  "$kiln" conformance "$dir/dynamic" --backend "$be" --json "$dir/$be.json" >"$out" 2>&1 ||
    fail "conformance on $be: exit $?"
  grep -q "^dynamic \[$be\]: 4 passed, 0 failed, 0 unsupported, 0 crashed of 4" "$out" || fail "$be: not 4 passes"
  grep -q "^dynamic/cnn_batch \[$be\]: 3 sets from one plan, profile batch in \[1, 5\]$" "$out" ||
    fail "$be: the CNN's sets did not run from one plan"
  grep -q "^dynamic/encoder_batch_seq \[$be\]: 3 sets from one plan, profile batch in \[1, 4\], seq in \[5, 16\]$" \
    "$out" || fail "$be: the encoder's sets did not run from one plan"
  grep -q "^dynamic/positive_batch \[$be\]: 3 sets from one plan, profile batch in \[1, 4\], nonzero_n0 in \[0, 12\]$" \
    "$out" || fail "$be: the data-dependent model's sets did not run from one plan"
  grep -q "cnn_same_shape.*one plan" "$out" && fail "$be: sets of one shape must run as a static folder"
  grep -q '"one_plan": "3 sets from one plan, profile batch in \[1, 5\]"' "$dir/$be.json" ||
    fail "$be: the JSON does not record the plan's profile"
done

# A wrong expected value in the last set (batch 5) fails the test, naming it.
"$py" - "$dir/dynamic/cnn_batch/test_data_set_2/output_0.pb" <<'PY' || fail "could not edit output_0.pb"
import sys
import numpy as np
from onnx import TensorProto, numpy_helper
t = TensorProto()
t.ParseFromString(open(sys.argv[1], "rb").read())
a = numpy_helper.to_array(t).copy()
a[4, 0] += 0.5
open(sys.argv[1], "wb").write(numpy_helper.from_array(a, t.name).SerializeToString())
PY
"$kiln" conformance "$dir/dynamic" --filter cnn_batch -v >"$out" 2>&1 && fail "a wrong expected output passed"
grep -q '^fail dynamic/cnn_batch: test_data_set_2: output 0 ("probs")' "$out" || fail "the failing set is not named"
echo "conformance one plan: ok ($backends)"
