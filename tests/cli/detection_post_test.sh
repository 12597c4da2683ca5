#!/bin/sh
# Issue 19, torchvision's detection post-processing as its TorchScript export
# writes it (make_detection_post_model.py): GatherND with NonZero's indices,
# TopK with k = min(8, count) computed from Shape/ReduceMin, ConstantOfShape
# of a run-time shape, a Slice taking a run-time size whole (0:INT64_MAX) and
# one clamping it (idx[:5]); and NonMaxSuppression inside the branch of an If
# that guards it ("no boxes?"), with scores that take either branch. Each runs
# with `kiln run` on the reference backend and on the simulator against ONNX
# Runtime; the sizes the run bound are printed.
# Usage: detection_post_test.sh KILN TESTS_CLI_DIR VENV_PYTHON sim|nosim
set -u
kiln=$1
t=$2
py=$3
sim=${4:-sim}
. "$(dirname "$0")/lib.sh"
"$py" "$t/make_detection_post_model.py" "$dir" || fail "make_detection_post_model.py"

backends=ref
[ "$sim" = sim ] && backends="ref sim"
for b in $backends; do
  KILN_PYTHON=$py "$kiln" run "$dir/post.onnx" --backend $b --inputs "scores:$dir/scores.npy,boxes:$dir/boxes.npy" \
    --compare ort >"$out" 2>&1 || fail "post on $b: exit $?"
  # 13 scores pass the threshold, top-k keeps min(8, 13), the slice min(5, 8).
  grep -q '^data-dependent sizes: nonzero_n0=13 (.*), nonzero_n1=13 (.*), slice_n0=5 (.*), topk_k0=8 ' "$out" ||
    fail "post on $b: not the sizes 13, 8 and 5"
  grep -q '^compare: PASS' "$out" || fail "post on $b: no PASS against ONNX Runtime"
  # 13 boxes pass the threshold: the else branch, NMS keeps 10, the slice 6.
  KILN_PYTHON=$py "$kiln" run "$dir/nms_if.onnx" --backend $b --inputs "scores:$dir/scores.npy,boxes:$dir/boxes.npy" \
    --compare ort >"$out" 2>&1 || fail "nms_if on $b: exit $?"
  grep -q '^data-dependent sizes: if_n0=10 (.*), nms_n0=10 (.*), nonzero_n0=13 (.*), slice_n0=6 ' "$out" ||
    fail "nms_if on $b: not the else branch with sizes 13, 10 and 6"
  grep -q '^compare: PASS' "$out" || fail "nms_if on $b: no PASS against ONNX Runtime"
  # None pass: the then branch's empty list; NMS does not run.
  KILN_PYTHON=$py "$kiln" run "$dir/nms_if.onnx" --backend $b --inputs "scores:$dir/low_scores.npy,boxes:$dir/boxes.npy" \
    --compare ort >"$out" 2>&1 || fail "nms_if (no boxes) on $b: exit $?"
  grep -q '^data-dependent sizes: if_n0=0 (.*), nms_n0 not run (.*), nonzero_n0=0 (.*), slice_n0=0 ' "$out" ||
    fail "nms_if (no boxes) on $b: not the then branch"
  grep -q '^compare: PASS' "$out" || fail "nms_if (no boxes) on $b: no PASS against ONNX Runtime"
done
echo PASS
