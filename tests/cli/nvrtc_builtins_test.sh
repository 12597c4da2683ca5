#!/bin/sh
# NVRTC from the nvidia-cuda-nvrtc 13.0 wheel: libnvrtc.so.13 opens
# libnvrtc-builtins.so.13.0 by soname, and the wheel's folder is not on the
# loader's path. kiln preloads the builtins from NVRTC's own folder by
# absolute path (codegen/nvrtc/nvrtc_library.cpp), so the compile gets past
# them. A fake NVRTC in that layout (tests/cli/fake_nvrtc) says in its log
# whether they were loaded; it compiles nothing, so the compile still fails.
# Usage: nvrtc_builtins_test.sh KILN MODEL_DIR FAKE_NVRTC_DIR
set -u
kiln=$1
model=$2/small.onnx
fake=$3
. "$(dirname "$0")/lib.sh"

[ -e "$fake/libnvrtc.so.13" ] && [ -e "$fake/libnvrtc-builtins.so.13.0" ] || fail "fake NVRTC layout missing in $fake"
KILN_NVRTC_LIBRARY=$fake/libnvrtc.so.13 KILN_CACHE_DIR=$dir/cache "$kiln" compile "$model" --target sm_90 \
  --no-kernel-cache -o "$dir/m.plan" >"$out" 2>&1
[ $? -eq 1 ] || fail "the fake NVRTC compiled something"
grep -q "libnvrtc-builtins.so.13.0 was preloaded from NVRTC's folder" "$out" ||
  fail "the builtins were not preloaded from NVRTC's folder"
echo PASS
