#!/bin/bash
# Deterministic builds (docs/tuning.md): without --tune, compiling the same
# model with the same flags gives byte-identical plans, whatever the kernel
# cache holds (empty, warm, or bypassed with --no-kernel-cache), the
# directory kiln runs in and the path the model is read from.
# Usage: determinism_test.sh KILN SOURCE_DIR MODELS_DIR
# Models: examples/models/tiny_cnn.onnx and MODELS_DIR/mobilenet_v2 (a real
# model; a missing folder fails the test), both for sm_90 in fp16 so the plans
# carry GPU kernels (checked: a CPU-only plan would make the test weaker).
set -euo pipefail
kiln=$(realpath "$1")
src=$(realpath "$2")
models=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check_model() {
  local name=$1 model=$2
  local dir=$tmp/$name
  mkdir -p "$dir/elsewhere"
  cp "$model" "$dir/elsewhere/copy.onnx"
  local flags=(--target sm_90 --precision fp16)
  # 1: empty kernel cache; 2: the same cache, now warm.
  KILN_CACHE_DIR=$dir/cache "$kiln" compile "$model" "${flags[@]}" -o "$dir/cold.plan" 2>"$dir/cold.log"
  KILN_CACHE_DIR=$dir/cache "$kiln" compile "$model" "${flags[@]}" -o "$dir/warm.plan" 2>"$dir/warm.log"
  # 3: no cache at all, another working directory, another path to the model.
  (cd "$dir/elsewhere" && KILN_CACHE_DIR=$dir/other "$kiln" compile copy.onnx "${flags[@]}" --no-kernel-cache \
     -o nocache.plan 2>"$dir/nocache.log")
  grep -q "plan written; GPU kernels: [0-9]* for sm_90" "$dir/cold.log" ||
    { echo "FAIL: $name: the plan has no GPU kernels:" >&2; cat "$dir/cold.log" >&2; exit 1; }
  grep -q "0 from the cache" "$dir/cold.log" || { echo "FAIL: $name: the first cache was not empty" >&2; exit 1; }
  grep -q "0 compiled by NVRTC" "$dir/warm.log" || { echo "FAIL: $name: the second build missed the cache" >&2; exit 1; }
  cmp "$dir/cold.plan" "$dir/warm.plan" || { echo "FAIL: $name: empty vs warm kernel cache differ" >&2; exit 1; }
  cmp "$dir/cold.plan" "$dir/elsewhere/nocache.plan" ||
    { echo "FAIL: $name: --no-kernel-cache / other cwd differ" >&2; exit 1; }
  echo "ok: $name: 3 builds, $(stat -c %s "$dir/cold.plan") identical bytes"
}

check_model tiny_cnn "$src/examples/models/tiny_cnn.onnx"
[ -f "$models/mobilenet_v2/model.onnx" ] || { echo "FAIL: $models/mobilenet_v2/model.onnx is missing" >&2; exit 1; }
check_model mobilenet_v2 "$models/mobilenet_v2/model.onnx"
