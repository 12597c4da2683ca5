#!/bin/sh
# Issue 19, symbolic image sizes (docs/dynamic_shapes.md): the zoo's
# fcn_tiny_dynamic (an FCN-style segmentation net exported by torch with a
# dynamic batch, height and width; strided Conv-BN-ReLU, max pool, a dilated
# conv, GroupNorm, a global-pool branch, and a bilinear resize to the
# input's own size taken from Shape ops) compiles ONCE for sm_90 at fp32 and
# fp16, every launch shape-generic, and runs from each plan at three image
# sizes (odd ones included) on the simulator and the CPU path, matching ONNX
# Runtime (fp16 within its tolerance).
# Usage: zoo_spatial_profiles_test.sh KILN ZOO_DIR TESTS_CLI_DIR VENV_PYTHON sim|nosim|gpu
# gpu (bench/gpu_lease.sh, on a machine with a GPU): the profile plans' runs
# against ONNX Runtime are on the GPU (the runtime's GPU engine) instead of
# on ref and sim; the steps that name sim still run on the simulator.
kiln=$1
zoo=$2
t=$3
py=$4
sim=${5:-sim}
. "$(dirname "$0")/lib.sh"
model=$zoo/fcn_tiny_dynamic/model.onnx
[ -f "$model" ] || fail "$model is missing: prepare the zoo first (tools/prepare_models.sh build/models)"
"$py" -c "
import numpy as np
for s in [(1, 3, 64, 48), (2, 3, 45, 61), (3, 3, 96, 96)]:
    np.save('$dir/x_%dx%dx%dx%d.npy' % s, np.random.default_rng(sum(s)).standard_normal(s).astype(np.float32))
" || fail "inputs"
backends="ref"
[ "$sim" = sim ] && backends="ref sim"
[ "$sim" = gpu ] && backends="gpu"
for prec in fp32 fp16; do
  "$kiln" compile "$model" --target sm_90 --precision $prec --min-shapes input:1x3x32x32 \
    --max-shapes input:4x3x128x128 -o "$dir/fcn_$prec.plan" >"$out" 2>&1 || fail "compile ($prec) for sm_90: exit $?"
  "$kiln" inspect "$dir/fcn_$prec.plan" >"$out" 2>&1 || fail "inspect ($prec): exit $?"
  n=$(sed -n 's/^GPU kernels: [0-9]* distinct, [0-9]* launch steps (\([0-9]*\) kernel launches.*/\1/p' "$out")
  [ -n "$n" ] && grep -q "^shape-generic launches: $n " "$out" || fail "$prec: not all $n launches are shape-generic"
  grep -q 'height.*width' "$out" || fail "$prec: no grid over the symbolic height and width"
  tol=
  [ "$prec" = fp16 ] && tol=--fp16
  for be in $backends; do
    for s in 1x3x64x48 2x3x45x61 3x3x96x96; do
      run_plan "$dir/fcn_$prec.plan" "$be" "fcn_$prec.plan on $be at $s" "input=$dir/x_$s.npy"
      matches_ort $tol "$model" "fcn_$prec.plan on $be at $s" "input=$dir/x_$s.npy"
    done
  done
done
echo "PASS"
