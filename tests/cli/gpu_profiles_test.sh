#!/bin/sh
# Issue 19, shape-generic GPU kernels (docs/dynamic_shapes.md): a pointwise
# and softmax model with a dynamic batch compiled ONCE for --target sm_90 with a profile
# holds shape-generic kernels (section `generic launches`) and runs from that
# plan at three batches on the simulator (the plan's own kernels) and on the
# CPU path, matching ONNX Runtime; so do a dynamic-batch MLP (also with tf32
# allowed), the BERT-style encoder (its attention written out, and fused with
# its head merge), the issue's CNN at fp32 and at fp16 (tensor cores). A model with a family
# that is not shape-generic yet (scatter_elements) is refused for a GPU target,
# naming the node and its op, with no plan written.
# Usage: gpu_profiles_test.sh KILN TESTS_CLI_DIR VENV_PYTHON sim|nosim|gpu
# gpu (bench/gpu_lease.sh, on a machine with a GPU): the profile plans' runs
# against ONNX Runtime are on the GPU (the runtime's GPU engine) instead of
# on ref and sim; the steps that name sim still run on the simulator.
kiln=$1
t=$2
py=$3
sim=${4:-sim}
. "$(dirname "$0")/lib.sh"
"$py" "$t/make_pointwise_dynamic_model.py" "$dir" || fail "make_pointwise_dynamic_model.py"
mkdir "$dir/cnn" && "$py" "$t/make_dynamic_models.py" "$dir/cnn" || fail "make_dynamic_models.py"

"$kiln" compile "$dir/pw.onnx" --target sm_90 --min-shapes x:1x3x24 --max-shapes x:16x3x24 -o "$dir/pw.plan" \
  >"$out" 2>&1 || fail "compile pw for sm_90 with a profile: exit $?"
grep -q 'plan written; GPU kernels: [0-9]* for sm_90' "$out" || fail "no GPU kernels in the plan"
"$kiln" inspect "$dir/pw.plan" >"$out" 2>&1 || fail "inspect pw: exit $?"
grep -q '^shape profiles: 1 (symbols: batch in \[1, 16\])' "$out" || fail "inspect shows no profile"
grep -q '^shape-generic launches: [1-9]' "$out" || fail "inspect shows no shape-generic launches"
grep -q '^  step [0-9]*: x = ceil(.*batch.*/ [0-9]*), at most [0-9]* (symbols batch)$' "$out" ||
  fail "inspect shows no grid as a function of batch"

backends="ref"
[ "$sim" = sim ] && backends="ref sim"
[ "$sim" = gpu ] && backends="gpu"
pw_symbols() {
  grep -q "^symbols: batch=$2 (range \[1, 16\])" "$out" || fail "pw.plan on $1 at batch $2: no symbols line"
}
runs_like_ort --check pw_symbols "$dir/pw.plan" "$dir/pw.onnx" "pw.plan (batch)" "$backends" "1 5 16" "x=$dir/x_{}.npy"
# The dynamic-batch MLP (gemm, relu, gemm, matmul, softmax): compiled once for
# sm_90, every launch shape-generic (the relu fused into its gemm's epilogue:
# four launches), run at three batches on sim and ref.
"$kiln" compile "$dir/mlp.onnx" --target sm_90 --min-shapes x:1x64 --max-shapes x:256x64 -o "$dir/mlp.plan" \
  >"$out" 2>&1 || fail "compile mlp for sm_90 with a profile: exit $?"
"$kiln" inspect "$dir/mlp.plan" >"$out" 2>&1 || fail "inspect mlp: exit $?"
grep -q '^shape-generic launches: 4 ' "$out" || fail "the MLP's four launches are not all shape-generic"
grep -q 'x = ceil(batch / [0-9]*) \* [0-9]* (symbols batch)' "$out" || fail "no GEMM grid of row tiles x column tiles"
runs_like_ort "$dir/mlp.plan" "$dir/mlp.onnx" "mlp.plan (batch)" "$backends" "1 9 200" "x=$dir/m_{}.npy"

# The same MLP with tf32 allowed: its Gemms and MatMul on tensor cores
# (mma.sync tf32) with a symbolic M, every launch shape-generic, within the
# fp16 tolerance of ONNX Runtime's fp32 outputs (tf32 keeps fp16's 10
# mantissa bits) at three batches on sim.
"$kiln" compile "$dir/mlp.onnx" --target sm_90 --precision tf32 --min-shapes x:1x64 --max-shapes x:256x64 \
  -o "$dir/mlp_tf32.plan" >"$out" 2>&1 || fail "compile mlp (tf32) for sm_90 with a profile: exit $?"
