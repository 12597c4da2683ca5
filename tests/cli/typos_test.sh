#!/bin/sh
# Issue 16, item 5: typos and meaningless flags are errors (exit 1) that say
# what exists, instead of being accepted silently: a --shapes name that is no
# input, compile flags with a plan, an --inputs name given twice,
# --iterations 0 or negative, an unknown subcommand.
# Usage: typos_test.sh KILN TESTS_CLI_DIR
set -u
kiln=$1
model=$2/small.onnx
. "$(dirname "$0")/lib.sh"

for cmd in compile run inspect dump-ir bench; do
  expect_error '--shapes names "foo", which is not an input of the model (its inputs: "x")' \
    $cmd "$model" --shapes foo:2x3x8
done

"$kiln" compile "$model" --target cpu -o "$dir/m.plan" >"$out" 2>&1 || fail "compile exit $?"
expect_error "$dir/m.plan: a plan is already compiled; --precision only applies when compiling an .onnx model" \
  run "$dir/m.plan" --precision fp16
expect_error "$dir/m.plan: a plan is already compiled; --shapes only applies when compiling an .onnx model (a plan's shapes are fixed" \
  run "$dir/m.plan" --shapes x:2x3x8
expect_error "a plan is already compiled; --fp16, --target only apply" bench "$dir/m.plan" --fp16 --target sm_90
expect_error "a plan is already compiled; --precision only applies" dump-ir "$dir/m.plan" --precision bf16

cp "$2/small_x.npy" "$dir/a.npy"
expect_error "--inputs: input \"x\" is given twice ($dir/a.npy and $dir/a.npy)" run "$model" --inputs "x:$dir/a.npy,x:$dir/a.npy"
expect_error '--inputs: the model has no input named "y" (its inputs: "x")' run "$model" --inputs "y:$dir/a.npy"

expect_error "--iterations: Value 0 not in range 1 to" run "$model" --iterations 0
expect_error "--iterations: Value -3 not in range 1 to" run "$model" --iterations -3

expect_error "unknown subcommand 'frobnicate' (subcommands: compile, run," frobnicate "$model"
expect_error "unknown subcommand 'frobnicate'" -v frobnicate
echo PASS
