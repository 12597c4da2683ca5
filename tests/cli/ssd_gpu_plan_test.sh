#!/bin/sh
# Issue 19, data-dependent sizes in GPU plans: the zoo's ssd_tiny (an
# SSD-style head: convs, box decoding, softmax, NonMaxSuppression, the kept
# boxes and scores gathered) prepared from its committed skeleton, compiled
# once for sm_90 (computed at the NMS bound, the count written on the device),
# run from the plan on the simulator (the plan's own kernels) and through the
# runtime's path (ref), the outputs trimmed to the count and compared with
# ONNX Runtime at fp32 tolerance; the count is printed and is neither 0 nor the
# bound.
# Usage: ssd_gpu_plan_test.sh KILN TESTS_CLI_DIR REPO VENV_PYTHON
set -u
kiln=$1
t=$2
repo=$3
py=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$dir/out.txt
fail() { echo "FAIL: $*"; cat "$out" 2>/dev/null; exit 1; }
"$py" "$repo/tests/models/prepare_models.py" --zoo "$dir/zoo" ssd_tiny >"$out" 2>&1 || fail "prepare ssd_tiny"
m=$dir/zoo/ssd_tiny/model.onnx
"$py" -c "
import sys, onnx, numpy as np
from onnx import numpy_helper
t = onnx.TensorProto()
t.ParseFromString(open(sys.argv[1], 'rb').read())
np.save(sys.argv[2], numpy_helper.to_array(t))" "$dir/zoo/ssd_tiny/test_data_set_0/input_0.pb" "$dir/images.npy" ||
  fail "the input"
"$kiln" compile "$m" --target sm_90 -o "$dir/ssd.plan" >"$out" 2>&1 || fail "compile: exit $?"
grep -q 'non_max_suppression) (nms_n0 in \[0, 40\])): the GPU plan computes at the upper bounds' "$out" ||
  fail "compile: the bound is not said"
grep -q 'plan written; GPU kernels: [1-9][0-9]* for sm_90' "$out" || fail "compile: no GPU kernels"
for b in sim ref; do
  rm -rf "$dir/o"
  "$kiln" run "$dir/ssd.plan" --backend $b --inputs "images:$dir/images.npy" --outputs "$dir/o" >"$out" 2>&1 ||
    fail "run on $b: exit $?"
  grep -q '^data-dependent sizes: nms_n0=\([1-9]\|[1-3][0-9]\) (range \[0, 40\]' "$out" ||
    fail "run on $b: not some boxes kept, some suppressed"
  grep -q '^output 3 "det_boxes": f32\[[1-9][0-9]*,4\]' "$out" || fail "run on $b: det_boxes not trimmed"
  "$py" "$t/compare_outputs_ort.py" "$m" "$dir/o" "images=$dir/images.npy" >"$out" 2>&1 ||
    fail "run on $b: not ONNX Runtime's outputs"
done
echo PASS
