#!/usr/bin/env bash
# Writes the plan loader fuzzer's seeds (tests/fuzz/corpus/plan_load/) with a
# built kiln: small real plans, CPU-only and with GPU kernels (launch list,
# kernels, memory plan), so mutations start from every section's real layout.
# Plans record kiln's version: rerun after a version change.
#
#   tests/fuzz/make_plan_seeds.sh [KILN]      (default build/bin/kiln)
set -euo pipefail
cd "$(dirname "$0")/../.."
KILN=${1:-build/bin/kiln}
out=tests/fuzz/corpus/plan_load
mkdir -p "$out"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d)}
"$KILN" compile examples/models/tiny_cnn.onnx --target cpu -o "$out/tiny_cnn_cpu.plan" >/dev/null
data=/usr/share/libonnx-testdata/data/node
for t in test_relu test_softmax_axis_1 test_matmul_2d test_basic_conv_with_padding; do
  "$KILN" compile "$data/$t/model.onnx" --target cpu -o "$out/${t#test_}_cpu.plan" >/dev/null
  "$KILN" compile "$data/$t/model.onnx" --target sm_90 -o "$out/${t#test_}_sm90.plan" >/dev/null
done
ls -l "$out"