"$kiln" inspect "$dir/mlp_tf32.plan" >"$out" 2>&1 || fail "inspect mlp (tf32): exit $?"
grep -q '^shape-generic launches: 4 ' "$out" || fail "the tf32 MLP's four launches are not all shape-generic"
[ "$(grep -c ' kiln_gemm_mma_.* sm_90 ' "$out")" -eq 2 ] || fail "the tf32 MLP's two Gemms are not on tensor cores"
grep -q ' kiln_matmul_mma_.* sm_90 ' "$out" || fail "the tf32 MLP's MatMul is not on tensor cores"
if [ "$sim" = sim ]; then
  runs_like_ort --fp16 "$dir/mlp_tf32.plan" "$dir/mlp.onnx" "mlp_tf32.plan (batch)" sim "1 9 200" "x=$dir/m_{}.npy"
fi

# The BERT-style encoder of cli_plan_profiles (embedding gather, layer norms,
# Q/K/V projection and head split/merge transposes, masked softmax attention,
# output Gemm, GELU FFN), compiled once for sm_90 in fp32 and fp16 with a
# dynamic batch and sequence (1x1 .. 8x64), twice: with its attention
# written out (the default pipeline less recognize-patterns and layout: the
# scores' softmax over rows of the symbolic length seq), and with the
# default pipeline, whose attention node is fused with its head merge and
# the merged QKV projection with its split and head transposes, as in a
# static plan: fewer launches, every one shape-generic. Each plan runs at
# three (batch, seq) shapes on sim and ref against ONNX Runtime.
enc=$dir/cnn/encoder.onnx
enc_symbols() {
  grep -q "^symbols: batch=${2%x*} (range \[1, 8\]), seq=${2#*x} (range \[1, 64\])" "$out" ||
    fail "encoder on $1 at $2: no symbols line"
}
unfused=fold-constants,fold-control-flow,simplify,dce,cse,fold-constants,dce
for prec in fp32 fp16; do
  passes=$unfused
  [ "$prec" = fp16 ] && passes=$passes,precision,fold-constants,simplify,cse,dce
  passes=$passes,merge-sibling-matmuls,fuse,plan-memory
  for pipe in unfused default; do
    plan=$dir/enc_${prec}_$pipe.plan
    if [ $pipe = unfused ]; then
      set -- --passes $passes
    else
      set --
    fi
    "$kiln" compile "$enc" --target sm_90 --precision $prec "$@" \
      --min-shapes input_ids:1x1,attention_mask:1x1 --max-shapes input_ids:8x64,attention_mask:8x64 \
      -o "$plan" >"$out" 2>&1 || fail "compile the encoder ($prec, $pipe) for sm_90 with a profile: exit $?"
    "$kiln" inspect "$plan" >"$out" 2>&1 || fail "inspect encoder ($prec, $pipe): exit $?"
    # Every launch is shape-generic.
    n=$(sed -n 's/^GPU kernels: [0-9]* distinct, [0-9]* launch steps (\([0-9]*\) kernel launches.*/\1/p' "$out")
    grep -q "^shape-generic launches: $n (" "$out" || fail "encoder ($prec, $pipe): not all $n launches are shape-generic"
    # The embedding gather is the first layer norm's prologue (one kernel, as
    # in the static plan), not a launch of its own.
    grep -q '^ *0 #0 fused  *kiln_norm_layer_normalization_' "$out" ||
      fail "encoder ($prec, $pipe): the embedding gather is not fused into the first layer norm"
    ! grep -q 'kiln_inj_gather_' "$out" || fail "encoder ($prec, $pipe): the embedding gather runs as a kernel of its own"
    if [ $pipe = unfused ]; then
      unfused_launches=$n
      # Batched scores and context: row tiles x column tiles x 4*batch heads.
      grep -q 'x = ceil(seq / [0-9]*); y = ceil(seq / [0-9]*); z = ceil(4\*batch / 1) (symbols batch, seq)' "$out" ||
        fail "encoder ($prec): no scores grid of seq x seq tiles x 4*batch heads"
      grep -q 'kiln_sm_softmax_' "$out" || fail "encoder ($prec): no softmax over the symbolic seq"
      [ "$prec" = fp16 ] && { grep -q 'kiln_matmul_mma_' "$out" || fail "encoder (fp16): no tensor-core matmul"; }
    else
      # The attention with its head merge: one kernel, its grid batch*heads x query tiles.
      grep -q ' kiln_attn_fused_attention_.* sm_90 ' "$out" || fail "encoder ($prec): the attention is not fused"
      grep -q 'x = ceil(4\*batch / 1); y = ceil(seq / [0-9]*) (symbols batch, seq)' "$out" ||
        fail "encoder ($prec): no attention grid of 4*batch heads x query tiles"
      [ "$n" -lt "$unfused_launches" ] ||
        fail "encoder ($prec): $n launches with the attention fused, $unfused_launches written out"
      echo "encoder ($prec): $unfused_launches launches with the attention written out, $n fused"
    fi
    tol=
    [ "$prec" = fp16 ] && tol=--fp16
    # shellcheck disable=SC2086
    runs_like_ort $tol --check enc_symbols "$plan" "$enc" "encoder ($prec, $pipe)" "$backends" "1x5 2x16 4x33" \
      "input_ids=$dir/cnn/ids_{}.npy" "attention_mask=$dir/cnn/mask_{}.npy"
  done
