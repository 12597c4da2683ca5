#!/bin/sh
# The ai.onnx.ml tree ensembles run on the CPU only (ops/tree_ensemble.h):
#  - a GPU target refuses the node by name, exit 1, and writes no plan;
#  - the sim backend (generated kernels) refuses it by name, exit 1;
#  - --target cpu compiles, and the plan runs on the CPU path;
#  - skl2onnx's default ZipMap is refused, exit 1, naming the zipmap option;
#  - `kiln conformance --backend sim --baseline REF.json` does not count the
#    sim refusals of a CPU-only op as regressions (conformance_sim's gate).
# Usage: tree_ensemble_test.sh KILN SOURCE_DIR
set -u
KILN=$1
ML=$2/tests/models/ml
. "$(dirname "$0")/lib.sh"
model=$ML/test_sklearn_random_forest_multiclass/model.onnx
x=$ML/test_sklearn_random_forest_multiclass/test_data_set_0/input_0.pb

expect_exit 1 "compile --target sm_80" "$KILN" compile "$model" --shapes X:24x4 --target sm_80 -o "$dir/gpu.plan"
grep -q 'node "TreeEnsembleClassifier" (tree_ensemble)' "$out" || fail "the GPU refusal does not name the node"
[ -e "$dir/gpu.plan" ] && fail "a GPU plan was written"

expect_exit 1 "run --backend sim" "$KILN" run "$model" --shapes X:24x4 --inputs "X:$x" --backend sim
grep -q 'sim backend: op tree_ensemble runs on the CPU backends only' "$out" || fail "the sim refusal is not clear"
grep -q '"TreeEnsembleClassifier"' "$out" || fail "the sim refusal does not name the node"

expect_exit 0 "compile --target cpu" "$KILN" compile "$model" --min-shapes X:1x4 --opt-shapes X:8x4 --max-shapes X:64x4 \
  --target cpu -o "$dir/cpu.plan"
expect_exit 0 "run the cpu plan" "$KILN" run "$dir/cpu.plan" --inputs "X:$x"
grep -q 'output 0 "label": i64\[24\]' "$out" || fail "the cpu plan gives no label output for 24 rows"

expect_exit 1 "ZipMap" "$KILN" compile "$ML/sklearn_zipmap.onnx" --shapes X:2x4 --target cpu -o "$dir/z.plan"
grep -q "ZipMap" "$out" || fail "the ZipMap refusal does not name the op"
grep -q "'zipmap': False" "$out" || fail "the ZipMap refusal does not name the converter option"
expect_exit 0 "conformance on ref" "$KILN" conformance "$ML" -j 2 --json "$dir/ref.json"
expect_exit 0 "sim against the ref baseline" "$KILN" conformance "$ML" -j 2 --backend sim --baseline "$dir/ref.json"
grep -q "0 regressions (9 of them refused here: an op runs on the CPU backends only)" "$out" ||
  fail "the sim baseline does not set the CPU-only refusals apart"
echo PASS
