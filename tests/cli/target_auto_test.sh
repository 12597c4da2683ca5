#!/bin/sh
# No silent CPU at compile time (issue 14): `kiln compile` without --target
# builds a GPU plan -- for the local GPU's arch when a CUDA driver with a
# device is present (the fake driver as an sm_86 GPU), else a portable plan
# (CUBINs for sm_80 and sm_90 plus PTX) -- and a CPU-only plan only with
# --target cpu. The portable plan picks the right code on each GPU (doctor),
# records the oldest driver its code needs (inspect), and a driver older than
# that is refused by name (--backend gpu, doctor) or, for the auto backend,
# reported as the reason it runs on the CPU. A GPU target with a node no
# kernel emitter covers is an error naming the model and the node;
# --allow-cpu-fallback is refused (plans have no per-node CPU fallback).
# Usage: target_auto_test.sh KILN MODEL_DIR FAKE_DIR
set -u
kiln=$1
model=$2/small.onnx
window=$2/window.onnx
fake=$3
. "$(dirname "$0")/lib.sh"

# No device: a portable plan, said so on stderr.
if ! FAKE_CUDA_DEVICE_COUNT=0 LD_LIBRARY_PATH=$fake "$kiln" compile "$model" -o "$dir/p.plan" >"$out" 2>"$err"; then
  grep -q "NVRTC" "$err" && { echo "SKIP: no NVRTC"; exit 77; }
  fail "compile without --target (no device): exit $?"
fi
grep -q "target auto: no local GPU (no CUDA device): a portable GPU plan (CUBINs for sm_80 and sm_90, PTX for newer GPUs)" "$err" ||
  fail "no line saying what auto resolved to"
"$kiln" inspect "$dir/p.plan" >"$out" 2>&1 || fail "inspect p.plan exit $?"
grep -q "^target: portable, precision: fp32$" "$out" || fail "portable plan: target line"
grep -q "^archs: sm_80, sm_90 (CUBIN + PTX per kernel)$" "$out" || fail "portable plan: archs line"
grep -q "^PTX: sm_80's, JIT-compiled by the driver on newer GPUs$" "$out" || fail "portable plan: PTX line"
grep -q "^needs: CUBINs CUDA driver 13.0+, PTX CUDA driver 13\.[0-9]+$" "$out" || fail "portable plan: driver line"
grep -q "^plan: .*plan format version 2)$" "$out" || fail "format version"

# The portable plan on each GPU: sm_80's CUBIN on Ampere and Ada, sm_90's on
# Hopper, the PTX on a newer arch.
for case in "8.0:CUBIN" "8.6:CUBIN sm_80" "8.9:CUBIN sm_80" "9.0:CUBIN" \
            "10.0:PTX JIT-compiled by the driver from sm_80"; do
  arch=${case%%:*}
  want=${case#*:}
  FAKE_CUDA_ARCH=$arch LD_LIBRARY_PATH=$fake "$kiln" doctor "$dir/p.plan" >"$out" 2>"$err" ||
    fail "doctor on $arch: exit $?"
  grep -qF "): can run ($want)" "$out" || fail "doctor on $arch: not '$want'"
done

# A local sm_86 GPU: a plan for sm_86 only.
FAKE_CUDA_ARCH=8.6 LD_LIBRARY_PATH=$fake "$kiln" compile "$model" -o "$dir/a.plan" >"$out" 2>"$err" ||
  fail "compile on an sm_86 GPU: exit $?"
grep -q "target auto: the local GPU, .* (sm_86)$" "$err" || fail "auto on sm_86: no reason line"
"$kiln" inspect "$dir/a.plan" >"$out" 2>&1 || fail "inspect a.plan exit $?"
grep -q "^target: sm_86, precision: fp32$" "$out" || fail "auto on sm_86: target is not sm_86"

# Only --target cpu gives a CPU-only plan.
"$kiln" compile "$model" --target cpu -o "$dir/c.plan" >"$out" 2>"$err" || fail "--target cpu exit $?"
grep -q "plan written; GPU kernels: none (compiled for target cpu" "$err" || fail "--target cpu: not a CPU plan"

# A driver older than the plan's code: --backend gpu fails naming both
# versions; the auto backend runs on the CPU and says why; doctor exits 1.
old="p.plan: the plan's kernels (CUBIN sm_90) need a CUDA driver of version 13.0 or newer, this driver is version 12.8"
FAKE_CUDA_DRIVER_VERSION=12080 LD_LIBRARY_PATH=$fake "$kiln" run "$dir/p.plan" --backend gpu >"$out" 2>"$err"
[ $? -eq 1 ] || fail "old driver, --backend gpu: exit not 1"
grep -qF "$old" "$err" || fail "old driver, --backend gpu: no message naming both versions"
FAKE_CUDA_DRIVER_VERSION=12080 LD_LIBRARY_PATH=$fake "$kiln" run "$dir/p.plan" >"$out" 2>"$err" ||
  fail "old driver, auto backend: exit $?"
grep -q "^warning: a GPU is present but the plan runs on the CPU: .*$old" "$err" ||
  fail "old driver, auto backend: no warning naming the reason"
FAKE_CUDA_DRIVER_VERSION=12080 LD_LIBRARY_PATH=$fake "$kiln" doctor "$dir/p.plan" >"$out" 2>"$err"
[ $? -eq 1 ] || fail "old driver, doctor: exit not 1"
grep -qF "$old" "$out" || fail "old driver, doctor: no reason"

# A GPU target and a node without a kernel emitter: an error naming the model
# and the node, no plan; the same model compiles for the CPU.
for target in "" "--target sm_90" "--target portable"; do
  FAKE_CUDA_DEVICE_COUNT=0 LD_LIBRARY_PATH=$fake "$kiln" compile "$window" $target --passes fuse,plan-memory \
    -o "$dir/w.plan" >"$out" 2>"$err"
  [ $? -eq 1 ] || fail "window model ($target): exit not 1"
  grep -q "^error: .*window.onnx: target [a-z0-9_]* needs a GPU kernel for every node, and 1 node(s) have no kernel emitter:" "$err" ||
    fail "window model ($target): no error naming the model"
  grep -q '^  node "window" (hann_window)$' "$err" || fail "window model ($target): the node is not named"
  [ -e "$dir/w.plan" ] && fail "window model ($target): a plan was written"
done
"$kiln" compile "$window" --target cpu --passes fuse,plan-memory -o "$dir/w.plan" >"$out" 2>"$err" ||
  fail "window model, --target cpu: exit $?"
"$kiln" compile "$model" --allow-cpu-fallback -o "$dir/x.plan" >"$out" 2>"$err"
[ $? -eq 1 ] || fail "--allow-cpu-fallback: exit not 1"
grep -q "no per-node CPU fallback" "$err" || fail "--allow-cpu-fallback: no reason"
echo PASS