done

rm -rf "$dir/o"
"$py" -c "import numpy as np; np.save('$dir/x_17.npy', np.zeros((17, 3, 24), np.float32))"
expect_exit 1 "a batch outside the profile must exit 1" "$kiln" run "$dir/pw.plan" --backend sim --inputs "x:$dir/x_17.npy"
grep -q 'outside every shape profile' "$out" || fail "no out-of-profile message"

# The issue's CNN (Conv, BatchNormalization folded into it, Relu, MaxPool,
# strided Conv, Relu, GlobalAveragePool, Flatten, Gemm, Softmax) compiled
# once for sm_90 in fp32: every kernel launch shape-generic (the convs
# channels-last, their grids row tiles over the images' positions), run at
# three batches on sim and ref against ONNX Runtime.
"$kiln" compile "$dir/cnn/cnn.onnx" --target sm_90 --min-shapes x:1x3x16x16 --max-shapes x:8x3x16x16 \
  -o "$dir/cnn.plan" >"$out" 2>&1 || fail "compile the CNN for sm_90 with a profile: exit $?"
"$kiln" inspect "$dir/cnn.plan" >"$out" 2>&1 || fail "inspect cnn: exit $?"
launches=$(sed -n 's/^GPU kernels: [0-9]* distinct, [0-9]* launch steps (\([0-9]*\) kernel launches.*/\1/p' "$out")
grep -q "^shape-generic launches: $launches " "$out" || fail "the CNN's $launches launches are not all shape-generic"
# The layout pass runs on the symbolic graph: the convs channels-last, one
# GEMM whose M is the images x 16x16 positions (row tiles over 256*batch).
grep -q ' kiln_conv_nhwc_.* sm_90 ' "$out" || fail "the CNN's convs are not channels-last"
grep -q 'x = ceil(256\*batch / [0-9]*) (symbols batch)' "$out" || fail "no conv grid of row tiles over the images' positions"
cnn_symbols() {
  grep -q "^symbols: batch=$2 (range \[1, 8\])" "$out" || fail "cnn.plan on $1 at batch $2: no symbols line"
}
runs_like_ort --check cnn_symbols "$dir/cnn.plan" "$dir/cnn/cnn.onnx" "cnn.plan (batch)" "$backends" "1 3 8" \
  "x=$dir/cnn/x_{}.npy"
# The same CNN at fp16, compiled once for sm_90: its convs on tensor cores
# (mma.sync implicit GEMMs over a symbolic batch of images) and its head's
# Gemm too (a tensor-core GEMM with a symbolic M), within the fp16 tolerance
# of ONNX Runtime's fp32 outputs at three batches.
"$kiln" compile "$dir/cnn/cnn.onnx" --target sm_90 --precision fp16 --min-shapes x:1x3x16x16 \
  --max-shapes x:8x3x16x16 -o "$dir/cnn16.plan" >"$out" 2>&1 || fail "compile the CNN at fp16: exit $?"
"$kiln" inspect "$dir/cnn16.plan" >"$out" 2>&1 || fail "inspect cnn (fp16): exit $?"
[ "$(grep -c ' kiln_conv_nhwc_mma_.* sm_90 ' "$out")" -ge 2 ] || fail "the fp16 CNN's two convs are not on tensor cores"
grep -q ' kiln_gemm_mma_.* sm_90 ' "$out" || fail "the fp16 CNN's Gemm is not on tensor cores"
launches=$(sed -n 's/^GPU kernels: [0-9]* distinct, [0-9]* launch steps (\([0-9]*\) kernel launches.*/\1/p' "$out")
grep -q "^shape-generic launches: $launches " "$out" || fail "the fp16 CNN's $launches launches are not all shape-generic"
runs_like_ort --fp16 "$dir/cnn16.plan" "$dir/cnn/cnn.onnx" "cnn16.plan (fp16, batch)" "$backends" "1 3 8" \
  "x=$dir/cnn/x_{}.npy"

