#!/bin/sh
# No silent CPU in `kiln run MODEL.onnx` (issue 14): without --target it
# behaves as `kiln compile`'s default, auto: with a GPU present (the fake CUDA
# driver as an H100) the model becomes a GPU plan for its arch and runs on the
# GPU; with none it runs on the CPU reference backend and one warning line on
# stderr says so, why, and how to get GPU kernels. Asking for the CPU
# (--backend ref, --target cpu) is not warned about.
# Usage: run_default_target_test.sh KILN MODEL_DIR FAKE_DIR
set -u
kiln=$1
model=$2/small.onnx
fake=$3
. "$(dirname "$0")/lib.sh"

# No GPU: the CPU reference, said loudly, exit 0.
FAKE_CUDA_DEVICE_COUNT=0 LD_LIBRARY_PATH=$fake "$kiln" run "$model" >"$out" 2>"$err" || fail "no GPU: exit $?"
grep -q "^warning: .*small.onnx: no GPU here (no CUDA device): running on the CPU reference backend, not on GPU kernels. For GPU kernels, run it where a GPU is (kiln doctor checks), or build a plan here with \`kiln compile .*small.onnx -o model.plan\`" "$err" ||
  fail "no GPU: no warning saying the run is on the CPU and how to get GPU kernels"
[ "$(grep -c '^warning:' "$err")" -eq 1 ] || fail "no GPU: expected one warning line"
grep -q "^backend: ref (CPU reference" "$out" || fail "no GPU: not run on the reference backend"

# Asking for the CPU: no warning.
for flags in "--backend ref" "--target cpu"; do
  # shellcheck disable=SC2086
  FAKE_CUDA_DEVICE_COUNT=0 LD_LIBRARY_PATH=$fake "$kiln" run "$model" $flags >"$out" 2>"$err" ||
    fail "$flags: exit $?"
  ! grep -q "^warning:" "$err" || fail "$flags: warned though the CPU was asked for"
  grep -q "^backend: ref" "$out" || fail "$flags: not on the reference backend"
done

# A GPU (the fake driver as an H100): a plan for sm_90, run on the GPU path.
# (The fake runs no kernel arithmetic without the simulator, which `kiln run`
# does not load: the engine's choice is checked, not the values.)
if ! FAKE_CUDA_DEVICE=h100 LD_LIBRARY_PATH=$fake "$kiln" run "$model" >"$out" 2>"$err"; then
  grep -q "NVRTC" "$err" && { echo "SKIP: no NVRTC"; exit 77; }
  fail "H100: exit $?"
fi
grep -q "target auto: the local GPU, .* (sm_90)$" "$err" || fail "H100: no line saying what auto resolved to"
grep -q "^compile: .*GPU kernels: [1-9][0-9]* for sm_90$" "$out" || fail "H100: no sm_90 GPU kernels"
grep -q "^backend: gpu (GPU sm_90" "$out" || fail "H100: did not run on the GPU"
! grep -q "^warning:" "$err" || fail "H100: warned"
echo PASS
