#!/bin/sh
# Issue 19, symbolic spatial dims (docs/dynamic_shapes.md, "Symbolic image
# sizes"): a segmentation-style CNN exported with a dynamic batch, height and
# width (make_spatial_cnn_model.py: conv, batch norm, relu, max pool, strided
# conv, instance norm, resize x2, conv_transpose, average pool, group norm,
# global pool, gemm) compiles ONCE for sm_90 with a profile, every launch
# shape-generic (grids over batch, height, width and the floor divisions of
# the strided windows), and runs from that plan at four shapes (one with odd
# sizes) on the simulator (the plan's own kernels) and on the CPU path,
# matching ONNX Runtime; at fp16 (convs on tensor cores) the head's logits
# within the fp16 tolerance; a resize to another tensor's height and width
# (sizes from Shape ops) likewise, and resizes by non-integer scales
# (floor(in * scale) over derived symbols) and cubic ones. A resize by 1.5
# of a pooled height (no derived symbol spells it) is refused by name, exit 1.
# Usage: gpu_spatial_profiles_test.sh KILN TESTS_CLI_DIR VENV_PYTHON sim|nosim|gpu
# gpu (bench/gpu_lease.sh, on a machine with a GPU): the profile plans' runs
# against ONNX Runtime are on the GPU (the runtime's GPU engine) instead of
# on ref and sim; the steps that name sim still run on the simulator.
kiln=$1
t=$2
py=$3
sim=${4:-sim}
. "$(dirname "$0")/lib.sh"
"$py" "$t/make_spatial_cnn_model.py" "$dir" || fail "make_spatial_cnn_model.py"
backends="ref"
[ "$sim" = sim ] && backends="ref sim"
[ "$sim" = gpu ] && backends="gpu"
shapes="1x3x32x32 2x3x48x40 3x3x64x64 2x3x37x29"

"$kiln" compile "$dir/seg_cnn.onnx" --target sm_90 --min-shapes x:1x3x16x16 --max-shapes x:4x3x64x64 \
  -o "$dir/seg.plan" >"$out" 2>&1 || fail "compile the CNN for sm_90 with a profile: exit $?"
"$kiln" inspect "$dir/seg.plan" >"$out" 2>&1 || fail "inspect: exit $?"
grep -q '^shape profiles: 1 (symbols: batch in \[1, 4\], height in \[16, 64\], width in \[16, 64\])' "$out" ||
  fail "inspect shows no profile over batch, height and width"
launches=$(sed -n 's/^GPU kernels: [0-9]* distinct, [0-9]* launch steps (\([0-9]*\) kernel launches.*/\1/p' "$out")
[ -n "$launches" ] && grep -q "^shape-generic launches: $launches " "$out" ||
  fail "not all $launches launches are shape-generic"
# The layout pass runs on the symbolic graph: the first conv channels-last,
# row tiles over the images x height*width positions; after the max pool and
# the strided conv, floor((height+2)/4) positions per axis.
grep -q ' kiln_conv_nhwc_.* sm_90 ' "$out" || fail "the convs are not channels-last"
grep -q 'x = ceil(batch\*height\*width / [0-9]*) (symbols batch, height, width)' "$out" ||
  fail "no conv grid over the images' height*width positions"
grep -q 'height.plus2.div4\*width.plus2.div4' "$out" || fail "no grid over the strided windows' floor((height+2)/4)"
seg_symbols() {
  IFS=x read -r b c hh ww <<EOS
$2
EOS
  grep -q "^symbols: batch=$b (range \[1, 4\]), height=$hh (range \[16, 64\]), width=$ww (range \[16, 64\])" "$out" ||
    fail "seg.plan on $1 at $2: no symbols line"
}
runs_like_ort --check seg_symbols "$dir/seg.plan" "$dir/seg_cnn.onnx" seg.plan "$backends" "$shapes" "x=$dir/x_{}.npy"

# fp16: the convs (channels-last, M the images x positions) and the
# conv_transpose (channels-first, N the positions) as tensor-core implicit
# GEMMs over the symbolic sizes, the logits within the fp16 tolerance.
"$kiln" compile "$dir/seg_cnn_head.onnx" --target sm_90 --precision fp16 --min-shapes x:1x3x16x16 \
  --max-shapes x:4x3x64x64 -o "$dir/seg16.plan" >"$out" 2>&1 || fail "compile the CNN at fp16: exit $?"
