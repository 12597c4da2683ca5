#!/bin/sh
# Issue 19, data-dependent sizes in GPU plans: the zoo's ssd_tiny (an
# SSD-style head: convs, box decoding, softmax, NonMaxSuppression, the kept
# boxes and scores gathered) prepared from its committed skeleton, compiled
# once for sm_90 (computed at the NMS bound, the count written on the device),
# run from the plan on the simulator (the plan's own kernels) and through the
# runtime's path (ref), the outputs trimmed to the count and compared with
# ONNX Runtime at fp32 tolerance; the count is printed and is neither 0 nor the
# bound.
# Then the zoo's ssdlite_mobilenet_v3 (torchvision's SSDlite head: per class
# NonZero and TopK with k = min(k, n), the classes concatenated along their
# counts, an If around the batched NMS ("no boxes left?"), a slice clamping
# the kept to 100): compiled once for sm_90, the If's branches both inlined and
# selected on the device, run on sim and ref for the test image (100 kept), a
# dark image (2 kept) and the image scaled by 0.1 (5 kept), against ONNX
# Runtime at fp32; and at fp16 on ref for the scaled image (at fp16 the test
# image's 100 detections come in another order: scores 5e-3 apart swap ranks).
# And the ssdlite plan through the runtime's GPU path on the strict fake
# driver (kiln_fake_gpu_plan_check --run-time-inputs: one captured CUDA Graph,
# the plan's kernels on the simulator), against the zoo's expected outputs.
# Usage: ssd_gpu_plan_test.sh KILN TESTS_CLI_DIR REPO VENV_PYTHON FAKE_GPU_PLAN_CHECK
set -u
kiln=$1
t=$2
repo=$3
py=$4
plan_check=$5
. "$(dirname "$0")/lib.sh"
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
  run_plan "$dir/ssd.plan" $b "run on $b" "images=$dir/images.npy"
  grep -q '^data-dependent sizes: nms_n0=\([1-9]\|[1-3][0-9]\) (range \[0, 40\]' "$out" ||
    fail "run on $b: not some boxes kept, some suppressed"
  grep -q '^output 3 "det_boxes": f32\[[1-9][0-9]*,4\]' "$out" || fail "run on $b: det_boxes not trimmed"
  matches_ort "$m" "run on $b" "images=$dir/images.npy"
done

"$py" "$repo/tests/models/prepare_models.py" --zoo "$dir/zoo" ssdlite_mobilenet_v3 >"$out" 2>&1 || fail "prepare ssdlite"
m=$dir/zoo/ssdlite_mobilenet_v3/model.onnx
"$py" -c "
import sys, onnx, numpy as np
from onnx import numpy_helper
t = onnx.TensorProto()
t.ParseFromString(open(sys.argv[1], 'rb').read())
x = numpy_helper.to_array(t)
np.save(sys.argv[2] + '/test.npy', x)
np.save(sys.argv[2] + '/dark.npy', np.zeros_like(x))
np.save(sys.argv[2] + '/dim.npy', (x * 0.1).astype(np.float32))" "$dir/zoo/ssdlite_mobilenet_v3/test_data_set_0/input_0.pb" "$dir" ||
  fail "the ssdlite inputs"
"$kiln" compile "$m" --target sm_90 -o "$dir/lite.plan" >"$out" 2>&1 || fail "compile ssdlite: exit $?"
grep -q '(if) (if_n0 in \[0, 1566\]), .*(slice) (slice_n0 in \[0, 100\])): the GPU plan computes at the upper bounds' "$out" ||
  fail "compile ssdlite: the if's and the slice's bounds are not said"
grep -q 'plan written; GPU kernels: [1-9][0-9]* for sm_90' "$out" || fail "compile ssdlite: no GPU kernels"
for b in sim ref; do
  for x in test:100 dark:2 dim:5; do
    run_plan "$dir/lite.plan" $b "ssdlite on $b with ${x%%:*}" "images=$dir/${x%%:*}.npy"
    grep -q "slice_n0=${x##*:} (range \[0, 100\]" "$out" || fail "ssdlite on $b with ${x%%:*}: not ${x##*:} kept"
    grep -q "^output 0 \"boxes\": f32\[${x##*:},4\]" "$out" || fail "ssdlite on $b with ${x%%:*}: boxes not trimmed"
    matches_ort "$m" "ssdlite on $b with ${x%%:*}" "images=$dir/${x%%:*}.npy"
  done
done
"$kiln" compile "$m" --target sm_90 --precision fp16 -o "$dir/lite16.plan" >"$out" 2>&1 || fail "compile ssdlite fp16: exit $?"
run_plan "$dir/lite16.plan" ref "ssdlite fp16" "images=$dir/dim.npy"
matches_ort --fp16 "$m" "ssdlite fp16" "images=$dir/dim.npy"
"$plan_check" "$dir/zoo/ssdlite_mobilenet_v3" --run-time-inputs >"$out" 2>&1 || fail "ssdlite on the fake driver: exit $?"
grep -q '"status":"pass"' "$out" || fail "ssdlite on the fake driver: not a pass"
echo PASS