# Launch variants (docs/dynamic_shapes.md "Specialised launches"): the CNN
# (fp32) and the encoder (fp16) compiled with an opt shape and every node
# also specialised for it (--opt-variants all); on sim the opt shape runs the
# specialised launches and two other shapes the shape-generic ones, all
# matching ONNX Runtime. `kiln inspect` lists the variants; `--perf` models
# the plan at the opt shape with them.
if [ "$sim" = sim ]; then
  "$kiln" compile "$dir/cnn/cnn.onnx" --target sm_90 --min-shapes x:1x3x16x16 --opt-shapes x:3x3x16x16 \
    --max-shapes x:8x3x16x16 --opt-variants all -o "$dir/cnn_opt.plan" >"$out" 2>&1 ||
    fail "compile the CNN with launch variants: exit $?"
  "$kiln" inspect "$dir/cnn_opt.plan" >"$out" 2>&1 || fail "inspect cnn_opt: exit $?"
  grep -q '^launch variants: [1-9][0-9]* (the first whose shape condition holds' "$out" || fail "inspect shows no launch variants"
  grep -q '^  steps [0-9]*\.\.[0-9]* (node #[0-9]* fused): at the opt shape of profile 0 (batch=3): 1 launch(es): kiln_conv_.* grid .*; other shapes: kiln_conv_' "$out" ||
    fail "inspect shows no conv variant for batch=3"
  "$kiln" inspect "$dir/cnn_opt.plan" --perf >"$out" 2>&1 || fail "inspect cnn_opt --perf: exit $?"
  grep -q '^shape: the opt shape of profile 0 (batch=3); [1-9][0-9]* of its [0-9]* launches from launch variants' "$out" ||
    fail "inspect --perf does not model the opt shape's launch variants"
  grep -q '^plan: .*batch 3$' "$out" || fail "inspect --perf does not model batch 3"
  cnn_variants() {
    if [ "$2" = 3 ]; then
      grep -q '^launch variants: [1-9][0-9]* node(s) ran [1-9][0-9]* launch(es) specialised for the opt shape of profile 0 (batch=3)$' "$out" ||
        fail "cnn_opt.plan at batch 3 did not run its launch variants"
    else
      grep -q '^launch variants: none at this shape' "$out" || fail "cnn_opt.plan at batch $2 ran a launch variant"
    fi
  }
  runs_like_ort --check cnn_variants "$dir/cnn_opt.plan" "$dir/cnn/cnn.onnx" "cnn_opt.plan (batch)" sim "3 1 8" \
    "x=$dir/cnn/x_{}.npy"
  passes=$unfused,precision,fold-constants,simplify,cse,dce,merge-sibling-matmuls,fuse,plan-memory
  "$kiln" compile "$enc" --target sm_90 --precision fp16 --passes $passes \
    --min-shapes input_ids:1x1,attention_mask:1x1 --opt-shapes input_ids:2x16,attention_mask:2x16 \
    --max-shapes input_ids:8x64,attention_mask:8x64 --opt-variants all -o "$dir/enc_opt.plan" >"$out" 2>&1 ||
    fail "compile the encoder with launch variants: exit $?"
  enc_variants() {
    if [ "$2" = 2x16 ]; then
      grep -q '^launch variants: [1-9][0-9]* node(s) ran [1-9][0-9]* launch(es) specialised for the opt shape of profile 0 (batch=2, seq=16)$' "$out" ||
        fail "enc_opt.plan at 2x16 did not run its launch variants"
    else
      grep -q '^launch variants: none at this shape' "$out" || fail "enc_opt.plan at $2 ran a launch variant"
    fi
  }
  runs_like_ort --fp16 --check enc_variants "$dir/enc_opt.plan" "$enc" "enc_opt.plan" sim "2x16 1x5 4x33" \
    "input_ids=$dir/cnn/ids_{}.npy" "attention_mask=$dir/cnn/mask_{}.npy"
fi
expect_exit 1 "--opt-variants without a profile must exit 1" "$kiln" compile "$dir/cnn/cnn.onnx" --target sm_90 \
  --opt-variants all -o "$dir/no.plan"
grep -q 'applies to shape profiles' "$out" || fail "no message for --opt-variants without a profile"

# A family without shape-generic kernels: refused by node and op, no plan.
"$kiln" compile "$dir/scatter.onnx" --target sm_90 --min-shapes x:1x3x24,i:1x3x2,u:1x3x2 \
  --max-shapes x:16x3x24,i:16x3x2,u:16x3x2 -o "$dir/scatter.plan" >"$out" 2>&1
[ $? -eq 1 ] || fail "scatter_elements with a profile for sm_90 must exit 1"
grep -q 'scatter.onnx: node (scatter_elements) producing %[^:]*: target sm_90 needs a shape-generic GPU kernel for every node.*kiln has none yet for scatter_elements (its kernel family (scatter) has no shape-generic kernel for it yet)' "$out" ||
  fail "no message naming the scatter_elements node"
[ ! -e "$dir/scatter.plan" ] || fail "a refused compile wrote a plan"
echo "PASS"
