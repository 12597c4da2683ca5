#!/bin/sh
# The auto backend says why it runs a plan on the CPU (issue 14, "no silent
# CPU"): with a GPU present (the fake CUDA driver as an A100, cc 8.0) an sm_90
# plan falls back to the CPU and `kiln run` / `kiln bench` print one warning
# line naming the reason; --backend ref asks for the CPU (no warning); with no
# driver at all there is no warning and the engine line says "(no CUDA driver)".
# Usage: auto_reason_test.sh KILN MODEL_DIR FAKE_DIR
set -u
kiln=$1
model=$2/small.onnx
fake=$3
. "$(dirname "$0")/lib.sh"

if ! "$kiln" compile "$model" --target sm_90 -o "$dir/gpu.plan" >"$out" 2>&1; then
  grep -q "NVRTC" "$out" && { echo "SKIP: no NVRTC"; exit 77; }
  fail "compile --target sm_90"
fi
"$kiln" compile "$model" --target cpu -o "$dir/cpu.plan" >"$out" 2>&1 || fail "compile (cpu)"

warn="^warning: a GPU is present but the plan runs on the CPU: .*gpu.plan: wrong GPU arch: the plan's kernels are for sm_90, this GPU is sm_80"
for cmd in run bench; do
  FAKE_CUDA_DEVICE=a100 LD_LIBRARY_PATH=$fake "$kiln" $cmd "$dir/gpu.plan" >"$out" 2>"$err" || fail "$cmd exit $?"
  grep -q "$warn" "$err" || fail "$cmd: no warning naming the reason"
  [ "$(grep -c '^warning:' "$err")" -eq 1 ] || fail "$cmd: expected one warning line"
  FAKE_CUDA_DEVICE=a100 LD_LIBRARY_PATH=$fake "$kiln" $cmd "$dir/gpu.plan" --backend ref >"$out" 2>"$err" ||
    fail "$cmd --backend ref exit $?"
  ! grep -q "^warning:" "$err" || fail "$cmd --backend ref warned"
done
# A CPU-only plan with a GPU present: the reason is the plan's.
FAKE_CUDA_DEVICE=h100 LD_LIBRARY_PATH=$fake "$kiln" run "$dir/cpu.plan" >"$out" 2>"$err" || fail "run cpu.plan exit $?"
grep -q "^warning: a GPU is present but the plan runs on the CPU: the plan has no GPU kernels" "$err" ||
  fail "CPU-only plan: no warning"
# The fake as an H100 runs the plan on the "GPU": nothing to warn about.
# (Its kernels need the simulator, which `kiln run` does not load: only the
# choice of engine is checked, through doctor's verdict, in doctor_test.sh.)
if ! ldconfig -p 2>/dev/null | grep -q "libcuda.so.1"; then
  "$kiln" run "$dir/cpu.plan" >"$out" 2>"$err" || fail "run without a driver exit $?"
  ! grep -q "^warning:" "$err" || fail "warned without a driver"
  grep -q "^backend: ref (CPU reference path (the plan has no GPU kernels: .*) (no CUDA driver)$" "$out" ||
    fail "engine line lacks (no CUDA driver)"
fi
echo PASS
