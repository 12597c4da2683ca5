#!/bin/sh
# kiln run's --backend (branch defects10): an unknown name, or a known one in
# the wrong case, is refused while the command line is read, naming the
# backends -- before the no-GPU warning, the import or any run; and --backend
# gpu without --target says that no --target was given instead of blaming a
# "--target cpu" the user never typed. Runs where no GPU is (CI): with one,
# --backend gpu and no --target is a GPU run, not an error.
# Usage: backend_flag_test.sh KILN TESTS_CLI_DIR
set -u
kiln=$1
t=$2
. "$(dirname "$0")/lib.sh"

expect_error "error: --backend: 'REF' is not a backend (the backends: auto, gpu, ref, sim; names are lower case: --backend ref)" \
  run "$t/small.onnx" --backend REF
grep -q 'warning' "$out" && fail "--backend REF: a warning came before the error"
grep -q '^input' "$out" && fail "--backend REF: inputs were made before the error"
expect_error "error: --backend: 'cuda' is not a backend (the backends: auto, gpu, ref, sim)" run "$t/small.onnx" --backend cuda
grep -q 'lower case' "$out" && fail "--backend cuda: a lower-case hint for a name that is no backend in any case"
"$kiln" compile "$t/small.onnx" --target cpu -o "$dir/m.plan" >"$out" 2>&1 || fail "compile m.plan: exit $?"
expect_error "error: --backend: 'Sim' is not a backend" run "$dir/m.plan" --backend Sim

if "$kiln" doctor 2>/dev/null | grep -q '^GPUs: none'; then
  expect_error "small.onnx: --backend gpu runs GPU kernels, and no --target was given: with no GPU here (" \
    run "$t/small.onnx" --backend gpu
  grep -q -- '--target cpu' "$out" && fail "--backend gpu blames a --target cpu that was never given"
  grep -qF 'kiln compile' "$out" || fail "--backend gpu: the message does not say what to do"
fi
expect_error "small.onnx: --backend gpu runs GPU kernels and --target cpu builds none" \
  run "$t/small.onnx" --backend gpu --target cpu
expect_error "small.onnx: --backend sim runs a plan's GPU kernels, and no --target was given" \
  run "$t/small.onnx" --backend sim --save-engine "$dir/s.plan"
echo PASS
