#!/bin/sh
# Issue 19, data-dependent sizes: NonZero, TopK with k from an input and
# NonMaxSuppression on run-time inputs, followed by ops that read their
# results (make_data_dependent_models.py), run with `kiln run` on the
# reference backend and on the simulator and match ONNX Runtime (--compare
# ort); the sizes the run bound are printed. A CPU plan holds such a graph:
# `kiln compile --target cpu` writes it and `kiln run PLAN` runs it through
# the runtime (ref) and on the simulator, matching ONNX Runtime. A GPU plan
# (sm_90) holds it computed at the upper bounds and trimmed to the counts
# (plan-on-sim and the runtime's path against ONNX Runtime); what the bounds
# cannot compute exactly is refused naming the node (exit 1).
# Usage: data_dependent_test.sh KILN TESTS_CLI_DIR VENV_PYTHON sim|nosim
set -u
kiln=$1
t=$2
py=$3
sim=${4:-sim}
. "$(dirname "$0")/lib.sh"
"$py" "$t/make_data_dependent_models.py" "$dir" || fail "make_data_dependent_models.py"

backends=ref
[ "$sim" = sim ] && backends="ref sim"
for b in $backends; do
  KILN_PYTHON=$py "$kiln" run "$dir/select.onnx" --backend $b --inputs "x:$dir/x.npy,k:$dir/k.npy" --compare ort \
    >"$out" 2>&1 || fail "select on $b: exit $?"
  grep -q '^data-dependent sizes: nonzero_n0=[0-9]* (.*), nonzero_n1=[0-9]* (.*), topk_k0=3 ' "$out" ||
    fail "select on $b: no sizes line"
  grep -q '^compare: PASS' "$out" || fail "select on $b: no PASS against ONNX Runtime"
  KILN_PYTHON=$py "$kiln" run "$dir/detect.onnx" --backend $b --inputs "boxes:$dir/boxes.npy,scores:$dir/scores.npy" \
    --compare ort >"$out" 2>&1 || fail "detect on $b: exit $?"
  grep -q '^data-dependent sizes: nms_n0=\([1-9]\|1[01]\) ' "$out" || fail "detect on $b: not some boxes kept, some suppressed"
  grep -q '^compare: PASS' "$out" || fail "detect on $b: no PASS against ONNX Runtime"
done

# A k outside [0, axis size] is an error naming the node, exit 1.
"$py" -c "import numpy as np, sys; np.save(sys.argv[1], np.array([9], np.int64))" "$dir/k9.npy"
expect_exit 1 "k = 9 must exit 1" "$kiln" run "$dir/select.onnx" --inputs "x:$dir/x.npy,k:$dir/k9.npy"
grep -q 'k = 9 is out of range for axis 1 of size 6' "$out" || fail "no k range message"
# CPU plans hold them: the runtime runs the graph stage by stage, outputs
# trimmed to the counts (kiln_context_output_shape after the run).
"$kiln" compile "$dir/select.onnx" --target cpu -o "$dir/select.plan" >"$out" 2>&1 || fail "compile select: exit $?"
grep -q 'result sizes decided at run time (.*nonzero.*): the plan keeps the graph as imported, without passes' "$out" ||
  fail "compile select: the skipped passes are not said"
"$kiln" inspect "$dir/select.plan" >"$out" 2>&1 || fail "inspect select.plan: exit $?"
grep -q '^shape profiles: 1 (symbols: nonzero_n0 in \[0, 24\], .*); sizes decided at run time (nonzero_n0, nonzero_n1, topk_k0)' \
  "$out" || fail "inspect select.plan: the sizes decided at run time are not shown"
grep -q '^memory plan: none (sizes decided at run time' "$out" || fail "inspect select.plan: not 'no memory plan'"
"$kiln" compile "$dir/detect.onnx" --target cpu -o "$dir/detect.plan" >"$out" 2>&1 || fail "compile detect: exit $?"
# Generated inputs keep TopK's k within its axis (it drew 9 of [0, 9] for an
# axis of 6 and failed): kiln run says the range, kiln bench runs.
"$kiln" run "$dir/select.plan" >"$out" 2>&1 || fail "select.plan with generated inputs: exit $?"
grep -q '^input "k": i64\[1\] random in \[1, 6\] (k of node (topk) producing %top, axis 1 of size 6)' "$out" ||
  fail "select.plan: k is not drawn within the axis"
