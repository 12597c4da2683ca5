#!/bin/sh
# kiln conformance --backend gpu (conformance/gpu_run.h) against the strict
# fake CUDA driver (FAKE_DIR/libcuda.so.1), which loads and launches every
# kernel but computes nothing:
#  - the default --target cpu is refused before any test runs (exit 1);
#  - a test runs its plan through the runtime's GPU engine: on the fake
#    driver its outputs are unwritten, so it FAILS on its values (a silent
#    CPU fallback would pass);
#  - string tensors and a CPU-only op (a scikit-learn tree ensemble) are
#    unsupported on the GPU, named;
#  - without a driver each test fails naming the missing driver.
# And the ONNX runner's bound: a test of a generated onnx 1.23 suite (its
# root's ONNX_VERSION) named by its folder is held to ONNX's bound (rtol
# 1e-3), as under --suite onnx-1.23; the same folder copied elsewhere is held
# to kiln's own fp32 bound.
# Usage: conformance_gpu_test.sh KILN REPO FAKE_DIR
set -u
kiln=$1
repo=$2
fake=$3
. "$(dirname "$0")/lib.sh"
debian=/usr/share/libonnx-testdata/data/node
[ -d "$debian/test_relu" ] || { echo "SKIP: no libonnx-testdata"; exit 77; }

expect_error "--target cpu builds no GPU kernels" conformance "$debian/test_relu" --backend gpu
grep -q "\[gpu\]:" "$out" && fail "--backend gpu --target cpu: tests ran before the refusal"

if ! "$kiln" compile "$debian/test_relu/model.onnx" --target sm_90 -o "$dir/relu.plan" >"$out" 2>&1; then
  grep -q "NVRTC" "$out" && { echo "SKIP: no NVRTC"; exit 77; }
  fail "compile --target sm_90"
fi

LD_LIBRARY_PATH=$fake FAKE_CUDA_DEVICE=h100 "$kiln" conformance "$debian/test_relu" \
  "$debian/test_strnormalizer_export_monday_casesensintive_lower" "$repo/tests/models/ml/test_sklearn_random_forest_regressor" \
  --backend gpu --target sm_90 -v >"$out" 2>&1
grep -q "^fail node/test_relu: .*elements differ" "$out" || fail "relu on the fake driver: no value failure"
grep -q "^unsupported node/test_strnormalizer_export_monday_casesensintive_lower: .*not in GPU plans" "$out" ||
  fail "a string test is not unsupported on the GPU"
grep -q "^unsupported ml/test_sklearn_random_forest_regressor: .*no GPU kernel for .*tree_ensemble" "$out" ||
  fail "a tree ensemble is not unsupported on the GPU"

if ! ldconfig -p 2>/dev/null | grep -q "libcuda.so.1"; then
  "$kiln" conformance "$debian/test_relu" --backend gpu --target sm_90 -v >"$out" 2>&1
  grep -q "^fail node/test_relu: .*no CUDA driver" "$out" || fail "no driver: the test does not fail naming it"
fi

# ONNX's runner bound follows the suite the folder belongs to.
suite=${KILN_ONNX_TESTS:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/onnx-1.23-tests}
t=test_averagepool_2d_ceil_last_window_starts_on_pad
if [ -f "$suite/ONNX_VERSION" ] && [ -d "$suite/node/$t" ]; then
  "$kiln" conformance "$suite/node/$t" -v >"$out" 2>&1 || fail "$t in its generated suite: not within ONNX's bound"
  mkdir -p "$dir/elsewhere/node" && cp -r "$suite/node/$t" "$dir/elsewhere/node/"
  "$kiln" conformance "$dir/elsewhere/node/$t" -v >"$out" 2>&1 &&
    fail "$t outside a generated suite passed kiln's fp32 bound (its expected values have 4 decimals)"
  grep -q "atol 1e-05 rtol 0.0001" "$out" || fail "$t outside a generated suite: not kiln's fp32 bound"
else
  echo "note: no generated onnx 1.23 suite ($suite): the runner-bound case is not checked"
fi
echo "ok: conformance --backend gpu"