"$kiln" inspect "$dir/seg16.plan" >"$out" 2>&1 || fail "inspect (fp16): exit $?"
[ "$(grep -c ' kiln_conv_nhwc_mma_.* sm_90 ' "$out")" -ge 2 ] || fail "the fp16 convs are not on tensor cores"
grep -q ' kiln_conv_transpose_mma_.* sm_90 ' "$out" || fail "the fp16 conv_transpose is not on tensor cores"
launches=$(sed -n 's/^GPU kernels: [0-9]* distinct, [0-9]* launch steps (\([0-9]*\) kernel launches.*/\1/p' "$out")
grep -q "^shape-generic launches: $launches " "$out" || fail "not all $launches fp16 launches are shape-generic"
runs_like_ort --fp16 "$dir/seg16.plan" "$dir/seg_cnn_head.onnx" "seg16.plan (fp16)" "$backends" "$shapes" \
  "x=$dir/x_{}.npy"

# Resize to sizes computed from Shape ops (another tensor's symbolic height
# and width, as torchvision's segmentation heads do): linear, half_pixel,
# the scale out/in per run.
"$kiln" compile "$dir/seg_resize_like.onnx" --target sm_90 --min-shapes x:1x3x16x16 --max-shapes x:4x3x64x64 \
  -o "$dir/like.plan" >"$out" 2>&1 || fail "compile the resize-to-shape model for sm_90: exit $?"
runs_like_ort "$dir/like.plan" "$dir/seg_resize_like.onnx" like.plan "$backends" "$shapes" "x=$dir/x_{}.npy"

# Resizes by non-integer scales (nearest 1.5, linear 0.75) and cubic ones
# (1.5 x 1.25; 0.5 x 2.5 with exclude_outside): floor(in * scale) over
# derived symbols (height+height.div2), every launch shape-generic.
"$kiln" compile "$dir/seg_resize15.onnx" --target sm_90 --min-shapes x:1x3x16x16 --max-shapes x:4x3x64x64 \
  -o "$dir/r15.plan" >"$out" 2>&1 || fail "compile the non-integer and cubic resizes for sm_90: exit $?"
"$kiln" inspect "$dir/r15.plan" >"$out" 2>&1 || fail "inspect r15.plan: exit $?"
grep -q 'height+height.div2' "$out" || fail "no size floor(1.5 * height) over a derived symbol"
launches=$(sed -n 's/^GPU kernels: [0-9]* distinct, [0-9]* launch steps (\([0-9]*\) kernel launches.*/\1/p' "$out")
[ "$launches" = 4 ] && grep -q "^shape-generic launches: 4 " "$out" || fail "not 4 shape-generic resize launches"
runs_like_ort "$dir/r15.plan" "$dir/seg_resize15.onnx" r15.plan "$backends" "$shapes" "x=$dir/x_{}.npy"

# A shape outside the profile: exit 1 naming the dim and its range.
"$py" -c "import numpy as np; np.save('$dir/x_big.npy', np.zeros((1, 3, 65, 32), np.float32))"
expect_exit 1 "a height outside the profile must exit 1" "$kiln" run "$dir/seg.plan" --backend sim --inputs "x:$dir/x_big.npy"
grep -q 'outside every shape profile' "$out" || fail "no out-of-profile message"
# A resize by 1.5 of a max pool's floor(height / 2): floor(1.5 * height.div2)
# is neither a polynomial nor one derived symbol; refused by name.
expect_exit 1 "a resize by 1.5 of a pooled symbolic height must exit 1" "$kiln" compile \
  "$dir/seg_resize15_pooled.onnx" --target cpu --min-shapes x:1x3x16x16 --max-shapes x:4x3x64x64 -o "$dir/r.plan"
grep -q 'scale 1.5 along axis 2 of the symbolic dim height.div2: kiln cannot write floor(height.div2 \* 1.5) as a size' \
  "$out" || fail "no message naming the resize scale and the symbolic dim"
# A profile whose smallest image is smaller than a window (a 2x2 max pool
# over a height of 1): refused at compile time naming the node, never an
# empty result at run time.
expect_exit 1 "a profile whose smallest shape cannot run must exit 1" "$kiln" compile "$dir/seg_cnn.onnx" \
  --target sm_90 --min-shapes x:1x3x1x1 --max-shapes x:4x3x64x64 -o "$dir/tiny.plan"
grep -q "profile 0's smallest shapes (x 1x3x1x1) cannot run: .*node (max_pool) producing %p1: kernel 2 (dilation 1) does not fit the input 1" \
  "$out" || fail "no message naming the profile and the node that cannot run at its smallest shape"
[ ! -e "$dir/tiny.plan" ] || fail "a refused compile wrote a plan"
# A dim named like a derived size ("height.div2" reads as floor(height / 2)): refused by name.
expect_exit 1 "a dim_param spelling a derived size must exit 1" "$kiln" compile "$dir/seg_badname.onnx" \
  --target cpu --min-shapes x:1x3x16x8 --max-shapes x:4x3x64x8 -o "$dir/bad.plan"
grep -q 'dim 2 is named "height.div2", which kiln reads as a derived size (floor division)' "$out" ||
  fail "no message naming the dim that spells a derived size"
echo "PASS"