"$kiln" bench "$dir/select.plan" --iterations 3 >"$out" 2>&1 || fail "bench select.plan: exit $?"
for b in $backends; do
  run_plan "$dir/select.plan" $b "select.plan on $b" "x=$dir/x.npy" "k=$dir/k.npy"
  grep -q '^data-dependent sizes: nonzero_n0=[0-9]* (range \[0, 24\], .*), nonzero_n1=[0-9]* (.*), topk_k0=3 ' "$out" ||
    fail "select.plan on $b: no sizes line"
  matches_ort "$dir/select.onnx" "select.plan on $b" "x=$dir/x.npy" "k=$dir/k.npy"
  run_plan "$dir/detect.plan" $b "detect.plan on $b" "boxes=$dir/boxes.npy" "scores=$dir/scores.npy"
  grep -q '^data-dependent sizes: nms_n0=\([1-9]\|1[01]\) ' "$out" || fail "detect.plan on $b: no sizes line"
  matches_ort "$dir/detect.onnx" "detect.plan on $b" "boxes=$dir/boxes.npy" "scores=$dir/scores.npy"
done

# GPU plans (sm_90) hold NonZero, NMS and TopK(k an input) computed at the
# upper bounds, the counts written on the device and the outputs trimmed to
# them: the plan's own kernels on the simulator (plan-on-sim) and the
# runtime's path (ref: the plan's graph on the reference backend, as the
# runtime runs it without a GPU), against ONNX Runtime.
# (Only where codegen is built: a GPU plan needs NVRTC's kernels.)
if [ "$sim" = sim ]; then
  "$kiln" compile "$dir/detect.onnx" --target sm_90 -o "$dir/detect_gpu.plan" >"$out" 2>&1 || fail "compile detect sm_90: exit $?"
  grep -q 'result sizes decided at run time (node (non_max_suppression) producing %selected (nms_n0 in \[0, 12\])): the GPU plan computes at the upper bounds' \
    "$out" || fail "compile detect sm_90: the bounds are not said"
  grep -q 'GPU kernels: [0-9]* for sm_90' "$out" || fail "compile detect sm_90: no GPU kernels"
  "$kiln" inspect "$dir/detect_gpu.plan" >"$out" 2>&1 || fail "inspect detect_gpu.plan: exit $?"
  grep -q '^sizes decided at run time, computed at their bounds: nms_n0 in \[0, 12\] (node (non_max_suppression) producing %selected, output %nms_n0_count)' \
    "$out" || fail "inspect detect_gpu.plan: no counts line"
  grep -q '^  output kept trimmed to \[nms_n0,4\] (bound \[12,4\])' "$out" || fail "inspect detect_gpu.plan: no trim line"
  "$kiln" compile "$dir/select.onnx" --target sm_90 -o "$dir/select_gpu.plan" >"$out" 2>&1 || fail "compile select sm_90: exit $?"
  "$kiln" compile "$dir/nonzero_gather.onnx" --target sm_90 -o "$dir/nz_gpu.plan" >"$out" 2>&1 || fail "compile nonzero_gather sm_90: exit $?"
  for b in $backends; do
    run_plan "$dir/detect_gpu.plan" $b "detect_gpu.plan on $b" "boxes=$dir/boxes.npy" "scores=$dir/scores.npy"
    grep -q '^data-dependent sizes: nms_n0=\([1-9]\|1[01]\) (range \[0, 12\], .*) (the plan computed at the bounds; outputs trimmed)' \
      "$out" || fail "detect_gpu.plan on $b: no sizes line"
    matches_ort "$dir/detect.onnx" "detect_gpu.plan on $b" "boxes=$dir/boxes.npy" "scores=$dir/scores.npy"
    run_plan "$dir/select_gpu.plan" $b "select_gpu.plan on $b" "x=$dir/x.npy" "k=$dir/k.npy"
    grep -q '^data-dependent sizes: nonzero_n0=[0-9]* (.*), nonzero_n1=[0-9]* (.*), topk_k0=3 ' "$out" ||
      fail "select_gpu.plan on $b: no sizes line"
    matches_ort "$dir/select.onnx" "select_gpu.plan on $b" "x=$dir/x.npy" "k=$dir/k.npy"
    run_plan "$dir/nz_gpu.plan" $b "nz_gpu.plan on $b" "x=$dir/x.npy"
    matches_ort "$dir/nonzero_gather.onnx" "nz_gpu.plan on $b" "x=$dir/x.npy"
    # A k past the axis: the run's count is checked against its bound, exit 1.
    "$kiln" run "$dir/select_gpu.plan" --backend $b --inputs "x:$dir/x.npy,k:$dir/k9.npy" >"$out" 2>&1
    [ $? -eq 1 ] || fail "select_gpu.plan on $b with k = 9 must exit 1"
    grep -q '(topk) producing %top: the run gave its result size topk_k0 = 9, outside \[0, 6\]' "$out" ||
      fail "select_gpu.plan on $b: no k range message"
  done
  # A sum over the kept entries sees the padding masked to 0
  # (compiler/gpu_bounded_lowering.h); a mean would divide by the bound:
  # refused by name (exit 1), no plan written.
  "$kiln" compile "$dir/positive_sum.onnx" --target sm_90 -o "$dir/sum.plan" >"$out" 2>&1 || fail "compile positive_sum sm_90: exit $?"
  "$kiln" compile "$dir/positive_mean.onnx" --target sm_90 -o "$dir/mean.plan" >"$out" 2>&1
  [ $? -eq 1 ] || fail "positive_mean for sm_90 must exit 1"
  grep -q 'positive_mean.onnx: node "average" (reduce_mean) .*reads a value whose size is decided at run time (nonzero_n0).*it reduces along a data-dependent dim' \
    "$out" || fail "positive_mean: the refusal does not name the node and why"
  [ ! -e "$dir/mean.plan" ] || fail "positive_mean: a plan was written"
  # torchvision's If-guarded NMS with a clamped slice (make_detection_post_model.py's
  # nms_if.onnx) as one sm_90 plan: both branches compiled in, the condition read
  # on the device; some boxes kept (the else branch) and none (the then branch).
  "$py" "$t/make_detection_post_model.py" "$dir" >"$out" 2>&1 || fail "make_detection_post_model.py"
  "$kiln" compile "$dir/nms_if.onnx" --target sm_90 -o "$dir/nms_if_gpu.plan" >"$out" 2>&1 || fail "compile nms_if sm_90: exit $?"
  grep -q '(if) producing %keep (if_n0 in \[0, 40\])' "$out" || fail "compile nms_if sm_90: the if's bound is not said"
  for b in $backends; do
    run_plan "$dir/sum.plan" $b "sum.plan on $b" "x=$dir/x.npy"
    matches_ort "$dir/positive_sum.onnx" "sum.plan on $b" "x=$dir/x.npy"
    for sc in scores:10 low_scores:0; do
      pairs="scores=$dir/${sc%%:*}.npy boxes=$dir/boxes.npy"
      # shellcheck disable=SC2086
      run_plan "$dir/nms_if_gpu.plan" $b "nms_if_gpu.plan on $b with ${sc%%:*}" $pairs
      grep -q "^data-dependent sizes: .*if_n0=${sc##*:} (range \[0, 40\]" "$out" ||
        fail "nms_if_gpu.plan on $b with ${sc%%:*}: not if_n0=${sc##*:}"
      # shellcheck disable=SC2086
      matches_ort "$dir/nms_if.onnx" "nms_if_gpu.plan on $b with ${sc%%:*}" $pairs
    done
  done
  # kiln dump-ir on such a model: the imported IR with each size a symbol of
  # range [0, bound] (exit 0, said on stderr); with -O for sm_90 the graph the
  # GPU plan compiles, at the bounds, the counts its last outputs.
  "$kiln" dump-ir "$dir/nms_if.onnx" >"$dir/ir.txt" 2>"$out" || fail "dump-ir nms_if: exit $?"
  grep -q 'result sizes decided at run time (.*(if) producing %keep (if_n0 in \[0, 40\])' "$out" ||
    fail "dump-ir nms_if: the sizes are not said"
  grep -q 'symbols(.*if_n0 in \[0, 40\]' "$dir/ir.txt" || fail "dump-ir nms_if: no size symbols in the IR"
  grep -q 'size_symbol="if_n0"' "$dir/ir.txt" || fail "dump-ir nms_if: the if does not name its size"
  "$kiln" dump-ir "$dir/nms_if.onnx" -O --target sm_90 >"$dir/ir.txt" 2>"$out" || fail "dump-ir -O sm_90 nms_if: exit $?"
  grep -q "the IR after passes is the GPU plan's graph at the upper bounds, the counts its last 4 outputs" "$out" ||
    fail "dump-ir -O sm_90 nms_if: not said"
  grep -q 'size_symbol\|= if(' "$dir/ir.txt" && fail "dump-ir -O sm_90 nms_if: sizes or the if left in the graph"
  grep -q 'non_max_suppression(.*bounded=1' "$dir/ir.txt" || fail "dump-ir -O sm_90 nms_if: no bounded NMS"
  "$kiln" dump-ir "$dir/nms_if.onnx" -O --target cpu >"$dir/ir.txt" 2>"$out"
  [ $? -eq 1 ] || fail "dump-ir -O for cpu on nms_if must exit 1"
  grep -q 'the graph has result sizes decided at run time' "$out" || fail "dump-ir -O cpu: no refusal"
fi

# A Loop whose body decides a size (NonZero on the iteration number): each
# iteration's body runs stage by stage, on ref and sim and from a CPU plan,
# against ONNX Runtime; a GPU target refuses it naming the node.
for b in $backends; do
  KILN_PYTHON=$py "$kiln" run "$dir/loop_nonzero.onnx" --backend $b --inputs "x:$dir/xl.npy" --compare ort \
    >"$out" 2>&1 || fail "loop_nonzero on $b: exit $?"
  grep -q '^compare: PASS' "$out" || fail "loop_nonzero on $b: no PASS against ONNX Runtime"
done
"$kiln" compile "$dir/loop_nonzero.onnx" --target cpu -o "$dir/loop.plan" >"$out" 2>&1 || fail "compile loop: exit $?"
for b in $backends; do
  run_plan "$dir/loop.plan" $b "loop.plan on $b" "x=$dir/xl.npy"
  matches_ort "$dir/loop_nonzero.onnx" "loop.plan on $b" "x=$dir/xl.npy"
done
# A Scan whose body decides a size per row, and an If nested in an If's
# branch deciding one (its inner then branch), the same ways: on ref and sim
# against ONNX Runtime (both paths of the nested ifs), and from CPU plans.
for b in $backends; do
  KILN_PYTHON=$py "$kiln" run "$dir/scan_nonzero.onnx" --backend $b --inputs "x:$dir/xs.npy" --compare ort \
    >"$out" 2>&1 || fail "scan_nonzero on $b: exit $?"
  grep -q '^data-dependent sizes: nonzero_n0=3 ' "$out" || fail "scan_nonzero on $b: not the last row's size"
  grep -q '^compare: PASS' "$out" || fail "scan_nonzero on $b: no PASS against ONNX Runtime"
  for c in yes:yes:4 yes:no:no no:yes:no; do
    c1=${c%%:*} rest=${c#*:}
    c2=${rest%%:*} n=${rest#*:}
    KILN_PYTHON=$py "$kiln" run "$dir/nested_if.onnx" --backend $b --inputs "x:$dir/xn.npy,c1:$dir/$c1.npy,c2:$dir/$c2.npy" \
      --compare ort >"$out" 2>&1 || fail "nested_if on $b with $c1 $c2: exit $?"
    if [ "$n" = no ]; then
      grep -q '^data-dependent sizes: nonzero_n0 not run' "$out" || fail "nested_if on $b with $c1 $c2: nonzero ran"
    else
      grep -q "^data-dependent sizes: nonzero_n0=$n " "$out" || fail "nested_if on $b with $c1 $c2: not $n kept"
    fi
    grep -q '^compare: PASS' "$out" || fail "nested_if on $b with $c1 $c2: no PASS against ONNX Runtime"
  done
done
"$kiln" compile "$dir/scan_nonzero.onnx" --target cpu -o "$dir/scan.plan" >"$out" 2>&1 || fail "compile scan: exit $?"
"$kiln" compile "$dir/nested_if.onnx" --target cpu -o "$dir/nested.plan" >"$out" 2>&1 || fail "compile nested_if: exit $?"
for b in $backends; do
  run_plan "$dir/scan.plan" $b "scan.plan on $b" "x=$dir/xs.npy"
  matches_ort "$dir/scan_nonzero.onnx" "scan.plan on $b" "x=$dir/xs.npy"
  run_plan "$dir/nested.plan" $b "nested.plan on $b" "x=$dir/xn.npy" "c1=$dir/yes.npy" "c2=$dir/yes.npy"
  matches_ort "$dir/nested_if.onnx" "nested.plan on $b" "x=$dir/xn.npy" "c1=$dir/yes.npy" "c2=$dir/yes.npy"
done
if [ "$sim" = sim ]; then
  "$kiln" compile "$dir/scan_nonzero.onnx" --target sm_90 -o "$dir/scan_gpu.plan" >"$out" 2>&1
  [ $? -eq 1 ] || fail "scan_nonzero for sm_90 must exit 1"
  grep -q "(nonzero) producing %nz decides the size nonzero_n0 inside a region (a loop's or scan's body" "$out" ||
    fail "scan_nonzero for sm_90: the refusal does not name the node"
  "$kiln" compile "$dir/loop_nonzero.onnx" --target sm_90 -o "$dir/loop_gpu.plan" >"$out" 2>&1
  [ $? -eq 1 ] || fail "loop_nonzero for sm_90 must exit 1"
  grep -q '(nonzero) producing %nz decides the size nonzero_n0 inside a region' "$out" ||
    fail "loop_nonzero for sm_90: the refusal does not name the node"
fi

# The If-guarded NMS and the clamped-slice/TopK chain of torchvision's
# post-processing (make_detection_post_model.py) as CPU plans: both branches
# (some boxes kept; none above the score threshold) through the runtime and on sim.
"$py" "$t/make_detection_post_model.py" "$dir" >"$out" 2>&1 || fail "make_detection_post_model.py"
for m in post nms_if; do
  "$kiln" compile "$dir/$m.onnx" --target cpu -o "$dir/$m.plan" >"$out" 2>&1 || fail "compile $m: exit $?"
  for sc in scores low_scores; do
    for b in $backends; do
      run_plan "$dir/$m.plan" $b "$m.plan on $b with $sc" "scores=$dir/$sc.npy" "boxes=$dir/boxes.npy"
      matches_ort "$dir/$m.onnx" "$m.plan on $b with $sc" "scores=$dir/$sc.npy" "boxes=$dir/boxes.npy"
    done
  done
done
"$kiln" run "$dir/nms_if.plan" --backend ref --inputs "scores:$dir/scores.npy,boxes:$dir/boxes.npy" >"$out" 2>&1 ||
  fail "nms_if.plan: exit $?"
grep -q '^data-dependent sizes: if_n0=[1-9][0-9]* (range \[0, 40\], node (if) producing %keep)' "$out" ||
  fail "nms_if.plan: the if's size is not printed"

# With --no-opt a GPU plan cannot compute the sizes at their bounds (that
# needs the passes): refused by compile_model's one check, naming the nodes
# (it used to say "needs a shape-generic GPU kernel").
expect_exit 1 "compiling a data-dependent graph with --no-opt must exit 1" "$kiln" compile "$dir/detect.onnx" --target sm_90 --no-opt -o "$dir/detect.plan"
grep -q 'the graph has result sizes decided at run time' "$out" || fail "no data-dependent message with --no-opt"
grep -q 'NonMaxSuppression\|non_max_suppression' "$out" || fail "the --no-opt message does not name the node"
grep -q 'shape-generic' "$out" && fail "--no-opt: the kernel check spoke before the data-dependent refusal"
echo PASS
